/**
 * What the follower reads of the chain: headers by height (batched: the node answers a chunk's
 * calls in one JSON-RPC batch), one block's logs by its hash, and the canonical hash at chosen
 * heights. Every answer is validated (rpc-data.ts) before anyone trusts it.
 */
import type { Address, Hex } from 'viem'
import { errorSummary } from '../../lib/logger.ts'
import { TRANSFER_TOPIC, type RpcLogLike } from '../transfer-scan.ts'
import {
  ChainMovedError,
  asLogList,
  toQuantity,
  validateBlock,
  type FetchedBlock,
  type Rpc,
} from './rpc-data.ts'

export interface BlockFetcher {
  /**
   * Blocks from..to, in one batch; stops at the first the node does not have (returns fewer).
   * With `withTxs`, bodies come along for the native scan.
   */
  blocks(from: bigint, to: bigint, withTxs: boolean): Promise<FetchedBlock[]>
  /**
   * One block's Transfer logs by hash: the node answers for exactly the block validated, or fails
   * (anvil: invalid params) when that block has just been replaced: a reason to rescan.
   */
  logsByHash(hash: Hex): Promise<RpcLogLike[]>
  /**
   * The canonical hash (lowercase) at each height the node has a block for, `batchSize` at a time.
   */
  canonicalHashes(numbers: readonly bigint[]): Promise<Map<bigint, string>>
}

export function createBlockFetcher(o: {
  rpc: Rpc
  /** Lowercase token addresses whose Transfer logs are read. */
  tokens: readonly Address[]
  batchSize: number
}): BlockFetcher {
  const { rpc } = o
  const logFilter = { address: o.tokens, topics: [TRANSFER_TOPIC] }
  return {
    async blocks(from, to, withTxs) {
      const calls: Promise<unknown>[] = []
      for (let n = from; n <= to; n++)
        calls.push(rpc('eth_getBlockByNumber', [toQuantity(n), withTxs]))
      const raw = await Promise.all(calls)
      const blocks: FetchedBlock[] = []
      for (let i = 0; i < raw.length; i++) {
        if (raw[i] == null) break
        blocks.push(validateBlock(raw[i], from + BigInt(i), withTxs))
      }
      return blocks
    },

    async logsByHash(hash) {
      if (o.tokens.length === 0) return []
      const result = await rpc('eth_getLogs', [{ ...logFilter, blockHash: hash }]).catch(
        (error) => {
          throw new ChainMovedError(`eth_getLogs by hash ${hash} failed: ${errorSummary(error)}`)
        },
      )
      return asLogList([result])
    },

    async canonicalHashes(numbers) {
      const found = new Map<bigint, string>()
      for (let i = 0; i < numbers.length; i += o.batchSize) {
        const group = numbers.slice(i, i + o.batchSize)
        const raw = await Promise.all(
          group.map((n) => rpc('eth_getBlockByNumber', [toQuantity(n), false])),
        )
        raw.forEach((b, j) => {
          if (b != null) found.set(group[j]!, validateBlock(b, group[j]!, false).hash.toLowerCase())
        })
      }
      return found
    },
  }
}
