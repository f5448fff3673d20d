/**
 * A merchant's own API charging agents over x402, with this service as its facilitator: a Hono
 * app whose `GET /weather` costs one cent of the first token the service settles in the key's mode,
 * paid to the project's x402 address. The x402 Foundation's middleware (`@x402/hono`) does the
 * protocol; this service verifies and settles (its relayer pays the gas) and records each payment
 * as a transaction with its webhooks.
 *
 *   NODE_EXTRA_CA_CERTS=.data/tls/cert.pem API_KEY=sk_test_... npx bun docs/examples/x402-merchant.ts
 *
 * SERVICE_URL (default https://localhost:3000), API_KEY (a key with the x402:settle scope), PORT
 * (default 4021; 0 picks one). Prints `listening <url>`.
 */
import { HTTPFacilitatorClient } from '@x402/core/server'
import { ExactEvmScheme } from '@x402/evm/exact/server'
import {
  paymentMiddlewareFromHTTPServer,
  x402HTTPResourceServer,
  x402ResourceServer,
} from '@x402/hono'
import { Hono } from 'hono'

const service = process.env.SERVICE_URL ?? 'https://localhost:3000'
const key = process.env.API_KEY
if (!key) throw new Error('API_KEY is not set: a key of your project with the x402:settle scope')
const auth = { Authorization: `Bearer ${key}` }

// Where the project's payments go (the operator sets it), and what may be asked for.
const setup = (await (await fetch(`${service}/api/x402/pay-to`, { headers: auth })).json()) as {
  pay_to: string | null
  assets: {
    network: `${string}:${string}`
    asset: string
    decimals: number
    extra: Record<string, unknown>
  }[]
}
const asset = setup.assets[0]
if (!setup.pay_to || !asset)
  throw new Error(`nothing to charge in: ${JSON.stringify(setup)} (see project set-x402-pay-to)`)

const facilitator = new HTTPFacilitatorClient({
  url: `${service}/api/x402`,
  createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
})
const resourceServer = new x402ResourceServer(facilitator).register(
  asset.network,
  new ExactEvmScheme(),
)
const httpServer = new x402HTTPResourceServer(resourceServer, {
  'GET /weather': {
    accepts: {
      scheme: 'exact',
      network: asset.network,
      payTo: setup.pay_to,
      // One cent of a dollar stablecoin, in its smallest units.
      price: {
        amount: (10n ** BigInt(asset.decimals - 2)).toString(),
        asset: asset.asset,
        extra: asset.extra,
      },
    },
    description: 'Weather for agents',
    mimeType: 'application/json',
  },
})
await httpServer.initialize()

const app = new Hono()
app.use(paymentMiddlewareFromHTTPServer(httpServer, undefined, undefined, false))
app.get('/weather', (c) => c.json({ forecast: 'sunny', temperature_c: 21 }))

const server = Bun.serve({
  port: Number(process.env.PORT ?? 4021),
  hostname: '127.0.0.1',
  fetch: app.fetch,
})
console.log(`listening ${server.url.origin}`)
