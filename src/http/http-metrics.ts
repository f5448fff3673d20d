import type { Metrics } from '../metrics/metrics.ts'
import { pathOf } from './api-gate.ts'
import { factsOf } from './context.ts'

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/**
 * The route label of a request: the template Elysia matched, or for a request answered before
 * routing (401, 429, 404) the area it was for. Never the raw path: ids would make the label set
 * unbounded.
 */
function routeLabel(req: Request): string {
  const route = factsOf(req)?.route
  if (route) return route
  const path = pathOf(req.url)
  for (const area of ['/api', '/pay', '/dashboard']) if (path === area || path.startsWith(`${area}/`)) return `${area}/(unmatched)`
  return '(unmatched)'
}

/** Wraps the app's handler: counts every answer and times it to the response head. */
export function measured(handle: (req: Request) => Response | Promise<Response>, metrics: Pick<Metrics, 'httpRequest'>) {
  return async (req: Request): Promise<Response> => {
    const started = performance.now()
    const res = await handle(req)
    metrics.httpRequest(routeLabel(req), METHODS.has(req.method) ? req.method : 'OTHER', res.status, (performance.now() - started) / 1000)
    return res
  }
}
