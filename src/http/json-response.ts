/**
 * What a route's context gathered for its response: the headers the hooks set (security, request
 * id, rate limits, caching).
 */
export interface Gathered {
  headers: Record<string, string | number>
}

/**
 * The route's Response, built once with the headers the request's hooks gathered in `set`;
 * the route's own `headers` win. `set` is left empty, so Elysia returns this Response as it is:
 * given a Response while `set` still holds headers, it copies it (body stream included) into a
 * second Response and merges the headers in one at a time, which was ~13% of the server's CPU
 * on GET /api/transactions/{id} (bench/RESULTS.md).
 */
export function respond(
  set: Gathered,
  body: BodyInit | null,
  status = 200,
  headers?: Record<string, string>,
): Response {
  const all = set.headers as Record<string, string>
  set.headers = {}
  if (headers) Object.assign(all, headers)
  return new Response(body, { status, headers: all })
}

const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' }
const REPLAYED = { ...JSON_TYPE, 'idempotent-replayed': 'true' }

/**
 * A JSON response serialized here. Handlers return these for bodies whose shape TypeScript
 * already guarantees (the route's TypeBox response model stays for OpenAPI), so Elysia does not
 * re-validate every field, formats included, on every response.
 */
export function json(
  set: Gathered,
  body: unknown,
  status = 200,
  headers?: Record<string, string>,
): Response {
  return respond(
    set,
    JSON.stringify(body),
    status,
    headers ? { ...JSON_TYPE, ...headers } : JSON_TYPE,
  )
}

/**
 * A create's JSON as stored with its Idempotency-Key (docs/decisions/0006-idempotent-create.md),
 * marked `Idempotent-Replayed` when it is a retry's answer.
 */
export function storedJson(
  set: Gathered,
  stored: { body: string; status: number; replayed?: boolean },
): Response {
  return respond(set, stored.body, stored.status, stored.replayed ? REPLAYED : JSON_TYPE)
}
