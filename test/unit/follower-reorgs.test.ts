import { describe, expect, test } from 'bun:test'
import type { Hex } from 'viem'
import type { BlockRef } from '../../src/chain/follower/cursor.ts'
import {
  findForkPoint,
  haltOf,
  noLongerCanonical,
  recheckCandidates,
  rewindTo,
} from '../../src/chain/follower/reorgs.ts'

const hash = (fork: string, n: number) =>
  `0x${fork.repeat(2)}${n.toString(16).padStart(62, '0')}` as Hex
/** Remembered blocks from..to of chain `fork`. */
const chain = (fork: string, from: number, to: number): BlockRef[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({
    number: BigInt(from + i),
    hash: hash(fork, from + i),
  }))

/** A node serving chain `a` up to `forkAt`, chain `b` above it; records the ranges asked. */
function node(forkAt: number) {
  const asked: [bigint, bigint][] = []
  const canonicalIn = async (low: bigint, high: bigint) => {
    asked.push([low, high])
    const m = new Map<bigint, string>()
    for (let n = low; n <= high; n++) m.set(n, hash(Number(n) <= forkAt ? 'a' : 'b', Number(n)))
    return m
  }
  return { asked, canonicalIn }
}

describe('findForkPoint(): the newest remembered block still canonical', () => {
  test('a one-block reorg is found in the first small group, newest first', async () => {
    const n = node(199)
    expect(await findForkPoint(chain('a', 100, 200), 200n, 100, n.canonicalIn)).toBe(199n)
    expect(n.asked).toEqual([[193n, 200n]])
  })

  test('a deeper reorg walks back a batch at a time after the first group', async () => {
    const n = node(150)
    expect(await findForkPoint(chain('a', 100, 200), 200n, 20, n.canonicalIn)).toBe(150n)
    expect(n.asked).toEqual([
      [193n, 200n],
      [173n, 192n],
      [153n, 172n],
      [133n, 152n],
    ])
  })

  test('blocks above the head the node reports are not asked about', async () => {
    const n = node(197)
    expect(await findForkPoint(chain('a', 100, 200), 198n, 100, n.canonicalIn)).toBe(197n)
    expect(n.asked).toEqual([[191n, 198n]])
  })

  test('none canonical: null, after asking about every remembered block', async () => {
    const n = node(50)
    expect(await findForkPoint(chain('a', 100, 120), 120n, 100, n.canonicalIn)).toBeNull()
    expect(n.asked).toEqual([
      [113n, 120n],
      [100n, 112n],
    ])
  })
})

describe('rewindTo(): what a reorg does to the remembered window', () => {
  const recent = chain('a', 100, 110)

  test('a fork point inside the window: the blocks above it are removed, those below kept', () => {
    expect(rewindTo(recent, 50n, 107n)).toEqual({
      kind: 'rewind',
      forkPoint: 107n,
      removed: chain('a', 108, 110),
      kept: chain('a', 100, 107),
    })
  })

  test('no remembered block canonical, and the window reaches the first block followed: all of it removed, nothing halts', () => {
    expect(rewindTo(recent, 100n, null)).toEqual({
      kind: 'rewind',
      forkPoint: 99n,
      removed: recent,
      kept: [],
    })
  })

  test('no remembered block canonical, and blocks below the window were scanned: the network halts', () => {
    expect(rewindTo(recent, 90n, null)).toEqual({ kind: 'halt' })
    // A cursor older than `origin`: nothing is assumed about what lies below.
    expect(rewindTo(recent, undefined, null)).toEqual({ kind: 'halt' })
    expect(rewindTo([], 90n, null)).toEqual({ kind: 'halt' })
  })

  test('the remembered tip itself still canonical: the chain moved between two reads, not a reorg', () => {
    expect(rewindTo(recent, 50n, 110n)).toEqual({ kind: 'moved' })
  })
})

describe('haltOf(): the halt saved for a reorg deeper than the window', () => {
  test('names the window, the head, and one window lower to resume from', () => {
    expect(haltOf({ height: 300n, recent: chain('a', 173, 300) }, 305n, 128, 1_000)).toEqual({
      at: 1_000,
      windowFrom: 173n,
      windowTo: 300n,
      head: 305n,
      resumeFrom: 45n,
    })
  })

  test('never resumes below block 0; an empty window is the height alone', () => {
    expect(haltOf({ height: 60n, recent: [] }, 61n, 128, 5)).toEqual({
      at: 5,
      windowFrom: 60n,
      windowTo: 60n,
      head: 61n,
      resumeFrom: 0n,
    })
  })
})

describe('after a resume: what was recorded, checked against the chain', () => {
  test('recheckCandidates() takes recorded and remembered blocks from the start on, each once, hashes lowercase', () => {
    const upper = { number: 12n, hash: hash('a', 12).toUpperCase().replace('0X', '0x') as Hex }
    expect(recheckCandidates([upper, ...chain('c', 5, 5)], chain('a', 9, 13), 10n)).toEqual([
      { number: 12n, hash: hash('a', 12) },
      ...chain('c', 5, 5),
      ...chain('a', 10, 11),
      ...chain('a', 13, 13),
    ])
  })

  test('noLongerCanonical() keeps those whose hash is not the chain’s now (or that the node has no block for), lowest first', () => {
    const canonical = new Map<bigint, string>([
      [10n, hash('a', 10)],
      [11n, hash('b', 11)],
    ])
    expect(
      noLongerCanonical(
        [...chain('a', 12, 12), ...chain('a', 11, 11), ...chain('a', 10, 10)],
        canonical,
      ),
    ).toEqual([...chain('a', 11, 11), ...chain('a', 12, 12)])
  })
})
