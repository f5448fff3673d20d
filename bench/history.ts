/**
 * `bun bench/history.ts`: how reading history behaves as one project's history grows, on
 * PostgreSQL, with nothing changed in the service. The service runs on a fresh database
 * (bench/harness.ts `startService`); its project's test-mode history is written straight into
 * the database by SQL (INSERT ... SELECT generate_series, about 200,000 rows a statement) beside
 * 10 other projects of 100,000 rows each, all spread over the last two years and written in order
 * of creation as a table grows (most completed, some expired, cancelled or failed, the last half
 * hour's still open; 85% USD, 15% EUR), then VACUUM ANALYZE (the steady state autovacuum keeps).
 * Each operation is requested BENCH_SAMPLES times one after another over HTTPS (keep-alive,
 * after a few unmeasured ones), first with 100,000 transactions in the project, then with the
 * table rebuilt with BENCH_HISTORY_ROWS in the project over the same two years (ten times as
 * many a day):
 *   GET /api/transactions/stats                      all time, the last 30 days, yesterday
 *   GET /api/transactions/project/{id}?limit=50      first page, offset 50,000, status=expired
 *   GET /dashboard/{p}/test                          overview: stats and daily chart, 30 days
 *   GET /dashboard/{p}/test?start_date=…             the same for a year
 *   GET /dashboard/{p}/test/transactions             first page
 * and, at both sizes, the statements behind the slowest of them through EXPLAIN ANALYZE.
 * The goal (the project's): p99 under 50 ms each, and a flat cost as history grows (here: p50 at
 * the large size within 1.5× of the small).
 *
 * Env: BENCH_HISTORY_ROWS (default 1,000,000; the small size is 100,000, or this when smaller),
 * BENCH_SAMPLES (50), BENCH_NEIGHBOUR_ROWS (100,000 for each of the 10 other projects),
 * BENCH_TIMEOUT_MINUTES (20: everything is stopped after that), DATABASE_URL (PostgreSQL server; default postgres://postgres@127.0.0.1:5432/test, a fresh
 * database is created and dropped).
 */
import { spawnSync } from 'node:child_process'
import { cpus, loadavg, totalmem } from 'node:os'
import {
  cli,
  dashboardSignIn,
  liftRateLimits,
  loopbackCall,
  planChain,
  startService,
  type BenchService,
} from './harness.ts'
import { SETTLE_LAG_DAYS } from '../src/modules/transactions/rollups.ts'

const LARGE = Number(process.env.BENCH_HISTORY_ROWS ?? 1_000_000)
const SMALL = Math.min(100_000, LARGE)
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 50)
const WARM = 5
const NEIGHBOURS = 10
const NEIGHBOUR_ROWS = Number(process.env.BENCH_NEIGHBOUR_ROWS ?? 100_000)
const CHUNK = 200_000
const GOAL_P99_MS = 50
const FLAT = 1.5
const TIMEOUT_MS = Number(process.env.BENCH_TIMEOUT_MINUTES ?? 20) * 60_000
const EMAIL = 'bench@example.com'
const PASSWORD = 'bench-password-1234'
const DAY_MS = 86_400_000
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'

const started = Date.now()
const load0 = loadavg()
let svc: BenchService | null = null
let client: any = null
let stopping: Promise<void> | null = null
/** Stops the service and drops its database (once, whatever called it). */
const cleanup = () =>
  (stopping ??= (async () => {
    await client?.end({ timeout: 5 }).catch(() => {})
    await svc?.stop()
  })())
const abort = (why: string) => {
  console.error(why)
  void cleanup().finally(() => process.exit(1))
}
const watchdog = setTimeout(
  () => abort(`history bench: over ${TIMEOUT_MS / 60_000} minutes, stopped`),
  TIMEOUT_MS,
)
process.once('SIGINT', () => abort('history bench: interrupted'))
process.once('SIGTERM', () => abort('history bench: terminated'))

const call = (url: string, init: RequestInit = {}) => loopbackCall(url, init, 60_000)

