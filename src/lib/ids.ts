import { randomBytes, randomUUID } from 'node:crypto'

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
/** Crockford-style alphabet without look-alikes (0/O, 1/I/L, U) for numbers people read aloud. */
const HUMAN = '23456789ABCDEFGHJKMNPQRSTVWXYZ'

/**
 * Cryptographically random bytes drawn from a pool refilled 4 KiB at a time (one RNG call per ~100
 * ids, not one each); each byte is used once.
 */
let pool = Buffer.alloc(0)
let poolAt = 0
function nextRandomByte(): number {
  if (poolAt === pool.length) {
    pool = randomBytes(4096)
    poolAt = 0
  }
  return pool[poolAt++]!
}

/** Uniformly random string over `alphabet` (rejection sampling, no modulo bias). */
export function randomString(length: number, alphabet = BASE62): string {
  const limit = 256 - (256 % alphabet.length)
  let out = ''
  while (out.length < length) {
    const byte = nextRandomByte()
    if (byte < limit) out += alphabet[byte % alphabet.length]
  }
  return out
}

/**
 * Prefixed record ids (`proj_`, `key_`, `usr_`) tell what they are at a glance
 * (docs/development.md#conventions).
 */
export const newId = (prefix: string) => `${prefix}_${randomString(20)}`

/**
 * Transaction ids are random UUIDs: the pay page is authorised by this id alone
 * (docs/decisions/0026-pay-page-endpoints.md).
 */
export const newTransactionId = () => randomUUID()

/**
 * Human-readable transaction number such as `TX-7K3M-Q9PD`
 * (docs/decisions/0007-full-transaction-object.md).
 */
export const newTransactionNumber = () => `TX-${randomString(4, HUMAN)}-${randomString(4, HUMAN)}`

export const newRequestId = () => `req_${randomString(20)}`

/**
 * `x-service-event-id` of an event made outside the outbox (a manual retry, a test event, an
 * endpoint notice).
 */
export const newEventId = () => `evt_${randomString(24)}`

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
