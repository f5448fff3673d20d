/**
 * Follows one network's canonical chain block by block and reports, in order, the transfers
 * to watched deposit addresses, the reorgs that take reported blocks away, and the head.
 *
 * Why an own polling loop (not viem's `watchBlocks`): polling `watchBlocks` misses anvil's
 * replacement blocks after a reorg, WebSocket delivery can be out of order, and nodes never
 * report `removed` logs for anvil reorgs (TOOLING.md). So the follower keeps a window of
 * recent `{ number, hash }`, checks every new block's `parentHash` against it, re-checks the
 * remembered tip when the chain did not grow (a reorg at the same heights), and walks back
 * to the fork point itself.
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
 * The window holds at least `confirmations` + 64 hashes (cursor.ts), so every block
 * that may hold a payment not completed yet is remembered. A reorg deeper than the window halts
 * the network: no event is emitted for it any more (so nothing on it completes, is taken back
 * or settles), the halt is saved in the cursor (a restart, or another instance taking the
 * network over, stays halted) and said once as an error, until `network resume` sets where to
 * re-check from. Assuming the blocks below the window canonical would complete payments that a
 * reorg may have taken away.
 *
 * RPC data is validated before it is trusted: a header must have the number asked for and
 * well-formed hashes, consecutive headers must link by `parentHash`, and every log must
 * carry the hash of the header validated for its height; otherwise the chain moved under
 * the scan and the tick starts over.
 */
import type { Address, Hex } from 'viem'
import { systemClock, type Clock } from '../../lib/clock.ts'
import { errorSummary, type Logger } from '../../lib/logger.ts'
import { errorChain, isRateLimit, retryAfterMs } from '../../metrics/metrics.ts'
import { createTraceReader, type InternalTransfer } from './internal-traces.ts'
import type { RpcClient } from '../rpc.ts'
import {
  MAX_WINDOW,
  resumeCommand,
  windowFor,
  type BlockRef,
  type Cursor,
  type CursorStore,
  type Halt,
} from './cursor.ts'
import {
  TRANSFER_TOPIC,
  scanNativeTransactions,
  scanTransferLogs,
  type Finding,
  type NativeFinding,
  type RpcLogLike,
  type RpcTransactionLike,
  type WatchSet,
} from '../transfer-scan.ts'

export interface BlockHeader extends BlockRef {
  parentHash: Hex
  /** Seconds since the epoch, as the block says. */
  timestamp: bigint
}

export type FollowerEvent =
  | { type: 'block'; block: BlockHeader; findings: Finding[] }
  /** Reported blocks above `forkPoint` (the last common block) left the canonical chain. */
  | { type: 'reorg'; forkPoint: bigint; removed: BlockRef[] }
  /**
   * Highest validated canonical block; confirmations = number - blockNumber + 1. `final`: where
   * the network's safe or finalized block stands, when the network waits for one (never above `number`).
   */
  | { type: 'head'; number: bigint; final?: bigint }

export type FollowerHandler = (event: FollowerEvent) => Promise<void> | void

export interface FollowerNetwork {
  name: string
  pollIntervalMs: number
  /** Most blocks one ranged `eth_getLogs` may span (providers cap it, often 1,000 or less). */
  maxLogRange: number
  erc20Tokens: Address[]
  /** Fetch whole blocks to find native transfers (costly: only where a native token is accepted). */
  scanNative: boolean
  /** The block tag whose height each head event reports (`safe` / `finalized`), for networks that wait for one. */
  finalityTag?: 'safe' | 'finalized'
  /** Blocks a payment waits for: the window of remembered hashes is at least this plus a margin (`windowFor`). */
  confirmations?: number
  /** At most this many JSON-RPC calls a second (a provider's plan); bursts up to a second's worth share a batch. */
  maxRequestsPerSecond?: number
}

export interface FollowerTuning {
  /** Recent hashes kept for reorg detection, also across restarts. Default `windowFor(network.confirmations)`: 128 at least. */
  windowSize?: number
  /**
   * Blocks per chunk: their headers and logs are fetched together, delivered, then the cursor
   * is saved. Default 100 (one JSON-RPC batch). Larger chunks send several batches at once:
   * faster catch-up (bench: 500 about 1.5x on local anvil), harder on a rate-limited provider.
   */
  batchSize?: number
  /** Backoff after a failed tick: baseMs * 2^(failures-1), capped. Default pollIntervalMs / 30 s. */
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
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>
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
  /** Whether new heads are being pushed (a live WebSocket subscription): polling then slows to a safety net. */
  pushed?: () => boolean
  /**
   * Blocks at or above `from` in which the handler recorded transfers not taken back yet: what a
   * resumed network checks against the chain. Without it, only the remembered window is checked.
   */
  recorded?: (from: bigint) => Promise<BlockRef[]>
  /** Told once when a reorg deeper than the window halts the network (metrics count it). */
  onHalt?: (halt: Halt) => void
}