/**
 * One slice (`$4` of `$5`) of the two years of history of several projects (`$1` ids, `$2` tags
 * of their transaction numbers, `$3` how many each has over the 730 days), all in test mode and
 * written in order of creation, as a table grows: transaction g of n of a project is created at
 * a random moment of the g-th n-th of the last 730 days. Those of the last half hour are open
 * (`created`); the others 72% completed (token, network, hash and confirmations filled), 18%
 * expired, 6% cancelled, 4% failed; 15% in EUR (at 1.08, no recorded rate), the rest USD.
 */
const INSERT = `
INSERT INTO transactions (id, project_id, testing_mode, transaction_number, status, amount_usd,
  currency, amount_in_currency, usd_rate, order_id, order_description, customer_email, metadata,
  token_symbol, token_amount, blockchain_network, deposit_address, amount_received,
  transaction_hash, transaction_hash_names, block_number, confirmations, required_confirmations,
  finality, confirmed_at, completed_at, expires_at, created_at, updated_at, version)
SELECT gen_random_uuid(), project_id, true, tag || g, status,
  round(amount * CASE WHEN eur THEN 1.08 ELSE 1 END, 2), CASE WHEN eur THEN 'EUR' ELSE 'USD' END,
  amount, NULL, 'order-' || g, 'Order ' || g || ' of the shop', 'buyer' || (g % 20000) || '@example.com',
  jsonb_build_object('cart', 'c' || (g % 1000), 'channel', 'web'),
  CASE WHEN done THEN 'USDC' END,
  CASE WHEN done THEN round(amount * CASE WHEN eur THEN 1.08 ELSE 1 END, 2) * 1000000 END,
  CASE WHEN status <> 'created' THEN 'base' END,
  CASE WHEN status <> 'created' THEN '0x' || substr(md5(tag || g), 1, 40) END,
  CASE WHEN done THEN round(amount * CASE WHEN eur THEN 1.08 ELSE 1 END, 2) * 1000000 END,
  CASE WHEN done THEN '0x' || md5('h' || tag || g) || md5('t' || tag || g) END,
  CASE WHEN done THEN 'transaction' END,
  CASE WHEN done THEN 20000000 + g END,
  CASE WHEN done THEN 12 END, CASE WHEN status <> 'created' THEN 12 END,
  CASE WHEN status <> 'created' THEN 'confirmations' END,
  CASE WHEN done THEN created_at + interval '3 minutes' END,
  CASE WHEN done THEN created_at + interval '4 minutes' END,
  created_at + interval '30 minutes', created_at,
  CASE WHEN done THEN created_at + interval '4 minutes' ELSE created_at + interval '30 minutes' END,
  CASE WHEN done THEN 6 ELSE 1 END
FROM (
  SELECT *, status = 'completed' AS done FROM (
    SELECT project_id, tag, g, created_at, amount, eur,
      CASE WHEN created_at > now() - interval '30 minutes' THEN 'created'
        WHEN r < 0.72 THEN 'completed' WHEN r < 0.90 THEN 'expired'
        WHEN r < 0.96 THEN 'cancelled' ELSE 'failed' END AS status
    FROM (
      SELECT p.project_id, p.tag, g,
        now() - interval '730 days' * (1 - (g - random()) / p.n) AS created_at, random() AS r,
        round((5 + random() * 495)::numeric, 2) AS amount, random() < 0.15 AS eur
      FROM unnest($1::text[], $2::text[], $3::int[]) AS p(project_id, tag, n)
      CROSS JOIN LATERAL generate_series($4::int * p.n / $5::int + 1, ($4::int + 1) * p.n / $5::int) g
    ) a
  ) b
) c
ORDER BY created_at`

/**
 * The whole history of these projects, in order of creation, about CHUNK rows a statement;
 * then VACUUM ANALYZE, the steady state autovacuum keeps. The seconds each took.
 */
