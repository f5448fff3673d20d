/**
 * Reconciling the followed chain with the node's: the remembered window of `{ number, hash }` is
 * checked against the canonical chain, a reorg is walked back to its fork point and reported, a
 * reorg deeper than the window halts the network, a chain with another genesis block is not
 * followed at all, and after `network resume` what was recorded is checked again.
 *
 * A reorg deeper than the window halts the network: no event is emitted for it any more (so
 * nothing on it completes, is taken back or settles), the halt is saved in the cursor (a restart,
 * or another instance taking the network over, stays halted) and said once as an error, until
 * `network resume` sets where to re-check from. Assuming the blocks below the window canonical
 * would complete payments that a reorg may have taken away.
 *
 * The decisions are pure functions below (`findForkPoint`, `rewindTo`, `haltOf`,
 * `noLongerCanonical`); `createReconciler` reads the chain for them and acts on what they decide.
 */
import type { Hex } from 'viem'
import type { Clock } from '../../lib/clock.ts'
import type { Logger } from '../../lib/logger.ts'
import { resumeCommand, type BlockRef, type Cursor, type Halt } from './cursor.ts'
import type { FollowerEvent } from './events.ts'
import type { BlockFetcher } from './fetch.ts'
import type { Position } from './position.ts'
import { ChainMovedError, min, parseQuantity, type Rpc } from './rpc-data.ts'

/**
 * The RPC serves a chain with another genesis block than the one followed: not a reorg, another
 * chain.
 */
export class ChainReplacedError extends Error {
  constructor(
    readonly expected: Hex,
    readonly found: Hex,
  ) {
    super(`the RPC serves another chain (genesis ${found}, expected ${expected})`)
  }
}

/**
 * The first group of remembered blocks checked when walking back: most reorgs are a block or two
 * deep.
 */
const FIRST_GROUP = 8

/**
 * The newest remembered block at or below `head` that is still canonical, or null when none is.
 * Walks back newest first, `FIRST_GROUP` blocks, then `batchSize` at a time, asking
 * `canonicalIn(low, high)` for the chain's hashes at those heights.
 */
export async function findForkPoint(
  recent: readonly BlockRef[],
  head: bigint,
  batchSize: number,
  canonicalIn: (low: bigint, high: bigint) => Promise<ReadonlyMap<bigint, string>>,
): Promise<bigint | null> {
  const candidates = recent.filter((r) => r.number <= head).reverse()
  for (let i = 0, size = FIRST_GROUP; i < candidates.length; i += size, size = batchSize) {
    const group = candidates.slice(i, i + size)
    const canonical = await canonicalIn(group.at(-1)!.number, group[0]!.number)
    const found = group.find((r) => canonical.get(r.number) === r.hash)
    if (found) return found.number
  }
  return null
}

export type Rewind =
  /** Back to `forkPoint`: `removed` left the chain, `kept` is the window from now on. */
  | { kind: 'rewind'; forkPoint: bigint; removed: BlockRef[]; kept: BlockRef[] }
  /** None of the remembered blocks is canonical, and blocks below them were scanned: halt. */
  | { kind: 'halt' }
  /**
   * A parent mismatch while the remembered tip is still canonical: two reads saw different chains.
   */
  | { kind: 'moved' }

/**
 * What a reorg found by walking back (`forkPoint`, null: none of `recent` canonical) does to the
 * window.
 */
export function rewindTo(
  recent: readonly BlockRef[],
  origin: bigint | undefined,
  forkPoint: bigint | null,
): Rewind {
  let fp = forkPoint
  if (fp === null) {
    const lowest = recent[0]
    // Nothing below the first block followed was scanned, so nothing recorded there can be taken
    // away.
    if (!lowest || origin === undefined || lowest.number > origin) return { kind: 'halt' }
    fp = lowest.number - 1n
  }
  const at = fp
  const removed = recent.filter((r) => r.number > at)
  if (removed.length === 0) return { kind: 'moved' }
  return { kind: 'rewind', forkPoint: at, removed, kept: recent.filter((r) => r.number <= at) }
}

/** The halt found at `at` (epoch ms) for `cursor`'s window; resuming re-checks one window lower. */
export function haltOf(cursor: Cursor, head: bigint, windowSize: number, at: number): Halt {
  const windowFrom = cursor.recent[0]?.number ?? cursor.height
  return {
    at,
    windowFrom,
    windowTo: cursor.recent.at(-1)?.number ?? cursor.height,
    head,
    resumeFrom: windowFrom > BigInt(windowSize) ? windowFrom - BigInt(windowSize) : 0n,
  }
}

/**
 * Of the blocks recorded or remembered from a resume's `start` on (each once, hashes lowercase),
 * those whose hash is not the canonical one at their height now, lowest first.
 */
export function noLongerCanonical(
  candidates: readonly BlockRef[],
  canonical: ReadonlyMap<bigint, string>,
): BlockRef[] {
  return candidates
    .filter((c) => canonical.get(c.number) !== c.hash)
    .sort((a, b) => (a.number < b.number ? -1 : a.number > b.number ? 1 : 0))
}