/** While heads are pushed, the follower still polls, this many times less often, in case a push is lost. */
export const PUSHED_POLL_FACTOR = 10

/** Where a follower stands, for metrics and readiness. */
export interface FollowerStatus {
  /** The head the RPC last reported; null before the first answer. */
  head: bigint | null
  /** Last height processed; null before the first. */
  synced: bigint | null
  /** When a tick last ended with every block up to the head processed (epoch ms); the start time before the first. */
  inStepAt: number
  /** Failed ticks in a row, and the last one's error. */
  failures: number
  lastError: string | null
  /** The RPC serves another chain than the one followed (another genesis block); nothing is followed meanwhile. */
  replaced: { expected: Hex; found: Hex } | null
  /** A reorg went deeper than the remembered window: nothing is followed until an operator resumes the network. */
  halted: Halt | null
}

export interface BlockFollower {
  /** Begins the polling loop (no-op when running). */
  start(): void
  /** Ends the loop, aborting in-flight RPC calls; resolves once no handler call is running. */
  stop(): Promise<void>
  /** One tick now, errors thrown: for tests and benchmarks. Not while the loop runs. */
  syncOnce(): Promise<void>
  /** A new head is known (pushed over a WebSocket): the wait before the next poll ends now, unless the RPC is failing. */
  wake(): void
  /** Last height whose events the handler accepted and the store saved; null before the first. */
  syncedHeight(): bigint | null
  status(): FollowerStatus
}

/** The chain changed between two reads of one tick; the tick starts over. */
class ChainMovedError extends Error {}

/** The RPC serves a chain with another genesis block than the one followed: not a reorg, another chain. */
export class ChainReplacedError extends Error {
  constructor(
    readonly expected: Hex,
    readonly found: Hex,
  ) {
    super(`the RPC serves another chain (genesis ${found}, expected ${expected})`)
  }
}

const MAX_RESTARTS_PER_TICK = 3

