import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { swagger } from '@elysiajs/swagger'
import { Elysia } from 'elysia'

/**
 * All OpenAPI wiring: @elysiajs/swagger builds the document at /swagger/json from the routes'
 * TypeBox models; /swagger serves Swagger UI from swagger-ui-dist on this server, because the
 * plugin's own page loads its scripts from a CDN and stays blank offline (TOOLING.md).
 */
export const OPENAPI_INFO = {
  title: 'Crypto Pay merchant API',
  version: '1.0.0',
  description:
    'Accept cryptocurrency priced in US dollars. Create a transaction, send the customer to its `payment_url`, and learn of the payment through signed webhooks. ' +
    'Every request needs `Authorization: Bearer sk_test_...` (test mode) or `sk_live_...` (live mode) and HTTPS. ' +
    'Every /api response carries X-Request-Id and the nine X-RateLimit-* headers.',
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
</head>
<body>
<div id="swagger-ui"></div>
<script src="/swagger/assets/swagger-ui-bundle.js"></script>
<script src="/swagger/assets/init.js"></script>
</body>
</html>`

const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

function loadAssets(): Map<string, ArrayBuffer> {
  const dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
  return new Map(Object.keys(ASSETS).map((f) => [f, new Uint8Array(readFileSync(join(dir, f))).buffer as ArrayBuffer]))
}

export function openapi() {
  const assets = loadAssets()
  const hide = { detail: { hide: true } }
  return new Elysia({ name: 'openapi' })
    // The plugin offers every body as JSON, form data and text, omits response descriptions
    // (required by OpenAPI) and leaks Elysia's `$id`s: tidy the document it returns.
    .onAfterHandle({ as: 'global' }, ({ path, response }) => (path === '/swagger/json' ? tidyDocument(response as OpenApiDoc) : undefined))
    .use(
      swagger({
        path: '/swagger',
        specPath: '/swagger/json',
        provider: 'swagger-ui',
        exclude: [/^\/swagger/, /^\/pay/, /^\/dashboard/, '/'],
        documentation: {
          info: OPENAPI_INFO,
          tags: [
            { name: 'Transactions', description: 'Create and read payment transactions.' },
            { name: 'Statistics', description: 'Aggregates over transactions.' },
          ],
          components: {
            securitySchemes: {
              bearerAuth: { type: 'http', scheme: 'bearer', description: 'A project API key: sk_test_... or sk_live_...' },
            },
          },
          security: [{ bearerAuth: [] }],
        },
      }),
    )
    // Registered after the plugin, so this page replaces its CDN-loading one.
    .get('/swagger', () => new Response(PAGE, { headers: { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': CSP } }), hide)
    .get('/swagger/assets/init.js', () => new Response(INIT_JS, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=3600' } }), hide)
    .get('/swagger/assets/:file', ({ params }) => {
      const body = assets.get(params.file)
      if (!body) return new Response('Not found', { status: 404 })
      return new Response(body, { headers: { 'content-type': ASSETS[params.file], 'cache-control': 'public, max-age=86400' } })
    }, hide)
}

type OpenApiDoc = { paths: Record<string, Record<string, any>>; components?: { schemas?: Record<string, any> } }

const STATUS_TEXT: Record<string, string> = {
  200: 'Success',
  400: 'Invalid request: `error.details` names each bad field',
  401: 'API key missing, malformed, unknown or revoked',
  403: 'Key lacks the scope, project inactive, IP not allowed, or another project',
  404: 'No such transaction for this key (other projects and modes look the same)',
  409: 'Conflict: Idempotency-Key reused with another body, or the transaction is not in a status that allows it',
  413: 'Request body larger than 64 KiB',
  429: 'Rate limit exceeded: see Retry-After and X-RateLimit-* headers',
  500: 'Internal error: quote `error.request_id`',
}

/** JSON only, a description for every response, no `$id`. Pure: the input is not changed. */
export function tidyDocument(input: OpenApiDoc): OpenApiDoc {
  const doc: OpenApiDoc = JSON.parse(JSON.stringify(input))
  const jsonOnly = (content: Record<string, any> | undefined) => {
    const schema = content && Object.values(content)[0]?.schema
    return schema ? { 'application/json': { schema } } : undefined
  }
  for (const ops of Object.values(doc.paths)) {
    for (const op of Object.values(ops)) {
      if (op.requestBody) op.requestBody.content = jsonOnly(op.requestBody.content)
      for (const [status, res] of Object.entries<any>(op.responses ?? {})) {
        op.responses[status] = { description: STATUS_TEXT[status] ?? 'Response', content: jsonOnly(res.content) }
      }
    }
  }
  for (const schema of Object.values(doc.components?.schemas ?? {})) delete schema.$id
  return schemaFor30(doc) as OpenApiDoc
}

/**
 * TypeBox writes JSON Schema 2019 and OpenAPI 3.0 speaks an older dialect: `X | null` becomes
 * X with `nullable: true`, a numeric `exclusiveMinimum` becomes `minimum` plus `true`, `const`
 * an one-value `enum`, `examples` one `example`, and a record's `patternProperties` its
 * `additionalProperties`.
 */
function schemaFor30(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(schemaFor30)
  if (!node || typeof node !== 'object') return node
  const o = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, schemaFor30(v)])) as Record<string, any>
  if (typeof o.exclusiveMinimum === 'number') Object.assign(o, { minimum: o.exclusiveMinimum, exclusiveMinimum: true })
  if (typeof o.exclusiveMaximum === 'number') Object.assign(o, { maximum: o.exclusiveMaximum, exclusiveMaximum: true })
  if ('const' in o) {
    o.enum = [o.const]
    delete o.const
  }
  if (Array.isArray(o.examples)) {
    o.example = o.examples[0]
    delete o.examples
  }
  if (o.patternProperties && typeof o.patternProperties === 'object') {
    const [value] = Object.values(o.patternProperties)
    o.additionalProperties = value
    delete o.patternProperties
  }
  if (Array.isArray(o.anyOf)) {
    const rest = o.anyOf.filter((v: any) => v?.type !== 'null')
    if (rest.length < o.anyOf.length) {
      const { anyOf: _, ...outer } = o
      // 3.0 wants a `type` beside `nullable`: with several variants the first one carries it.
      return rest.length === 1 ? { ...rest[0], ...outer, nullable: true } : { ...outer, anyOf: [{ ...rest[0], nullable: true }, ...rest.slice(1)] }
    }
  }
  return o
}
