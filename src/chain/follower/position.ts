/**
 * Where one follower stands: the cursor as last loaded or saved, the genesis hash checked against
 * it, and where the node last said its safe / finalized block was. Only this module changes them;
 * the rest of the follower reads them and asks for a save.
 */
import type { Hex } from 'viem'
import { MAX_WINDOW, type BlockRef, type Cursor, type CursorStore, type Halt } from './cursor.ts'

export interface Position {
  /** The cursor as loaded or last saved; null before the first block. */
  cursor(): Cursor | null
  /** Reads the stored cursor unless it was read since the last `reload()`. */
  load(): Promise<void>
  /**
   * The stored cursor is read again at the next `load()` (it may have been changed elsewhere: a
   * resume, a forget).
   */
  reload(): void
  /** Block 0's hash once checked against the cursor since it was loaded; null until then. */
  genesis(): Hex | null
  genesisChecked(hash: Hex): void
  /** Saves where the follower stands; a halt or a resume request is never carried on by it. */
  commit(next: Cursor): Promise<void>
  /** Saves the halt (so a restart, or another instance, stays halted); read again next tick. */
  saveHalt(halt: Halt): Promise<void>
  /** Where the node said its safe / finalized block stands: the window reaches down to it. */
  finalAt(height: bigint): void
  /** The cursor after the blocks `added` on top of `base`, its window trimmed to what is kept. */
  advance(base: Cursor, added: readonly BlockRef[]): Cursor
}

export function createPosition(o: {
  store: CursorStore
  /** Hashes kept at least (`windowFor(confirmations)`). */
  windowSize: number
  /** On a network that waits for its safe / finalized block, the window also reaches down to it. */
  waitsForFinal: boolean
}): Position {
  let cursor: Cursor | null = null
  let loaded = false
  let genesis: Hex | null = null
  let lastFinal: bigint | null = null

  /**
   * Hashes kept at `height`: the window; on a network that waits for its safe / finalized block,
   * also back to that block (at most MAX_WINDOW, the size the cursor was measured at), so a reorg
   * of blocks not final yet finds its fork point instead of halting the network, and the tag
   * block is checked against the chain followed. Until the node has said where that block is
   * (after a restart), what is there is kept.
   */
  const kept = (height: bigint, have: number) =>
    windowLength(
      { windowSize: o.windowSize, waitsForFinal: o.waitsForFinal, lastFinal },
      height,
      have,
    )

  return {
    cursor: () => cursor,
    async load() {
      if (loaded) return
      cursor = await o.store.load()
      loaded = true
      genesis = null
    },
    reload() {
      loaded = false
    },
    genesis: () => genesis,
    genesisChecked(hash) {
      genesis = hash
    },
    async commit(next) {
      const g = genesis ?? next.genesis
      const origin = next.origin ?? cursor?.origin
      const full: Cursor = {
        height: next.height,
        recent: next.recent,
        ...(g ? { genesis: g } : {}),
        ...(origin !== undefined ? { origin } : {}),
      }
      await o.store.save(full)
      cursor = full
    },
    async saveHalt(halt) {
      const saved: Cursor = { ...cursor!, ...(genesis ? { genesis } : {}), halted: halt }
      await o.store.save(saved)
      cursor = saved
      loaded = false
    },
    finalAt(height) {
      lastFinal = height
    },
    advance(base, added) {
      const recent = [...base.recent, ...added]
      const height = added.at(-1)?.number ?? base.height
      return {
        height,
        recent: recent.slice(-kept(height, recent.length)),
        ...(base.origin !== undefined ? { origin: base.origin } : {}),
      }
    },
  }
}

/** How many hashes a cursor at `height` keeps (see `kept` above). */
export function windowLength(
  o: { windowSize: number; waitsForFinal: boolean; lastFinal: bigint | null },
  height: bigint,
  have: number,
): number {
  if (!o.waitsForFinal) return o.windowSize
  const toFinal = o.lastFinal === null ? have : Number(height - o.lastFinal + 1n)
  return Math.max(o.windowSize, Math.min(MAX_WINDOW, toFinal))
}