async function insertHistory(projects: { id: string; tag: string; n: number }[]) {
  const t0 = Date.now()
  const total = projects.reduce((n, p) => n + p.n, 0)
  const slices = Math.max(1, Math.ceil(total / CHUNK))
  const cols = [projects.map((p) => p.id), projects.map((p) => p.tag), projects.map((p) => p.n)]
  for (let k = 0; k < slices; k++) await client.unsafe(INSERT, [...cols, k, slices])
  const inserted = (Date.now() - t0) / 1000
  const t1 = Date.now()
  await client.unsafe('VACUUM ANALYZE transactions')
  const vacuumed = (Date.now() - t1) / 1000
  const [{ n }] = await client.unsafe('SELECT count(*)::int AS n FROM transactions')
  if (n !== total) throw new Error(`${n} transactions inserted, not ${total}`)
  console.error(
    `${total.toLocaleString('en-US')} transactions of ${projects.length} projects inserted in ${inserted.toFixed(0)} s (${slices} statements); VACUUM ANALYZE ${vacuumed.toFixed(0)} s`,
  )
  return { inserted, vacuumed }
}

/** One timed operation: its URL and what its answer must hold. */
interface Op {
  label: string
  url: string
  headers: Record<string, string>
  check: (body: string, rows: number) => string | null
}

interface Measured {
  p50: number
  p99: number
  bytes: number
}

/** Nearest-rank percentile of sorted samples. */
const pct = (xs: number[], p: number) => xs[Math.max(0, Math.ceil(p * xs.length) - 1)]!

async function measure(op: Op, rows: number): Promise<Measured> {
  const times: number[] = []
  let bytes = 0
  for (let i = 0; i < WARM + SAMPLES; i++) {
    const s = Bun.nanoseconds()
    const r = await call(op.url, { headers: op.headers })
    const ms = (Bun.nanoseconds() - s) / 1e6
    const problem = r.status === 200 ? op.check(r.body, rows) : `status ${r.status}`
    if (problem) throw new Error(`${op.label} at ${rows} rows: ${problem}: ${r.body.slice(0, 300)}`)
    if (i >= WARM) times.push(ms)
    bytes = r.body.length
  }
  times.sort((a, b) => a - b)
  const m = { p50: pct(times, 0.5), p99: pct(times, 0.99), bytes }
  console.error(
    `${op.label} (${rows.toLocaleString('en-US')} rows): p50 ${m.p50.toFixed(2)} ms, p99 ${m.p99.toFixed(2)} ms, ${bytes} B`,
  )
  return m
}

/**
 * Rows a plan read from the table or its indexes: its leaves' rows, those their filter dropped
 * included, summed (per-worker averages times workers, so near the count in a parallel plan).
 */
function rowsRead(node: any): number {
  if (!node.Plans?.length)
    return (
      ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) *
      (node['Actual Loops'] ?? 1)
    )
  return node.Plans.reduce((n: number, c: any) => n + rowsRead(c), 0)
}

