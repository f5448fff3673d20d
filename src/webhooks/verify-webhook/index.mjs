// Webhook verification for merchants: the package @crypto-pay/verify-webhook (this folder). Plain
// JavaScript with node:crypto only, so it runs unchanged on Node, Bun and Deno:
//   import { constructEvent } from '@crypto-pay/verify-webhook'
//   const event = constructEvent(rawBody, request.headers, secret) // typed by `event.event`
import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * Lowercase hex HMAC-SHA-256 of the exact request body under the endpoint's secret: the value
 * of the `x-service-signature` header.
 * @param {string | Uint8Array} rawBody
 * @param {string} secret
 * @returns {string}
 */
export function signWebhookBody(rawBody, secret) {
  return createHmac('sha256', secret).update(rawBody).digest('hex')
}

/**
 * True when `signature` (the `x-service-signature` header) is the signature of `rawBody`.
 * Pass the body exactly as received, before any JSON parsing: re-serialised JSON differs.
 * The comparison takes the same time wherever the first difference is.
 * @param {string | Uint8Array} rawBody
 * @param {string | null | undefined} signature
 * @param {string} secret
 * @returns {boolean}
 */
export function verifyWebhookSignature(rawBody, signature, secret) {
  if (typeof signature !== 'string' || !/^[0-9a-f]{64}$/.test(signature)) return false
  const expected = Buffer.from(signWebhookBody(rawBody, secret), 'hex')
  return timingSafeEqual(expected, Buffer.from(signature, 'hex'))
}

/**
 * The Standard Webhooks signature of one delivery: `v1,` and the base64 HMAC-SHA-256 of
 * `{webhook-id}.{webhook-timestamp}.{body}` under the secret's key (the base64 text after
 * `whsec_`, decoded): the value of the `webhook-signature` header.
 * @param {string} id the `webhook-id` header
 * @param {number} timestampSeconds the `webhook-timestamp` header
 * @param {string | Uint8Array} rawBody
 * @param {string} secret
 * @returns {string}
 */
export function signStandardWebhook(id, timestampSeconds, rawBody, secret) {
  const key = Buffer.from(
    secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret,
    'base64',
  )
  const body = typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`
}

/** A receiver should refuse a delivery whose timestamp is further than this from its own clock. */
export const REPLAY_WINDOW_SECONDS = 300

/**
 * Checks a delivery by its Standard Webhooks headers, the way the `standardwebhooks` package
 * does: a `v1` signature among those of `webhook-signature` must match, compared in constant
 * time, and `webhook-timestamp` must be within five minutes of `now` (a replay is refused).
 * @param {string | Uint8Array} rawBody
 * @param {{ get(name: string): string | null } | Record<string, string | undefined>} headers
 * @param {string} secret
 * @param {number} [nowSeconds]
 * @returns {boolean}
 */
export function verifyStandardWebhook(
  rawBody,
  headers,
  secret,
  nowSeconds = Math.floor(Date.now() / 1000),
) {
  const get = (name) =>
    (typeof headers.get === 'function' ? headers.get(name) : headers[name]) ?? null
  const id = get('webhook-id')
  const timestamp = get('webhook-timestamp')
  const signatures = get('webhook-signature')
  if (!id || !timestamp || !signatures || !/^\d{1,12}$/.test(timestamp)) return false
  if (Math.abs(nowSeconds - Number(timestamp)) > REPLAY_WINDOW_SECONDS) return false
  const expected = Buffer.from(
    signStandardWebhook(id, Number(timestamp), rawBody, secret).slice(3),
    'base64',
  )
  return signatures.split(' ').some((s) => {
    const [version, value] = s.split(',')
    if (version !== 'v1' || !value) return false
    const given = Buffer.from(value, 'base64')
    return given.length === expected.length && timingSafeEqual(given, expected)
  })
}

/** Thrown by `constructEvent` when a delivery is not what the service sent: answer 401. */
export class WebhookVerificationError extends Error {
  constructor(message) {
    super(message)
    this.name = 'WebhookVerificationError'
  }
}

/**
 * Verifies one delivery and returns its event, parsed, the way Stripe's `constructEvent` does:
 * the `x-service-signature` must sign the raw body and, when the Standard Webhooks headers are
 * there (the service always sends them), they must sign it too within five minutes of `now`, so
 * a captured delivery cannot be replayed later. Throws `WebhookVerificationError` otherwise.
 * Pass the body exactly as received, before any JSON parsing.
 * @param {string | Uint8Array} rawBody
 * @param {{ get(name: string): string | null } | Record<string, string | string[] | undefined>} headers
 * @param {string} secret
 * @param {{ nowSeconds?: number }} [options]
 */
export function constructEvent(rawBody, headers, secret, options = {}) {
  const get = (name) => {
    if (typeof headers.get === 'function') return headers.get(name)
    const value =
      headers[name] ?? headers[Object.keys(headers).find((k) => k.toLowerCase() === name) ?? '']
    return (Array.isArray(value) ? value[0] : value) ?? null
  }
  if (!verifyWebhookSignature(rawBody, get('x-service-signature'), secret)) {
    throw new WebhookVerificationError(
      'x-service-signature does not sign this body under this secret',
    )
  }
  if (
    get('webhook-signature') !== null &&
    !verifyStandardWebhook(rawBody, { get }, secret, options.nowSeconds)
  ) {
    throw new WebhookVerificationError(
      'webhook-signature does not sign this delivery, or webhook-timestamp is more than five minutes away',
    )
  }
  const text = typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody)
  let event
  try {
    event = JSON.parse(text)
  } catch {
    throw new WebhookVerificationError('the signed body is not JSON')
  }
  if (
    !event ||
    typeof event.event !== 'string' ||
    typeof event.data !== 'object' ||
    event.data === null
  ) {
    throw new WebhookVerificationError('the signed body is not a webhook event')
  }
  return event
}
