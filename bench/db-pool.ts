/**
 * `bun bench/db-pool.ts`: the PostgreSQL driver's pool under steady load, with its default and
 * with the setting src/db/client.ts uses (`max_pipeline: 1`). Callers each send one prepared
 * primary key read after another through a pool of 10 connections, for BENCH_SECONDS (default
 * 10), and the rate is printed for every 2 s window with the client's CPU per statement.
 *
 * Why it exists: with the default (`max_pipeline: 100`) a statement that finds every connection
 * busy is sent on the first one of the pool's `busy` list. That list's queue (postgres.js 3.4.9,
 * src/queue.js) leaves a hole for every connection it hands out and drops the holes only when a
 * hand-out empties it; every move of a connection between lists scans them. A connection that
 * can still take more goes straight back on the list, so under steady load it never empties and
 * the rate falls the longer the load lasts. With `max_pipeline: 1` a connection handed out is
 * full and leaves the list, so the list keeps emptying. (0, no pipelining at all, would keep
 * every statement out of the list too, but the driver's `sql.begin` fails with it.)
 *
 * Env: BENCH_SECONDS (10), DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test; a fresh
 * database is created and dropped).
 */
import postgres from 'postgres'
import { cpus } from 'node:os'

process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'
const { freshPostgres } = await import('../test/helpers/databases.ts')
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const WINDOW_MS = 2000

interface Run { name: string; callers: number; windows: number[]; total: number; cpuPerStatement: number }

async function run(name: string, callers: number, url: string, setup: (sql: postgres.Sql) => Promise<(text: string, params: string[]) => Promise<unknown>>, options: postgres.Options<{}>): Promise<Run> {
  const sql = postgres(url, { max: 10, onnotice: () => {}, ...options })
  const send = await setup(sql)
  await send('SELECT * FROM pool_bench WHERE id = $1', ['1'])
  let n = 0
  let stop = false
  const windows: number[] = []
  const cpu0 = process.cpuUsage()
  let lastN = 0
  const timer = setInterval(() => (windows.push(((n - lastN) * 1000) / WINDOW_MS), (lastN = n)), WINDOW_MS)
  const loops = Array.from({ length: callers }, async () => {
    while (!stop) await send('SELECT * FROM pool_bench WHERE id = $1', ['1']).then(() => n++)
  })
  await new Promise((r) => setTimeout(r, SECONDS * 1000 + 50))
  stop = true
  clearInterval(timer)
  await Promise.all(loops)
  const cpu = process.cpuUsage(cpu0)
  await sql.end({ timeout: 5 })
  const result = { name, callers, windows, total: n, cpuPerStatement: (cpu.user + cpu.system) / n }
  console.error(`${name}, ${callers} callers: ${windows.map((w) => Math.round(w)).join(', ')} statements/s; ${result.cpuPerStatement.toFixed(1)} µs client CPU per statement`)
  return result
}

const db = await freshPostgres()
try {
  const admin = postgres(db.url, { max: 1, onnotice: () => {} })
  await admin.unsafe(`CREATE TABLE pool_bench (id text PRIMARY KEY, value text); INSERT INTO pool_bench VALUES ('1', 'x')`)
  await admin.end()
  const pooled = async (sql: postgres.Sql) => (text: string, params: string[]) => sql.unsafe(text, params, { prepare: true })
  // The driver reads `max_pipeline`, but its type declarations leave it out.
  const service = { max_pipeline: 1 } as postgres.Options<{}>
  const runs = [
    await run('pool, postgres.js default (max_pipeline 100)', 32, db.url, pooled, {}),
    await run('pool, max_pipeline 1 (the service)', 32, db.url, pooled, service),
    await run('pool, postgres.js default (max_pipeline 100)', 12, db.url, pooled, {}),
    await run('pool, max_pipeline 1 (the service)', 12, db.url, pooled, service),
    await run('pool, max_pipeline 1 (the service)', 100, db.url, pooled, service),
  ]
  console.log(`\n${new Date().toISOString()} · Bun ${Bun.version} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · a pool of 10 connections, ${SECONDS} s per run\n`)
  console.log(`| pool | callers | statements/s in each ${WINDOW_MS / 1000} s window | client µs CPU per statement |`)
  console.log('|---|---:|---|---:|')
  for (const r of runs) console.log(`| ${r.name} | ${r.callers} | ${r.windows.map((w) => Math.round(w).toLocaleString('en')).join(' → ')} | ${r.cpuPerStatement.toFixed(1)} |`)
} finally {
  await db.drop()
}
