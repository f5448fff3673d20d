import type { Metrics } from '../metrics/metrics.ts'
import { pathOf } from './api-gate.ts'
import { factsOf } from './context.ts'

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/**
 * Finds the template of a path among the app's routes, for requests answered before Elysia
 * routed them (the /api gate's 401, 403, 413 and 429): static routes first, then those with
 * fewer parameters, as Elysia's router prefers them.
 */
function templateFinder(routes: readonly { method: string; path: string }[]) {
  const compiled = routes
    .filter((r) => !r.path.includes('*'))
    .map((r) => ({
      method: r.method,
      path: r.path,
      params: (r.path.match(/:/g) ?? []).length,
      re: new RegExp(
        `^${r.path
          .split('/')
          .map((seg) =>
            seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('/')}$`,
      ),
    }))
    .sort((a, b) => a.params - b.params)
  return (method: string, path: string) =>
    compiled.find((r) => (r.method === method || r.method === 'ALL') && r.re.test(path))?.path ??
    null
}

/** Wraps the app's handler: counts every answer and times it to the response head. */
export function measured(
  handle: (req: Request) => Response | Promise<Response>,
  metrics: Pick<Metrics, 'httpRequest'>,
  routes: readonly { method: string; path: string }[],
) {
  const find = templateFinder(routes)
  /**
   * The route label of a request: the template Elysia matched, else the one its path fits, else
   * the area it was for. Never the raw path: ids would make the label set unbounded.
   */
  const routeLabel = (req: Request): string => {
    const route = factsOf(req)?.route
    if (route) return route
    const path = pathOf(req.url)
    const template = find(req.method, path)
    if (template) return template
    for (const area of ['/api', '/commerce', '/pay', '/dashboard'])
      if (path === area || path.startsWith(`${area}/`)) return `${area}/(unmatched)`
    return '(unmatched)'
  }
  return (req: Request): Response | Promise<Response> => {
    const started = performance.now()
    const count = (res: Response) => {
      metrics.httpRequest(
        routeLabel(req),
        METHODS.has(req.method) ? req.method : 'OTHER',
        res.status,
        (performance.now() - started) / 1000,
      )
      return res
    }
    const res = handle(req)
    return res instanceof Promise ? res.then(count) : count(res)
  }
}
