import { timingSafeEqual } from 'node:crypto'
import { Elysia } from 'elysia'
import { factsOf } from '../../http/context.ts'
import { errorResponse } from '../../http/errors.ts'
import { json } from '../../http/json-response.ts'
import { isLoopback } from '../../lib/cidr.ts'
import type { Metrics } from '../../metrics/metrics.ts'
import { type Readiness, readinessBody } from '../../operations/readiness.ts'

/**
 * The operator's probes and metrics (docs/decisions/0047-metrics-and-probes.md), outside the
 * merchant API: unauthenticated and never rate-limited probes with nothing secret in them, and the
 * Prometheus scrape.
 *  - GET /healthz: liveness, the process serves (nothing else is asked).
 *  - GET /readyz: readiness, 200 or 503 with every check and which failed.
 *  - GET /metrics: with METRICS_TOKEN set, `Authorization: Bearer <token>` is required;
 *    without it only loopback clients (after TRUST_PROXY's forwarded address) may scrape.
 */
export function operationsController(deps: {
  readiness: Readiness
  metrics: Metrics | null
  metricsToken: string | null
}) {
  const token = deps.metricsToken === null ? null : Buffer.from(`Bearer ${deps.metricsToken}`)
  const app = new Elysia({ name: 'operations' })
    .get('/healthz', ({ set }) => json(set, { status: 'ok' }), { detail: { hide: true } })
    .get(
      '/readyz',
      async ({ set }) => {
        const report = await deps.readiness.report()
        return json(set, readinessBody(report), report.ready ? 200 : 503)
      },
      { detail: { hide: true } },
    )
  const metrics = deps.metrics
  if (!metrics) return app
  return app.get(
    '/metrics',
    async ({ request }) => {
      const refusal = scrapeRefusal(request, token)
      if (refusal) return refusal
      const { body, contentType } = await metrics.scrape()
      return new Response(body, {
        headers: { 'content-type': contentType, 'cache-control': 'no-store' },
      })
    },
    { detail: { hide: true } },
  )
}

/** The project's error response when this request may not scrape, else null. */
function scrapeRefusal(request: Request, token: Buffer | null): Response | null {
  const facts = factsOf(request)
  if (token !== null) {
    const given = Buffer.from(request.headers.get('authorization') ?? '')
    // Constant time whatever the header holds: compared only at equal length, and the length is not
    // the secret.
    if (given.length === token.length && timingSafeEqual(given, token)) return null
    return errorResponse(
      'unauthenticated',
      'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>',
      { requestId: facts?.requestId, headers: { 'www-authenticate': 'Bearer realm="metrics"' } },
    )
  }
  const ip = facts?.clientIp ?? null
  if (ip !== null && isLoopback(ip)) return null
  return errorResponse(
    'forbidden',
    'Without METRICS_TOKEN, GET /metrics answers loopback clients only',
    { requestId: facts?.requestId },
  )
}
