/**
 * Follows one network's canonical chain block by block and reports, in order, the transfers
 * to watched deposit addresses, the reorgs that take reported blocks away, and the head.
 *
 * Why an own polling loop (not viem's `watchBlocks`): polling `watchBlocks` misses anvil's
 * replacement blocks after a reorg, WebSocket delivery can be out of order, and nodes never report
 * `removed` logs for anvil reorgs (docs/development.md#anvil). So the follower keeps a window of
 * recent `{ number, hash }`, checks every new block's `parentHash` against it, re-checks the
 * remembered tip when the chain did not grow (a reorg at the same heights), and walks back to the
 * fork point itself.
 *
 * Delivery is at-least-once: each event is awaited, and the cursor is saved only after the
 * handler resolved for every block of a chunk (up to `batchSize` blocks). After a crash the
 * unsaved blocks are delivered again, so the handler must be idempotent (key findings by
 * txHash + logIndex + blockHash).
 *
 * First start (no cursor): the current head is the first block delivered; nothing older.
 * An address must be in the watch set before anyone can pay to it: a block already passed is
 * not scanned again for an address added later.
 *
 * The window holds at least `confirmations` + 64 hashes (cursor.ts), so every block that may
 * hold a payment not completed yet is remembered; a reorg deeper than that halts the network
 * (reorgs.ts).
 *
 * This module is the tick: it reads the head and scans the blocks above the cursor in chunks.
 * Around it: fetch.ts and log-ranges.ts read the chain (rpc-data.ts validates every answer),
 * findings.ts finds the transfers in a chunk, reorgs.ts reconciles the window with the chain,
 * position.ts holds where the follower stands, and pacing.ts runs the ticks.
 */
import type { Address, Hex } from 'viem'
import { systemClock, type Clock } from '../../lib/clock.ts'
import type { Logger } from '../../lib/logger.ts'
import type { RpcClient } from '../rpc.ts'
import type { WatchSet } from '../transfer-scan.ts'
import { windowFor, type BlockRef, type Cursor, type CursorStore, type Halt } from './cursor.ts'
import type { FollowerEvent, FollowerHandler } from './events.ts'
import { createBlockFetcher } from './fetch.ts'
import { createChunkFindings } from './findings.ts'
import { createLogRanges } from './log-ranges.ts'
import { abortableSleep, createLoop, createThrottle, type Sleep } from './pacing.ts'
import { createPosition } from './position.ts'
import { ChainReplacedError, createReconciler } from './reorgs.ts'
import {
  ChainMovedError,
  checkLinked,
  checkLogs,
  header,
  min,
  parseQuantity,
  type Rpc,
} from './rpc-data.ts'

export interface FollowerNetwork {
  name: string
  pollIntervalMs: number
  /** Most blocks one ranged `eth_getLogs` may span (providers cap it, often 1,000 or less). */
  maxLogRange: number
  erc20Tokens: Address[]
  /**
   * Fetch whole blocks to find native transfers (costly: only where a native token is accepted).
   */
  scanNative: boolean
  /**
   * The block tag whose height each head event reports (`safe` / `finalized`), for networks that
   * wait for one.
   */
  finalityTag?: 'safe' | 'finalized'
  /**
   * Blocks a payment waits for: the window of remembered hashes is at least this plus a margin
   * (`windowFor`).
   */
  confirmations?: number
  /**
   * At most this many JSON-RPC calls a second (a provider's plan); bursts up to a second's worth
   * share a batch.
   */
  maxRequestsPerSecond?: number
}

export interface FollowerTuning {
  /**
   * Recent hashes kept for reorg detection, also across restarts. Default
   * `windowFor(network.confirmations)`: 128 at least.
   */
  windowSize?: number
  /**
   * Blocks per chunk: their headers and logs are fetched together, delivered, then the cursor
   * is saved. Default 100 (one JSON-RPC batch). Larger chunks send several batches at once:
   * faster catch-up (bench: 500 about 1.5x on local anvil), harder on a rate-limited provider.
   */
  batchSize?: number
  /**
   * Backoff after a failed tick: baseMs * 2^(failures-1), capped. Default pollIntervalMs / 30 s.
   */
  backoff?: { baseMs?: number; maxMs?: number }
}