export function createBlockFollower(deps: BlockFollowerDeps): BlockFollower {
  const {
    network,
    client,
    store,
    watch,
    handler,
    clock = systemClock,
    sleep = abortableSleep,
    logger,
  } = deps
  const windowSize = Math.max(1, deps.tuning?.windowSize ?? windowFor(network.confirmations ?? 0))
  const batchSize = Math.max(1, deps.tuning?.batchSize ?? 100)
  const backoffBase = deps.tuning?.backoff?.baseMs ?? network.pollIntervalMs
  const backoffMax = deps.tuning?.backoff?.maxMs ?? 30_000
  const maxLogRange = Math.max(1, network.maxLogRange)
  const tokens = network.erc20Tokens.map((a) => a.toLowerCase() as Address)
  const tokenSet = new Set<string>(tokens)
  const logFilter = { address: tokens, topics: [TRANSFER_TOPIC] }

  let cursor: Cursor | null = null
  let loaded = false
  let controller = new AbortController()
  let running: Promise<void> | null = null
  let head: bigint | null = null
  let inStepAt = clock.now()
  let failures = 0
  let lastError: string | null = null
  let replaced: { expected: Hex; found: Hex } | null = null
  let halted: Halt | null = null
  /** Where the node's safe / finalized block stood at the last head (networks that wait for one); the window reaches down to it. */
  let lastFinal: bigint | null = null
  /** The wait between ticks, ended early by `wake()`; a wake during a tick skips the next wait. */
  let napping: AbortController | null = null
  let woken = false
  /** Block 0's hash once checked against the cursor's since the cursor was loaded. */
  let genesis: Hex | null = null

  const throttle = network.maxRequestsPerSecond
    ? createThrottle(network.maxRequestsPerSecond, clock, sleep)
    : null
  const rpc = async (method: string, params: unknown[]) => {
    if (throttle) await throttle(controller.signal)
    return client.request({ method, params }, { signal: controller.signal })
  }
  /** Who sent native coin by an internal call, where the node traces (asked only when such coin arrived). */
  const traces = createTraceReader(rpc, clock)
  /** The widest eth_getLogs span the provider has taken: starts at maxLogRange, halved at each refusal, kept. */
  let logSpan = maxLogRange
  const checkStopped = () => {
    if (controller.signal.aborted) throw controller.signal.reason ?? new Error('stopped')
  }
  const emit = async (event: FollowerEvent) => {
    checkStopped()
    await handler(event)
  }
  /** Saves where the follower stands; a halt or a resume request is never carried on by it. */
  const commit = async (next: Cursor) => {
    const g = genesis ?? next.genesis
    const origin = next.origin ?? cursor?.origin
    const full: Cursor = {
      height: next.height,
      recent: next.recent,
      ...(g ? { genesis: g } : {}),
      ...(origin !== undefined ? { origin } : {}),
    }
    await store.save(full)
    cursor = full
  }

  /**
   * Block 0 of the chain the RPC serves, against the one the cursor was made on. Checked once after
   * the cursor is loaded, and again before any reorg is handled: a replaced chain (a devnet
   * started afresh, a testnet reset, an RPC pointed elsewhere) looks like a reorg deeper than any
   * window, and taking its blocks back would mark completed payments as reorged out.
   */
  async function checkGenesis(force: boolean) {
    if (genesis && !force) return
    const [zero] = await fetchBlocks(0n, 0n, false)
    if (!zero) throw new Error('the RPC does not serve block 0')
    if (cursor?.genesis && cursor.genesis !== zero.hash)
      throw new ChainReplacedError(cursor.genesis, zero.hash)
    genesis = zero.hash
    replaced = null
  }

  async function tick(): Promise<void> {
    if (!loaded) {
      cursor = await store.load()
      loaded = true
      genesis = null
    }
    if (cursor?.halted) return stayHalted(cursor.halted)
    halted = null
    await checkGenesis(false)
    const reported = parseQuantity(await rpc('eth_blockNumber', []), 'eth_blockNumber')
    head = reported
    if (cursor?.recheckFrom !== undefined) await recheck(cursor.recheckFrom, reported)
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
    if (halted) return
    if (cursor) {
      const final = network.finalityTag ? await finalHeight(network.finalityTag, cursor) : undefined
      if (final !== undefined) lastFinal = final
      await emit({
        type: 'head',
        number: cursor.height,
        ...(final === undefined ? {} : { final: min(final, cursor.height) }),
      })
    }
    if (cursor && cursor.height >= reported) inStepAt = clock.now()
  }

  async function sync(head: bigint): Promise<void> {
    if (cursor && cursor.height >= head) {
      // No new block: a reorg at the same heights only shows as a changed hash. One height
      // suffices: a block hash commits to every ancestor.
      const remembered = cursor.recent.find((r) => r.number === head)
      if (!remembered) return
      const [current] = await fetchBlocks(head, head, false)
      if (current && current.hash !== remembered.hash) await handleReorg(head)
      return
    }
    // First start: begin at the current head, nothing to catch up.
    let base: Cursor = cursor ?? { height: head - 1n, recent: [], origin: head }
    while (base.height < head) {
      checkStopped()
      const from = base.height + 1n
      const to = min(head, from + BigInt(batchSize) - 1n)
      const single = from === to
      const [blocks, rangeLogs] = await Promise.all([
        fetchBlocks(from, to, network.scanNative),
        single ? null : fetchLogsInRange(from, to),
      ])
      if (blocks.length === 0) return // the node does not serve `from` yet (a lagging replica)
      const tip = base.recent.at(-1)
      if (tip && tip.number === base.height && blocks[0]!.parentHash !== tip.hash) {
        if (await handleReorg(head)) return
        base = cursor!
        continue
      }
      for (let i = 1; i < blocks.length; i++) {
        if (blocks[i]!.parentHash !== blocks[i - 1]!.hash)
          throw new ChainMovedError(`block ${blocks[i]!.number} does not link to its parent`)
      }
      const logs = checkLogs(rangeLogs ?? (await fetchLogsByHash(blocks[0]!.hash)), blocks)
      // Read before the scan: an address quoted a moment ago (its NOTIFY not heard yet) is in the
      // database's list, and its listed transfers must be found as such, not as balance changes.
      const balanceWatched =
        network.scanNative && deps.balanceWatch ? await deps.balanceWatch() : []
      const quoted = new Set(balanceWatched.map((w) => w.address))
      const nativeWatch: WatchSet = quoted.size
        ? { has: (a) => watch.has(a) || quoted.has(a) }
        : watch
      const balances = balanceWatched.length
        ? await balancesAt(balanceWatched, blocks.at(-1)!, head)
        : null
      const byBlock = new Map<bigint, Finding[]>()
      for (const f of scanTransferLogs(logs, watch, tokenSet)) {
        const list = byBlock.get(f.blockNumber) ?? []
        list.push(f)
        byBlock.set(f.blockNumber, list)
      }
      const recent = base.recent.slice()
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
      for (const b of blocks) {
        const findings = [
          ...native.get(b.number)!,
          ...internal.filter((f) => f.blockNumber === b.number),
          ...(byBlock.get(b.number) ?? []),
        ]
        await emit({ type: 'block', block: header(b), findings })
        recent.push({ number: b.number, hash: b.hash })
      }
      const height = blocks.at(-1)!.number
      base = {
        height,
        recent: recent.slice(-kept(height, recent.length)),
        ...(base.origin !== undefined ? { origin: base.origin } : {}),
      }
      await commit(base)
    }
  }

  /**
   * Hashes kept at `height`: the window; on a network that waits for its safe / finalized block,
   * also back to that block (at most MAX_WINDOW, the size the cursor was measured at), so a reorg
   * of blocks not final yet finds its fork point instead of halting the network, and the tag
   * block is checked against the chain followed. Until the node has said where that block is
   * (after a restart), what is there is kept.
   */
  function kept(height: bigint, have: number): number {
    if (!network.finalityTag) return windowSize
    const toFinal = lastFinal === null ? have : Number(height - lastFinal + 1n)
    return Math.max(windowSize, Math.min(MAX_WINDOW, toFinal))
  }

  /** A halted network's tick: nothing is asked or emitted; the cursor is read again next time, to see a resume. */
  function stayHalted(found: Halt) {
    if (!halted) {
      // Found earlier (by this instance before a restart, or by another): said once here too.
      logger?.warn(
        'this network is halted: a reorg went deeper than the remembered window; nothing on it is followed until an operator resumes it',
        {
          network: network.name,
          ...haltFields(found),
          fix: `check the chain, then run: ${resumeCommand(network.name)}`,
        },
      )
    }
    halted = found
    loaded = false
  }

  /** Saves the halt (so a restart or another instance stays halted), says it once, and stops emitting. */
  async function halt(reportedHead: bigint): Promise<void> {
    const at = cursor!
    const windowFrom = at.recent[0]?.number ?? at.height
    const found: Halt = {
      at: clock.now(),
      windowFrom,
      windowTo: at.recent.at(-1)?.number ?? at.height,
      head: reportedHead,
      resumeFrom: windowFrom > BigInt(windowSize) ? windowFrom - BigInt(windowSize) : 0n,
    }
    const saved: Cursor = { ...at, ...(genesis ? { genesis } : {}), halted: found }
    await store.save(saved)
    cursor = saved
    halted = found
    loaded = false
    logger?.error(
      'reorg deeper than the remembered window: none of the remembered blocks is on the chain any more; this network is halted (nothing on it completes, is taken back or settles) until an operator resumes it',
      {
        network: network.name,
        ...haltFields(found),
        fix: `check the chain (an explorer, another node), then run: ${resumeCommand(network.name)}`,
      },
    )
    deps.onHalt?.(found)
  }

  /**
   * After `network resume`: what was recorded from `from` on is checked against the chain as it is
   * now, and blocks no longer canonical are reported as a reorg (their transfers are taken back
   * as any reorg takes them back); then `from`..head is scanned again by the usual loop (the
   * handler keeps findings by txHash + logIndex + blockHash, so a block recorded before adds
   * nothing). A crash before the cursor is saved does it again: taking back is idempotent.
   */
  async function recheck(from: bigint, reported: bigint): Promise<void> {
    const at = cursor!
    // A chain now shorter than `from`: nothing above its head to re-check, and nothing skipped when it grows.
    const start = min(from, reported + 1n)
    const recorded = deps.recorded ? await deps.recorded(start) : []
    const candidates = new Map<string, BlockRef>()
    for (const r of [...recorded, ...at.recent.filter((r) => r.number >= start)]) {
      const hash = r.hash.toLowerCase() as Hex
      candidates.set(`${r.number}:${hash}`, { number: r.number, hash })
    }
    const canonical = await canonicalHashes([
      ...new Set([...candidates.values()].map((c) => c.number)),
    ])
    const removed = [...candidates.values()]
      .filter((c) => canonical.get(c.number) !== c.hash)
      .sort((a, b) => (a.number < b.number ? -1 : a.number > b.number ? 1 : 0))
    const [anchor] = start > 0n ? await fetchBlocks(start - 1n, start - 1n, false) : []
    logger?.warn(
      'network resumed by an operator: re-checking what was recorded against the chain, and scanning again',
      {
        network: network.name,
        from: start.toString(),
        head: reported.toString(),
        recordedBlocks: recorded.length,
        noLongerCanonical: removed.length,
      },
    )
    if (removed.length) await emit({ type: 'reorg', forkPoint: removed[0]!.number - 1n, removed })
    // Every block from `start` on is scanned again: if the cursor began above it, it now begins there.
    const origin = at.origin !== undefined && start < at.origin ? start : at.origin
    await commit({
      height: start - 1n,
      recent: anchor ? [{ number: anchor.number, hash: anchor.hash }] : [],
      ...(origin !== undefined ? { origin } : {}),
    })
  }

  /** The canonical hash (lowercase) at each height the node has a block for, in batches. */
  async function canonicalHashes(numbers: bigint[]): Promise<Map<bigint, string>> {
    const found = new Map<bigint, string>()
    for (let i = 0; i < numbers.length; i += batchSize) {
      const group = numbers.slice(i, i + batchSize)
      const raw = await Promise.all(
        group.map((n) => rpc('eth_getBlockByNumber', [toQuantity(n), false])),
      )
      raw.forEach((b, j) => {
        if (b != null) found.set(group[j]!, validateBlock(b, group[j]!, false).hash.toLowerCase())
      })
    }
    return found
  }

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
   * belong to the chain the headers were validated on), with what was credited to each. Null
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
      const answers = await Promise.all(
        watchedNow.map((w) => rpc('eth_getBalance', [w.address, { blockHash: block.hash }])),
      )
      return new Map(
        watchedNow.map((w, i) => [
          w.address,
          { balance: parseQuantity(answers[i], 'eth_getBalance'), credited: w.credited },
        ]),
      )
    } catch (error) {
      checkStopped()
      // The head's state is always kept: not reading it is a problem; an older block's may be pruned.
      const log = block.number >= head ? logger?.warn : logger?.debug
      log?.call(
        logger,
        'native balances not readable at this block; compared again at a later one',
        { network: network.name, block: block.number.toString(), error: errorSummary(error) },
      )
      return null
    }
  }

  /**
   * The height of the node's `safe` / `finalized` block (-1 when it has none yet: a young chain).
   * A node behind a balancer may be on another fork than the one followed: a tag block within the
   * remembered window must have the hash followed, or nothing counts as final on this tick.
   */
  async function finalHeight(tag: 'safe' | 'finalized', followed: Cursor): Promise<bigint> {
    const block = (await rpc('eth_getBlockByNumber', [tag, false])) as {
      number?: unknown
      hash?: unknown
    } | null
    if (block == null) return -1n
    const number = parseQuantity(block.number, `${tag} block number`)
    const known = followed.recent.find((r) => r.number === number)
    if (known && known.hash !== block.hash) {
      logger?.info(`the ${tag} block is not on the chain followed; nothing is final on this tick`, {
        network: network.name,
        block: number.toString(),
      })
      return -1n
    }
    return number
  }

  /**
   * Walks back through the remembered window to the last block still canonical. True when none
   * is: the network is halted (see `halt`), unless the window reaches the first block followed.
   */
  async function handleReorg(head: bigint): Promise<boolean> {
    await checkGenesis(true)
    const recent = cursor?.recent ?? []
    let forkPoint: bigint | null = null
    // Newest first, a few at a time at first: most reorgs are a block or two deep.
    const candidates = recent.filter((r) => r.number <= head).reverse()
    for (
      let i = 0, size = 8;
      i < candidates.length && forkPoint === null;
      i += size, size = batchSize
    ) {
      const group = candidates.slice(i, i + size)
      const low = group.at(-1)!.number
      const high = group[0]!.number
      const canonical = new Map(
        (await fetchBlocks(low, high, false)).map((b) => [b.number, b.hash]),
      )
      forkPoint = group.find((r) => canonical.get(r.number) === r.hash)?.number ?? null
    }
    if (forkPoint === null) {
      const lowest = recent[0]
      // Nothing below the first block followed was scanned, so nothing recorded there can be taken away.
      if (!lowest || cursor?.origin === undefined || lowest.number > cursor.origin) {
        await halt(head)
        return true
      }
      forkPoint = lowest.number - 1n
    }
    const fp = forkPoint
    const removed = recent.filter((r) => r.number > fp)
    // A parent mismatch while the tip is still canonical: two reads saw different chains.
    if (removed.length === 0)
      throw new ChainMovedError('parent mismatch, yet the remembered tip is canonical')
    logger?.warn('chain reorganisation', {
      network: network.name,
      forkPoint: fp.toString(),
      removed: removed.length,
    })
    await emit({ type: 'reorg', forkPoint: fp, removed })
    await commit({ height: fp, recent: recent.filter((r) => r.number <= fp) })
    return false
  }

  /**
   * Blocks from..to, batched; stops at the first the node does not have (returns fewer).
   * With `withTxs`, bodies come along for the native scan.
   */
  async function fetchBlocks(from: bigint, to: bigint, withTxs: boolean): Promise<FetchedBlock[]> {
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
  }

  /**
   * Transfer logs of the watched tokens for from..to: ranged calls of at most the working span,
   * issued together with the header fetch (one round trip less per chunk). They are trusted only
   * once `checkLogs` matched them to the validated headers.
   */
  async function fetchLogsInRange(from: bigint, to: bigint): Promise<RpcLogLike[]> {
    if (tokens.length === 0) return []
    const calls: Promise<RpcLogLike[]>[] = []
    for (let lo = from; lo <= to; lo += BigInt(logSpan))
      calls.push(logsOf(lo, min(to, lo + BigInt(logSpan) - 1n)))
    return (await Promise.all(calls)).flat()
  }

  /**
   * One ranged eth_getLogs. A provider that refuses the range or the size of the answer ("block
   * range too large", "more than 10000 results") gets each half asked instead, down to one
   * block; the narrower span is kept for the next calls.
   */
  async function logsOf(lo: bigint, hi: bigint): Promise<RpcLogLike[]> {
    try {
      return asLogList([
        await rpc('eth_getLogs', [
          { ...logFilter, fromBlock: toQuantity(lo), toBlock: toQuantity(hi) },
        ]),
      ])
    } catch (error) {
      if (lo === hi || controller.signal.aborted || !isRangeRefusal(error)) throw error
      const half = (hi - lo + 2n) / 2n
      if (half < BigInt(logSpan)) {
        logSpan = Number(half)
        logger?.warn('the provider refused an eth_getLogs range; asking for narrower ones', {
          network: network.name,
          from: lo.toString(),
          to: hi.toString(),
          span: logSpan,
          error: errorSummary(error),
        })
      }
      deps.onLogRangeRefused?.(error)
      const [a, b] = await Promise.all([logsOf(lo, lo + half - 1n), logsOf(lo + half, hi)])
      return [...a, ...b]
    }
  }

  /**
   * One block's logs by hash: the node answers for exactly the block validated, or fails
   * (anvil: invalid params) when that block has just been replaced: a reason to rescan.
   */
  async function fetchLogsByHash(hash: Hex): Promise<RpcLogLike[]> {
    if (tokens.length === 0) return []
    const result = await rpc('eth_getLogs', [{ ...logFilter, blockHash: hash }]).catch((error) => {
      throw new ChainMovedError(`eth_getLogs by hash ${hash} failed: ${errorSummary(error)}`)
    })
    return asLogList([result])
  }

  /** Keeps the logs of `blocks`' heights, each of which must carry its header's hash. */
  function checkLogs(logs: RpcLogLike[], blocks: FetchedBlock[]): RpcLogLike[] {
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

  async function loop(): Promise<void> {
    failures = 0
    let retryInMs = 0
    const signal = controller.signal
    while (!signal.aborted) {
      const started = clock.now()
      try {
        await tick()
        failures = 0
        lastError = null
      } catch (error) {
        if (signal.aborted) break
        failures++
        lastError = errorSummary(error)
        if (error instanceof ChainReplacedError) {
          // Said once per chain found; the cursor is read again at each try, so a forgotten one (or the old chain back) is taken up at once.
          if (replaced?.found !== error.found) {
            logger?.error(
              'the RPC now serves another chain: this network is not followed until it serves the one followed before, or its position is forgotten',
              {
                network: network.name,
                expectedGenesis: error.expected,
                foundGenesis: error.found,
                fix: `point the RPC back to the chain, or, if the network was really reset, run: npm run cli -- network forget --network ${network.name}`,
              },
            )
          }
          replaced = { expected: error.expected, found: error.found }
          loaded = false
        } else deps.onTickFailed?.(error)
        // A wake that came during the failing tick does not cut the back-off short.
        woken = false
        // A provider that said how long to wait (429 Retry-After) is given at least that.
        retryInMs = Math.max(
          Math.min(backoffBase * 2 ** (failures - 1), backoffMax),
          retryAfterMs(error) ?? 0,
        )
        logger?.warn('chain follower tick failed', {
          network: network.name,
          failures,
          retryInMs,
          rateLimited: isRateLimit(error),
          error: errorSummary(error),
        })
      }
      if (signal.aborted) break
      const interval = deps.pushed?.()
        ? network.pollIntervalMs * PUSHED_POLL_FACTOR
        : network.pollIntervalMs
      const delay = failures > 0 ? retryInMs : Math.max(0, interval - (clock.now() - started))
      if (!woken) {
        const nap = new AbortController()
        napping = nap
        const end = () => nap.abort()
        signal.addEventListener('abort', end)
        await sleep(delay, nap.signal)
        signal.removeEventListener('abort', end)
        napping = null
      }
      woken = false
    }
  }

  return {
    start() {
      if (running) return
      if (controller.signal.aborted) controller = new AbortController()
      running = loop().finally(() => {
        running = null
      })
    },
    async stop() {
      controller.abort(new Error('block follower stopped'))
      await running
    },
    async syncOnce() {
      if (running) throw new Error('syncOnce() while the loop runs')
      if (controller.signal.aborted) controller = new AbortController()
      await tick()
    },
    wake() {
      if (!running || failures > 0) return
      woken = true
      napping?.abort()
    },
    syncedHeight: () => cursor?.height ?? null,
    status: () => ({
      head,
      synced: cursor?.height ?? null,
      inStepAt,
      failures,
      lastError,
      replaced,
      halted,
    }),
  }
}

