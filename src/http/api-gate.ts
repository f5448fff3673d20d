import { Elysia } from 'elysia'
import type { TransactionRow } from '../db/schema.ts'
import type { Scope } from '../keys/api-key.ts'
import type { KeyService, Principal } from '../keys/key.service.ts'
import { ipAllowed } from '../lib/cidr.ts'
import { newRequestId, UUID_RE } from '../lib/ids.ts'
import type { Decision, RateLimiter } from '../limits/rate-limiter.ts'
import { WINDOWS } from '../limits/windows.ts'
import type { RateLimits } from '../projects/project.service.ts'
import { factsOf, isHostless, peerIpOf, setFacts, type RequestFacts } from './context.ts'
import { ApiError, isCommercePath } from './errors.ts'
import { COMMERCE_API_VERSION } from '../modules/commerce/model.ts'
import { forwardedFor, isApiPath, refuseInsecure } from './transport.ts'

/** docs/decisions/0005-create-request-bounds.md: larger bodies get 413 before they are read. */
export const MAX_BODY_BYTES = 64 * 1024

export interface GateDeps {
  keys: KeyService
  limiter: RateLimiter
  /**
   * Limits for requests without a valid key, counted per client IP
   * (docs/decisions/0023-rate-limits-exact.md).
   */
  anonymousLimits: RateLimits
  trustProxy: boolean
  httpsOrigin: (req: Request) => string
}

/** The nine rate-limit headers' names, made once rather than on every request. */
const HEADER_NAMES = WINDOWS.map(
  (w) =>
    [
      w,
      {
        limit: `x-ratelimit-limit-${w}`,
        remaining: `x-ratelimit-remaining-${w}`,
        reset: `x-ratelimit-reset-${w}`,
      },
    ] as const,
)

/** Every request of a window shares its reset time: format it once. */
const resetText = new Map<number, string>()
function isoOf(ms: number): string {
  let t = resetText.get(ms)
  if (t === undefined) {
    if (resetText.size > 64) resetText.clear()
    resetText.set(ms, (t = new Date(ms).toISOString()))
  }
  return t
}

/**
 * The nine `X-RateLimit-*` headers of a decision: limit, remaining and reset of each window
 * (docs/decisions/0023-rate-limits-exact.md).
 */
export function setRateLimitHeaders(
  set: { headers: Record<string, string | number> },
  decision: Decision,
): void {
  for (const [w, names] of HEADER_NAMES) {
    const s = decision.windows[w]
    set.headers[names.limit] = String(s.limit)
    set.headers[names.remaining] = String(s.remaining)
    set.headers[names.reset] = isoOf(s.reset)
  }
}

/**
 * Runs before routing for every request: request id, transport (docs/decisions/0003-https-only.md
 * under TRUST_PROXY), a usable Host, and for /api the key
 * (docs/decisions/0022-api-keys-and-scopes.md), the rate limit
 * (docs/decisions/0023-rate-limits-exact.md) with its nine headers, project status, IP allow-list
 * and declared body size. Running before routing means unknown routes, bad bodies and validation
 * errors still carry the headers and never reveal anything to an unknown caller.
 */
