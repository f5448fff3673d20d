/** Lowercase hex HMAC-SHA-256 of the exact request body: the `x-service-signature` value. */
export function signWebhookBody(rawBody: string | Uint8Array, secret: string): string
/** True when `signature` is the signature of `rawBody` under `secret` (constant-time). */
export function verifyWebhookSignature(rawBody: string | Uint8Array, signature: string | null | undefined, secret: string): boolean
