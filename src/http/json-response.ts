/**
 * A JSON response serialized here. Handlers return these for bodies whose shape TypeScript
 * already guarantees (the route's TypeBox response model stays for OpenAPI), so Elysia does not
 * re-validate every field, formats included, on every response.
 */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } })
}
