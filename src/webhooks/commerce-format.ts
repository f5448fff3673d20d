import { createHmac } from 'node:crypto'
import { LATE_PAYMENT_EVENT, RESOLVED_EVENT } from '../db/schema.ts'

/**
 * Coinbase Commerce's webhook format (docs/decisions/0065-coinbase-commerce-drop-in.md), for the
 * endpoints that choose it: Commerce's envelope, signed as Commerce signed it.
 */

/** The Commerce event each outbox event is, for the events Commerce had a name for. */
export const COMMERCE_EVENT_OF: Readonly<Record<string, string>> = {
  'transaction.created': 'charge:created',
  'transaction.payment_received': 'charge:pending',
  'transaction.completed': 'charge:confirmed',
  'transaction.failed': 'charge:failed',
  'transaction.expired': 'charge:failed',
  'transaction.cancelled': 'charge:failed',
  [LATE_PAYMENT_EVENT]: 'charge:delayed',
  [RESOLVED_EVENT]: 'charge:resolved',
}

/**
 * An event's name as an endpoint of `format` receives it: a Commerce-format endpoint hears
 * `charge:confirmed` where a standard one hears `transaction.completed`.
 */
export const eventNameFor = (format: string, eventType: string) =>
  format === 'commerce' ? (COMMERCE_EVENT_OF[eventType] ?? eventType) : eventType

/** The outbox event types that have a Commerce name. */
export const COMMERCE_OUTBOX_TYPES = Object.keys(COMMERCE_EVENT_OF)

/**
 * `X-CC-Webhook-Signature`: HMAC-SHA256 of the raw body keyed with the endpoint's secret as
 * text (Commerce's "shared secret"), in lowercase hex.
 */
export const commerceSignature = (body: string, secret: string) =>
  createHmac('sha256', secret).update(body).digest('hex')

/**
 * The body of one attempt: `id` (the delivery's), `scheduled_for` (when this attempt was due),
 * `attempt_number`, and the `event` as the Commerce API's events list shows it.
 */
export function commerceBody(o: {
  deliveryId: string
  scheduledFor: Date
  attempt: number
  event: Record<string, unknown>
}): string {
  return JSON.stringify({
    id: o.deliveryId,
    scheduled_for: o.scheduledFor.toISOString(),
    attempt_number: o.attempt,
    event: o.event,
  })
}

export function commerceHeaders(body: string, secret: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'crypto-pay-webhooks/1',
    'x-cc-webhook-signature': commerceSignature(body, secret),
  }
}