export interface BlockFollowerDeps {
  network: FollowerNetwork
  client: RpcClient
  store: CursorStore
  watch: WatchSet
  handler: FollowerHandler
  clock?: Clock
  /** Resolves after `ms` or as soon as `signal` aborts (never rejects). */
  sleep?: Sleep
  logger?: Logger
  tuning?: FollowerTuning
  /** Told of every failed tick of the loop (metrics count them by kind). */
  onTickFailed?: (error: unknown) => void
  /** Told of every eth_getLogs range the provider refused (the range is split and asked again). */
  onLogRangeRefused?: (error: unknown) => void
  /**
   * Deposit addresses (lowercase) whose native balance is compared with what was recorded as
   * arriving there (`credited`: the native transfers found so far, in smallest units), read once
   * per chunk. Native coin sent by a contract's internal call (a Safe, a smart-contract wallet)
   * shows in no block's transaction list, only in the balance. Only with `scanNative`.
   */
  balanceWatch?: () => Promise<readonly { address: string; credited: bigint }[]>
  /**
   * Multicall3's address, where the chain has it (the network's start-up verification says):
   * `balanceWatch`'s balances are then read through it, a few thousand an `eth_call`, rather than
   * by one `eth_getBalance` each (native-balances.ts).
   */
  multicall3?: Address
  /**
   * Whether new heads are being pushed (a live WebSocket subscription): polling then slows to a
   * safety net.
   */
  pushed?: () => boolean
  /**
   * Blocks at or above `from` in which the handler recorded transfers not taken back yet: what a
   * resumed network checks against the chain. Without it, only the remembered window is checked.
   */
  recorded?: (from: bigint) => Promise<BlockRef[]>
  /** Told once when a reorg deeper than the window halts the network (metrics count it). */
  onHalt?: (halt: Halt) => void
}

/** Where a follower stands, for metrics and readiness. */
export interface FollowerStatus {
  /** The head the RPC last reported; null before the first answer. */
  head: bigint | null
  /** Last height processed; null before the first. */
  synced: bigint | null
  /**
   * When a tick last ended with every block up to the head processed (epoch ms); the start time
   * before the first.
   */
  inStepAt: number
  /** Failed ticks in a row, and the last one's error. */
  failures: number
  lastError: string | null
  /**
   * The RPC serves another chain than the one followed (another genesis block); nothing is followed
   * meanwhile.
   */
  replaced: { expected: Hex; found: Hex } | null
  /**
   * A reorg went deeper than the remembered window: nothing is followed until an operator resumes
   * the network.
   */
  halted: Halt | null
}

export interface BlockFollower {
  /** Begins the polling loop (no-op when running). */
  start(): void
  /** Ends the loop, aborting in-flight RPC calls; resolves once no handler call is running. */
  stop(): Promise<void>
  /** One tick now, errors thrown: for tests and benchmarks. Not while the loop runs. */
  syncOnce(): Promise<void>
  /**
   * A new head is known (pushed over a WebSocket): the wait before the next poll ends now, unless
   * the RPC is failing.
   */
  wake(): void
  /** Last height whose events the handler accepted and the store saved; null before the first. */
  syncedHeight(): bigint | null
  status(): FollowerStatus
}

/**
 * A tick whose chain moved under it starts over at most this many times; then the loop's back-off
 * takes over.
 */
const MAX_RESTARTS_PER_TICK = 3

