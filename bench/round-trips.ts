/**
 * `bun bench/round-trips.ts`: database round trips per API request on PostgreSQL, and how they
 * change as one project's load grows tenfold and a hundredfold (1, 10 and 100 concurrent
 * connections of wrk). A small proxy in front of PostgreSQL counts what the service sends: every
 * `Sync` (the end of an extended-protocol statement; postgres.js sends one per statement, also
 * when it pipelines) and every simple `Query`. Background work (the lease, the dispatcher's poll)
 * runs during the rounds too: a round with nothing to do is measured first, and its rate is
 * taken off the others.
 *
 * Env: BENCH_SECONDS per round (default 5), DATABASE_URL (a PostgreSQL server; default
 * postgres://postgres@127.0.0.1:5432/test; a fresh database is created and dropped).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  createOne,
  liftRateLimits,
  startProcess,
  startService,
  stopProcess,
  wrk,
} from './harness.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'
const target = new URL(process.env.DATABASE_URL)

const work = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-round-trips-'))
const lua = join(work, 'post.lua')
writeFileSync(
  lua,
  `wrk.method = "POST"\nwrk.body = '{"amount": 25.5, "order_id": "bench"}'\nwrk.headers["Content-Type"] = "application/json"\n`,
)
const proxyProcess = await startProcess(['bench/pg-proxy.ts'], {
  PG_TARGET: `${target.hostname}:${target.port || 5432}`,
})
const proxyPort = Number(/"msg":"proxy","port":(\d+)/.exec(proxyProcess.stderr())![1])
const counted = async () =>
  Number(await (await fetch(`http://127.0.0.1:${proxyProcess.port}/count`)).text())
const svc = await startService('postgres', {}, (url) => {
  const u = new URL(url)
  u.hostname = '127.0.0.1'
  u.port = String(proxyPort)
  return u.toString()
})
const rows: string[] = []
try {
  liftRateLimits(svc)
  const id = createOne(svc)
  const auth = ['-H', `Authorization: Bearer ${svc.key}`]

  // What the service sends with no request at all, per second.
  const idleFrom = await counted()
  const idleStart = performance.now()
  await new Promise((r) => setTimeout(r, SECONDS * 1000))
  const idlePerSecond = ((await counted()) - idleFrom) / ((performance.now() - idleStart) / 1000)

  for (const [route, url, args] of [
    ['GET /api/transactions/{id}', `${svc.base}/api/transactions/${id}`, auth],
    ['POST /api/transactions/create', `${svc.base}/api/transactions/create`, [...auth, '-s', lua]],
  ] as const) {
    const cells: string[] = []
    for (const connections of [1, 10, 100]) {
      // Unmeasured first: connections opened, statements prepared.
      wrk(`${route} warm-up`, url, { seconds: 2, connections, extraArgs: [...args] })
      const from = await counted()
      const start = performance.now()
      const r = wrk(`${route} -c${connections}`, url, {
        seconds: SECONDS,
        connections,
        extraArgs: [...args],
      })
      const seconds = (performance.now() - start) / 1000
      const sent = (await counted()) - from - idlePerSecond * seconds
      cells.push(
        `${(sent / r.requests).toFixed(2)} (${Math.round(r.rps).toLocaleString('en')} req/s)`,
      )
    }
    rows.push(`| ${route} | ${cells.join(' | ')} |`)
  }
  console.log(
    `\n${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${SECONDS} s a round · background: ${idlePerSecond.toFixed(1)} statements/s, taken off\n`,
  )
  console.log(
    '| route | statements per request at 1 connection | at 10 | at 100 |\n| --- | ---: | ---: | ---: |',
  )
  for (const r of rows) console.log(r)
} finally {
  await svc.stop()
  await stopProcess(proxyProcess)
  rmSync(work, { recursive: true, force: true })
}
