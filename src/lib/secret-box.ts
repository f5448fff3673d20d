import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto'

/**
 * Secrets at rest (webhook signing secrets,
 * docs/decisions/0021-webhook-endpoints-and-private-addresses.md) are sealed with AES-256-GCM under
 * SECRET_KEY. The record's id is bound in as associated data, so a sealed value copied onto another
 * row does not open there.
 */
export interface SecretBox {
  seal(plaintext: string, boundTo: string): string
  /** Throws when the value was not sealed with this key for this record. */
  open(sealed: string, boundTo: string): string
  /** A value derived from the key that reveals nothing about it: detects a changed SECRET_KEY. */
  readonly fingerprint: string
}

const VERSION = 'v1'

/** `key` is 32 bytes: 64 hex characters or base64/base64url. */
export function parseSecretKey(text: string): Buffer | null {
  const s = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(s)) return Buffer.from(s, 'hex')
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(s)) {
    const b = Buffer.from(s.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
    return b.length === 32 ? b : null
  }
  return null
}

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('secret key must be 32 bytes')
  return {
    seal(plaintext, boundTo) {
      const iv = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', key, iv)
      cipher.setAAD(Buffer.from(boundTo))
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
      return [
        VERSION,
        iv.toString('base64'),
        cipher.getAuthTag().toString('base64'),
        body.toString('base64'),
      ].join(':')
    },
    open(sealed, boundTo) {
      const [version, iv, tag, body] = sealed.split(':')
      if (version !== VERSION || !iv || !tag || body === undefined)
        throw new Error('not a sealed secret')
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'))
      decipher.setAAD(Buffer.from(boundTo))
      decipher.setAuthTag(Buffer.from(tag, 'base64'))
      return Buffer.concat([
        decipher.update(Buffer.from(body, 'base64')),
        decipher.final(),
      ]).toString('utf8')
    },
    fingerprint: createHmac('sha256', key)
      .update('crypto-pay secret key fingerprint')
      .digest('hex')
      .slice(0, 32),
  }
}
