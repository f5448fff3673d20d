import { describe, expect, test } from 'bun:test'
import { spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import {
  assertPostgresQueueFixed,
  installedQueueUrl,
  queueIsFixed,
} from '../../src/db/postgres-queue-check.ts'

/**
 * The PostgreSQL driver's connection queue as installed: `npm ci` applies
 * patches/postgres+3.4.9.patch (patch-package), which stops the pool's busy list from piling up
 * holes that every move of a connection scans (the cause of a pool slowing down the longer
 * steady load lasts; `npm run bench:db-pool`). Every copy the runtimes load must carry the fix,
 * the start-up check must tell a fixed queue from one as shipped, and the fixed queue must still
 * behave as the pool expects of it.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const PATCH = join(ROOT, 'patches/postgres+3.4.9.patch')
const COPIES = ['src/queue.js', 'cjs/src/queue.js', 'cf/src/queue.js']
const installed = (copy: string) => new URL(`../../node_modules/postgres/${copy}`, import.meta.url)

interface Queue<T> {
  readonly length: number
  push(x: T): T
  shift(): T | undefined
  remove(x: T): T | null
}

describe('the start-up check of the driver queue', () => {
  test('the copy this runtime loads is the one the check asks', () => {
    expect(installedQueueUrl()).toBe(installed('src/queue.js').href)
  })

  test('every copy the runtimes load (Bun and Deno: src, Node: cjs, Cloudflare: cf) has the fix', async () => {
    for (const copy of COPIES) expect(await queueIsFixed(installed(copy).href), copy).toBe(true)
    expect(await assertPostgresQueueFixed()).toBeUndefined()
  })

  test('refuses the queue as shipped (the patch taken back out), naming the fix and `npm ci`', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'postgres-queue-'))
    try {
      for (const copy of COPIES)
        cpSync(fileURLToPath(installed(copy)), join(dir, 'node_modules/postgres', copy))
      const reversed = spawnSync('git', ['apply', '--reverse', PATCH], { cwd: dir })
      expect({ status: reversed.status, stderr: reversed.stderr.toString() }).toEqual({
        status: 0,
        stderr: '',
      })
      const shipped = pathToFileURL(join(dir, 'node_modules/postgres/src/queue.js')).href
      expect(await queueIsFixed(shipped)).toBe(false)
      const refused = await assertPostgresQueueFixed(shipped).then(
        () => null,
        (e: Error) => e.message,
      )
      expect(refused).toContain('npm ci')
      expect(refused).toContain('patches/postgres+3.4.9.patch')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('postgres.js connection queue (as installed)', () => {
  test('it stays a first-in-first-out queue with removal, through many hand-outs while never empty', async () => {
    const { default: Queue } = (await import(installed('src/queue.js').href)) as {
      default: <T>(initial?: T[]) => Queue<T>
    }
    const q = Queue<number>()
    const model: number[] = []
    // A fixed pseudo-random walk: pushes outnumber shifts a little, removes hit live items, absent
    // ones and the head.
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
