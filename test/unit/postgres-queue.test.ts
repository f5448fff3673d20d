import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'

/**
 * The PostgreSQL driver's connection queue as installed: `npm ci` runs
 * scripts/patch-postgres-queue.mjs, which stops the pool's busy list from piling up holes that
 * every move of a connection scans (the cause of a pool slowing down the longer steady load
 * lasts; `npm run bench:db-pool`). The copies Bun (src) and Node (cjs) load must carry the
 * fix, and the fixed queue must still behave as the pool expects of it.
 */
const installed = (copy: string) => new URL(`../../node_modules/postgres/${copy}`, import.meta.url)

interface Queue<T> {
  readonly length: number
  push(x: T): T
  shift(): T | undefined
  remove(x: T): T | null
}

describe('postgres.js connection queue (as installed)', () => {
  test('the copies Bun and Node load carry the fix from scripts/patch-postgres-queue.mjs', () => {
    for (const copy of ['src/queue.js', 'cjs/src/queue.js']) {
      expect(readFileSync(installed(copy), 'utf8')).toContain('crypto-pay: queue holes fixed')
    }
  })

  test('it stays a first-in-first-out queue with removal, through many hand-outs while never empty', async () => {
    const { default: Queue } = (await import(installed('src/queue.js').href)) as {
      default: <T>(initial?: T[]) => Queue<T>
    }
    const q = Queue<number>()
    const model: number[] = []
    // A fixed pseudo-random walk: pushes outnumber shifts a little, removes hit live items, absent ones and the head.
    let seed = 7
    const next = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed)
    let counter = 0
    for (let i = 0; i < 20_000; i++) {
      const r = next() % 10
      if (r < 5 || model.length === 0) {
        q.push(++counter)
        model.push(counter)
      } else if (r < 9) {
        expect(q.shift()).toBe(model.shift()!)
      } else {
        const target = next() % 3 === 0 ? -1 : model[next() % model.length]!
        const at = model.indexOf(target)
        expect(q.remove(target)).toBe(at === -1 ? null : target)
        if (at !== -1) model.splice(at, 1)
      }
      expect(q.length).toBe(model.length)
    }
    expect(model.length).toBeGreaterThan(100)
    while (model.length) expect(q.shift()).toBe(model.shift()!)
    expect(q.length).toBe(0)
  })
})
