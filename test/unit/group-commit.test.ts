import { describe, expect, test } from 'bun:test'
import { createGroupCommit } from '../../src/db/group-commit.ts'

/** A stand-in database that records what ran alone and what ran in which transaction. */
function recording(opts: { failInTransaction?: string } = {}) {
  const log: string[][] = []
  let release: (() => void) | null = null
  const held = new Promise<void>((r) => (release = r))
  let first = true
  const db = {
    async query(text: string) {
      if (first) {
        first = false
        await held // the first write takes a while: others queue meanwhile
      }
      if (text === 'bad') throw new Error('unique violation')
      log.push([text])
      return [{ text }]
    },
    async transaction<T>(
      fn: (q: (t: string, p: unknown[]) => Promise<unknown[]>) => Promise<T>,
    ): Promise<T> {
      const inTx: string[] = []
      const r = await fn(async (text) => {
        if (text === 'bad' || text === opts.failInTransaction) throw new Error('unique violation')
        inTx.push(text)
        return [{ text }]
      })
      log.push(inTx)
      return r
    },
  }
  return { db: db as never, log, release: () => release!() }
}

describe('createGroupCommit()', () => {
  test('an idle write goes at once; writes queued meanwhile share one transaction, each gets its own rows', async () => {
    const r = recording()
    const g = createGroupCommit(r.db, 0)
    const first = g.query('a', [])
    const rest = ['b', 'c', 'd'].map((t) => g.query(t, []))
    r.release()
    expect(await first).toEqual([{ text: 'a' }])
    expect(await Promise.all(rest)).toEqual([[{ text: 'b' }], [{ text: 'c' }], [{ text: 'd' }]])
    expect(r.log).toEqual([['a'], ['b', 'c', 'd']])
  })

  test('a failing shared transaction is written again one by one: only the statement at fault fails', async () => {
    const r = recording()
    const g = createGroupCommit(r.db, 0)
    const first = g.query('a', [])
    const rest = ['b', 'bad', 'c'].map((t) =>
      g.query(t, []).then(
        (x) => x,
        (e: Error) => e.message,
      ),
    )
    r.release()
    await first
    expect(await Promise.all(rest)).toEqual([[{ text: 'b' }], 'unique violation', [{ text: 'c' }]])
    expect(r.log).toEqual([['a'], ['b'], ['c']])
  })

  test('under load a write waits for the gather window, and everything queued by then goes together', async () => {
    const r = recording()
    r.release()
    const g = createGroupCommit(r.db, 30)
    await g.query('a', [])
    const later = ['b', 'c'].map((t) => g.query(t, []))
    expect(r.log).toEqual([['a']])
    await Promise.all(later)
    expect(r.log).toEqual([['a'], ['b', 'c']])
  })
})
