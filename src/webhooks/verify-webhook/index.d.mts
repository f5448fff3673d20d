import type { components } from './api.mjs'

/**
 * The types of the whole merchant API and its webhooks, generated from the service's OpenAPI
 * document.
 */
export type { components, paths, webhooks } from './api.mjs'

/** Any webhook body the service sends; switch on `event` to narrow it. */
export type WebhookEvent = components['schemas']['WebhookEvent']
export type WebhookEventType = WebhookEvent['event']
/** The body of one event type, e.g. `WebhookEventOf<'transaction.completed'>`. */
export type WebhookEventOf<T extends WebhookEventType> = Extract<WebhookEvent, { event: T }>

/** Thrown by `constructEvent` when a delivery is not what the service sent: answer 401. */
export class WebhookVerificationError extends Error {}

/**
 * Verifies one delivery (x-service-signature, and the Standard Webhooks headers within five
 * minutes of now) and returns its event, parsed and typed; throws `WebhookVerificationError`.
 */
export function constructEvent(
  rawBody: string | Uint8Array,
  headers: { get(name: string): string | null } | Record<string, string | string[] | undefined>,
  secret: string,
  options?: { nowSeconds?: number },
): WebhookEvent

/** Lowercase hex HMAC-SHA-256 of the exact request body: the `x-service-signature` value. */
export function signWebhookBody(rawBody: string | Uint8Array, secret: string): string
/** True when `signature` is the signature of `rawBody` under `secret` (constant-time). */
export function verifyWebhookSignature(
  rawBody: string | Uint8Array,
  signature: string | null | undefined,
  secret: string,
): boolean
/** The Standard Webhooks `webhook-signature` value (`v1,` + base64) of one delivery. */
export function signStandardWebhook(
  id: string,
  timestampSeconds: number,
  rawBody: string | Uint8Array,
  secret: string,
): string
/** Seconds a receiver accepts between `webhook-timestamp` and its own clock. */
export const REPLAY_WINDOW_SECONDS: number
/**
 * True when the Standard Webhooks headers sign `rawBody` under `secret` and the timestamp is within
 * five minutes of now.
 */
export function verifyStandardWebhook(
  rawBody: string | Uint8Array,
  headers: { get(name: string): string | null } | Record<string, string | undefined>,
  secret: string,
  nowSeconds?: number,
): boolean
