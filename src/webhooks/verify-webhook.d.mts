/** Lowercase hex HMAC-SHA-256 of the exact request body: the `x-service-signature` value. */
export function signWebhookBody(rawBody: string | Uint8Array, secret: string): string
/** True when `signature` is the signature of `rawBody` under `secret` (constant-time). */
export function verifyWebhookSignature(rawBody: string | Uint8Array, signature: string | null | undefined, secret: string): boolean
/** The Standard Webhooks `webhook-signature` value (`v1,` + base64) of one delivery. */
export function signStandardWebhook(id: string, timestampSeconds: number, rawBody: string | Uint8Array, secret: string): string
/** Seconds a receiver accepts between `webhook-timestamp` and its own clock. */
export const REPLAY_WINDOW_SECONDS: number
/** True when the Standard Webhooks headers sign `rawBody` under `secret` and the timestamp is within five minutes of now. */
export function verifyStandardWebhook(
  rawBody: string | Uint8Array,
  headers: { get(name: string): string | null } | Record<string, string | undefined>,
  secret: string,
  nowSeconds?: number,
): boolean
