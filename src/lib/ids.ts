import { randomBytes, randomUUID } from 'node:crypto'

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
/** Crockford-style alphabet without look-alikes (0/O, 1/I/L, U) for numbers people read aloud. */
const HUMAN = '23456789ABCDEFGHJKMNPQRSTVWXYZ'

/** Uniformly random string over `alphabet` (rejection sampling, no modulo bias). */
export function randomString(length: number, alphabet = BASE62): string {
  const limit = 256 - (256 % alphabet.length)
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit) out += alphabet[byte % alphabet.length]
      if (out.length === length) break
    }
  }
  return out
}

/** Prefixed record ids (`proj_`, `key_`, `usr_`) tell what they are at a glance (STYLE.md). */
export const newId = (prefix: string) => `${prefix}_${randomString(20)}`

/** Transaction ids are random UUIDs: the pay page is authorised by this id alone (R26). */
export const newTransactionId = () => randomUUID()

/** Human-readable transaction number such as `TX-7K3M-Q9PD` (R7). */
export const newTransactionNumber = () => `TX-${randomString(4, HUMAN)}-${randomString(4, HUMAN)}`

export const newRequestId = () => `req_${randomString(20)}`

/** `x-service-event-id` of an event made outside the outbox (a manual retry, a test event, an endpoint notice). */
export const newEventId = () => `evt_${randomString(24)}`

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
