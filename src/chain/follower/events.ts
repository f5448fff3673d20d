/** What a block follower tells its handler, in chain order. */
import type { Hex } from 'viem'
import type { Finding } from '../transfer-scan.ts'
import type { BlockRef } from './cursor.ts'

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
   * Highest validated canonical block; confirmations = number - blockNumber + 1. `final`: where the
   * network's safe or finalized block stands, when the network waits for one (never above
   * `number`).
   */
  | { type: 'head'; number: bigint; final?: bigint }

export type FollowerHandler = (event: FollowerEvent) => Promise<void> | void
