// A shop written for Coinbase Commerce, running on this service: the official Node SDK
// (coinbase-commerce-node), unmodified, with only `Client.init`'s key and base URL changed
// (docs/integrating/coinbase-commerce.md, "Try it").
//
// It creates a 25.00 EUR charge, prints its code and hosted_url (the customer's pay page), polls
// Charge.retrieve every 2 s, printing each new status of the charge's timeline, and once the
// charge is COMPLETED prints its payment and exits 0. It exits 1 when the charge ends otherwise
// (EXPIRED, CANCELED, UNRESOLVED) or is not paid within COMMERCE_TIMEOUT_SECONDS.
//
//   COMMERCE_API_KEY          a test API key of one of the service's projects (sk_test_...)
//   COMMERCE_BASE_URL         default https://localhost:3000/commerce/ (npm start's default port)
//   COMMERCE_TIMEOUT_SECONDS  default 600
//   NODE_EXTRA_CA_CERTS       the service's certificate when it is self-signed (.data/tls/cert.pem)
//
//   COMMERCE_API_KEY=sk_test_... NODE_EXTRA_CA_CERTS=.data/tls/cert.pem node docs/examples/commerce-shop.mjs
import commerce from 'coinbase-commerce-node'

const {
  Client,
  resources: { Charge },
} = commerce

const apiKey = process.env.COMMERCE_API_KEY
const baseUrl = process.env.COMMERCE_BASE_URL || 'https://localhost:3000/commerce/'
const timeoutSeconds = Number(process.env.COMMERCE_TIMEOUT_SECONDS || 600)
const POLL_MS = 2_000

/** How the SDK's errors read: its class (ValidationError, AuthenticationError...) and message. */
const reason = (e) =>
  `${e?.constructor?.name ?? 'Error'}: ${e?.message ?? String(e)}${typeof e?.code === 'number' ? ` (HTTP ${e.code})` : ''}`

/** A timeline step as printed: its status, and why when it is UNRESOLVED. */
const stepText = (s) => (s.context ? `${s.status} (${s.context})` : s.status)

/** The shop's side of one sale; resolves with the exit code (0: paid). */
async function main() {
  if (!apiKey) {
    console.error(
      'Set COMMERCE_API_KEY to a test API key of the service (sk_test_...): npm start prints one on its first start.',
    )
    return 1
  }
  if (!(timeoutSeconds > 0)) {
    console.error('COMMERCE_TIMEOUT_SECONDS must be a number of seconds above 0')
    return 1
  }
  // The SDK appends paths such as "charges" to the base URL as it is: it must end with a slash.
  if (!baseUrl.endsWith('/')) {
    console.error(`COMMERCE_BASE_URL must end with "/": ${baseUrl}/`)
    return 1
  }

  // The line a Commerce shop changes: the service's API key and its /commerce/ base URL.
  Client.init(apiKey, baseUrl)

  let charge
  try {
    charge = await Charge.create({
      name: 'The Sovereign Individual',
      description: 'Hardcover, shipped to the customer',
      pricing_type: 'fixed_price',
      local_price: { amount: '25.00', currency: 'EUR' },
      metadata: { customer_id: 'c-42', order_id: 'order-1001' },
    })
  } catch (e) {
    console.error(`Could not create the charge at ${baseUrl}: ${reason(e)}`)
    return 1
  }
  console.log(
    `charge ${charge.code} created: ${charge.local_price.amount} ${charge.local_price.currency}`,
  )
  console.log(`hosted_url ${charge.hosted_url}`)
  console.log('Open it, choose a token and pay (on the devnet: "Pay with test wallet").')

  const deadline = Date.now() + timeoutSeconds * 1000
  let shown = 0
  for (;;) {
    const steps = charge.timeline ?? []
    for (; shown < steps.length; shown++) console.log(`status ${stepText(steps[shown])}`)
    // An overpaid charge is COMPLETED, then UNRESOLVED (OVERPAID) at the same moment: it is paid.
    if (steps.some((s) => s.status === 'COMPLETED')) break
    const last = steps[steps.length - 1]
    if (last && ['EXPIRED', 'CANCELED', 'UNRESOLVED'].includes(last.status)) {
      console.error(`The charge ended ${stepText(last)} without being paid in full.`)
      return 1
    }
    if (Date.now() + POLL_MS > deadline) {
      console.error(
        `Timed out after ${timeoutSeconds} s: charge ${charge.code} is still ${last ? stepText(last) : 'NEW'}. Pay it at ${charge.hosted_url}`,
      )
      return 1
    }
    await new Promise((r) => setTimeout(r, POLL_MS))
    try {
      charge = await Charge.retrieve(charge.id)
    } catch (e) {
      // A passing failure (a restart, the network): the next poll tries again.
      console.error(`retrieve failed, retrying: ${reason(e)}`)
    }
  }

  for (const p of charge.payments) {
    const local = p.value.local ? ` (${p.value.local.amount} ${p.value.local.currency})` : ''
    console.log(
      `payment ${p.value.crypto.amount} ${p.value.crypto.currency}${local} on ${p.network}, transaction ${p.transaction_id}, ${p.status}`,
    )
  }
  console.log(`paid: ship order ${charge.metadata.order_id}`)
  return 0
}

process.exitCode = await main()
