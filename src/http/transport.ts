import { newRequestId } from '../lib/ids.ts'
import { errorResponseFor, isCommercePath } from './errors.ts'

export const isApiPath = (pathname: string) => pathname === '/api' || pathname.startsWith('/api/')

/**
 * Where an insecure request is sent: the BASE_URL origin when the operator set one, else the
 * host the client asked for, over https on the service's TLS port (or the proxy's own port).
 */
export function httpsOriginFor(
  baseUrl: string | null,
  tlsPort: number | null,
  trustProxy: boolean,
) {
  return (req: Request): string => {
    if (baseUrl) return new URL(baseUrl).origin
    // X-Forwarded-Host only from the proxy we trust; a Host that is not a host name gives
    // localhost.
    const host =
      (trustProxy ? req.headers.get('x-forwarded-host') : null) ?? req.headers.get('host') ?? ''
    let hostname = 'localhost'
    try {
      hostname = new URL(`http://${host.split(',')[0].trim()}`).hostname || hostname
    } catch {}
    const shown = hostname.includes(':') && !hostname.startsWith('[') ? `[${hostname}]` : hostname
    return tlsPort === null || tlsPort === 443 ? `https://${shown}` : `https://${shown}:${tlsPort}`
  }
}

/**
 * docs/decisions/0003-https-only.md: a request that did not arrive over HTTPS. `/api` is refused
 * with 403 and never processed; everything else is redirected (308 keeps the method and body) to
 * the HTTPS URL.
 */
export function refuseInsecure(req: Request, httpsOrigin: (req: Request) => string): Response {
  const url = new URL(req.url)
  const requestId = newRequestId()
  if (isApiPath(url.pathname) || isCommercePath(url.pathname)) {
    return errorResponseFor(
      url.pathname,
      'https_required',
      'HTTPS is required: the API rejects plain HTTP requests. Use https://.',
      { requestId, headers: { 'x-request-id': requestId } },
    )
  }
  return new Response(null, {
    status: 308,
    headers: { location: httpsOrigin(req) + url.pathname + url.search, 'x-request-id': requestId },
  })
}

/**
 * What every path answers while the server starts (its port is bound before the database,
 * the networks and the actors are ready): 503 in the API's error shape, with `Retry-After`, so
 * a client's usual handling of an unavailable service applies.
 */
export function startingUp(req: Request): Response {
  const requestId = newRequestId()
  return errorResponseFor(
    new URL(req.url).pathname,
    'unavailable',
    'The service is starting; try again in a moment.',
    {
      requestId,
      headers: { 'x-request-id': requestId, 'retry-after': '1' },
    },
  )
}

/** The forwarded client address: the last X-Forwarded-For hop, the one our proxy appended. */
export function forwardedFor(req: Request): string | null {
  const xff = req.headers.get('x-forwarded-for')
  if (!xff) return null
  const hops = xff
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  return hops[hops.length - 1] ?? null
}
