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
  return quoteInCurrency({ minor: usdCents, places: 2 }, tokenDecimals, price, ONE_DOLLAR)
}

/** The USD rate of USD itself. */
export const ONE_DOLLAR: UsdPrice = { answer: 1n, decimals: 0 }

/**
 * Smallest token units worth `amount` (minor units of a currency with `places` decimal places) when
 * one whole token is worth `tokenUsd` dollars and one unit of the currency `currencyUsd` dollars;
 * `'par'`: the token is a stablecoin of the currency itself, one whole token per unit, no rate.
 * Rounded up: ceil(minor * currencyUsd * 10^tokenDecimals / (10^places * tokenUsd)).
 */
export function quoteInCurrency(
  amount: { minor: bigint; places: number },
  tokenDecimals: number,
  tokenUsd: UsdPrice | 'par',
  currencyUsd: UsdPrice,
): bigint {
  if (amount.minor < 0n) throw new RangeError(`amount must not be negative, got ${amount.minor}`)
  checkDecimals('tokenDecimals', tokenDecimals)
  checkDecimals('places', amount.places)
  if (tokenUsd === 'par')
    return ceilDiv(amount.minor * 10n ** BigInt(tokenDecimals), 10n ** BigInt(amount.places))
  checkDecimals('tokenUsd.decimals', tokenUsd.decimals)
  checkDecimals('currencyUsd.decimals', currencyUsd.decimals)
  if (tokenUsd.answer <= 0n)
    throw new RangeError(`tokenUsd.answer must be positive, got ${tokenUsd.answer}`)
  if (currencyUsd.answer <= 0n)
    throw new RangeError(`currencyUsd.answer must be positive, got ${currencyUsd.answer}`)
  const numerator =
    amount.minor * currencyUsd.answer * 10n ** BigInt(tokenDecimals + tokenUsd.decimals)
  const denominator = 10n ** BigInt(amount.places + currencyUsd.decimals) * tokenUsd.answer
  return ceilDiv(numerator, denominator)
}

/**
 * USD cents of `amount` (minor units with `places`) at `currencyUsd` dollars per unit, to the
 * nearest cent (half a cent up): the USD value a transaction is recorded at when it is created.
 */
export function currencyToUsdCents(
  amount: { minor: bigint; places: number },
  currencyUsd: UsdPrice,
): bigint {
  checkDecimals('places', amount.places)
  checkDecimals('currencyUsd.decimals', currencyUsd.decimals)
  const denominator = 10n ** BigInt(amount.places + currencyUsd.decimals)
  return (amount.minor * currencyUsd.answer * 100n * 2n + denominator) / (2n * denominator)
}

/** An exact decimal string of a price (`answer / 10^decimals`): "1.08340000". */
export function priceToDecimal(p: UsdPrice): string {
  if (p.decimals === 0) return p.answer.toString()
  const s = p.answer.toString().padStart(p.decimals + 1, '0')
  return `${s.slice(0, s.length - p.decimals)}.${s.slice(s.length - p.decimals)}`
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
