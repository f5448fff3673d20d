/**
 * `npm run bench`: throughput and latency of GET /api/transactions/{id} and POST
 * /api/transactions/create over HTTPS on Bun, on PGlite and on PostgreSQL, each against its floor
 * in the same run: a bare Elysia app doing one statement per request on the same database
 * (bench/floor-server.ts: GET one key read, POST one insert), and the same floor after the rate
 * limit every API request must pass (docs/decisions/0023-rate-limits-exact.md, exact across
 * instances: the service's own limiter), the most the service could reach; for create also the rate
 * limit plus the service's own create statement (four rows in one statement). They run side by side
 * and are measured in alternating wrk rounds (the order reverses every round), so the machine's
 * drift falls on all alike; the median round of each is compared. A bare Elysia JSON route with no
 * database is measured too, for scale.
 *
 * Env: BENCH_SECONDS per round (default 5), BENCH_ROUNDS (3), BENCH_WARMUP (10 s of unmeasured
 * load on each target first, bench/harness.ts), BENCH_CONNECTIONS (32),
 * DATABASE_URL (PostgreSQL server; default postgres://postgres@127.0.0.1:5432/test; fresh
 * databases are created and dropped), BENCH_DATABASES (`pglite,postgres`: which to measure).
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import {
  alternateRounds,
  createOne,
  liftRateLimits,
  median,
  medianRound,
  startProcess,
  startService,
  stopProcess,
  wrk,
  type BenchProcess,
  type BenchService,
  type WrkResult,
  type WrkTarget,
  selfSignedTls,
} from './harness.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
const pgServer = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
delete process.env.DATABASE_URL
/** Targets as fractions of the floor (docs/decisions/0053-speed-measured-against-a-floor.md). */
const TARGETS = { pglite: { get: 0.6, create: 0.4 }, postgres: { get: 0.8, create: 0.5 } } as const

const work = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-http-'))
const lua = join(work, 'post.lua')
const BODY = '{"amount": 25.5, "order_id": "bench", "metadata": {"k": "v"}}'
writeFileSync(
  lua,
  `wrk.method = "POST"\nwrk.body = '${BODY}'\nwrk.headers["Content-Type"] = "application/json"\n`,
)
const tls = await selfSignedTls(work)

const run = (t: WrkTarget) =>
  wrk(t.name, t.url, { seconds: SECONDS, connections: CONNECTIONS, extraArgs: t.args })

/** Alternating rounds of the targets; the median round of each. */
function alternate(...targets: WrkTarget[]): WrkResult[] {
  return alternateRounds(targets, {
    rounds: ROUNDS,
    seconds: SECONDS,
    connections: CONNECTIONS,
  }).map((rounds, i) => medianRound(targets[i]!.name, rounds))
}

/**
 * `limited`: the floor after the rate limit the contract asks of every API request
 * (bench/floor-server.ts).
 */
interface Row {
  backend: string
  route: 'get' | 'create'
  service: WrkResult
  floor: WrkResult
  limited: WrkResult
  statement?: WrkResult
}
const rows: Row[] = []
let bareRps = 0

const bare = await startProcess(['bench/bare-server.ts'], tls)
try {
  bareRps = median(
    Array.from(
      { length: ROUNDS },
      () =>
        run({ name: 'bare Elysia GET', url: `https://127.0.0.1:${bare.port}/bare`, args: [] }).rps,
    ),
  )
} finally {
  await stopProcess(bare)
}

