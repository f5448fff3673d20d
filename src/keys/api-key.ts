import { createHash } from 'node:crypto'
import { randomString } from '../lib/ids.ts'

import type { Mode } from '../projects/mode.ts'

/**
 * The merchant API's four (transactions, stats, webhooks), and money out's: `deposits:read`
 * (networks, the deposit key's fingerprint, deposit addresses, sweeps), `refunds:read`,
 * `refunds:write` (create and cancel refunds: what a shop's backend does), and the treasury tool's
 * own two, `sweeps:write` (record a sweep) and `refunds:pay` (record a refund's payment, mark one
 * unpayable, abandon a payment). A key made before a scope existed keeps the scopes it has.
 */
export const SCOPES = [
  'transactions:read',
  'transactions:write',
  'stats:read',
  'webhooks:write',
  'deposits:read',
  'sweeps:write',
  'refunds:read',
  'refunds:write',
  'refunds:pay',
  'x402:settle',
] as const
export type Scope = (typeof SCOPES)[number]

/**
 * The treasury tool's scopes: what records money leaving deposit addresses. Keys get them only
 * when asked for by name, so the key a shop's backend holds (which may create refunds) is not the
 * key that records their payment.
 */
export const TREASURY_SCOPES: readonly Scope[] = [
  'deposits:read',
  'sweeps:write',
  'refunds:read',
  'refunds:pay',
]

/** A key made without naming its scopes gets every scope but the treasury tool's writes. */
export const DEFAULT_SCOPES: readonly Scope[] = SCOPES.filter(
  (s) => s !== 'sweeps:write' && s !== 'refunds:pay',
)

const KEY_RE = /^sk_(test|live)_[A-Za-z0-9]{32,128}$/

/**
 * A new key: `sk_test_` / `sk_live_` + 40 random base62 characters
 * (docs/decisions/0022-api-keys-and-scopes.md).
 */
export function generateApiKey(mode: Mode): string {
  return `sk_${mode}_${randomString(40)}`
}

/**
 * Keys carry 238 bits of entropy, so a fast hash is enough (no salt or stretching needed), and
 * looking a key up by its hash reveals nothing through timing about any stored key.
 */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex')
}

/** What a dashboard may show of a key: its kind and a few characters at both ends. */
export function displayPrefix(key: string): string {
  return `${key.slice(0, 12)}…${key.slice(-4)}`
}

/** Shape check before any lookup; says nothing about validity. */
export function looksLikeApiKey(s: string): boolean {
  return KEY_RE.test(s)
}
