import { createHash } from 'node:crypto'
import { randomString } from '../lib/ids.ts'

import type { Mode } from '../projects/mode.ts'

/**
 * R22's four, and the treasury's (issue 13): `deposits:read` (networks, the deposit key, deposit
 * addresses, sweeps), `sweeps:write` (record a sweep), `refunds:read`, `refunds:write` (create,
 * cancel, record a refund's payment). A key made before a scope existed keeps the scopes it has.
 */
export const SCOPES = ['transactions:read', 'transactions:write', 'stats:read', 'webhooks:write', 'deposits:read', 'sweeps:write', 'refunds:read', 'refunds:write'] as const
export type Scope = (typeof SCOPES)[number]

const KEY_RE = /^sk_(test|live)_[A-Za-z0-9]{32,128}$/

/** A new key: `sk_test_` / `sk_live_` + 40 random base62 characters (R22). */
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
