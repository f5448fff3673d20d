/**
 * `npm run bench:db-pool`: the PostgreSQL driver's pool under steady load. Callers each send one
 * prepared primary key read after another through a pool of 10 connections, for BENCH_SECONDS
 * (default 10); the rate is printed for every 2 s window with the client's CPU per statement.
 *
 * Why it exists: as shipped, postgres.js 3.4.9 hands a statement that finds every connection
 * busy to the first one of the pool's `busy` list, from a queue (src/queue.js) that leaves a
 * hole for every item it hands out, drops the holes only when it hands out the last item, and
 * scans them on every removal. A connection that can take more goes straight back on the list,
 * so under steady load it never empties and the rate falls the longer the load lasts (32
 * callers: ~50,000 to ~15,000 statements/s within 10 s). `npm ci` fixes the queue
 * (patches/postgres+3.4.9.patch); run this after `npx patch-package --reverse` to see the fall. The
 * second setting, `max_pipeline: 1`, is the other way around it (a connection handed out is then
 * full and leaves the list): steady too, but a busy connection gets no new statement until it
 * has finished both it holds, which cost ~18% of the actor transitions per second
 * (bench/actors.ts), so the service keeps the default.
 *
 * Env: BENCH_SECONDS (10), DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test; a fresh
 * database is created and dropped).
 */
import postgres from 'postgres'
import { installedQueueUrl, queueIsFixed } from '../src/db/postgres-queue-check.ts'
import { cpus } from 'node:os'

process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'
const { freshPostgres } = await import('../test/helpers/databases.ts')
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const WINDOW_MS = 2000
const READ = 'SELECT * FROM pool_bench WHERE id = $1'

interface Run {
  name: string
  callers: number
  windows: number[]
  cpuPerStatement: number
}

async function run(
  name: string,
  callers: number,
  url: string,
  options: postgres.Options<Record<string, never>>,
): Promise<Run> {
  const sql = postgres(url, { max: 10, onnotice: () => {}, ...options })
  const send = () => sql.unsafe(READ, ['1'], { prepare: true })
  await send()
  let n = 0
  let stop = false
  const windows: number[] = []
  const cpu0 = process.cpuUsage()
  let lastN = 0
  const timer = setInterval(
    () => (windows.push(((n - lastN) * 1000) / WINDOW_MS), (lastN = n)),
    WINDOW_MS,
  )
  const loops = Array.from({ length: callers }, async () => {
    while (!stop) await send().then(() => n++)
  })
  await new Promise((r) => setTimeout(r, SECONDS * 1000 + 50))
  stop = true
  clearInterval(timer)
  await Promise.all(loops)
  const cpu = process.cpuUsage(cpu0)
  await sql.end({ timeout: 5 })
  const result = { name, callers, windows, cpuPerStatement: (cpu.user + cpu.system) / n }
  console.error(
    `${name}, ${callers} callers: ${windows.map((w) => Math.round(w)).join(', ')} statements/s; ${result.cpuPerStatement.toFixed(1)} µs client CPU per statement`,
  )
  return result
}

const db = await freshPostgres()
try {
  const admin = postgres(db.url, { max: 1, onnotice: () => {} })
  await admin.unsafe(
    `CREATE TABLE pool_bench (id text PRIMARY KEY, value text); INSERT INTO pool_bench VALUES ('1', 'x')`,
  )
  await admin.end()
  // The driver reads `max_pipeline`, but its type declarations leave it out.
  const single = { max_pipeline: 1 } as postgres.Options<Record<string, never>>
  const fixed = await queueIsFixed(installedQueueUrl())
  const pool = `pool, max_pipeline 100 (default; queue ${fixed ? 'fixed' : 'NOT fixed'})`
  const runs: Run[] = []
  for (const callers of [12, 32, 100]) {
    runs.push(await run(pool, callers, db.url, {}))
    runs.push(await run('pool, max_pipeline 1', callers, db.url, single))
  }
  console.log(
    `\n${new Date().toISOString()} · Bun ${Bun.version} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · a pool of 10 connections, ${SECONDS} s per run\n`,
  )
  console.log(
    `| pool | callers | statements/s in each ${WINDOW_MS / 1000} s window | client µs CPU per statement |`,
  )
  console.log('|---|---:|---|---:|')
  for (const r of runs)
    console.log(
      `| ${r.name} | ${r.callers} | ${r.windows.map((w) => Math.round(w).toLocaleString('en')).join(' → ')} | ${r.cpuPerStatement.toFixed(1)} |`,
    )
} finally {
  await db.drop()
}
