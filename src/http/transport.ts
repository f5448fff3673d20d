import { newRequestId } from '../lib/ids.ts'
import { errorResponse } from './errors.ts'

export const isApiPath = (pathname: string) => pathname === '/api' || pathname.startsWith('/api/')

/**
 * R3: a request that did not arrive over HTTPS. `/api` is refused with 403 and never
 * processed; everything else is redirected (308 keeps the method and body) to the HTTPS URL.
 */
export function refuseInsecure(req: Request, httpsOrigin: string): Response {
  const url = new URL(req.url)
  const requestId = newRequestId()
  if (isApiPath(url.pathname)) {
    return errorResponse('https_required', 'HTTPS is required: the API rejects plain HTTP requests. Use https://.', { requestId, headers: { 'x-request-id': requestId } })
  }
  return new Response(null, { status: 308, headers: { location: httpsOrigin + url.pathname + url.search, 'x-request-id': requestId } })
}

/** The forwarded client address: the last X-Forwarded-For hop, the one our proxy appended. */
export function forwardedFor(req: Request): string | null {
  const xff = req.headers.get('x-forwarded-for')
  if (!xff) return null
  const hops = xff.split(',').map((s) => s.trim()).filter(Boolean)
  return hops[hops.length - 1] ?? null
}
