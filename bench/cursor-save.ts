/**
 * What the follower's cursor costs to write: `bun bench/cursor-save.ts` (about half a minute;
 * PostgreSQL too when DATABASE_URL is set, in a database of its own that it drops).
 *
 * The cursor is saved after every chunk of blocks, so once in step with the chain after every
 * block: its size bounds how many hashes a network may remember, and so its `confirmations`
 * (src/chain/networks-config.ts). For each window: the JSON text's size, `encodeCursor`'s time,
 * and `encodeCursor` + the upsert of src/chain/chain.repo.ts, one after another as the follower
 * does, on PGlite and PostgreSQL.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { Hex } from 'viem'
import { encodeCursor, type Cursor } from '../src/chain/follower/cursor.ts'
import { createChainRepo } from '../src/chain/chain.repo.ts'
import { openDatabase, type Database } from '../src/db/client.ts'

/** confirmations + 64: 64 (the 128 floor), 200, 1,000 (the bound), and beyond it. */
const WINDOWS = [128, 264, 1_064, 2_064, 5_064, 10_064]
const SAVES = 300
const HEIGHT = 25_000_000n

function cursorOf(size: number, height: bigint): Cursor {
  const recent = Array.from({ length: size }, (_, i) => ({
    number: height - BigInt(size - 1 - i),
    hash: `0x${randomBytes(32).toString('hex')}` as Hex,
  }))
  return { height, recent, genesis: `0x${randomBytes(32).toString('hex')}` as Hex }
}

const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!
const ms = (x: number) => x.toFixed(3)

async function measure(label: string, database: Database) {
  const repo = createChainRepo(database)
  for (const size of WINDOWS) {
    // Each save a new block's cursor: the window slid by one, as when following the head.
    const cursors = Array.from({ length: SAVES + 20 }, (_, i) => cursorOf(size, HEIGHT + BigInt(i)))
    const encodeTimes: number[] = []
    const saveTimes: number[] = []
    let bytes = 0
    for (let i = 0; i < cursors.length; i++) {
      const t0 = performance.now()
      const text = encodeCursor(cursors[i]!)
      const t1 = performance.now()
      await repo.saveCursor('bench', text, new Date())
      const t2 = performance.now()
      bytes = text.length
      if (i < 20) continue // warm-up
      encodeTimes.push(t1 - t0)
      saveTimes.push(t2 - t0)
    }
    const row = [
      `${label}, window ${size} (confirmations ${size - 64})`,
      (bytes / 1024).toFixed(1),
      ms(quantile(encodeTimes, 0.5)),
      ms(quantile(saveTimes, 0.5)),
      ms(quantile(saveTimes, 0.99)),
    ]
    console.error(`  ${row.join(' · ')}`)
    rows.push(row)
  }
}

const rows: string[][] = []

const dir = mkdtempSync(join(tmpdir(), 'cursor-bench-'))
try {
  const pglite = await openDatabase({ databaseUrl: null, pgliteDir: join(dir, 'pglite') })
  await measure('PGlite', pglite)
  await pglite.close()
} finally {
  rmSync(dir, { recursive: true, force: true })
}

if (process.env.DATABASE_URL) {
  const name = `cursor_bench_${randomBytes(4).toString('hex')}`
  const admin = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  const url = new URL(process.env.DATABASE_URL)
  url.pathname = `/${name}`
  try {
    const pg = await openDatabase({ databaseUrl: url.toString(), pgliteDir: null })
    await measure('PostgreSQL', pg)
    await pg.close()
  } finally {
    await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin.end()
  }
}

console.log(
  '| cursor | KiB | encodeCursor median ms | encode + save median ms | encode + save p99 ms |',
)
console.log('|---|---:|---:|---:|---:|')
for (const r of rows) console.log(`| ${r.join(' | ')} |`)
