/**
 * What a chunk of validated blocks holds for the watched addresses: Transfer logs of the watched
 * tokens, native transactions listed in the blocks (only where the network scans native coin),
 * and native coin that arrived by a contract's internal call, found by comparing balances and
 * named by the node's traces where it has them.
 */
import type { Address, Hex } from 'viem'
import type { Clock } from '../../lib/clock.ts'
import { errorSummary, type Logger } from '../../lib/logger.ts'
import {
  scanNativeTransactions,
  scanTransferLogs,
  type Finding,
  type NativeFinding,
  type RpcLogLike,
  type WatchSet,
} from '../transfer-scan.ts'
import { createTraceReader, type InternalTransfer } from './internal-traces.ts'
import { createNativeBalances } from './native-balances.ts'
import type { FetchedBlock, Rpc } from './rpc-data.ts'

export interface ChunkFindings {
  /**
   * Each block's findings, by height; `head`: the head the RPC reported (its state is always kept).
   */
  of(blocks: FetchedBlock[], logs: RpcLogLike[], head: bigint): Promise<Map<bigint, Finding[]>>
}

export function createChunkFindings(o: {
  rpc: Rpc
  clock: Clock
  network: { name: string; scanNative: boolean }
  watch: WatchSet
  /** Lowercase token addresses: a second check against a node that ignores the logs filter. */
  tokens: ReadonlySet<string>
  /**
   * Deposit addresses (lowercase) whose native balance is compared with what was credited there.
   */
  balanceWatch?: () => Promise<readonly { address: string; credited: bigint }[]>
  /**
   * Multicall3's address, where the chain has it (its start-up verification said so): balances
   * are then read through it, a few thousand addresses a call, rather than one eth_getBalance each.
   */
  multicall3?: Address
  /** Throws when the follower stopped: an aborted balance read is not a pruned state. */
  checkStopped: () => void
  logger?: Logger
}): ChunkFindings {
  const { network, logger } = o
  const nativeBalances = createNativeBalances({
    rpc: o.rpc,
    multicall3: o.multicall3,
    network: network.name,
    checkStopped: o.checkStopped,
    logger,
  })
  /**
   * Who sent native coin by an internal call, where the node traces (asked only when such coin
   * arrived).
   */
  const traces = createTraceReader(o.rpc, o.clock)

  /**
   * Native coin found arriving by internal call (named by the chunk's last block), named instead by
   * the transactions that sent it, in their own blocks, where the node's traces account for all of
   * it at that address; otherwise (no traces, or they do not add up: coin also left the address)
   * it stays named by the block.
   */
  async function namedByTraces(
    blocks: FetchedBlock[],
    arrived: NativeFinding[],
  ): Promise<NativeFinding[]> {
    const traced: { block: FetchedBlock; transfers: InternalTransfer[] }[] = []
    for (const block of blocks) {
      const transfers = await traces.internalTransfers(block)
      if (transfers === null) return arrived
      traced.push({ block, transfers })
    }
    return arrived.flatMap((a) => {
      const to = a.to.toLowerCase()
      const perTx = new Map<string, NativeFinding>()
      for (const { block, transfers } of traced) {
        for (const t of transfers) {
          if (t.to !== to) continue
          const key = `${block.hash}:${t.txHash}`
          const seen = perTx.get(key)
          if (seen) seen.amount += t.value
          else
            perTx.set(key, {
              kind: 'native',
              internal: true,
              traced: true,
              from: t.from as Address,
              to: a.to,
              amount: t.value,
              txHash: t.txHash as Hex,
              blockNumber: block.number,
              blockHash: block.hash,
            })
        }
      }
      const named = [...perTx.values()]
      return named.reduce((sum, f) => sum + f.amount, 0n) === a.amount ? named : [a]
    })
  }

  /**
   * The balance-watched addresses' native balances at `block` (read at its hash, EIP-1898, so they
   * belong to the chain the headers were validated on; through Multicall3 where the chain has it,
   * native-balances.ts), with what was credited to each. Null
   * when the node no longer keeps that block's state (a full node
   * keeps about 128 blocks; catching up from further back): the comparison is cumulative, so
   * whatever arrived meanwhile is found at a later chunk the node can answer for.
   */
  async function balancesAt(
    watchedNow: readonly { address: string; credited: bigint }[],
    block: FetchedBlock,
    head: bigint,
  ): Promise<Map<string, { balance: bigint; credited: bigint }> | null> {
    try {
      const balances = await nativeBalances.at(
        watchedNow.map((w) => w.address),
        block.hash,
      )
      return new Map(
        watchedNow.map((w, i) => [w.address, { balance: balances[i]!, credited: w.credited }]),
      )
    } catch (error) {
      o.checkStopped()
      // The head's state is always kept: not reading it is a problem; an older block's may be
      // pruned.
      const log = block.number >= head ? logger?.warn : logger?.debug
      log?.call(
        logger,
        'native balances not readable at this block; compared again at a later one',
        { network: network.name, block: block.number.toString(), error: errorSummary(error) },
      )
      return null
    }
  }

  return {
    async of(blocks, logs, head) {
      // Read before the scan: an address quoted a moment ago (its NOTIFY not heard yet) is in the
      // database's list, and its listed transfers must be found as such, not as balance changes.
      const balanceWatched = network.scanNative && o.balanceWatch ? await o.balanceWatch() : []
      const quoted = new Set(balanceWatched.map((w) => w.address))
      const nativeWatch: WatchSet = quoted.size
        ? { has: (a) => o.watch.has(a) || quoted.has(a) }
        : o.watch
      const balances = balanceWatched.length
        ? await balancesAt(balanceWatched, blocks.at(-1)!, head)
        : null
      const tokenFindings = new Map<bigint, Finding[]>()
      for (const f of scanTransferLogs(logs, o.watch, o.tokens)) {
        const list = tokenFindings.get(f.blockNumber) ?? []
        list.push(f)
        tokenFindings.set(f.blockNumber, list)
      }
      const native = new Map(
        blocks.map((b) => [
          b.number,
          network.scanNative ? scanNativeTransactions(b, nativeWatch) : [],
        ]),
      )
      const arrived = balances
        ? internalTransfers(blocks.at(-1)!, balances, [...native.values()].flat())
        : []
      const internal = arrived.length ? await namedByTraces(blocks, arrived) : []
      return new Map(
        blocks.map((b) => [
          b.number,
          [
            ...native.get(b.number)!,
            ...internal.filter((f) => f.blockNumber === b.number),
            ...(tokenFindings.get(b.number) ?? []),
          ],
        ]),
      )
    },
  }
}

/**
 * Native coin that reached a watched address without a transaction to it: its balance at
 * `block` beyond what was credited to it before and what the blocks of this chunk list
 * (`listed`). It is recorded in `block`, named by the block's hash (which transaction sent it is
 * not known without traces: see `namedByTraces`) and `internal`, apart from the transfers the
 * blocks list. Money that left the address (a sweep) hides as much of an arrival.
 */
export function internalTransfers(
  block: { number: bigint; hash: Hex },
  balances: ReadonlyMap<string, { balance: bigint; credited: bigint }>,
  listed: readonly NativeFinding[],
): NativeFinding[] {
  const found: NativeFinding[] = []
  for (const [address, { balance, credited }] of balances) {
    const arrived =
      balance - credited - listed.reduce((sum, f) => (f.to === address ? sum + f.amount : sum), 0n)
    if (arrived > 0n)
      found.push({
        kind: 'native',
        internal: true,
        from: '0x0000000000000000000000000000000000000000',
        to: address as Address,
        amount: arrived,
        txHash: block.hash,
        blockNumber: block.number,
        blockHash: block.hash,
      })
  }
  return found
}
