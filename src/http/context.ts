import type { TransactionRow } from '../db/schema.ts'
import type { Principal } from '../keys/key.service.ts'

/**
 * Per-request facts the runtime adapter and the /api gate learn before Elysia routes the
 * request. Keyed by the Request object, so nothing leaks between requests.
 */
export interface RequestFacts {
  requestId: string
  /** Client address as the runtime saw it, or from X-Forwarded-For under TRUST_PROXY. */
  clientIp: string | null
  principal?: Principal
  /**
   * The transaction this request reads, read by the gate with its rate-limit grant in one
   * statement (GET /api/transactions/{id} on the shared limiter): the row in any project, or null
   * for none. The route checks the caller's scope and uses it instead of reading again.
   */
  read?: { id: string; row: TransactionRow | null }
  /**
   * The route template Elysia matched (`/api/transactions/:id`), for metrics; unset when none
   * matched.
   */
  route?: string
}

const facts = new WeakMap<Request, RequestFacts>()
const peerIps = new WeakMap<Request, string>()
const hostless = new WeakSet<Request>()

/** Called by the runtime adapter (Bun or Deno) with the socket's remote address. */
export function setPeerIp(req: Request, ip: string | null | undefined) {
  if (ip) peerIps.set(req, ip)
}
export const peerIpOf = (req: Request) => peerIps.get(req) ?? null

/**
 * Called by the runtime adapter for a request that named no usable host (HTTP/1.0 without
 * Host, an empty or malformed Host): its URL carries a stand-in host, and the app refuses it.
 */
export function setHostless(req: Request) {
  hostless.add(req)
}
export const isHostless = (req: Request) => hostless.has(req)

export function setFacts(req: Request, f: RequestFacts) {
  facts.set(req, f)
}
export const factsOf = (req: Request): RequestFacts | undefined => facts.get(req)
