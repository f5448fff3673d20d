/**
 * RPC data is validated before it is trusted: a header must have the number asked for and
 * well-formed hashes, consecutive headers must link by `parentHash`, and every log must carry the
 * hash of the header validated for its height; otherwise the chain moved under the scan
 * (`ChainMovedError`) and the tick starts over.
 */
import type { Hex } from 'viem'
import type { RpcLogLike, RpcTransactionLike } from '../transfer-scan.ts'
import type { BlockHeader } from './events.ts'

/** A JSON-RPC call to the followed network's node (throttled and aborted with the follower). */
export type Rpc = (method: string, params: unknown[]) => Promise<unknown>

/** A validated header, with its transactions (hashes, or bodies when asked for). */
export interface FetchedBlock extends BlockHeader {
  transactions: readonly (RpcTransactionLike | string)[]
}

/** The chain changed between two reads of one tick; the tick starts over. */
export class ChainMovedError extends Error {}

const HASH = /^0x[0-9a-fA-F]{64}$/

export function validateBlock(raw: unknown, expected: bigint, withTxs: boolean): FetchedBlock {
  const b = raw as Record<string, unknown>
  const number = parseQuantity(b.number, 'block.number')
  if (number !== expected) throw new Error(`asked for block ${expected}, got ${number}`)
  if (typeof b.hash !== 'string' || !HASH.test(b.hash)) throw new Error(`block ${number}: bad hash`)
  if (typeof b.parentHash !== 'string' || !HASH.test(b.parentHash))
    throw new Error(`block ${number}: bad parentHash`)
  const txs = Array.isArray(b.transactions) ? b.transactions : []
  if (withTxs && txs.some((t) => typeof t !== 'object' || t === null))
    throw new Error(`block ${number}: transactions without bodies`)
  return {
    number,
    hash: b.hash as Hex,
    parentHash: b.parentHash as Hex,
    timestamp: parseQuantity(b.timestamp, 'block.timestamp'),
    transactions: txs as FetchedBlock['transactions'],
  }
}

/** Consecutive blocks of one fetch must link by `parentHash`. */
export function checkLinked(blocks: readonly FetchedBlock[]): void {
  for (let i = 1; i < blocks.length; i++) {
    if (blocks[i]!.parentHash !== blocks[i - 1]!.hash)
      throw new ChainMovedError(`block ${blocks[i]!.number} does not link to its parent`)
  }
}

/** Keeps the logs of `blocks`' heights, each of which must carry its header's hash. */
export function checkLogs(logs: RpcLogLike[], blocks: FetchedBlock[]): RpcLogLike[] {
  const first = blocks[0]!.number
  const last = blocks.at(-1)!.number
  const kept: RpcLogLike[] = []
  for (const log of logs) {
    const n = log.blockNumber ? BigInt(log.blockNumber) : -1n
    if (n > last) continue // the node served fewer headers than logs: next chunk
    const expected = n >= first ? blocks[Number(n - first)]!.hash : null
    if (!expected || log.blockHash !== expected) {
      throw new ChainMovedError(
        `log of block ${log.blockNumber} has hash ${log.blockHash}, expected ${expected}`,
      )
    }
    kept.push(log)
  }
  return kept
}

export function header(b: FetchedBlock): BlockHeader {
  return { number: b.number, hash: b.hash, parentHash: b.parentHash, timestamp: b.timestamp }
}

export function parseQuantity(value: unknown, what: string): bigint {
  if (typeof value !== 'string' || !/^0x[0-9a-fA-F]{1,64}$/.test(value))
    throw new Error(`${what}: not a hex quantity: ${String(value)}`)
  return BigInt(value)
}

export function asLogList(results: unknown[]): RpcLogLike[] {
  return results.flatMap((r) => {
    if (!Array.isArray(r)) throw new Error(`eth_getLogs returned ${typeof r}, not a list`)
    return r as RpcLogLike[]
  })
}

export const toQuantity = (n: bigint) => `0x${n.toString(16)}`
export const min = (a: bigint, b: bigint) => (a < b ? a : b)
