/**
 * What a transaction priced in a fiat currency is worth, and what a token costs for it
 * (docs/decisions/0064-priced-in-the-merchants-currency.md):
 * - at creation, its USD value (`amount_usd`) at the currency's current rate, to the nearest
 *   cent, from the rate book's last answer (no call on the request path while it is current);
 * - at quote time, the token amount: a stablecoin of the transaction's own currency at par (one
 *   whole token per unit, no rate); any other token through USD, from the token's USD price and
 *   the currency's USD rate, both read now and both refused when stale, rounded up in the token's
 *   smallest unit.
 * Every rate used is returned as recorded (value, feed, round, time) to be stored with the
 * transaction.
 */
import type { QuoteRates, RecordedRate } from '../../machines/transaction.machine.ts'
import type { Clock } from '../lib/clock.ts'
import { decimalToMinor, minorUnits } from '../lib/currency.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { Mode } from '../projects/mode.ts'
import type { RateBook } from './fx-rates.ts'
import type { TokenConfig } from './networks-config.ts'
import type { PriceReader, PriceResult } from './prices.ts'
import { currencyToUsdCents, ONE_DOLLAR, priceToDecimal, quoteInCurrency } from './quote.ts'

type Answer = Extract<PriceResult, { ok: true }>

/** A price or rate as stored with the transaction. */
export function recordRate(p: Answer): RecordedRate {
  return {
    usd: priceToDecimal(p),
    source: p.source.kind,
    network: p.source.kind === 'chainlink' ? p.source.network : null,
    feed: p.source.kind === 'chainlink' ? p.source.feed : null,
    roundId: p.roundId === undefined ? null : p.roundId.toString(),
    updatedAt: p.updatedAt.toISOString(),
  }
}

/** The refusal customers and merchants read when a rate cannot be used now. */
const unavailable = (what: string, r: Exclude<PriceResult, { ok: true }>, hint: string) =>
  deny('unavailable', `The ${what} is unavailable right now (${r.reason}); ${hint}`)

/**
 * The USD value of `amountMinor` of `currency` now, in cents, with the rate used (null for USD).
 * Uses the rate book's current answer, reading the feed only when there is none.
 */
export async function valueAtCreation(
  rates: Pick<RateBook, 'current' | 'read'>,
  mode: Mode,
  currency: string,
  amountMinor: bigint,
): Promise<Outcome<{ usdCents: bigint; usdRate: RecordedRate | null }>> {
  const places = minorUnits(currency)
  if (currency === 'USD') {
    // Exact: the amount is the value.
    return ok({
      usdCents: currencyToUsdCents({ minor: amountMinor, places }, ONE_DOLLAR),
      usdRate: null,
    })
  }
  const rate = rates.current(mode, currency) ?? (await rates.read(mode, currency))
  if (!rate.ok) return unavailable(`${currency} rate`, rate, 'please try again in a moment')
  return ok({
    usdCents: currencyToUsdCents({ minor: amountMinor, places }, rate),
    usdRate: recordRate(rate),
  })
}

/** Whether `token` can be quoted for a transaction in `currency` of a mode offering `offered`. */
export function canQuote(token: TokenConfig, currency: string, offered: readonly string[]) {
  return (
    token.price.kind !== 'par' ||
    token.price.currency === currency ||
    offered.includes(token.price.currency)
  )
}

/**
 * The token amount for a transaction's amount, rounded up, and the rates it was computed with.
 */
export async function quoteToken(deps: {
  tx: { currency: string; amountInCurrency: string; testingMode: boolean }
  token: TokenConfig
  prices: PriceReader
  rates: Pick<RateBook, 'read'>
  clock: Clock
}): Promise<Outcome<{ units: bigint; rates: QuoteRates }>> {
  const { tx, token } = deps
  const amount = {
    minor: decimalToMinor(tx.amountInCurrency, tx.currency),
    places: minorUnits(tx.currency),
  }
  const quotedAt = new Date(deps.clock.now()).toISOString()
  if (token.price.kind === 'par' && token.price.currency === tx.currency)
    return ok({
      units: quoteInCurrency(amount, token.decimals, 'par', ONE_DOLLAR),
      rates: { quotedAt, method: 'par', tokenUsd: null, currencyUsd: null },
    })
  const [price, rate] = await Promise.all([
    deps.prices.read(token),
    tx.currency === 'USD' ? null : deps.rates.read(tx.testingMode ? 'test' : 'live', tx.currency),
  ])
  const hint = 'please try again in a moment or choose another token'
  if (!price.ok) return unavailable(`${token.symbol} price`, price, hint)
  if (rate && !rate.ok) return unavailable(`${tx.currency} rate`, rate, hint)
  return ok({
    units: quoteInCurrency(amount, token.decimals, price, rate ?? ONE_DOLLAR),
    rates: {
      quotedAt,
      method: 'usd',
      tokenUsd: recordRate(price),
      currencyUsd: rate ? recordRate(rate) : null,
    },
  })
}
