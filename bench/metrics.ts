/**
 * `bun bench/metrics.ts` (docs/decisions/0047-metrics-and-probes.md): the cost of metrics on the
 * GET hot path. Two services on the same database kind, one with METRICS=1 (the default: every
 * request counted and timed by route) and one with METRICS=0, measured in alternating wrk rounds
 * over HTTPS so that drift of the machine falls on both alike; the median round of each is
 * compared.
 *
 * Env: BENCH_SECONDS per round (default 5), BENCH_ROUNDS (4), BENCH_CONNECTIONS (32),
 * DATABASE_URL (PostgreSQL server; default postgres://postgres@127.0.0.1:5432/test).
 */
import { cpus, totalmem } from 'node:os'
import {
  alternateRounds,
  createOne,
  liftRateLimits,
  median,
  startService,
  type BenchService,
} from './harness.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
const pgServer = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
// The embedded run must not inherit a DATABASE_URL; the PostgreSQL run makes its own database on
// this server.
delete process.env.DATABASE_URL

async function prepared(
  backend: 'pglite' | 'postgres',
  metrics: '0' | '1',
): Promise<{ svc: BenchService; url: string }> {
  const svc = await startService(backend, { METRICS: metrics })
  liftRateLimits(svc)
  return { svc, url: `${svc.base}/api/transactions/${createOne(svc)}` }
}

const rows: string[] = []
for (const backend of ['pglite', 'postgres'] as const) {
  if (backend === 'postgres') process.env.DATABASE_URL = pgServer
  const on = await prepared(backend, '1')
  const off = await prepared(backend, '0')
  try {
    const target = (which: 'on' | 'off', t: { svc: BenchService; url: string }) => ({
      name: `GET (${backend}, metrics ${which})`,
      url: t.url,
      args: ['-H', `Authorization: Bearer ${t.svc.key}`],
    })
    const [onRounds, offRounds] = alternateRounds([target('on', on), target('off', off)], {
      rounds: ROUNDS,
      seconds: SECONDS,
      connections: CONNECTIONS,
    })
    const runs = { on: onRounds, off: offRounds }
    const m = { on: median(runs.on.map((r) => r.rps)), off: median(runs.off.map((r) => r.rps)) }
    const p99 = { on: median(runs.on.map((r) => r.p99)), off: median(runs.off.map((r) => r.p99)) }
    const errors = [...runs.on, ...runs.off].reduce((n, r) => n + r.errors, 0)
    rows.push(
      `| ${backend} | ${Math.round(m.off).toLocaleString('en')} | ${Math.round(m.on).toLocaleString('en')} | ${((m.on / m.off - 1) * 100).toFixed(1)}% | ${p99.off.toFixed(1)} / ${p99.on.toFixed(1)} | ${runs.on.map((r) => Math.round(r.rps)).join(', ')} vs ${runs.off.map((r) => Math.round(r.rps)).join(', ')} | ${errors} |`,
    )
  } finally {
    await on.svc.stop()
    await off.svc.stop()
  }
}

console.log(
  `\nMachine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GiB; wrk -t1 -c${CONNECTIONS}, ${ROUNDS} alternating rounds of ${SECONDS} s per setting\n`,
)
console.log(
  '| database | metrics off (req/s, median round) | metrics on | change | p99 ms off / on | rounds on vs off | errors |',
)
console.log('|---|---:|---:|---:|---:|---|---:|')
for (const r of rows) console.log(r)