export function apiGate(deps: GateDeps) {
  return new Elysia({ name: 'api-gate' }).onRequest(async ({ request, set }) => {
    const requestId = newRequestId()
    set.headers['x-request-id'] = requestId
    let clientIp = peerIpOf(request)
    if (deps.trustProxy) {
      if ((request.headers.get('x-forwarded-proto') ?? '').toLowerCase() !== 'https') {
        const res = refuseInsecure(request, deps.httpsOrigin)
        res.headers.set('x-request-id', requestId)
        return res
      }
      clientIp = forwardedFor(request) ?? clientIp
    }
    const facts: RequestFacts = { requestId, clientIp }
    setFacts(request, facts)
    // RFC 9112 3.2: a request must say which host it is for; HTTP/1.0 clients may leave it out.
    if (isHostless(request))
      throw new ApiError('invalid_request', 'The request has no usable Host header', [
        { path: 'host', message: 'must be the host name (and port) this request is for' },
      ])
    const path = pathOf(request.url)
    // The Commerce API (docs/decisions/0065-coinbase-commerce-drop-in.md) takes the same keys,
    // in Commerce's header, under the same limits.
    const commerce = isCommercePath(path)
    if (!commerce && !isApiPath(path)) return
    set.headers['cache-control'] = 'no-store'

    const token = commerce
      ? commerceKey(request.headers.get('x-cc-api-key'))
      : bearerToken(request.headers.get('authorization'))
    const principal = token ? await deps.keys.authenticate(token) : null
    const active = principal?.project.status === 'active'
    const allowed = principal ? ipAllowed(principal.project.ipAllowlist, clientIp) : false
    // Only requests the project will serve count against its limits: a leaked key used from
    // outside the allow-list (or an inactive project's key) counts against the caller's IP.
    const decision =
      principal && active && allowed
        ? await deps.limiter.check(
            `project:${principal.projectId}`,
            principal.project.limits,
            commerce ? undefined : transactionRead(request.method, path),
          )
        : await deps.limiter.check(`ip:${clientIp ?? 'unknown'}`, deps.anonymousLimits)
    setRateLimitHeaders(set, decision)
    if (!decision.allowed) {
      set.headers['retry-after'] = String(decision.retryAfter)
      const exhausted = WINDOWS.filter((w) => decision.windows[w].remaining === 0)
      throw new ApiError(
        'rate_limited',
        `Rate limit exceeded (${exhausted.join(', ')} window). Retry after ${decision.retryAfter} s.`,
      )
    }
    if (!principal) {
      throw new ApiError(
        'unauthenticated',
        token === null
          ? commerce
            ? 'Missing API key: send "X-CC-Api-Key: sk_test_..." or sk_live_...'
            : 'Missing API key: send "Authorization: Bearer sk_test_..." or sk_live_...'
          : 'Invalid API key',
      )
    }
    if (!active) throw new ApiError('forbidden', 'This project is not active')
    if (!allowed)
      throw new ApiError(
        'forbidden',
        `Requests from ${clientIp ?? 'this address'} are not in this project's IP allow-list`,
      )
    facts.principal = principal
    facts.read = decision.read
    const version = commerce ? request.headers.get('x-cc-version') : null
    if (version !== null && version !== COMMERCE_API_VERSION)
      throw new ApiError(
        'invalid_request',
        `X-CC-Version ${version.slice(0, 40)} is not supported; this service answers ${COMMERCE_API_VERSION}`,
      )

    const length = request.headers.get('content-length')
    if (length !== null && Number(length) > MAX_BODY_BYTES)
      throw new ApiError('payload_too_large', `Request body is larger than ${MAX_BODY_BYTES} bytes`)
  })
}

const TRANSACTION_PATH = '/api/transactions/'

/**
 * The transaction a request reads and nothing else, so the grant's statement can read it too:
 * GET /api/transactions/{id} with a UUID id (any other id is a 404 without reading).
 */
function transactionRead(method: string, path: string): string | undefined {
  if (method !== 'GET' || !path.startsWith(TRANSACTION_PATH)) return undefined
  const id = path.slice(TRANSACTION_PATH.length)
  return UUID_RE.test(id) ? id.toLowerCase() : undefined
}

/** The path of an absolute URL, without building a URL object on every request. */
export function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  if (start < 0) return '/'
  const end = url.slice(start).search(/[?#]/)
  return end < 0 ? url.slice(start) : url.slice(start, start + end)
}

/** The key of an `X-CC-Api-Key` header; '' for an empty one, null when absent. */
function commerceKey(header: string | null): string | null {
  return header === null ? null : header.trim()
}

/** The token of an `Authorization: Bearer` header; '' for a malformed header, null when absent. */
function bearerToken(header: string | null): string | null {
  if (header === null) return null
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header)
  return m ? m[1] : ''
}

/** The authenticated caller; the gate has already refused requests without one. */
export function principalOf(request: Request): Principal {
  const p = factsOf(request)?.principal
  if (!p) throw new ApiError('unauthenticated', 'Missing API key')
  return p
}

/**
 * The transaction `id` as the gate read it with the request's rate-limit grant (the row in any
 * project, or null for none); undefined when it did not, and the route reads it itself.
 */
export function readWithGrant(request: Request, id: string): TransactionRow | null | undefined {
  const read = factsOf(request)?.read
  return read?.id === id.toLowerCase() ? read.row : undefined
}

/**
 * A `transform` hook: refuses keys without `scope` before the body is read or validated
 * (docs/decisions/0022-api-keys-and-scopes.md).
 */
export function requireScope(scope: Scope) {
  return ({ request }: { request: Request }) => {
    if (!principalOf(request).scopes.includes(scope))
      throw new ApiError('forbidden', `This API key lacks the ${scope} scope`)
  }
}
