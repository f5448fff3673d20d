/**
 * Where a block follower stands, as kept in the database (`chain_cursors`, JSON text): the last
 * processed height, the window of recent canonical hashes it detects reorgs with, and, when a
 * reorg went deeper than that window, the halt that keeps the network still until an operator
 * resumes it (`npm run cli -- network resume`).
 *
 * The window is what finality rests on: a payment completes after `confirmations` blocks, so
 * every block that can still hold an uncompleted payment must be remembered, or a reorg that
 * takes it away cannot be told from one that does not. A reorg deeper than the window stops the
 * network (see reorgs.ts) rather than assume the blocks below it are canonical.
 */
import type { Hex } from 'viem'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'

export interface BlockRef {
  number: bigint
  hash: Hex
}

/**
 * A reorg reached below every remembered block: the network is not followed until an operator
 * resumes it.
 */
export interface Halt {
  /** When it was found (epoch ms). */
  at: number
  /** The window remembered then: none of these blocks was canonical any more. */
  windowFrom: bigint
  windowTo: bigint
  /** The head the RPC reported then. */
  head: bigint
  /** Where `network resume` re-checks from unless told otherwise: one window below `windowFrom`. */
  resumeFrom: bigint
}

/** The last processed height and the recent canonical hashes (ascending, ends at `height`). */
export interface Cursor {
  height: bigint
  recent: BlockRef[]
  /**
   * Hash of block 0 of the chain followed: another one behind the same RPC is another chain, not a
   * reorg.
   */
  genesis?: Hex
  /**
   * The first height followed with this cursor (its first start at the head): nothing below it
   * was scanned, so a reorg reaching below it takes nothing away that was recorded. Absent in
   * cursors older than this field: then nothing is assumed.
   */
  origin?: bigint
  halted?: Halt
  /**
   * Set by `network resume`: the follower re-checks what it recorded from this height on, then
   * scans from there again.
   */
  recheckFrom?: bigint
}

export interface CursorStore {
  load(): Promise<Cursor | null>
  save(cursor: Cursor): Promise<void>
}

/**
 * The highest `confirmations` a network may ask for. The cursor is written after every block
 * once the follower is in step, and its window grows with `confirmations`; at 1,000 it holds
 * 1,064 hashes, 85 KiB of JSON, and `encodeCursor` + the upsert take 3.5-4.0 ms (median of
 * 300; p99 7-16 ms) on PGlite and on PostgreSQL on a 2-core machine, where 10,000 would be
 * 806 KiB and 30-47 ms a block (`bun bench/cursor-save.ts`, two runs). 1,000 is four times
 * the deepest preset (256).
 */
export const MAX_CONFIRMATIONS = 1_000
/**
 * Hashes remembered beyond `confirmations`, so a reorg a little deeper than them still finds its
 * fork point.
 */
export const WINDOW_MARGIN = 64
/** The fewest hashes remembered, whatever `confirmations` says. */
export const MIN_WINDOW = 128

/** How many recent hashes a network with `confirmations` remembers. */
export const windowFor = (confirmations: number) =>
  Math.max(MIN_WINDOW, confirmations + WINDOW_MARGIN)
/** The most any follower remembers (the cursor size measured above). */
export const MAX_WINDOW = windowFor(MAX_CONFIRMATIONS)

/** The operator command that ends a halt. */
export const resumeCommand = (network: string) =>
  `npm run cli -- network resume --network ${network}`

/** What an operator on call reads about a halt (log, readiness). */
export function describeHalt(network: string, h: Halt): string {
  const remembered = h.windowTo - h.windowFrom + 1n
  return (
    `halted since ${new Date(h.at).toISOString()}: a reorg went deeper than the ${remembered} blocks remembered ` +
    `(${h.windowFrom}-${h.windowTo}, none of them on the chain any more; head ${h.head}), so payments on it neither complete nor are taken back. ` +
    `Check the chain (an explorer, another node), then run: ${resumeCommand(network)} ` +
    `(re-checks what was recorded from block ${h.resumeFrom} on against the chain; --from-block N to go further back)`
  )
}

/**
 * The cursor a halted network resumes with: the halt gone, and what was recorded from `from`
 * (default: the halt's `resumeFrom`) on to be checked again. Refusals are values.
 */
