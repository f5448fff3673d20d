/**
 * `bun bench/commerce.ts`: the Coinbase Commerce API's reads against the native API's on the same
 * service and the same rows (docs/decisions/0065-coinbase-commerce-drop-in.md). The native read is
 * the floor (docs/decisions/0053-speed-measured-against-a-floor.md): a charge is a transaction
 * rendered another way, so what the Commerce read costs above it is the rendering (the timeline,
 * the transfers and the offered tokens' prices from the 30 s price board, never a chain read per
 * charge). Measured: one charge (`GET /commerce/charges/{id}` against `GET
 * /api/transactions/{id}`) and a page of 100 (`GET /commerce/charges?limit=100` against `GET
 * /api/transactions/project/{id}?limit=100`), over BENCH_CHARGES charges made through the
 * Commerce API, in alternating wrk rounds (bench/harness.ts), medians.
 *
 * The service is `npm start`'s: its own devnet, PGlite or PostgreSQL.
 *
 * Env: BENCH_SECONDS per round (default 5), BENCH_ROUNDS (3), BENCH_WARMUP (10 s),
 * BENCH_CONNECTIONS (32), BENCH_CHARGES (1,000), DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test; a fresh database is made and dropped),
 * BENCH_DATABASES (`pglite,postgres`).
 */
import { spawnSync } from 'node:child_process'
import { cpus, totalmem } from 'node:os'
import {
  alternateRounds,
  failWith,
  liftRateLimits,
  loopbackCall,
  medianRound,
  startService,
  WARMUP_SECONDS,
  type BenchService,
  type WrkResult,
} from './harness.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
const CHARGES = Number(process.env.BENCH_CHARGES ?? 1_000)
/** The PostgreSQL server the postgres run makes its fresh database on (never the PGlite run's). */
const PG_SERVER = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
delete process.env.DATABASE_URL
const BACKENDS = (['pglite', 'postgres'] as const).filter((b) =>
  (process.env.BENCH_DATABASES ?? 'pglite,postgres').split(',').includes(b),
)

interface Row {
  backend: string
  get: [WrkResult, WrkResult]
  list: [WrkResult, WrkResult]
}

/** Makes the charges through the Commerce API, waiting first while the devnet is verified. */
async function makeCharges(svc: BenchService): Promise<string> {
  const headers = { 'x-cc-api-key': svc.key, 'content-type': 'application/json' }
  const body = (i: number) =>
    JSON.stringify({
      name: `Item ${i}`,
      pricing_type: 'fixed_price',
      local_price: { amount: `${(i % 90) + 10}.00`, currency: i % 2 ? 'EUR' : 'USD' },
      metadata: { order: String(i) },
    })
  const until = Date.now() + 60_000
  let first = await loopbackCall(`${svc.base}/commerce/charges`, {
    method: 'POST',
    headers,
    body: body(0),
  })
  while (first.status === 503 && Date.now() < until) {
    await Bun.sleep(500)
    first = await loopbackCall(`${svc.base}/commerce/charges`, {
      method: 'POST',
      headers,
      body: body(0),
    })
  }
  if (first.status !== 201) failWith('a charge', first)
  for (let i = 1; i < CHARGES; i += 50)
    await Promise.all(
      Array.from({ length: Math.min(50, CHARGES - i) }, async (_, k) => {
        const r = await loopbackCall(`${svc.base}/commerce/charges`, {
          method: 'POST',
          headers,
          body: body(i + k),
        })
        if (r.status !== 201) failWith('a charge', r)
      }),
    )
  return JSON.parse(first.body).data.id as string
}

const rows: Row[] = []
for (const backend of BACKENDS) {
  if (backend === 'postgres') process.env.DATABASE_URL = PG_SERVER
  const svc = await startService(backend)
  try {
    liftRateLimits(svc)
    const id = await makeCharges(svc)
    const native = ['-H', `Authorization: Bearer ${svc.key}`]
    const commerce = ['-H', `X-CC-Api-Key: ${svc.key}`]
    const [nativeGet, commerceGet, nativeList, commerceList] = alternateRounds(
      [
        {
          name: `GET /api/transactions/{id} (${backend})`,
          url: `${svc.base}/api/transactions/${id}`,
          args: native,
        },
        {
          name: `GET /commerce/charges/{id} (${backend})`,
          url: `${svc.base}/commerce/charges/${id}`,
          args: commerce,
        },
        {
          name: `GET /api/transactions/project/{id}?limit=100 (${backend})`,
          url: `${svc.base}/api/transactions/project/${svc.projectId}?limit=100`,
          args: native,
        },
        {
          name: `GET /commerce/charges?limit=100 (${backend})`,
          url: `${svc.base}/commerce/charges?limit=100`,
          args: commerce,
        },
      ],
      { rounds: ROUNDS, seconds: SECONDS, connections: CONNECTIONS },
    ).map((rounds, i) => medianRound(String(i), rounds))
    for (const r of [nativeGet, commerceGet, nativeList, commerceList])
      if (r!.errors > 0) throw new Error(`${backend}: ${r!.errors} non-2xx answers`)
    rows.push({ backend, get: [nativeGet!, commerceGet!], list: [nativeList!, commerceList!] })
  } finally {
    await svc.stop()
  }
}

const bun = spawnSync(process.execPath, ['--version'], { encoding: 'utf8' }).stdout.trim()
const fmt = (n: number) => Math.round(n).toLocaleString('en')
const pct = (a: WrkResult, b: WrkResult) => `${((b.rps / a.rps) * 100).toFixed(1)}%`
console.log(
  `\n${new Date().toISOString()} · Bun ${bun} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · npm start's devnet · ${fmt(CHARGES)} charges · wrk -t1 -c${CONNECTIONS}, ${ROUNDS} alternating rounds of ${SECONDS} s after ${WARMUP_SECONDS} s warm-up each, HTTPS keep-alive, medians\n`,
)
console.log(
  '| Database | Read | Native (floor) req/s | Commerce req/s | Commerce / native | Commerce p50 / p99 ms |',
)
console.log('| --- | --- | ---: | ---: | ---: | ---: |')
for (const r of rows)
  for (const [what, [n, c]] of [
    ['one charge', r.get],
    ['a page of 100', r.list],
  ] as const)
    console.log(
      `| ${r.backend} | ${what} | ${fmt(n.rps)} | ${fmt(c.rps)} | ${pct(n, c)} | ${c.p50.toFixed(1)} / ${c.p99.toFixed(1)} |`,
    )