try {
  svc = await startService('postgres')
  const serviceStarted = Date.now()
  const { projectId, env, base } = svc
  liftRateLimits(svc)
  cli(['user', 'create', '--email', EMAIL, '--password', PASSWORD, '--project', projectId], env)
  const postgres = (await import('postgres')).default
  client = postgres(env.DATABASE_URL!, { max: 1, onnotice: () => {} })

  // The neighbours: other projects' history in the same table, created over the same two years.
  const neighbours = Array.from({ length: NEIGHBOURS }, (_, i) => ({
    id: `proj_history_neighbour_${String(i + 1).padStart(2, '0')}`,
    tag: `TX-N${i + 1}-`,
    n: NEIGHBOUR_ROWS,
  }))
  for (const p of neighbours)
    await client.unsafe('INSERT INTO projects (id, name) VALUES ($1, $2)', [p.id, p.id])
  const history = (n: number) => [...neighbours, { id: projectId, tag: 'TX-BENCH-', n }]
  const builtSmall = await insertHistory(history(SMALL))
  // Written behind the service's back into days it already rolled up at its start (empty then):
  // the rollups go, as in a database upgraded to them. The service looks for newly settled days of
  // a project's mode at most once a minute.
  await client.unsafe('TRUNCATE transaction_rollups, transaction_rollup_marks')
  await Bun.sleep(Math.max(0, serviceStarted + 61_000 - Date.now()))

  const token = await dashboardSignIn(base, EMAIL, PASSWORD, call)
  const apiAuth = { authorization: `Bearer ${svc.key}` }
  const cookie = { cookie: `__Host-cp_session=${token}` }
  const isoDate = (ms: number) => new Date(ms).toISOString().slice(0, 10)
  const today = isoDate(Date.now())
  const monthStart = isoDate(Date.now() - 29 * DAY_MS)
  const yesterday = isoDate(Date.now() - DAY_MS)
  const yearStart = isoDate(Date.now() - 364 * DAY_MS)
  const json = (b: string) => JSON.parse(b)
  const expect = (cond: boolean, what: string) => (cond ? null : what)
  const statsCheck = (all: boolean) => (b: string, rows: number) => {
    const s = json(b).stats
    return expect(
      all ? s.total_transactions === rows : s.total_transactions > 0,
      all ? `total_transactions ${s.total_transactions}, not ${rows}` : 'no transactions in range',
    )
  }
  const listCheck = (status?: string) => (b: string, rows: number) => {
    const j = json(b)
    return expect(
      j.transactions.length === 50 &&
        (status
          ? j.transactions.every((t: { status: string }) => t.status === status)
          : j.pagination.total === rows),
      `50 rows${status ? ` all ${status}` : ` of ${rows}`}`,
    )
  }
  const overviewCheck = (b: string) =>
    expect(
      b.includes('data-stat="total_transactions">') && b.includes('id="chart-data"'),
      'stats and chart data',
    )
  const api = `${base}/api/transactions`
  const dash = `${base}/dashboard/${projectId}/test`
  const ops: Op[] = [
    {
      label: 'GET /api/transactions/stats, all time',
      url: `${api}/stats`,
      headers: apiAuth,
      check: statsCheck(true),
    },
    {
      label: 'GET /api/transactions/stats, 30 days',
      url: `${api}/stats?start_date=${monthStart}&end_date=${today}`,
      headers: apiAuth,
      check: statsCheck(false),
    },
    {
      label: 'GET /api/transactions/stats, one day',
      url: `${api}/stats?start_date=${yesterday}&end_date=${yesterday}`,
      headers: apiAuth,
      check: statsCheck(false),
    },
    {
      label: 'GET /api/transactions/project/{id}?limit=50 (page 1)',
      url: `${api}/project/${projectId}?limit=50`,
      headers: apiAuth,
      check: listCheck(),
    },
    {
      label: '… &offset=50000 (page 1,000)',
      url: `${api}/project/${projectId}?limit=50&offset=50000`,
      headers: apiAuth,
      check: listCheck(),
    },
    {
      label: '… ?status=expired (page 1)',
      url: `${api}/project/${projectId}?status=expired&limit=50`,
      headers: apiAuth,
      check: listCheck('expired'),
    },
    {
      label: 'dashboard overview + chart data, 30 days',
      url: dash,
      headers: cookie,
      check: overviewCheck,
    },
    {
      label: 'dashboard overview + chart data, 365 days',
      url: `${dash}?start_date=${yearStart}&end_date=${today}`,
      headers: cookie,
      check: overviewCheck,
    },
    {
      label: 'dashboard transactions, page 1',
      url: `${dash}/transactions`,
      headers: cookie,
      check: (b, rows) =>
        expect(
          (b.match(/href="[^"]*\/transactions\/[0-9a-f-]{36}"/g) ?? []).length === 25 &&
            b.includes(`${rows.toLocaleString('en-US')} transactions`),
          `25 rows of ${rows}`,
        ),
    },
  ]

  // The direct statements the slowest operations ran before rollups (drizzle's SQL), for comparison:
  // stats and the list's count now read settled days from rollups instead.
  const scope = `project_id = $1 AND testing_mode IN (true)`
  const listScope = `project_id = $1 AND testing_mode = true`
  const order = `ORDER BY created_at DESC NULLS LAST, id DESC NULLS LAST`
  const statements: { label: string; text: string; params: unknown[] }[] = [
    {
      label: 'stats, all time',
      text: `SELECT status, currency, count(*), sum(amount_usd), sum(amount_in_currency) FROM transactions WHERE ${scope} GROUP BY status, currency`,
      params: [projectId],
    },
    {
      label: 'stats, 30 days',
      text: `SELECT status, currency, count(*), sum(amount_usd), sum(amount_in_currency) FROM transactions WHERE ${scope} AND created_at >= $2 AND created_at < $3 GROUP BY status, currency`,
      params: [
        projectId,
        `${monthStart}T00:00:00Z`,
        new Date(Date.parse(today) + DAY_MS).toISOString(),
      ],
    },
    {
      label: 'daily chart, 365 days',
      text: `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*), count(*) FILTER (WHERE status = 'completed'), sum(amount_usd) FILTER (WHERE status = 'completed') FROM transactions WHERE ${scope} AND created_at >= $2 AND created_at < $3 GROUP BY 1 ORDER BY 1`,
      params: [
        projectId,
        `${yearStart}T00:00:00Z`,
        new Date(Date.parse(today) + DAY_MS).toISOString(),
      ],
    },
    {
      label: 'list page 1',
      text: `SELECT * FROM transactions WHERE ${listScope} ${order} LIMIT 50`,
      params: [projectId],
    },
    {
      label: 'list count (every list page)',
      text: `SELECT count(*) FROM transactions WHERE ${listScope}`,
      params: [projectId],
    },
    {
      label: 'list offset 50,000',
      text: `SELECT * FROM transactions WHERE ${listScope} ${order} LIMIT 50 OFFSET 50000`,
      params: [projectId],
    },
    {
      label: 'list status=expired count',
      text: `SELECT count(*) FROM transactions WHERE ${listScope} AND status = 'expired'`,
      params: [projectId],
    },
  ]
  async function explain() {
    const out: { plan: string; ms: number; read: number }[] = []
    for (const s of statements) {
      const [row] = await client.unsafe(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.text}`, s.params)
      const p = row['QUERY PLAN'][0]
      out.push({
        plan: planChain(p.Plan),
        ms: p['Planning Time'] + p['Execution Time'],
        read: rowsRead(p.Plan),
      })
    }
    return out
  }

  /**
   * The first stats call after the history was written asks for its settled days to be rolled up
   * in the background (docs/decisions/0066-stats-from-settled-days.md) and reads them directly
   * meanwhile: that call timed on its own, then the roll-up until the project's mark reaches the
   * last settled day (the day before the settle lag's: the last half hour is still open), once per
   * size.
   */
  async function firstCall(
    rows: number,
  ): Promise<{ call: number; failed: string | null; rollUp: number }> {
    const s = Bun.nanoseconds()
    // Recorded, not thrown: what that call meets is one of the findings.
    const failed = await call(ops[0]!.url, { headers: ops[0]!.headers }).then(
      (r) => (r.status === 200 ? null : `status ${r.status}`),
      (e) => String(e),
    )
    const ms = (Bun.nanoseconds() - s) / 1e6
    const settled = new Date(
      Math.floor(Date.now() / DAY_MS) * DAY_MS - (SETTLE_LAG_DAYS + 1) * DAY_MS,
    )
      .toISOString()
      .slice(0, 10)
    for (;;) {
      const [mark] = await client.unsafe(
        `SELECT to_char(through_day, 'YYYY-MM-DD') AS through FROM transaction_rollup_marks WHERE project_id = $1 AND testing_mode`,
        [projectId],
      )
      if (mark && mark.through >= settled) break
      await Bun.sleep(50)
    }
    const rollUp = (Bun.nanoseconds() - s) / 1e9
    console.error(
      `first stats call at ${rows} rows: ${ms.toFixed(0)} ms (reads directly${failed ? `; failed: ${failed}` : ''}); rolled up in ${rollUp.toFixed(1)} s`,
    )
    return { call: ms, failed, rollUp }
  }

  const firstSmall = await firstCall(SMALL)
  const small: Measured[] = []
  for (const op of ops) small.push(await measure(op, SMALL))
  const plansSmall = await explain()
  const smallEnded = Date.now()

  // The larger history is built afresh, as a table that grew to it would be laid out, its rollups
  // with it.
  await client.unsafe('TRUNCATE transactions CASCADE')
  await client.unsafe('TRUNCATE transaction_rollups, transaction_rollup_marks')
  const builtLarge = await insertHistory(history(LARGE))
  // The service looks for newly settled days of a project's mode at most once a minute.
  await Bun.sleep(Math.max(0, smallEnded + 61_000 - Date.now()))
  const firstLarge = await firstCall(LARGE)
  const large: Measured[] = []
  for (const op of ops) large.push(await measure(op, LARGE))
  const plansLarge = await explain()
  const [{ size }] = await client.unsafe(
    `SELECT pg_size_pretty(pg_total_relation_size('transactions')) AS size`,
  )

  const bun = spawnSync(process.execPath, ['--version'], { encoding: 'utf8' }).stdout.trim()
  const n = (x: number) => x.toLocaleString('en-US')
  const f = (m: Measured) => `${m.p50.toFixed(1)} / ${m.p99.toFixed(1)}`
  console.log(
    `\n${new Date().toISOString()} · Bun ${bun} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · PostgreSQL, HTTPS keep-alive, ${SAMPLES} sequential requests per operation after ${WARM} unmeasured · load average at start ${load0.map((l) => l.toFixed(2)).join(' ')} · whole run ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
  )
  console.log(
    `Table: the project's test history of ${n(SMALL)}, then (rebuilt) ${n(LARGE)} transactions over the last 730 days, beside ${NEIGHBOURS} projects of ${n(NEIGHBOUR_ROWS)} over the same days, all written in order of creation (${size} with its indexes at the large size). Inserted by SQL in ${builtSmall.inserted.toFixed(0)} s and ${builtLarge.inserted.toFixed(0)} s; VACUUM ANALYZE ${builtSmall.vacuumed.toFixed(0)} s and ${builtLarge.vacuumed.toFixed(0)} s.\n`,
  )
  console.log(
    `The first stats call after the history was written reads it directly while its settled days are rolled up in the background, in chunks: ${firstSmall.call.toFixed(0)} ms at ${n(SMALL)}${firstSmall.failed ? ` (failed: ${firstSmall.failed})` : ''}, ${firstLarge.call.toFixed(0)} ms at ${n(LARGE)}${firstLarge.failed ? ` (failed: ${firstLarge.failed})` : ''}; the roll-up took ${firstSmall.rollUp.toFixed(1)} s and ${firstLarge.rollUp.toFixed(1)} s (once; later calls read the rollups).\n`,
  )
  console.log(
    `| operation | p50 / p99 ms at ${n(SMALL)} | p50 / p99 ms at ${n(LARGE)} | growth p50 / p99 | goal: p99 < ${GOAL_P99_MS} ms, flat (p50 < ${FLAT}×) |`,
  )
  console.log('|---|---:|---:|---:|---|')
  for (const [i, op] of ops.entries()) {
    const s = small[i]!
    const l = large[i]!
    const g50 = l.p50 / s.p50
    const g99 = l.p99 / s.p99
    const fast = s.p99 < GOAL_P99_MS && l.p99 < GOAL_P99_MS
    const flat = g50 < FLAT
    console.log(
      `| ${op.label} | ${f(s)} | ${f(l)} | ${g50.toFixed(1)}× / ${g99.toFixed(1)}× | ${fast && flat ? '✓' : `✗ ${[fast ? '' : 'slow', flat ? '' : 'grows'].filter(Boolean).join(', ')}`} |`,
    )
  }
  console.log(
    `\n| statement (EXPLAIN ANALYZE) | plan at ${n(LARGE)} | rows read at ${n(SMALL)} / ${n(LARGE)} | ms at ${n(SMALL)} / ${n(LARGE)} |`,
  )
  console.log('|---|---|---:|---:|')
  for (const [i, s] of statements.entries()) {
    const a = plansSmall[i]!
    const b = plansLarge[i]!
    console.log(
      `| ${s.label} | ${b.plan}${a.plan === b.plan ? '' : ` (at ${n(SMALL)}: ${a.plan})`} | ${n(a.read)} / ${n(b.read)} | ${a.ms.toFixed(1)} / ${b.ms.toFixed(1)} |`,
    )
  }
} catch (e) {
  console.error(e)
  process.exitCode = 1
} finally {
  clearTimeout(watchdog)
  await cleanup()
}