export function resumeCursor(
  cursor: Cursor | null,
  network: string,
  from?: bigint,
): Outcome<{ cursor: Cursor; from: bigint; halt: Halt }> {
  const halt = cursor?.halted
  if (!cursor || !halt)
    return deny('conflict', `Network ${network} is not halted: nothing to resume`)
  const start = from ?? halt.resumeFrom
  if (start < 0n) return deny('invalid_request', '--from-block must be a block number (0 or more)')
  // The fork is below the lowest block remembered: re-checking from above it would keep what it
  // removed.
  if (start > halt.windowFrom) {
    return deny(
      'invalid_request',
      `--from-block must be at most ${halt.windowFrom}: that block, the lowest remembered at the halt, is no longer on the chain, so the fork is below it`,
    )
  }
  const { halted: _, ...rest } = cursor
  return ok({ cursor: { ...rest, recheckFrom: start }, from: start, halt })
}

/** An in-memory CursorStore (tests, and a node that may rescan from head after a restart). */
export function memoryCursorStore(
  initial: Cursor | null = null,
): CursorStore & { current(): Cursor | null } {
  let saved = initial && cloneCursor(initial)
  return {
    load: async () => saved && cloneCursor(saved),
    save: async (c) => {
      saved = cloneCursor(c)
    },
    current: () => saved,
  }
}

/** JSON text for a database column (bigints as decimal strings). */
export function encodeCursor(cursor: Cursor): string {
  const h = cursor.halted
  return JSON.stringify({
    height: cursor.height.toString(),
    recent: cursor.recent.map((r) => [r.number.toString(), r.hash]),
    ...(cursor.genesis ? { genesis: cursor.genesis } : {}),
    ...(cursor.origin !== undefined ? { origin: cursor.origin.toString() } : {}),
    ...(h
      ? {
          halted: {
            at: h.at,
            windowFrom: h.windowFrom.toString(),
            windowTo: h.windowTo.toString(),
            head: h.head.toString(),
            resumeFrom: h.resumeFrom.toString(),
          },
        }
      : {}),
    ...(cursor.recheckFrom !== undefined ? { recheckFrom: cursor.recheckFrom.toString() } : {}),
  })
}

/** Parses `encodeCursor` output; throws on anything else rather than follow a wrong chain. */
export function decodeCursor(text: string): Cursor {
  const v = JSON.parse(text) as {
    height?: unknown
    recent?: unknown
    genesis?: unknown
    origin?: unknown
    halted?: unknown
    recheckFrom?: unknown
  }
  if (typeof v.height !== 'string' || !/^-?\d+$/.test(v.height) || !Array.isArray(v.recent))
    throw new Error('malformed cursor')
  if (v.genesis !== undefined && (typeof v.genesis !== 'string' || !HASH.test(v.genesis)))
    throw new Error('malformed cursor genesis')
  const recent = v.recent.map((e: unknown) => {
    if (
      !Array.isArray(e) ||
      typeof e[0] !== 'string' ||
      !/^\d+$/.test(e[0]) ||
      typeof e[1] !== 'string' ||
      !HASH.test(e[1])
    ) {
      throw new Error('malformed cursor entry')
    }
    return { number: BigInt(e[0]), hash: e[1] as Hex }
  })
  return {
    height: BigInt(v.height),
    recent,
    ...(v.genesis ? { genesis: v.genesis as Hex } : {}),
    ...(v.origin !== undefined ? { origin: height(v.origin, 'origin') } : {}),
    ...(v.halted !== undefined ? { halted: decodeHalt(v.halted) } : {}),
    ...(v.recheckFrom !== undefined ? { recheckFrom: height(v.recheckFrom, 'recheckFrom') } : {}),
  }
}

/**
 * The `halted` member of an encoded cursor (read apart from the rest where only the halt matters).
 */
export function decodeHalt(value: unknown): Halt {
  const h = value as Record<string, unknown> | null
  if (typeof h !== 'object' || h === null || typeof h.at !== 'number' || !Number.isFinite(h.at))
    throw new Error('malformed cursor halt')
  return {
    at: h.at,
    windowFrom: height(h.windowFrom, 'halt'),
    windowTo: height(h.windowTo, 'halt'),
    head: height(h.head, 'halt'),
    resumeFrom: height(h.resumeFrom, 'halt'),
  }
}

export const cloneCursor = (c: Cursor): Cursor => ({
  ...c,
  recent: c.recent.map((r) => ({ ...r })),
  ...(c.halted ? { halted: { ...c.halted } } : {}),
})

const HASH = /^0x[0-9a-fA-F]{64}$/

function height(value: unknown, what: string): bigint {
  if (typeof value !== 'string' || !/^\d+$/.test(value)) throw new Error(`malformed cursor ${what}`)
  return BigInt(value)
}
