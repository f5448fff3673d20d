/**
 * `bun bench/pglite-statements.ts`: what PGlite's named statements (src/db/pglite-statements.ts)
 * save, and so what the fallback to PGlite's own `query` costs when a PGlite lacks the private
 * methods they use (docs/upstream/pglite.md). In process, one caller, an in-memory database:
 * a primary-key read and an insert, each run STATEMENTS times per round through both clients,
 * in alternating rounds so that drift of the machine falls on both alike; the median round is
 * kept.
 *
 * Env: BENCH_STATEMENTS per round (default 5,000), BENCH_ROUNDS (default 5).
 */
import { PGlite } from '@electric-sql/pglite'
import { withNamedStatements } from '../src/db/pglite-statements.ts'

const STATEMENTS = Number(process.env.BENCH_STATEMENTS ?? 5_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const CASES = {
  'primary-key read': {
    text: 'SELECT id, value, created_at FROM bench_rows WHERE id = $1',
    params: (i: number) => [String(i % 1_000)],
  },
  insert: {
    text: 'INSERT INTO bench_rows (id, value) VALUES ($1, $2) RETURNING created_at',
    params: (i: number) => [`n${i}-${Math.random()}`, 'x'.repeat(64)],
  },
}

async function open(named: boolean): Promise<PGlite> {
  const db = new PGlite()
  await db.waitReady
  await db.exec(`CREATE TABLE bench_rows (id text PRIMARY KEY, value text, created_at timestamptz DEFAULT now());
    INSERT INTO bench_rows (id, value) SELECT g::text, 'v' FROM generate_series(0, 999) g`)
  return named ? withNamedStatements(db) : db
}

const clients = {
  'named statements': await open(true),
  "fallback: PGlite's own query": await open(false),
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const rows: string[] = []
for (const [label, c] of Object.entries(CASES)) {
  const times: Record<string, number[]> = {}
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, db] of Object.entries(clients)) {
      const t0 = performance.now()
      for (let i = 0; i < STATEMENTS; i++) await db.query(c.text, c.params(i))
      ;(times[name] ??= []).push(((performance.now() - t0) * 1000) / STATEMENTS)
    }
  }
  const [named, fallback] = Object.values(times).map(median) as [number, number]
  rows.push(
    `| ${label} | ${named.toFixed(1)} | ${fallback.toFixed(1)} | ${(fallback / named).toFixed(2)}× |`,
  )
}
for (const db of Object.values(clients)) await db.close()
console.log(
  `\n${new Date().toISOString()} · Bun ${Bun.version} · ${STATEMENTS} statements a round, median of ${ROUNDS}\n`,
)
console.log(
  "| statement | named statements, µs | fallback (PGlite's own query), µs | fallback's cost |",
)
console.log('|---|---:|---:|---:|')
for (const r of rows) console.log(r)