/** Recorded and remembered blocks from `start` on, each once (hashes lowercase). */
export function recheckCandidates(
  recorded: readonly BlockRef[],
  recent: readonly BlockRef[],
  start: bigint,
): BlockRef[] {
  const candidates = new Map<string, BlockRef>()
  for (const r of [...recorded, ...recent.filter((r) => r.number >= start)]) {
    const hash = r.hash.toLowerCase() as Hex
    candidates.set(`${r.number}:${hash}`, { number: r.number, hash })
  }
  return [...candidates.values()]
}

export interface Reconciler {
  /**
   * Block 0 of the chain the RPC serves, against the one the cursor was made on: checked once
   * after the cursor is loaded, and again (`force`) before any reorg is handled. Throws
   * `ChainReplacedError` when it differs.
   */
  checkGenesis(force: boolean): Promise<void>
  /**
   * A tick found the RPC serving another chain: said once per chain found, the cursor read again.
   */
  replacedBy(error: ChainReplacedError): void
  /**
   * No block above the cursor: a reorg at the same heights shows only as a changed hash at `head`.
   */
  recheckTip(head: bigint): Promise<void>
  /**
   * A new block does not link to the remembered tip: walks back and reports the reorg. True when
   * the network halted instead.
   */
  reconcile(head: bigint): Promise<boolean>
  /**
   * A halted network's tick: nothing is asked or emitted; the cursor is read again next time, to
   * see a resume.
   */
  stayHalted(found: Halt): void
  /** The loaded cursor is not halted (any more). */
  notHalted(): void
  /**
   * After `network resume`: re-checks what was recorded from `from` on, then scans from there
   * again.
   */
  recheck(from: bigint, reported: bigint): Promise<void>
  /**
   * The height of the node's `safe` / `finalized` block if it is on the chain followed; -1 when not
   * (or none yet).
   */
  finalHeight(tag: 'safe' | 'finalized', followed: Cursor): Promise<bigint>
  halted(): Halt | null
  replaced(): { expected: Hex; found: Hex } | null
}

