import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { swagger } from '@elysiajs/swagger'
import { Elysia } from 'elysia'
import { shapeDocument, type Json, type ServerEntry } from './openapi-shape.ts'

/**
 * All OpenAPI wiring: @elysiajs/swagger builds the document at /swagger/json from the routes'
 * TypeBox models; /swagger serves Swagger UI from swagger-ui-dist on this server, because the
 * plugin's own page loads its scripts from a CDN and stays blank offline
 * (docs/development.md#chromium).
 */
export const OPENAPI_INFO = {
  title: 'Crypto Pay merchant API',
  version: '1.0.0',
  description:
    'Accept cryptocurrency priced in your own currency (USD, EUR, GBP, JPY and more). Create a transaction, send the customer to its `payment_url`, and learn of the payment through signed webhooks. ' +
    'Every request needs `Authorization: Bearer sk_test_...` (test mode) or `sk_live_...` (live mode) and HTTPS. ' +
    'Every /api response carries X-Request-Id and the nine X-RateLimit-* headers. ' +
    'The webhooks section lists every event the service POSTs to your endpoints, with its body and headers.',
}

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
}

const INIT_JS = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/swagger/json', dom_id: '#swagger-ui', deepLinking: true, presets: [SwaggerUIBundle.presets.apis], layout: 'BaseLayout' });
});
`

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${OPENAPI_INFO.title}</title>
<link rel="icon" href="/swagger/assets/favicon-32x32.png">
<link rel="stylesheet" href="/swagger/assets/swagger-ui.css">
<style>
/* On a phone the responses table (with each response's headers) stays within the page. */
@media (max-width: 600px) {
  .swagger-ui .responses-table { table-layout: fixed; width: 100%; }
  .swagger-ui .responses-table .response-col_links { display: none; }
  .swagger-ui .responses-table td { overflow-wrap: anywhere; }
  .swagger-ui .headers-wrapper { overflow-x: auto; max-width: 100%; }
}
</style>
</head>
<body>
<div id="swagger-ui"></div>
<script src="/swagger/assets/swagger-ui-bundle.js"></script>
<script src="/swagger/assets/init.js"></script>
</body>
</html>`

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

function loadAssets(): Map<string, ArrayBuffer> {
  const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
  return new Map(
    Object.keys(ASSETS).map((f) => [
      f,
      new Uint8Array(readFileSync(join(dir, f))).buffer as ArrayBuffer,
    ]),
  )
}

const TAGS = [
  { name: 'Transactions', description: 'Create and read payment transactions.' },
  { name: 'Statistics', description: 'Aggregates over transactions.' },
  {
    name: 'Refunds',
    description:
      "Money sent back to customers, paid by the merchant's treasury tool and confirmed on-chain.",
  },
  {
    name: 'Treasury',
    description:
      "What the merchant's treasury tool reads and records: networks, the deposit key, deposit addresses, sweeps.",
  },
  {
    name: 'x402',
    description:
      "An x402 v2 facilitator for the merchant's own resources: point x402 middleware (@x402/hono, @x402/express) at {base}/api/x402 with an API key holding `x402:settle`. Payments go to the project's x402 address; each settled one is a transaction with its webhooks.",
  },
  {
    name: 'Coinbase Commerce',
    description:
      "Coinbase Commerce's charge API (version 2018-03-22) at {base}/commerce/: a Commerce integration works by changing its base URL and key (X-CC-Api-Key, a project API key). Charges are this service's transactions. Errors are Commerce's `{error: {type, message}}`. Guide: docs/integrating/coinbase-commerce.md.",
  },
  {
    name: 'Webhooks',
    description: "What the service POSTs to your endpoints, signed with the endpoint's secret.",
  },
]

/** `servers`: what the served document lists (see servedServers and COMMITTED_SERVERS). */
export function openapi(servers: ServerEntry[]) {
  const assets = loadAssets()
  const hide = { detail: { hide: true } }
  // Shaped once, on first request: the routes' models do not change while the app runs.
  let shaped: Json | undefined
  return (
    new Elysia({ name: 'openapi' })
      .onAfterHandle({ as: 'global' }, ({ path, response }) => {
        if (path !== '/swagger/json') return
        shaped ??= shapeDocument(response as Json, { servers, info: OPENAPI_INFO, tags: TAGS })
        return shaped
      })
      .use(
        swagger({
          path: '/swagger',
          specPath: '/swagger/json',
          provider: 'swagger-ui',
          // The pay page's routes are for its page, not the API; a transaction's x402_url is for
          // programs, so it is documented.
          exclude: [/^\/swagger/, /^\/pay\/(?!\{id\}\/x402$)/, /^\/dashboard/, '/'],
          documentation: {
            info: OPENAPI_INFO,
            components: {
              securitySchemes: {
                bearerAuth: {
                  type: 'http',
                  scheme: 'bearer',
                  description: 'A project API key: sk_test_... or sk_live_...',
                },
                CommerceApiKey: {
                  type: 'apiKey',
                  in: 'header',
                  name: 'X-CC-Api-Key',
                  description: 'The Commerce API: a project API key (sk_test_... or sk_live_...).',
                },
              },
            },
            security: [{ bearerAuth: [] }],
          },
        }),
      )
      // Registered after the plugin, so this page replaces its CDN-loading one.
      .get(
        '/swagger',
        () =>
          new Response(PAGE, {
            headers: { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': CSP },
          }),
        hide,
      )
      .get(
        '/swagger/assets/init.js',
        () =>
          new Response(INIT_JS, {
            headers: {
              'content-type': 'text/javascript; charset=utf-8',
              'cache-control': 'public, max-age=3600',
            },
          }),
        hide,
      )
      .get(
        '/swagger/assets/:file',
        ({ params }) => {
          const body = assets.get(params.file)
          if (!body) return new Response('Not found', { status: 404 })
          return new Response(body, {
            headers: {
              'content-type': ASSETS[params.file],
              'cache-control': 'public, max-age=86400',
            },
          })
        },
        hide,
      )
  )
}