const BACKENDS = (['pglite', 'postgres'] as const).filter((b) =>
  (process.env.BENCH_DATABASES ?? 'pglite,postgres').split(',').includes(b),
)
for (const backend of BACKENDS) {
  if (backend === 'postgres') process.env.DATABASE_URL = pgServer
  let svc: BenchService | null = null
  let floor: BenchProcess | null = null
  let floorDb: { drop(): Promise<void> } | null = null
  const floorDir = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-floor-'))
  try {
    svc = await startService(backend)
    liftRateLimits(svc)
    const id = createOne(svc)
    let floorEnv: Record<string, string> = { ...tls, DATA_DIR: floorDir }
    if (backend === 'postgres') {
      const { freshPostgres } = await import('../test/helpers/databases.ts')
      const pg = await freshPostgres()
      floorDb = pg
      floorEnv = { ...tls, DATABASE_URL: pg.url }
    }
    floor = await startProcess(['bench/floor-server.ts'], floorEnv)
    const seed = /"seed":"([^"]+)"/.exec(floor.stderr())![1]
    const auth = ['-H', `Authorization: Bearer ${svc.key}`]
    const floorBase = `https://127.0.0.1:${floor.port}`
    const [getS, getF, getL] = alternate(
      {
        name: `GET /api/transactions/{id} (${backend})`,
        url: `${svc.base}/api/transactions/${id}`,
        args: auth,
      },
      { name: `floor GET (${backend})`, url: `${floorBase}/floor/${seed}`, args: [] },
      {
        name: `floor + rate limit GET (${backend})`,
        url: `${floorBase}/limited/${seed}`,
        args: [],
      },
    )
    rows.push({ backend, route: 'get', service: getS!, floor: getF!, limited: getL! })
    const [postS, postF, postL, postC] = alternate(
      {
        name: `POST /api/transactions/create (${backend})`,
        url: `${svc.base}/api/transactions/create`,
        args: [...auth, '-s', lua],
      },
      { name: `floor POST (${backend})`, url: `${floorBase}/floor`, args: ['-s', lua] },
      {
        name: `floor + rate limit POST (${backend})`,
        url: `${floorBase}/limited`,
        args: ['-s', lua],
      },
      {
        name: `rate limit + create statement (${backend})`,
        url: `${floorBase}/limited/create`,
        args: ['-s', lua],
      },
    )
    rows.push({
      backend,
      route: 'create',
      service: postS!,
      floor: postF!,
      limited: postL!,
      statement: postC!,
    })
  } finally {
    await stopProcess(floor)
    await svc?.stop()
    await floorDb?.drop()
    rmSync(floorDir, { recursive: true, force: true })
  }
}
rmSync(work, { recursive: true, force: true })

const bunVersion = spawnSync(process.execPath, ['--version'], { encoding: 'utf8' }).stdout.trim()
const fmt = (n: number) => Math.round(n).toLocaleString('en')
console.log(
  `\n${new Date().toISOString()} · Bun ${bunVersion} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · wrk -t1 -c${CONNECTIONS}, ${ROUNDS} alternating rounds of ${SECONDS} s, HTTPS keep-alive, medians\n`,
)
console.log(`Bare Elysia JSON route, no database: ${fmt(bareRps)} req/s.\n`)
console.log(
  '| route | database | service req/s | p50 / p99 ms | floor req/s | floor p50 / p99 ms | vs floor | target | floor + rate limit | + create statement | service vs the last of these | vs bare | non-2xx |',
)
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for (const r of rows) {
  const ratio = r.service.rps / r.floor.rps
  const target = TARGETS[r.backend as keyof typeof TARGETS][r.route]
  const pct = (a: number, b: number) => `${((100 * a) / b).toFixed(1)}%`
  /** req/s, and its share of the floor's. */
  const ceiling = (x: WrkResult | undefined) =>
    x ? `${fmt(x.rps)} (${pct(x.rps, r.floor.rps)})` : '–'
  const last = r.statement ?? r.limited
  console.log(
    `| ${r.route === 'get' ? 'GET /api/transactions/{id}' : 'POST /api/transactions/create'} | ${r.backend === 'pglite' ? 'PGlite' : 'PostgreSQL'} | ${fmt(r.service.rps)} | ${r.service.p50.toFixed(2)} / ${r.service.p99.toFixed(2)} | ${fmt(r.floor.rps)} | ${r.floor.p50.toFixed(2)} / ${r.floor.p99.toFixed(2)} | **${(100 * ratio).toFixed(1)}%** ${ratio >= target ? '✓' : '✗'} | ${100 * target}% | ${ceiling(r.limited)} | ${ceiling(r.statement)} | ${pct(r.service.rps, last.rps)} | ${pct(r.service.rps, bareRps)} | ${[r.service, r.floor, r.limited, r.statement].reduce((e, x) => e + (x?.errors ?? 0), 0)} |`,
  )
}