export function createReconciler(o: {
  network: string
  position: Position
  fetcher: BlockFetcher
  rpc: Rpc
  emit: (event: FollowerEvent) => Promise<void>
  windowSize: number
  batchSize: number
  clock: Clock
  logger?: Logger
  /** Blocks at or above `from` in which the handler recorded transfers not taken back yet. */
  recorded?: (from: bigint) => Promise<BlockRef[]>
  onHalt?: (halt: Halt) => void
}): Reconciler {
  const { position, fetcher, logger } = o
  let halted: Halt | null = null
  let replaced: { expected: Hex; found: Hex } | null = null

  async function checkGenesis(force: boolean) {
    if (position.genesis() && !force) return
    const [zero] = await fetcher.blocks(0n, 0n, false)
    if (!zero) throw new Error('the RPC does not serve block 0')
    const expected = position.cursor()?.genesis
    if (expected && expected !== zero.hash) {
      if (!(await holdsRemembered())) throw new ChainReplacedError(expected, zero.hash)
      // The same chain: the node no longer keeps its first blocks as they were (anvil restored
      // from a state file that kept only its recent blocks answers a new block 0), but the blocks
      // followed last are still there with their hashes.
      logger?.info(
        'block 0 of the chain followed has another hash now; the blocks followed last are unchanged, so it is the same chain',
        {
          network: o.network,
          expectedGenesis: expected,
          foundGenesis: zero.hash,
        },
      )
    }
    position.genesisChecked(zero.hash)
    replaced = null
  }

  /** Whether any block the cursor remembers is on the chain now, with the hash remembered. */
  async function holdsRemembered(): Promise<boolean> {
    const recent = position.cursor()?.recent ?? []
    if (recent.length === 0) return false
    const onChain = await fetcher.canonicalHashes(recent.map((r) => r.number))
    return recent.some((r) => onChain.get(r.number) === r.hash.toLowerCase())
  }

  /**
   * Saves the halt (so a restart or another instance stays halted), says it once, and stops
   * emitting.
   */
  async function halt(reportedHead: bigint): Promise<void> {
    const found = haltOf(position.cursor()!, reportedHead, o.windowSize, o.clock.now())
    await position.saveHalt(found)
    halted = found
    logger?.error(
      'reorg deeper than the remembered window: none of the remembered blocks is on the chain any more; this network is halted (nothing on it completes, is taken back or settles) until an operator resumes it',
      {
        network: o.network,
        ...haltFields(found),
        fix: `check the chain (an explorer, another node), then run: ${resumeCommand(o.network)}`,
      },
    )
    o.onHalt?.(found)
  }

  async function reconcile(head: bigint): Promise<boolean> {
    await checkGenesis(true)
    const cursor = position.cursor()
    const recent = cursor?.recent ?? []
    const forkPoint = await findForkPoint(recent, head, o.batchSize, async (low, high) => {
      const blocks = await fetcher.blocks(low, high, false)
      return new Map(blocks.map((b) => [b.number, b.hash]))
    })
    const decided = rewindTo(recent, cursor?.origin, forkPoint)
    if (decided.kind === 'halt') {
      await halt(head)
      return true
    }
    if (decided.kind === 'moved')
      throw new ChainMovedError('parent mismatch, yet the remembered tip is canonical')
    logger?.warn('chain reorganisation', {
      network: o.network,
      forkPoint: decided.forkPoint.toString(),
      removed: decided.removed.length,
    })
    await o.emit({ type: 'reorg', forkPoint: decided.forkPoint, removed: decided.removed })
    await position.commit({ height: decided.forkPoint, recent: decided.kept })
    return false
  }

  return {
    checkGenesis,
    replacedBy(error) {
      // Said once per chain found; the cursor is read again at each try, so a forgotten one (or the
      // old chain back) is taken up at once.
      if (replaced?.found !== error.found) {
        logger?.error(
          'the RPC now serves another chain: this network is not followed until it serves the one followed before, or its position is forgotten',
          {
            network: o.network,
            expectedGenesis: error.expected,
            foundGenesis: error.found,
            fix: `point the RPC back to the chain, or, if the network was really reset, run: npm run cli -- network forget --network ${o.network}`,
          },
        )
      }
      replaced = { expected: error.expected, found: error.found }
      position.reload()
    },

    async recheckTip(head) {
      // One height suffices: a block hash commits to every ancestor.
      const remembered = position.cursor()?.recent.find((r) => r.number === head)
      if (!remembered) return
      const [current] = await fetcher.blocks(head, head, false)
      if (current && current.hash !== remembered.hash) await reconcile(head)
    },

    reconcile,

    stayHalted(found) {
      if (!halted) {
        // Found earlier (by this instance before a restart, or by another): said once here too.
        logger?.warn(
          'this network is halted: a reorg went deeper than the remembered window; nothing on it is followed until an operator resumes it',
          {
            network: o.network,
            ...haltFields(found),
            fix: `check the chain, then run: ${resumeCommand(o.network)}`,
          },
        )
      }
      halted = found
      position.reload()
    },

    notHalted() {
      halted = null
    },

    /**
     * What was recorded from `from` on is checked against the chain as it is now, and blocks no
     * longer canonical are reported as a reorg (their transfers are taken back as any reorg takes
     * them back); then `from`..head is scanned again by the usual loop (the handler keeps findings
     * by txHash + logIndex + blockHash, so a block recorded before adds nothing). A crash before
     * the cursor is saved does it again: taking back is idempotent.
     */
    async recheck(from, reported) {
      const at = position.cursor()!
      // A chain now shorter than `from`: nothing above its head to re-check, and nothing skipped
      // when it grows.
      const start = min(from, reported + 1n)
      const recorded = o.recorded ? await o.recorded(start) : []
      const candidates = recheckCandidates(recorded, at.recent, start)
      const canonical = await fetcher.canonicalHashes([...new Set(candidates.map((c) => c.number))])
      const removed = noLongerCanonical(candidates, canonical)
      const [anchor] = start > 0n ? await fetcher.blocks(start - 1n, start - 1n, false) : []
      logger?.warn(
        'network resumed by an operator: re-checking what was recorded against the chain, and scanning again',
        {
          network: o.network,
          from: start.toString(),
          head: reported.toString(),
          recordedBlocks: recorded.length,
          noLongerCanonical: removed.length,
        },
      )
      if (removed.length)
        await o.emit({ type: 'reorg', forkPoint: removed[0]!.number - 1n, removed })
      // Every block from `start` on is scanned again: if the cursor began above it, it now begins
      // there.
      const origin = at.origin !== undefined && start < at.origin ? start : at.origin
      await position.commit({
        height: start - 1n,
        recent: anchor ? [{ number: anchor.number, hash: anchor.hash }] : [],
        ...(origin !== undefined ? { origin } : {}),
      })
    },

    /**
     * A node behind a balancer may be on another fork than the one followed: a tag block within the
     * remembered window must have the hash followed, or nothing counts as final on this tick.
     */
    async finalHeight(tag, followed) {
      const block = (await o.rpc('eth_getBlockByNumber', [tag, false])) as {
        number?: unknown
        hash?: unknown
      } | null
      if (block == null) return -1n
      const number = parseQuantity(block.number, `${tag} block number`)
      const known = followed.recent.find((r) => r.number === number)
      if (known && known.hash !== block.hash) {
        logger?.info(
          `the ${tag} block is not on the chain followed; nothing is final on this tick`,
          { network: o.network, block: number.toString() },
        )
        return -1n
      }
      return number
    },

    halted: () => halted,
    replaced: () => replaced,
  }
}

const haltFields = (h: Halt) => ({
  windowFrom: h.windowFrom.toString(),
  windowTo: h.windowTo.toString(),
  head: h.head.toString(),
  resumeFrom: h.resumeFrom.toString(),
})
