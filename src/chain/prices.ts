/**
 * USD prices of tokens, from the networks config
 * (docs/decisions/0016-networks-config-and-devnet.md): a fixed decimal, or a Chainlink AggregatorV3
 * feed read on-chain. A quote is locked for a transaction's lifetime
 * (docs/decisions/0014-amounts-add-up.md), so a wrong price is worse than none: every doubtful
 * answer is refused as a value the caller can show ("price unavailable, try again"), never passed
 * on.
 *
 * Refusals (values, not exceptions):
 * - `invalid`: answer <= 0, an incomplete round (updatedAt 0), or updatedAt more than a
 *   minute in the future (a broken feed or a badly wrong clock).
 * - `stale`: answeredInRound < roundId (the answer was carried over from an older round), or
 *   older than the source's `maxAgeSeconds` by the injected clock.
 * - `unavailable`: the RPC call failed (node down, timeout, no contract at the address). A node
 *   that answered with an error of its own is asked again first (read-again.ts).
 * Anything else (a bug) throws.
 *
 * A stablecoin priced `par` to a fiat currency is worth that currency's USD rate: the reader asks
 * `par` (fx-rates.ts), so every price of a token, wherever it comes from, is read here.
 *
 * One reader serves one network (its client). Plain `readContract` calls: anvil has no
 * multicall contract unless one is deployed. A feed's `decimals` is cached per address because
 * Chainlink proxies keep it across aggregator upgrades; the round is read on every call.
 */
import { BaseError, type Address, type PublicClient } from 'viem'
import type { Clock } from '../lib/clock.ts'
import type { PriceSource } from './networks-config.ts'
import { usdPriceFromDecimal } from './quote.ts'
import { readAgainOnErrorAnswer } from './read-again.ts'

export type PriceResult =
  | {
      ok: true
      /** USD per whole token = answer / 10^decimals. */
      answer: bigint
      decimals: number
      /** When the price was last set: the round's time, or now for a fixed price. */
      updatedAt: Date
      /** The Chainlink round the answer came from; absent for a fixed price. */
      roundId?: bigint
      /** Where the answer was read: a feed on a network, or a fixed price of the config. */
      source: PriceOrigin
    }
  | { ok: false; reason: 'stale' | 'invalid' | 'unavailable'; message: string }

export type PriceOrigin = { kind: 'chainlink'; network: string; feed: Address } | { kind: 'fixed' }

export interface PriceReader {
  read(token: { price: PriceSource }): Promise<PriceResult>
}

/** How far a round's updatedAt may lie ahead of our clock (block timestamps drift a little). */
export const MAX_FUTURE_SKEW_SECONDS = 60

/** The subset of a Chainlink AggregatorV3Interface the reader calls. */
export const aggregatorV3Abi = [
  {
    type: 'function',
    name: 'decimals',
    stateMutability: 'view',
    inputs: [],
    outputs: [{ name: '', type: 'uint8' }],
  },
  {
    type: 'function',
    name: 'latestRoundData',
    stateMutability: 'view',
    inputs: [],
    outputs: [
      { name: 'roundId', type: 'uint80' },
      { name: 'answer', type: 'int256' },
      { name: 'startedAt', type: 'uint256' },
      { name: 'updatedAt', type: 'uint256' },
      { name: 'answeredInRound', type: 'uint80' },
    ],
  },
] as const

export interface PriceReaderDeps {
  /** Needed only for Chainlink sources. */
  client?: Pick<PublicClient, 'readContract'>
  /** The network the client reads (named in each answer's source). */
  network?: string
  clock: Clock
  /** A fiat currency's USD rate, for tokens priced at par to it (absent: such tokens are refused). */
  par?: (currency: string) => Promise<PriceResult>
}

export function createPriceReader({ client, network, clock, par }: PriceReaderDeps): PriceReader {
  const feedDecimals = new Map<Address, number>()

  async function readChainlink(feed: Address, maxAgeSeconds: number): Promise<PriceResult> {
    if (!client) throw new Error('createPriceReader: a client is required for Chainlink prices')
    let decimals: number
    let round: readonly [bigint, bigint, bigint, bigint, bigint]
    try {
      const cached = feedDecimals.get(feed)
      const [d, r] = await readAgainOnErrorAnswer(() =>
        Promise.all([
          cached ??
            client.readContract({ address: feed, abi: aggregatorV3Abi, functionName: 'decimals' }),
          client.readContract({
            address: feed,
            abi: aggregatorV3Abi,
            functionName: 'latestRoundData',
          }),
        ]),
      )
      decimals = d
      round = r
    } catch (error) {
      if (!(error instanceof BaseError)) throw error
      return {
        ok: false,
        reason: 'unavailable',
        message: `price feed ${feed} could not be read: ${error.shortMessage}`,
      }
    }
    feedDecimals.set(feed, decimals)

    const [roundId, answer, , updatedAt, answeredInRound] = round
    const nowSeconds = BigInt(Math.floor(clock.now() / 1000))
    if (answer <= 0n)
      return refuse('invalid', `price feed ${feed} answered ${answer} (not positive)`)
    if (updatedAt === 0n)
      return refuse('invalid', `price feed ${feed} round ${roundId} is incomplete (updatedAt 0)`)
    if (updatedAt > nowSeconds + BigInt(MAX_FUTURE_SKEW_SECONDS)) {
      return refuse(
        'invalid',
        `price feed ${feed} round ${roundId} is dated ${updatedAt - nowSeconds} s in the future`,
      )
    }
    if (answeredInRound < roundId) {
      return refuse(
        'stale',
        `price feed ${feed} round ${roundId} carries an answer from round ${answeredInRound}`,
      )
    }
    const age = nowSeconds - updatedAt
    if (age > BigInt(maxAgeSeconds)) {
      return refuse(
        'stale',
        `price feed ${feed} was last updated ${age} s ago (limit ${maxAgeSeconds} s)`,
      )
    }
    return {
      ok: true,
      answer,
      decimals,
      updatedAt: new Date(Number(updatedAt) * 1000),
      roundId,
      source: { kind: 'chainlink', network: network ?? '', feed },
    }
  }

  return {
    async read({ price }) {
      switch (price.kind) {
        case 'fixedUsd': {
          const { answer, decimals } = usdPriceFromDecimal(price.usd)
          return {
            ok: true,
            answer,
            decimals,
            updatedAt: new Date(clock.now()),
            source: { kind: 'fixed' },
          }
        }
        case 'chainlink':
          return readChainlink(price.feed, price.maxAgeSeconds)
        case 'par':
          if (price.currency === 'USD')
            return {
              ok: true,
              answer: 1n,
              decimals: 0,
              updatedAt: new Date(clock.now()),
              source: { kind: 'fixed' },
            }
          return par
            ? par(price.currency)
            : refuse('invalid', `no ${price.currency} rate is configured for this network's mode`)
      }
    },
  }
}

function refuse(reason: 'stale' | 'invalid', message: string): PriceResult {
  return { ok: false, reason, message }
}