interface FetchedBlock extends BlockHeader {
  transactions: readonly (RpcTransactionLike | string)[]
}

const HASH = /^0x[0-9a-fA-F]{64}$/

function validateBlock(raw: unknown, expected: bigint, withTxs: boolean): FetchedBlock {
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

function header(b: FetchedBlock): BlockHeader {
  return { number: b.number, hash: b.hash, parentHash: b.parentHash, timestamp: b.timestamp }
}

function parseQuantity(value: unknown, what: string): bigint {
  if (typeof value !== 'string' || !/^0x[0-9a-fA-F]{1,64}$/.test(value))
    throw new Error(`${what}: not a hex quantity: ${String(value)}`)
  return BigInt(value)
}

function asLogList(results: unknown[]): RpcLogLike[] {
  return results.flatMap((r) => {
    if (!Array.isArray(r)) throw new Error(`eth_getLogs returned ${typeof r}, not a list`)
    return r as RpcLogLike[]
  })
}

const toQuantity = (n: bigint) => `0x${n.toString(16)}`
const haltFields = (h: Halt) => ({
  windowFrom: h.windowFrom.toString(),
  windowTo: h.windowTo.toString(),
  head: h.head.toString(),
  resumeFrom: h.resumeFrom.toString(),
})
const min = (a: bigint, b: bigint) => (a < b ? a : b)

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done)
  })
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

/** Spaces calls to `perSecond`, letting a second's worth through at once (so a burst still shares a batch). */
export function createThrottle(
  perSecond: number,
  clock: Clock,
  sleep: (ms: number, signal: AbortSignal) => Promise<void>,
) {
  let tokens = perSecond
  let at = clock.now()
  return async (signal: AbortSignal) => {
    for (;;) {
      const now = clock.now()
      tokens = Math.min(perSecond, tokens + ((now - at) / 1000) * perSecond)
      at = now
      if (tokens >= 1) {
        tokens -= 1
        return
      }
      await sleep(Math.ceil(((1 - tokens) / perSecond) * 1000), signal)
      if (signal.aborted) throw signal.reason ?? new Error('stopped')
    }
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
