/**
 * Fiat currencies a transaction can be priced in (docs/decisions/0064-priced-in-the-merchants-currency.md):
 * ISO 4217 codes and their minor units (the decimal places an amount may carry: 2 for EUR, 0 for
 * JPY, 3 for KWD), from the ISO 4217 list (SIX Group, "Current currency & funds code list",
 * https://www.six-group.com/en/products-services/financial-information/data-standards.html).
 * Amounts are exact: integers of minor units inside, decimal strings and JSON numbers with at most
 * that many places at the edges; never a float on the way.
 */

/** ISO 4217 code -> minor units, for the currencies a deployment may configure. */
export const MINOR_UNITS: Readonly<Record<string, number>> = {
  USD: 2,
  EUR: 2,
  GBP: 2,
  JPY: 0,
  CHF: 2,
  CAD: 2,
  AUD: 2,
  NZD: 2,
  SGD: 2,
  HKD: 2,
  CNY: 2,
  KRW: 0,
  INR: 2,
  BRL: 2,
  MXN: 2,
  SEK: 2,
  NOK: 2,
  DKK: 2,
  PLN: 2,
  CZK: 2,
  HUF: 2,
  TRY: 2,
  ZAR: 2,
  ILS: 2,
  PHP: 2,
  THB: 2,
  IDR: 2,
  TWD: 2,
  ARS: 2,
  CLP: 0,
  COP: 2,
  AED: 2,
  SAR: 2,
  KWD: 3,
  BHD: 3,
  NGN: 2,
  KES: 2,
  VND: 0,
  ISK: 0,
}

export const isKnownCurrency = (code: string): boolean => Object.hasOwn(MINOR_UNITS, code)

/** Minor units of a known currency; throws for an unknown code (a bug: codes are checked first). */
export function minorUnits(code: string): number {
  const d = MINOR_UNITS[code]
  if (d === undefined) throw new RangeError(`not a configured ISO 4217 currency: ${code}`)
  return d
}

/**
 * A JSON number given for `currency` as integer minor units, or null when it is not positive or
 * has more decimal places than the currency has (JPY 10.5, EUR 19.999). `String(n)` is the
 * shortest representation that reads back as n, so 10.1 stays "10.1" and 0.1 + 0.2 fails; an
 * exponent form (1e-7, 1e21) is refused.
 */
export function amountToMinor(n: number, code: string): bigint | null {
  if (!Number.isFinite(n) || n <= 0) return null
  const d = minorUnits(code)
  const m = /^(0|[1-9]\d*)(?:\.(\d+))?$/.exec(String(n))
  if (!m || (m[2] ?? '').length > d) return null
  return BigInt(m[1]! + (m[2] ?? '').padEnd(d, '0'))
}

/** Minor units as a decimal string with the currency's places ("1999" EUR -> "19.99", JPY "1999"). */
export function minorToDecimal(minor: bigint, code: string): string {
  const d = minorUnits(code)
  const neg = minor < 0n
  const abs = (neg ? -minor : minor).toString().padStart(d + 1, '0')
  const whole = abs.slice(0, abs.length - d)
  return `${neg ? '-' : ''}${whole}${d ? `.${abs.slice(abs.length - d)}` : ''}`
}

/**
 * A decimal string of the currency (a numeric column: "19.990", "1999") as minor units; throws on
 * anything else or on places beyond the currency's that are not zero.
 */
export function decimalToMinor(s: string, code: string): bigint {
  const d = minorUnits(code)
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(s)
  if (!m) throw new RangeError(`not a decimal amount: ${JSON.stringify(s)}`)
  const frac = (m[3] ?? '').replace(/0+$/, '')
  if (frac.length > d) throw new RangeError(`${s} has more places than ${code} (${d})`)
  const v = BigInt(m[2]! + frac.padEnd(d, '0'))
  return m[1] ? -v : v
}

/** The JSON number of an amount in a currency, for the API edge: exact below 2^53 minor units. */
export const decimalAmountNumber = (s: string, code: string): number =>
  Number(minorToDecimal(decimalToMinor(s, code), code))

/**
 * What `units` of a token are worth in the transaction's currency at its locked quote
 * (`tokenAmount` units for `amountMinor`), in minor units, rounded down: a refund stated in the
 * merchant's currency. Null when the quote is unknown.
 */
export function unitsInCurrency(
  units: bigint,
  quote: { tokenAmount: string | null; amountMinor: bigint },
): bigint | null {
  if (quote.tokenAmount === null) return null
  const tokenAmount = BigInt(quote.tokenAmount)
  return tokenAmount > 0n ? (units * quote.amountMinor) / tokenAmount : null
}
