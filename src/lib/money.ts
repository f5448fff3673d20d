/**
 * USD amounts travel as JSON numbers at the API edge (the contract's shape,
 * docs/integrating/api.md) and as exact decimal strings / integer cents everywhere else. No float
 * arithmetic decides an amount.
 */

/**
 * Exact cents of a USD amount with at most two places, or a numeric(…,2) string from the database.
 */
export function usdToCents(v: number | string): bigint {
  const s = typeof v === 'number' ? String(v) : v
  const [whole, frac = ''] = s.split('.')
  return BigInt(whole) * 100n + BigInt(`${frac}00`.slice(0, 2))
}

/** Decimal string with two places, for numeric columns. */
export function centsToDecimal(cents: bigint): string {
  const neg = cents < 0n
  const abs = neg ? -cents : cents
  const frac = (abs % 100n).toString().padStart(2, '0')
  return `${neg ? '-' : ''}${abs / 100n}.${frac}`
}

/** JSON number for the API edge. Exact for every value below 2^53 cents. */
export function decimalToNumber(s: string): number {
  return Number(s)
}

const DECIMAL_RE = /^(\d+)(?:\.(\d+))?$/

/**
 * A non-negative decimal string as an integer and its scale ("3000.5" -> 30005n, 1); null for
 * anything else.
 */
function scaled(s: string): { units: bigint; scale: number } | null {
  const m = DECIMAL_RE.exec(s)
  return m ? { units: BigInt(m[1]! + (m[2] ?? '')), scale: (m[2] ?? '').length } : null
}

/**
 * USD cents (rounded down) of `amount` smallest units of a token with `decimals`, at `usdPrice` per
 * whole token. Exact, no floats.
 */
export function tokenUsdCents(amount: bigint, decimals: number, usdPrice: string): bigint | null {
  const p = scaled(usdPrice)
  if (!p) return null
  return (amount * p.units * 100n) / (10n ** BigInt(decimals) * 10n ** BigInt(p.scale))
}

/**
 * A USD amount given by a person ("25", "0.5", "1.25") as cents; null when it is not one with at
 * most two decimals.
 */
export function usdTextToCents(s: string): bigint | null {
  const p = /^\d{1,12}(\.\d{1,2})?$/.test(s) ? scaled(s) : null
  return p ? p.units * 10n ** BigInt(2 - p.scale) : null
}

/**
 * A decimal amount of a token ("3000.5") in smallest units with `decimals` (8: 300050000000n); null
 * for anything else, or more places than `decimals`. Exact: never rounds.
 */
export function decimalToUnits(value: string, decimals: number): bigint | null {
  const m = /^(\d{1,78})(?:\.(\d+))?$/.exec(value.trim())
  if (!m || (m[2] ?? '').length > decimals) return null
  return BigInt(m[1]! + (m[2] ?? '').padEnd(decimals, '0'))
}
