import { Elysia, type ValidationError } from 'elysia'
import type { Logger } from '../lib/logger.ts'
import type { FieldProblem } from '../lib/outcome.ts'
import { fieldPath } from '../lib/typebox-errors.ts'
import { operationsController } from '../modules/operations/index.ts'
import { statsController } from '../modules/stats/index.ts'
import { checkoutPageController, commerceController } from '../modules/commerce/index.ts'
import { transactionsController } from '../modules/transactions/index.ts'
import { refundsController } from '../modules/refunds/index.ts'
import { x402Controller } from '../modules/x402/index.ts'
import { treasuryController } from '../modules/treasury/index.ts'
import { PAY_ASSETS_DIR, payController, payNotFound } from '../modules/pay/index.ts'
import {
  DASHBOARD_ASSETS_DIR,
  dashboardController,
  dashboardNotFound,
  dashboardRefused,
} from '../modules/dashboard/index.ts'
import { transactionsExportSection } from '../modules/dashboard/transactions/index.ts'
import type { Services } from '../services.ts'
import { apiGate, pathOf } from './api-gate.ts'
import { factsOf } from './context.ts'
import { ApiError, errorResponseFor } from './errors.ts'
import { openapi } from './openapi.ts'
import type { ServerEntry } from './openapi-shape.ts'
import { checkRequestTarget } from './request-target.ts'
import { loadStaticAssets, SHARED_ASSETS_DIR, staticAssetsController } from './static-assets.ts'

export interface AppOptions {
  trustProxy: boolean
  /** Where insecure requests are redirected (docs/decisions/0003-https-only.md). */
  httpsOrigin: (req: Request) => string
  logger: Logger
  /** GET /metrics (METRICS); off, the route does not exist. */
  metricsEnabled: boolean
  metricsToken: string | null
  /** The OpenAPI document's `servers` (servedServers: BASE_URL, and API_URL when set). */
  servers: ServerEntry[]
}

