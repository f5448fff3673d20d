/**
 * Transfer logs of the watched tokens over a range of blocks, asked in ranged `eth_getLogs` calls
 * no wider than the provider takes. Providers cap the span of one call, or the size of its
 * answer, and say so in their own words; a refused range is asked again in halves, down to one
 * block, and the narrower span is kept for every later call (it is this module's only state).
 */
import type { Address } from 'viem'
import { errorSummary, type Logger } from '../../lib/logger.ts'
import { errorChain, isRateLimit } from '../../metrics/metrics.ts'
import { TRANSFER_TOPIC, type RpcLogLike } from '../transfer-scan.ts'
import { asLogList, toQuantity, type Rpc } from './rpc-data.ts'

export interface LogRanges {
  /** Every Transfer log of the tokens in from..to (unchecked: see `checkLogs`). */
  logs(from: bigint, to: bigint): Promise<RpcLogLike[]>
  /** The widest span asked now: `maxLogRange` until the provider refused one. */
  span(): number
}

export function createLogRanges(o: {
  rpc: Rpc
  /** Lowercase token addresses; none: no call is made. */
  tokens: readonly Address[]
  maxLogRange: number
  /** Whether the follower stopped: a call it aborted is not a refusal to split. */
  stopped: () => boolean
  network: string
  logger?: Logger
  /** Told of every refused range (metrics count them). */
  onRefused?: (error: unknown) => void
}): LogRanges {
  const filter = { address: o.tokens, topics: [TRANSFER_TOPIC] }
  let span = Math.max(1, o.maxLogRange)

  /** One ranged call; a refusal is split in halves, the span narrowed for the next calls. */
  async function logsOf(lo: bigint, hi: bigint): Promise<RpcLogLike[]> {
    try {
      return asLogList([
        await o.rpc('eth_getLogs', [
          { ...filter, fromBlock: toQuantity(lo), toBlock: toQuantity(hi) },
        ]),
      ])
    } catch (error) {
      if (lo === hi || o.stopped() || !isRangeRefusal(error)) throw error
      const half = (hi - lo + 2n) / 2n
      if (half < BigInt(span)) {
        span = Number(half)
        o.logger?.warn('the provider refused an eth_getLogs range; asking for narrower ones', {
          network: o.network,
          from: lo.toString(),
          to: hi.toString(),
          span,
          error: errorSummary(error),
        })
      }
      o.onRefused?.(error)
      const [a, b] = await Promise.all([logsOf(lo, lo + half - 1n), logsOf(lo + half, hi)])
      return [...a, ...b]
    }
  }

  return {
    // Issued together: one round trip for the whole range while the provider takes the span.
    async logs(from, to) {
      if (o.tokens.length === 0) return []
      const calls: Promise<RpcLogLike[]>[] = []
      for (let lo = from; lo <= to; lo += BigInt(span)) {
        const hi = lo + BigInt(span) - 1n
        calls.push(logsOf(lo, hi < to ? hi : to))
      }
      return (await Promise.all(calls)).flat()
    },
    span: () => span,
  }
}

/**
 * A provider's refusal of an eth_getLogs range or answer size, as the big providers word it
 * ("block range too large", "exceed maximum block range", "query returned more than 10000
 * results", "Log response size exceeded"); a rate limit is not one.
 */
export function isRangeRefusal(error: unknown): boolean {
  if (isRateLimit(error)) return false
  return errorChain(error).some((c) => RANGE_REFUSAL.test(`${c.message ?? ''} ${c.details ?? ''}`))
}
const RANGE_REFUSAL =
  /block range|range (is )?too (large|wide|big)|range limit|max(imum)? (block )?range|too many (results|logs|blocks)|more than \d+ results|response size|query timeout/i
