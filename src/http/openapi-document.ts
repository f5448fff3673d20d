import { createLogger } from '../lib/logger.ts'
import type { Services } from '../services.ts'
import { createApp } from './app.ts'
import { COMMITTED_SERVERS } from './openapi-shape.ts'

/**
 * The OpenAPI document exactly as a running server serves it at /swagger/json, but for `servers`
 * (a variable here, the server's own BASE_URL and API_URL there), built without a database: the
 * app is assembled over services that refuse to be used, and only the document route is called.
 */
export async function openapiDocument(): Promise<unknown> {
  const refuse = new Proxy(
    {},
    {
      get: (_, prop) =>
        prop === 'then'
          ? undefined
          : () => {
              throw new Error('documentation-only app: no services')
            },
    },
  )
  const services = new Proxy({}, { get: () => refuse }) as unknown as Services
  const app = createApp(services, {
    trustProxy: false,
    httpsOrigin: () => 'https://localhost:3000',
    logger: createLogger('silent'),
    metricsEnabled: true,
    metricsToken: null,
    servers: COMMITTED_SERVERS,
  })
  // A host such as http://x/ makes every route 404 (docs/development.md#openapi); localhost works.
  const res = await app.handle(new Request('http://localhost/swagger/json'))
  if (!res.ok) throw new Error(`/swagger/json answered ${res.status}`)
  return res.json()
}

/** The committed file's exact text: stable key order, two-space indent, final newline. */
export const formatDocument = (doc: unknown) => `${JSON.stringify(doc, null, 2)}\n`