/** The whole HTTP surface, runtime-neutral: serve it with `app.handle` on Bun or Deno. */
export function createApp(services: Services, opts: AppOptions) {
  const assets = loadStaticAssets([SHARED_ASSETS_DIR, PAY_ASSETS_DIR, DASHBOARD_ASSETS_DIR])
  return (
    new Elysia({ normalize: false })
      // Before the gate, so its refusals (401, 413, 429) carry them too.
      .onRequest(({ set }) => {
        set.headers['x-content-type-options'] = 'nosniff'
        set.headers['referrer-policy'] = 'no-referrer'
        set.headers['x-frame-options'] = 'DENY'
        set.headers['strict-transport-security'] = 'max-age=31536000'
      })
      .use(
        apiGate({
          keys: services.keys,
          limiter: services.limiter,
          anonymousLimits: services.anonymousLimits,
          trustProxy: opts.trustProxy,
          httpsOrigin: opts.httpsOrigin,
        }),
      )
      // After the gate: an unknown /api caller hears 401 first, as for any unknown route.
      .onRequest(({ request }) => checkRequestTarget(request.url))
      // The matched route's template, for the request metrics (src/http/http-metrics.ts); no hook
      // at all with METRICS=0.
      .use(opts.metricsEnabled ? routeTemplates() : new Elysia({ name: 'no-route-templates' }))
      .onError(({ code, error, request }) => {
        const requestId = factsOf(request)?.requestId
        const path = pathOf(request.url)
        // People read the dashboard: what it refuses, and its unknown paths, get a page.
        const dashboard = path === '/dashboard' || path.startsWith('/dashboard/')
        if (error instanceof ApiError) {
          return dashboard
            ? dashboardRefused(assets.url, error.status, error.message)
            : errorResponseFor(path, error.code, error.message, {
                details: error.details,
                requestId,
              })
        }
        if (code === 'VALIDATION') {
          const details = validationDetails(error as ValidationError)
          return errorResponseFor(
            path,
            'invalid_request',
            `Invalid request: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`,
            { details, requestId },
          )
        }
        if (code === 'NOT_FOUND') {
          if (dashboard) return dashboardNotFound(assets.url)
          // The pay page's links are opened by people: a path under it that names nothing is its
          // not-found page.
          if (path.startsWith('/pay/')) return payNotFound(assets.url)
          return errorResponseFor(path, 'not_found', `No route ${request.method} ${path}`, {
            requestId,
          })
        }
        if (code === 'PARSE')
          return errorResponseFor(path, 'invalid_request', 'Request body could not be parsed', {
            requestId,
          })
        opts.logger.error('unhandled error', {
          requestId,
          method: request.method,
          path,
          error: error instanceof Error ? error.stack : String(error),
        })
        return errorResponseFor(
          path,
          'internal',
          `Internal server error. Quote request id ${requestId} when reporting it.`,
          { requestId },
        )
      })
      .use(openapi(opts.servers))
      .use(
        operationsController({
          readiness: services.readiness,
          metrics: opts.metricsEnabled ? services.metrics : null,
          metricsToken: opts.metricsToken,
        }),
      )
      .get('/', ({ redirect }) => redirect('/swagger'), { detail: { hide: true } })
      .use(
        transactionsController({
          transactions: services.transactions,
          webhooks: services.webhooks,
          transactionExport: services.transactionExport,
        }),
      )
      .use(commerceController({ commerce: services.commerce }))
      .use(
        checkoutPageController({
          commerce: services.commerce,
          limiter: services.limiter,
          limits: services.payLimits,
          asset: assets.url,
        }),
      )
      .use(statsController({ stats: services.stats }))
      .use(refundsController({ refunds: services.refunds }))
      .use(
        x402Controller({
          facilitator: services.facilitator,
          limiter: services.limiter,
          settleLimits: services.x402SettleLimits,
        }),
      )
      .use(treasuryController({ treasury: services.treasury }))
      .use(staticAssetsController(assets))
      .use(
        payController({
          pay: services.pay,
          streams: services.payStreams,
          limiter: services.limiter,
          limits: services.payLimits,
          asset: assets.url,
        }),
      )
      .use(
        transactionsExportSection({
          sessions: services.sessions,
          asset: assets.url,
          transactionExport: services.transactionExport,
        }),
      )
      .use(
        dashboardController({
          sessions: services.sessions,
          dashboard: services.dashboard,
          keys: services.keys,
          endpoints: services.endpoints,
          webhooks: services.webhooks,
          transactions: services.transactions,
          refunds: services.refunds,
          limiter: services.limiter,
          signInLimits: services.signInLimits,
          asset: assets.url,
          clock: services.clock,
          decimals: (network, symbol) =>
            services.chain.networks
              .find((n) => n.name === network)
              ?.tokens.find((t) => t.symbol === symbol)?.decimals ?? null,
          native: (network) => {
            const coin = services.chain.networks
              .find((n) => n.name === network)
              ?.tokens.find((t) => t.kind === 'native')
            return coin ? { symbol: coin.symbol, decimals: coin.decimals } : null
          },
        }),
      )
  )
}

export type App = ReturnType<typeof createApp>

/** Records the template of the route Elysia matched on the request's facts. */
function routeTemplates() {
  return new Elysia({ name: 'route-templates' }).onTransform(
    { as: 'global' },
    ({ request, route }) => {
      const facts = factsOf(request)
      if (facts) facts.route = route
    },
  )
}

function validationDetails(e: ValidationError): FieldProblem[] {
  const seen = new Map<string, string>()
  for (const v of e.all) {
    const raw = 'path' in v ? String(v.path) : ''
    const path = fieldPath(raw) || e.type
    if (!seen.has(path)) seen.set(path, v.summary ?? v.message)
  }
  return [...seen].map(([path, message]) => ({ path, message }))
}
