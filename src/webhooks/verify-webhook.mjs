// Webhook signature check for merchants (issue 5). Plain JavaScript with node:crypto only, so it
// runs unchanged on Node, Bun and Deno:
//   import { verifyWebhookSignature } from 'crypto-pay/verify-webhook'
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
