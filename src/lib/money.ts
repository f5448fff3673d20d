/**
 * USD amounts travel as JSON numbers at the API edge (the spec's shape) and as exact decimal
 * strings / integer cents everywhere else. No float arithmetic decides an amount.
 */

const USD_RE = /^(0|[1-9]\d*)(\.\d{1,2})?$/

/** True when `n` is a positive amount with at most two decimal places, as written. */
export function isUsdAmount(n: number): boolean {
  // String(n) is the shortest round-trip representation, so 10.1 stays "10.1" and 0.1+0.2 fails.
  return Number.isFinite(n) && n > 0 && USD_RE.test(String(n))
}

/** Exact cents of an amount accepted by `isUsdAmount` or a numeric(…,2) string from the database. */
export function usdToCents(v: number | string): bigint {
  const s = typeof v === 'number' ? String(v) : v
  const [whole, frac = ''] = s.split('.')
  return BigInt(whole) * 100n + BigInt((frac + '00').slice(0, 2))
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
