/**
 * USD to token units, integers only. A float on this path could quote a customer one unit short and
 * leave a transaction `underpaid` forever (docs/decisions/0014-amounts-add-up.md), so the division
 * rounds up: the merchant receives at least the amount charged, the customer overpays by less than
 * one unit.
 */

/**
 * A USD price of one whole token: `answer / 10^decimals` dollars (a Chainlink answer, or a fixed
 * price).
 */
export interface UsdPrice {
  answer: bigint
  decimals: number
}

/**
 * Smallest token units worth `usdCents` at `price`:
 * ceil(usdCents * 10^(tokenDecimals + price.decimals) / (price.answer * 100)).
 * Throws RangeError on nonsense input (a non-positive price is refused upstream as a value).
 */
export function quoteTokenUnits(usdCents: bigint, tokenDecimals: number, price: UsdPrice): bigint {
  if (usdCents < 0n) throw new RangeError(`usdCents must not be negative, got ${usdCents}`)
  checkDecimals('tokenDecimals', tokenDecimals)
  checkDecimals('price.decimals', price.decimals)
  if (price.answer <= 0n) throw new RangeError(`price.answer must be positive, got ${price.answer}`)
  const numerator = usdCents * 10n ** BigInt(tokenDecimals + price.decimals)
  const denominator = price.answer * 100n
  return ceilDiv(numerator, denominator)
}

/**
 * The USD value in cents of `units` smallest token units at `price`, rounded down (what was
 * received is never overstated): floor(units * price.answer * 100 / 10^(tokenDecimals +
 * price.decimals)).
 */
export function tokenUnitsToCents(units: bigint, tokenDecimals: number, price: UsdPrice): bigint {
  if (units < 0n) throw new RangeError(`units must not be negative, got ${units}`)
  checkDecimals('tokenDecimals', tokenDecimals)
  checkDecimals('price.decimals', price.decimals)
  return (units * price.answer * 100n) / 10n ** BigInt(tokenDecimals + price.decimals)
}

/**
 * Parses a positive decimal string ("1", "0.9998") into an exact price; throws on anything else.
 */
export function usdPriceFromDecimal(usd: string): UsdPrice {
  const match = /^(\d+)(?:\.(\d+))?$/.exec(usd)
  if (!match) throw new RangeError(`not a decimal USD price: ${JSON.stringify(usd)}`)
  const fraction = match[2] ?? ''
  const answer = BigInt(match[1]! + fraction)
  if (answer <= 0n) throw new RangeError(`USD price must be positive, got ${usd}`)
  return { answer, decimals: fraction.length }
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b
}

function checkDecimals(name: string, d: number) {
  if (!Number.isInteger(d) || d < 0 || d > 77)
    throw new RangeError(`${name} must be an integer from 0 to 77, got ${d}`)
}