export function createBlockFollower(deps: BlockFollowerDeps): BlockFollower {
  const { network, handler, clock = systemClock, sleep = abortableSleep, logger } = deps
  const windowSize = Math.max(1, deps.tuning?.windowSize ?? windowFor(network.confirmations ?? 0))
  const batchSize = Math.max(1, deps.tuning?.batchSize ?? 100)
  const tokens = network.erc20Tokens.map((a) => a.toLowerCase() as Address)
  /**
   * What the last tick saw of the node: its head, and when the follower was last in step with it.
   */
  const seen: { head: bigint | null; inStepAt: number } = { head: null, inStepAt: clock.now() }

  const loop = createLoop({
    network: network.name,
    tick,
    onFailure: (error) =>
      error instanceof ChainReplacedError
        ? reconciler.replacedBy(error)
        : deps.onTickFailed?.(error),
    pollIntervalMs: network.pollIntervalMs,
    backoff: {
      baseMs: deps.tuning?.backoff?.baseMs ?? network.pollIntervalMs,
      maxMs: deps.tuning?.backoff?.maxMs ?? 30_000,
    },
    pushed: deps.pushed,
    clock,
    sleep,
    logger,
  })
  const throttle = network.maxRequestsPerSecond
    ? createThrottle(network.maxRequestsPerSecond, clock, sleep)
    : null
  const rpc: Rpc = async (method, params) => {
    if (throttle) await throttle(loop.signal())
    return deps.client.request({ method, params }, { signal: loop.signal() })
  }
  const checkStopped = () => {
    const signal = loop.signal()
    if (signal.aborted) throw signal.reason ?? new Error('stopped')
  }
  const emit = async (event: FollowerEvent) => {
    checkStopped()
    await handler(event)
  }

  const position = createPosition({
    store: deps.store,
    windowSize,
    waitsForFinal: network.finalityTag !== undefined,
  })
  const fetcher = createBlockFetcher({ rpc, tokens, batchSize })
  const logRanges = createLogRanges({
    rpc,
    tokens,
    maxLogRange: network.maxLogRange,
    stopped: () => loop.signal().aborted,
    network: network.name,
    logger,
    onRefused: deps.onLogRangeRefused,
  })
  const reconciler = createReconciler({
    network: network.name,
    position,
    fetcher,
    rpc,
    emit,
    windowSize,
    batchSize,
    clock,
    logger,
    recorded: deps.recorded,
    onHalt: deps.onHalt,
  })
  const findings = createChunkFindings({
    rpc,
    clock,
    network,
    watch: deps.watch,
    tokens: new Set<string>(tokens),
    balanceWatch: deps.balanceWatch,
    multicall3: deps.multicall3,
    checkStopped,
    logger,
  })

  async function tick(): Promise<void> {
    await position.load()
    const halt = position.cursor()?.halted
    if (halt) return reconciler.stayHalted(halt)
    reconciler.notHalted()
    await reconciler.checkGenesis(false)
    const reported = parseQuantity(await rpc('eth_blockNumber', []), 'eth_blockNumber')
    seen.head = reported
    const recheckFrom = position.cursor()?.recheckFrom
    if (recheckFrom !== undefined) await reconciler.recheck(recheckFrom, reported)
    for (let attempt = 1; ; attempt++) {
      try {
        await sync(reported)
        break
      } catch (error) {
        if (!(error instanceof ChainMovedError) || attempt >= MAX_RESTARTS_PER_TICK) throw error
        logger?.info('chain moved during a scan; rescanning', {
          network: network.name,
          reason: error.message,
        })
      }
    }
    if (reconciler.halted()) return
    const cursor = position.cursor()
    if (!cursor) return
    const final = network.finalityTag
      ? await reconciler.finalHeight(network.finalityTag, cursor)
      : undefined
    if (final !== undefined) position.finalAt(final)
    await emit({
      type: 'head',
      number: cursor.height,
      ...(final === undefined ? {} : { final: min(final, cursor.height) }),
    })
    if (cursor.height >= reported) seen.inStepAt = clock.now()
  }

  /**
   * Scans every block above the cursor up to `head`, a chunk at a time, saving the cursor after
   * each.
   */
  async function sync(head: bigint): Promise<void> {
    const cursor = position.cursor()
    if (cursor && cursor.height >= head) return reconciler.recheckTip(head)
    // First start: begin at the current head, nothing to catch up.
    let base: Cursor = cursor ?? { height: head - 1n, recent: [], origin: head }
    while (base.height < head) {
      checkStopped()
      const from = base.height + 1n
      const to = min(head, from + BigInt(batchSize) - 1n)
      // A single block's logs are asked by its hash below: exactly the block validated.
      const [blocks, rangeLogs] = await Promise.all([
        fetcher.blocks(from, to, network.scanNative),
        from === to ? null : logRanges.logs(from, to),
      ])
      if (blocks.length === 0) return // the node does not serve `from` yet (a lagging replica)
      const tip = base.recent.at(-1)
      if (tip && tip.number === base.height && blocks[0]!.parentHash !== tip.hash) {
        if (await reconciler.reconcile(head)) return
        base = position.cursor()!
        continue
      }
      checkLinked(blocks)
      const logs = checkLogs(rangeLogs ?? (await fetcher.logsByHash(blocks[0]!.hash)), blocks)
      const found = await findings.of(blocks, logs, head)
      for (const b of blocks)
        await emit({ type: 'block', block: header(b), findings: found.get(b.number)! })
      base = position.advance(
        base,
        blocks.map((b) => ({ number: b.number, hash: b.hash })),
      )
      await position.commit(base)
    }
  }

  return {
    start: () => loop.start(),
    stop: () => loop.stop(),
    async syncOnce() {
      if (loop.running()) throw new Error('syncOnce() while the loop runs')
      loop.renew()
      await tick()
    },
    wake: () => loop.wake(),
    syncedHeight: () => position.cursor()?.height ?? null,
    status: () => ({
      head: seen.head,
      synced: position.cursor()?.height ?? null,
      inStepAt: seen.inStepAt,
      failures: loop.failures(),
      lastError: loop.lastError(),
      replaced: reconciler.replaced(),
      halted: reconciler.halted(),
    }),
  }
}
