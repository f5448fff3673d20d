/**
 * `bun bench/dashboard.ts`: throughput and latency of the merchant dashboard's pages over HTTPS
 * on Bun, signed in, against PGlite and PostgreSQL (fresh database each), and in the same run a
 * bare `Bun.serve` answering the overview's HTML bytes with the same headers (same runtime,
 * same kind of certificate, same load tool and connection count):
 *   GET /dashboard/{p}/test                    overview: stats and the daily chart's data
 *   GET /dashboard/{p}/test/transactions       first page (25 of BENCH_TRANSACTIONS)
 *   GET /dashboard/{p}/test/transactions/{id}  a completed transaction: timeline, deliveries, transfers
 *   GET /dashboard/{p}/test/keys
 *   GET /dashboard/{p}/test/endpoints
 *   GET /dashboard/{p}/test/deliveries         first page (50)
 *   GET /dashboard/{p}/test/settings
 * then, in-process on the same PostgreSQL database (`app.handle`, no HTTP or TLS): the
 * statements each page sends (counted with postgres.js's debug hook), what PostgreSQL spends on
 * them (EXPLAIN ANALYZE planning + execution, summed), the page's median time served one at a
 * time, and req/s and Bun CPU per request served 32 at once; and finally `verifyPassword`
 * (what one sign-in costs in hashing) and `overviewPage` alone.
 *
 * Data: a project with a user (CLI `user create`), BENCH_TRANSACTIONS test transactions made
 * through the API (project limits out of reach, as `bench/http.ts` does), some cancelled, a few
 * driven to completed with the CLI's `transaction event`; a test webhook endpoint (all events)
 * on a local receiver that answers 200, made before the transactions so each one has a
 * delivery, and three test events. Sign-in happens once, over HTTP, as a browser does it (GET
 * the form for its cookie and CSRF token, POST it); every wrk connection then sends the
 * session cookie. Sign-in itself is not loaded with wrk: it is limited to 10 a minute per IP
 * and its cost is the password hash, timed in-process instead.
 *
 * Last, on PostgreSQL only, the same project grown by BENCH_LARGE_ROWS transactions and
 * deliveries (copies of its real rows made by SQL, spread over a year, then ANALYZE): the
 * overview and the two lists over HTTPS again, and each of their statements' plans.
 *
 * Env: BENCH_SECONDS (default 10), BENCH_CONNECTIONS (32), BENCH_TRANSACTIONS (200),
 * BENCH_LARGE_ROWS (200000; 0 skips the large project), DATABASE_URL (PostgreSQL server;
 * default postgres://postgres@127.0.0.1:5432/test, a fresh database is created and dropped).
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import {
  cli,
  liftRateLimits,
  planChain,
  startProcess,
  startService,
  stopProcess,
  timeCalls,
  wrk as runWrk,
  type BenchService,
  type WrkResult,
  selfSignedTls,
  dashboardSignIn,
  failWith,
  loopbackCall,
} from './harness.ts'

if (process.argv[2] === '--bare') {
  // The baseline: a plain Bun.serve answering the overview's bytes and headers.
  const { DASHBOARD_HEADERS } = await import('../src/modules/dashboard/layout.ts')
  const body = readFileSync(process.env.BENCH_HTML_FILE!)
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    tls: {
      cert: readFileSync(process.env.TLS_CERT_FILE!, 'utf8'),
      key: readFileSync(process.env.TLS_KEY_FILE!, 'utf8'),
    },
    fetch: () => new Response(body, { headers: DASHBOARD_HEADERS }),
  })
  console.error(JSON.stringify({ msg: 'listening', port: server.port }))
} else {
  await bench()
}

type Result = WrkResult
type Backend = 'pglite' | 'postgres'

/** One page of the dashboard, and what must be on it before it is measured. */
interface Target {
  label: string
  path: string
  check: (body: string) => string | null
}

/** A statement as postgres.js's debug hook saw it: parameters already serialized to text. */
interface Sent {
  text: string
  parameters: unknown[]
  types: number[]
}

/**
 * The parameters to send the statement again: postgres.js would serialize them a second time,
 * which turns a boolean's 't' into 'f' (its serializer tests `=== true`); the rest are text
 * that PostgreSQL reads as the statement's types.
 */
function replayable(q: Sent): any[] {
  return q.parameters.map((v, i) => (q.types[i] === 16 ? v === 't' : v))
}

/** What one statement count through app.handle found for a page. */
interface Counted {
  label: string
  statements: number
  distinct: string[]
  pgMs: number
  medianMs: number
  concurrentRps: number
  cpuUsPerRequest: number
}

async function bench() {
  const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
  const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
  const TRANSACTIONS = Number(process.env.BENCH_TRANSACTIONS ?? 200)
  const BIG_ROWS = Number(process.env.BENCH_LARGE_ROWS ?? 200_000)
  const CANCELLED = Math.floor(TRANSACTIONS / 10)
  const COMPLETED = Math.min(4, TRANSACTIONS - CANCELLED)
  const TEST_EVENTS = 3
  const EMAIL = 'bench@example.com'
  const PASSWORD = 'bench-password-1234'
  const BUN = process.execPath
  const started = Date.now()

  const call = loopbackCall
  const api = (svc: BenchService, path: string, body?: unknown) =>
    call(`${svc.base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  const fail = failWith

  /** The webhook receiver of bench/webhooks.ts, in its own process: 200 on /ok/*. */
  async function startReceiver(): Promise<{ port: number; stop(): void }> {
    const proc = spawn(BUN, [new URL('./webhook-receiver.ts', import.meta.url).pathname], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const port = await new Promise<number>((resolve, reject) => {
      let out = ''
      proc.stdout!.on('data', (c) => {
        out += c
        const m = /listening (\d+)/.exec(out)
        if (m) resolve(Number(m[1]))
      })
      proc.on('exit', (code) => reject(new Error(`webhook receiver exited ${code}`)))
    })
    return { port, stop: () => void proc.kill('SIGTERM') }
  }

  /** Transactions, statuses, an endpoint with a delivery per event: what the pages will show. */
  async function seed(svc: BenchService, receiverPort: number) {
    const { projectId, env } = svc
    const { WEBHOOK_EVENT_TYPES } = await import('../src/db/schema.ts')
    liftRateLimits(svc)
    cli(['user', 'create', '--email', EMAIL, '--password', PASSWORD, '--project', projectId], env)
    const endpoint = cli(
      [
        'endpoint',
        'create',
        '--project',
        projectId,
        '--mode',
        'test',
        '--url',
        `http://127.0.0.1:${receiverPort}/ok/dashboard`,
        '--events',
        WEBHOOK_EVENT_TYPES.join(','),
      ],
      env,
    )
    const ids: string[] = new Array(TRANSACTIONS)
    let next = 0
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < TRANSACTIONS) {
          const i = next++
          const r = await api(svc, '/api/transactions/create', {
            amount: 10 + (i % 90) + 0.99,
            order_id: `order-${String(i).padStart(5, '0')}`,
            order_description: `Bench order ${i}`,
            customer_email: `buyer${i}@example.com`,
          })
          if (r.status !== 200 && r.status !== 201) fail('create', r)
          ids[i] = JSON.parse(r.body).transaction.id
        }
      }),
    )
    for (const id of ids.slice(0, CANCELLED)) {
      const r = await api(svc, `/api/transactions/${id}/cancel`, {})
      if (r.status !== 200) fail('cancel', r)
    }
    // A few completed ones, so the overview has volume and a detail page has a whole timeline.
    const { PATH_TO } = await import('../test/helpers/lifecycle.ts')
    const completed = ids.slice(CANCELLED, CANCELLED + COMPLETED)
    for (const id of completed)
      for (const event of PATH_TO.completed)
        cli(['transaction', 'event', '--id', id, '--event', JSON.stringify(event)], env)
    for (let i = 0; i < TEST_EVENTS; i++)
      cli(['endpoint', 'test', '--endpoint', endpoint.id, '--event', 'transaction.completed'], env)
    // Every delivery sent before anything is measured: the dispatcher must be idle. The last
    // transaction's and the completed one's events have reached the log, and none is open.
    const deliveriesOf = (id: string) =>
      cli(
        [
          'delivery',
          'list',
          '--project',
          projectId,
          '--mode',
          'test',
          '--transaction',
          id,
          '--limit',
          '100',
        ],
        env,
      ).deliveries as unknown[]
    for (let t = Date.now(); ; await Bun.sleep(500)) {
      const open = ['pending', 'retrying']
        .map(
          (s) =>
            cli(
              [
                'delivery',
                'list',
                '--project',
                projectId,
                '--mode',
                'test',
                '--status',
                s,
                '--limit',
                '1',
              ],
              env,
            ).deliveries.length,
        )
        .reduce((a, b) => a + b)
      if (
        open === 0 &&
        deliveriesOf(ids[TRANSACTIONS - 1]!).length > 0 &&
        deliveriesOf(completed[0]!).length >= 4
      )
        break
      if (Date.now() - t > 60_000) throw new Error('deliveries still pending after 60 s')
    }
    const ofCompleted = deliveriesOf(completed[0]!).length
    return {
      ids,
      completedId: completed[0]!,
      endpointId: endpoint.id as string,
      endpointUrl: endpoint.url as string,
      ofCompleted,
    }
  }

  const signIn = (base: string) => dashboardSignIn(base, EMAIL, PASSWORD)

  function targets(projectId: string, data: Awaited<ReturnType<typeof seed>>): Target[] {
    const p = `/dashboard/${projectId}/test`
    const count = (s: string, re: RegExp) => (s.match(re) ?? []).length
    const expect = (cond: boolean, what: string) => (cond ? null : what)
    return [
      {
        label: 'overview',
        path: p,
        check: (b) =>
          expect(
            b.includes(`data-stat="total_transactions">${TRANSACTIONS.toLocaleString('en-US')}<`) &&
              b.includes(`data-status-count="completed">${COMPLETED}<`) &&
              b.includes('id="chart-data"'),
            `stats of ${TRANSACTIONS} transactions, ${COMPLETED} completed, and chart data`,
          ),
      },
      {
        label: 'transactions',
        path: `${p}/transactions`,
        check: (b) =>
          expect(
            count(b, /href="[^"]*\/transactions\/[0-9a-f-]{36}"/g) === Math.min(25, TRANSACTIONS) &&
              b.includes(`${TRANSACTIONS.toLocaleString('en-US')} transactions`),
            `25 rows of ${TRANSACTIONS}`,
          ),
      },
      {
        label: 'transaction detail',
        path: `${p}/transactions/${data.completedId}`,
        check: (b) =>
          expect(
            b.includes(data.completedId) &&
              b.includes('badge-completed') &&
              count(b, /data-delivery="/g) >= 4,
            'the completed transaction with its deliveries',
          ),
      },
      {
        label: 'keys',
        path: `${p}/keys`,
        check: (b) =>
          expect(count(b, /data-key="/g) >= 1 && b.includes('>bench<'), 'the bench key'),
      },
      {
        label: 'endpoints',
        path: `${p}/endpoints`,
        check: (b) =>
          expect(b.includes(data.endpointUrl.replace(/&/g, '&amp;')), 'the receiver endpoint'),
      },
      {
        label: 'deliveries',
        path: `${p}/deliveries`,
        check: (b) =>
          expect(
            count(b, /data-delivery="/g) === 50 && b.includes('badge-success'),
            '50 successful deliveries',
          ),
      },
      {
        label: 'settings',
        path: `${p}/settings`,
        check: (b) => expect(b.includes(projectId), 'the project'),
      },
    ]
  }

  /** Each page answers 200 with its content for this session; the bodies, by label. */
  async function checkPages(
    base: string,
    token: string,
    list: Target[],
  ): Promise<Map<string, string>> {
    const bodies = new Map<string, string>()
    for (const t of list) {
      const r = await call(`${base}${t.path}`, {
        headers: { cookie: `__Host-cp_session=${token}` },
      })
      const problem = r.status === 200 ? t.check(r.body) : `status ${r.status}`
      if (problem) {
        const main = r.body.indexOf('<main')
        throw new Error(
          `${t.label} (${t.path}) does not show what it should (${problem}): ${r.status} ${r.body.slice(Math.max(main, 0), Math.max(main, 0) + 1500)}`,
        )
      }
      bodies.set(t.label, r.body)
    }
    return bodies
  }

  /**
   * In-process, next to the running server on the same PostgreSQL database: the app on a
   * postgres.js client whose debug hook records every statement, each page served one at a time.
   */
  async function countStatements(
    svc: BenchService,
    token: string,
    list: Target[],
    endpointId: string,
  ) {
    const postgres = (await import('postgres')).default
    const { drizzle } = await import('drizzle-orm/postgres-js')
    const schema = await import('../src/db/schema.ts')
    const { createServices } = await import('../src/services.ts')
    const { createApp } = await import('../src/http/app.ts')
    const { createLogger } = await import('../src/lib/logger.ts')
    const { systemClock } = await import('../src/lib/clock.ts')
    const { parseSecretKey } = await import('../src/lib/secret-box.ts')
    const seen: Sent[] = []
    // As src/db/client.ts opens PostgreSQL (already migrated by the server), plus the hook.
    const client = postgres(svc.env.DATABASE_URL!, {
      max: 10,
      onnotice: () => {},
      debug: (_conn: number, text: string, parameters: unknown[], types: number[]) =>
        void seen.push({ text, parameters, types }),
    })
    const db = drizzle(client, { schema }) as any
    const database = {
      kind: 'postgres' as const,
      db,
      leaseDb: db,
      rows: async (q: any) => (await db.execute(q)) as any[],
      query: async (text: string, params: any[]) =>
        (await client.unsafe(text, params, { prepare: true })) as any[],
      transaction: (fn: any) =>
        client.begin((tx: any) =>
          fn(
            async (text: string, params: any[]) =>
              (await tx.unsafe(text, params, { prepare: true })) as any[],
          ),
        ) as Promise<any>,
      listen: async (channel: string, onPayload: (p: string) => void, onReconnect?: () => void) => {
        const sub = await client.listen(channel, onPayload, onReconnect)
        return () => sub.unlisten()
      },
      notify: async (channel: string, payload: string) => {
        await client`select pg_notify(${channel}, ${payload})`
      },
      // One instance, no relayer: nothing to exclude.
      exclusive: (_key: string, fn: () => Promise<any>) => fn(),
      close: () => client.end({ timeout: 5 }),
    }
    const logger = createLogger('warn')
    const services = await createServices({
      database,
      clock: systemClock,
      logger,
      baseUrl: svc.base,
      secretKey: parseSecretKey(svc.env.SECRET_KEY!)!,
    })
    const app = createApp(services, {
      trustProxy: false,
      httpsOrigin: () => svc.base,
      logger,
      metricsEnabled: false,
      metricsToken: null,
      servers: [],
    })
    const counted: Counted[] = []
    try {
      for (const t of list) {
        const get = () =>
          app.handle(
            new Request(`${svc.base}${t.path}`, {
              headers: { cookie: `__Host-cp_session=${token}` },
            }),
          )
        for (let i = 0; i < 20; i++) await (await get()).text()
        seen.length = 0
        const first = await get()
        const body = await first.text()
        if (first.status !== 200 || t.check(body))
          throw new Error(`in-process ${t.label}: ${first.status}`)
        const statements = seen.length
        const sent = seen.slice()
        const distinct = [...new Set(sent.map((q) => q.text.replace(/\s+/g, ' ').trim()))]
        // What PostgreSQL spends on them: planning + execution of each, as EXPLAIN ANALYZE reports.
        let pgMs = 0
        for (const q of sent) {
          const [row] = await client.unsafe(
            `EXPLAIN (ANALYZE, FORMAT JSON) ${q.text}`,
            replayable(q),
          )
          const plan = (row as any)['QUERY PLAN'][0]
          pgMs += plan['Planning Time'] + plan['Execution Time']
        }
        const times: number[] = []
        for (let i = 0; i < 300; i++) {
          const s = Bun.nanoseconds()
          await (await get()).text()
          times.push((Bun.nanoseconds() - s) / 1e6)
        }
        times.sort((a, b) => a - b)
        // 32 at once, as wrk's connections, without HTTP and TLS: what the app itself sustains.
        const N = 2000
        let n = 0
        const cpu0 = process.cpuUsage()
        const t0 = Bun.nanoseconds()
        await Promise.all(
          Array.from({ length: CONNECTIONS }, async () => {
            while (n++ < N) await (await get()).text()
          }),
        )
        const wall = (Bun.nanoseconds() - t0) / 1e9
        const cpu = process.cpuUsage(cpu0)
        counted.push({
          label: t.label,
          statements,
          distinct,
          pgMs,
          medianMs: times[150]!,
          concurrentRps: N / wall,
          cpuUsPerRequest: (cpu.user + cpu.system) / N,
        })
      }
      const overview = await services.dashboard.overview(
        { projectId: svc.projectId, mode: 'test' },
        {
          start_date: new Date(Date.now() - 29 * 86_400_000).toISOString().slice(0, 10),
          end_date: new Date().toISOString().slice(0, 10),
        },
      )
      if (!overview.ok) throw new Error(`overview: ${overview.message}`)
      const members = await services.sessions.projectsOf(
        (await services.sessions.authenticate(token))!.userId,
      )
      const big =
        BIG_ROWS > 0 ? await largeProject(svc, token, list, endpointId, client, seen, app) : null
      return { counted, overview: overview.value, members, big }
    } finally {
      await services.stop()
      await database.close()
    }
  }

  /**
   * The same project grown to BIG_ROWS more transactions and deliveries, copied by SQL from
   * the real rows (spread over the last 365 days), then ANALYZEd: the list pages and the
   * overview over HTTPS again, and each of their statements through EXPLAIN ANALYZE.
   */
  async function largeProject(
    svc: BenchService,
    token: string,
    list: Target[],
    endpointId: string,
    client: any,
    seen: Sent[],
    app: { handle(r: Request): Promise<Response> },
  ) {
    const t0 = Date.now()
    const spread = `(g * interval '1 second' * (365 * 86400 / $2::int))`
    await client.unsafe(
      `INSERT INTO transactions (id, project_id, testing_mode, transaction_number, status, amount_usd, currency, amount_in_currency, order_id, order_description, customer_email, metadata, expires_at, created_at, updated_at, version)
      SELECT gen_random_uuid(), t.project_id, t.testing_mode, 'BIG-' || g, (ARRAY['created','pending','completed','expired','cancelled'])[1 + g % 5], t.amount_usd, t.currency, t.amount_in_currency, 'big-' || g, t.order_description, t.customer_email, t.metadata,
        now() - ${spread} + interval '1 hour', now() - ${spread}, now() - ${spread}, 0
      FROM generate_series(1, $2::int) g, (SELECT * FROM transactions WHERE project_id = $1 AND status = 'created' LIMIT 1) t`,
      [svc.projectId, BIG_ROWS],
    )
    await client.unsafe(
      `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, project_id, mode, transaction_id, event_type, data, test, status, attempts, next_attempt_at, last_attempt_at, last_status_code, snapshot, machine_version, event_at, created_at)
      SELECT 'whd_big_' || g, 'evt_big_' || g, d.endpoint_id, d.project_id, d.mode, d.transaction_id, d.event_type, d.data, false, d.status, d.attempts, NULL, d.last_attempt_at, d.last_status_code, d.snapshot, d.machine_version, now() - ${spread}, now() - ${spread}
      FROM generate_series(1, $2::int) g, (SELECT * FROM webhook_deliveries WHERE project_id = $1 AND endpoint_id = $3 AND status = 'success' AND NOT test LIMIT 1) d`,
      [svc.projectId, BIG_ROWS, endpointId],
    )
    await client.unsafe('ANALYZE')
    const total = TRANSACTIONS + BIG_ROWS
    console.error(
      `postgres: +${BIG_ROWS} transactions and deliveries in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    )
    const count = (b: string, re: RegExp) => (b.match(re) ?? []).length
    const pages: Target[] = [
      {
        label: 'overview',
        path: list[0]!.path,
        check: (b) =>
          b.includes('id="chart-data"') && b.includes('data-stat="total_transactions">')
            ? null
            : 'stats and chart',
      },
      {
        label: 'transactions',
        path: list[1]!.path,
        check: (b) =>
          count(b, /href="[^"]*\/transactions\/[0-9a-f-]{36}"/g) === 25 &&
          b.includes(`${total.toLocaleString('en-US')} transactions`)
            ? null
            : `25 rows of ${total}`,
      },
      {
        label: 'transactions, page 400',
        path: `${list[1]!.path}?page=400`,
        check: (b) =>
          count(b, /href="[^"]*\/transactions\/[0-9a-f-]{36}"/g) === 25 ? null : '25 rows',
      },
      {
        label: 'deliveries',
        path: list[5]!.path,
        check: (b) => (count(b, /data-delivery="/g) === 50 ? null : '50 rows'),
      },
    ]
    await checkPages(svc.base, token, pages)
    const results = pages.map((t) =>
      wrk(
        `GET ${t.label} (postgres, +${BIG_ROWS.toLocaleString('en-US')} rows)`,
        `${svc.base}${t.path}`,
        token,
      ),
    )
    const plans: {
      page: string
      statement: string
      plan: string
      ms: number
      nullsLast: { plan: string; ms: number } | null
    }[] = []
    for (const t of pages) {
      await (
        await app.handle(
          new Request(`${svc.base}${t.path}`, {
            headers: { cookie: `__Host-cp_session=${token}` },
          }),
        )
      ).text()
      seen.length = 0
      const res = await app.handle(
        new Request(`${svc.base}${t.path}`, { headers: { cookie: `__Host-cp_session=${token}` } }),
      )
      if (res.status !== 200 || t.check(await res.text()))
        throw new Error(`in-process ${t.label} on the large project: ${res.status}`)
      for (const q of seen.slice()) {
        if (/dashboard_sessions|project_members/.test(q.text)) continue
        const [row] = await client.unsafe(`EXPLAIN (ANALYZE, FORMAT JSON) ${q.text}`, replayable(q))
        const plan = (row as any)['QUERY PLAN'][0]
        const text = q.text.replace(/\s+/g, ' ')
        const statement = `${/^select count\(\*\)/.test(text) ? 'count(*) ' : /group by/i.test(text) ? 'aggregate ' : 'rows '}from ${/from "(\w+)"/.exec(text)?.[1]}${/order by/i.test(text) ? ` order by …${/limit/.test(text) ? ' limit' : ''}${/offset \$\d+/.test(text) ? ' offset' : ''}` : ''}`
        // The list indexes are `created_at DESC NULLS LAST` (drizzle's `.desc()`); the same
        // statement with its ORDER BY spelled that way shows whether the index could serve it.
        const nullsLast = q.text.replace(/" desc(?= *,| +limit| *$)/gi, '" desc nulls last')
        let matched: { plan: string; ms: number } | null = null
        if (nullsLast !== q.text) {
          const [alt] = await client.unsafe(
            `EXPLAIN (ANALYZE, FORMAT JSON) ${nullsLast}`,
            replayable(q),
          )
          const a = (alt as any)['QUERY PLAN'][0]
          matched = { plan: planChain(a.Plan), ms: a['Planning Time'] + a['Execution Time'] }
        }
        plans.push({
          page: t.label,
          statement,
          plan: planChain(plan.Plan),
          ms: plan['Planning Time'] + plan['Execution Time'],
          nullsLast: matched,
        })
      }
    }
    return { results, plans }
  }

  const wrk = (name: string, url: string, token: string): Result =>
    // wrk's default 2 s timeout would drop the slowest answers of the large project from the
    // percentiles.
    runWrk(name, url, {
      seconds: SECONDS,
      connections: CONNECTIONS,
      extraArgs: ['--timeout', '10s', '-H', `Cookie: __Host-cp_session=${token}`],
    })

  async function serviceRun(backend: Backend, receiverPort: number) {
    const svc = await startService(backend)
    try {
      const t0 = Date.now()
      const data = await seed(svc, receiverPort)
      const token = await signIn(svc.base)
      const list = targets(svc.projectId, data)
      const bodies = await checkPages(svc.base, token, list)
      console.error(
        `${backend}: seeded ${TRANSACTIONS} transactions (${CANCELLED} cancelled, ${COMPLETED} completed), ${data.ofCompleted} deliveries for the completed one, in ${((Date.now() - t0) / 1000).toFixed(0)} s; pages ${list.map((t) => `${t.label} ${bodies.get(t.label)!.length} B`).join(', ')}`,
      )
      const results = list.map((t) =>
        wrk(`GET ${t.label} (${backend})`, `${svc.base}${t.path}`, token),
      )
      // The session must still be good after the runs: every measured response was the page.
      await checkPages(svc.base, token, list.slice(0, 1))
      const inProcess =
        backend === 'postgres' ? await countStatements(svc, token, list, data.endpointId) : null
      return { results, bodies, inProcess }
    } finally {
      await svc.stop()
    }
  }

  const work = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-cert-'))
  await selfSignedTls(work)

  const results: Result[] = []
  const receiver = await startReceiver()
  let pglite: Awaited<ReturnType<typeof serviceRun>>
  let pg: Awaited<ReturnType<typeof serviceRun>>
  try {
    pglite = await serviceRun('pglite', receiver.port)
    // The bare baseline serves the overview PGlite just rendered, while no service runs.
    writeFileSync(join(work, 'page.html'), pglite.bodies.get('overview')!)
    const bare = await startProcess(['bench/dashboard.ts', '--bare'], {
      TLS_CERT_FILE: join(work, 'cert.pem'),
      TLS_KEY_FILE: join(work, 'key.pem'),
      BENCH_HTML_FILE: join(work, 'page.html'),
    })
    try {
      results.push(
        runWrk(
          'bare Bun.serve, same overview bytes (baseline)',
          `https://127.0.0.1:${bare.port}/dashboard/x/test`,
          { seconds: SECONDS, connections: CONNECTIONS },
        ),
      )
    } finally {
      await stopProcess(bare)
    }
    if (!process.env.DATABASE_URL)
      process.env.DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test'
    pg = await serviceRun('postgres', receiver.port)
    results.push(...pg.results, ...(pg.inProcess?.big?.results ?? []), ...pglite.results)
  } finally {
    receiver.stop()
    rmSync(work, { recursive: true, force: true })
  }

  // In-process, nothing else running: one sign-in's hash, and the overview rendered alone.
  const { hashPassword, verifyPassword } = await import('../src/users/user.service.ts')
  const { overviewPage } = await import('../src/modules/dashboard/overview/page.ts')
  const { PAY_ASSETS_DIR } = await import('../src/modules/pay/index.ts')
  const { DASHBOARD_ASSETS_DIR } = await import('../src/modules/dashboard/index.ts')
  const { loadStaticAssets, SHARED_ASSETS_DIR } = await import('../src/http/static-assets.ts')
  const stored = await hashPassword(PASSWORD)
  const verify = await timeCalls(() => verifyPassword(PASSWORD, stored), 20, 2)
  // Four at once: do hashes run in parallel (thread pool), or one after another?
  const parallelStart = Bun.nanoseconds()
  const ok4 = await Promise.all(Array.from({ length: 4 }, () => verifyPassword(PASSWORD, stored)))
  const parallel4Ms = (Bun.nanoseconds() - parallelStart) / 1e6
  if (!ok4.every(Boolean)) throw new Error('verifyPassword refused the right password')
  const assets = loadStaticAssets([SHARED_ASSETS_DIR, PAY_ASSETS_DIR, DASHBOARD_ASSETS_DIR])
  const ip = pg.inProcess!
  const frame = {
    asset: assets.url,
    email: EMAIL,
    project: ip.members[0]!,
    projects: ip.members,
    mode: 'test' as const,
    csrf: 'x'.repeat(43),
  }
  const today = new Date().toISOString().slice(0, 10)
  const range = {
    start: new Date(Date.now() - 29 * 86_400_000).toISOString().slice(0, 10),
    end: today,
  }
  const rendered = overviewPage(frame, range, ip.overview, null)
  if (!rendered.includes(`data-stat="total_transactions">${TRANSACTIONS.toLocaleString('en-US')}<`))
    throw new Error('overviewPage did not render the stats')
  const render = await timeCalls(() => overviewPage(frame, range, ip.overview, null), 20_000, 2_000)
  const yearRange = {
    start: new Date(Date.now() - 364 * 86_400_000).toISOString().slice(0, 10),
    end: today,
  }
  const renderYear = await timeCalls(
    () => overviewPage(frame, yearRange, ip.overview, null),
    5_000,
    500,
  )

  const baseline = results[0]!.rps
  const bunVersion = spawnSync(BUN, ['--version'], { encoding: 'utf8' }).stdout.trim()
  console.log(
    `\n${new Date().toISOString()} · Bun ${bunVersion} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · wrk -t1 -c${CONNECTIONS} -d${SECONDS}s --timeout 10s, HTTPS keep-alive, session cookie · ${TRANSACTIONS} transactions · whole run ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
  )
  console.log('| target | req/s | p50 ms | p99 ms | vs bare | non-2xx |')
  console.log('|---|---:|---:|---:|---:|---:|')
  for (const r of results)
    console.log(
      `| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${((100 * r.rps) / baseline).toFixed(1)}% | ${r.errors}${r.errors ? ` of ${r.requests}` : ''} |`,
    )
  console.log(
    `\nBodies (PGlite): ${[...pglite.bodies].map(([k, v]) => `${k} ${v.length.toLocaleString('en-US')} B`).join(', ')}.\n`,
  )
  console.log(
    '| page (PostgreSQL, in-process app.handle, no HTTP/TLS) | statements | PG plan+exec ms (EXPLAIN ANALYZE, sum) | one at a time, median ms | 32 at once, req/s | Bun CPU µs per request |',
  )
  console.log('|---|---:|---:|---:|---:|---:|')
  for (const c of ip.counted)
    console.log(
      `| ${c.label} | ${c.statements} | ${c.pgMs.toFixed(2)} | ${c.medianMs.toFixed(2)} | ${c.concurrentRps.toFixed(0)} | ${c.cpuUsPerRequest.toFixed(0)} |`,
    )
  console.log('\n| in-process | median µs | p99 µs |')
  console.log('|---|---:|---:|')
  console.log(
    `| verifyPassword, scrypt N=2^15 r=8 (20 calls) | ${verify.median.toFixed(0)} | ${verify.p99.toFixed(0)} |`,
  )
  console.log(`| 4 × verifyPassword at once (wall time) | ${(parallel4Ms * 1000).toFixed(0)} | |`)
  console.log(
    `| overviewPage, 30 days (20,000 calls) | ${render.median.toFixed(1)} | ${render.p99.toFixed(1)} |`,
  )
  console.log(
    `| overviewPage, 365 days (5,000 calls) | ${renderYear.median.toFixed(1)} | ${renderYear.p99.toFixed(1)} |`,
  )
  if (ip.big) {
    console.log(
      `\nThe same project with ${BIG_ROWS.toLocaleString('en-US')} more transactions and deliveries (PostgreSQL; the page's own statements, EXPLAIN ANALYZE):\n`,
    )
    console.log(
      '| page | statement | plan | plan+exec ms | same, ORDER BY … DESC NULLS LAST as the index | ms |',
    )
    console.log('|---|---|---|---:|---|---:|')
    for (const p of ip.big.plans)
      console.log(
        `| ${p.page} | ${p.statement} | ${p.plan} | ${p.ms.toFixed(2)} | ${p.nullsLast?.plan ?? ''} | ${p.nullsLast ? p.nullsLast.ms.toFixed(2) : ''} |`,
      )
  }
  console.log('\nStatements per page (PostgreSQL):')
  for (const c of ip.counted)
    console.log(
      `- ${c.label}: ${c.statements}\n${c.distinct.map((q) => `    ${q.slice(0, 220)}`).join('\n')}`,
    )
  const bad = results.filter((r) => r.errors > 0)
  if (bad.length) {
    console.error(
      `\nNON-2xx RESPONSES in ${bad.map((r) => r.name).join(', ')}: those rows did not measure the page`,
    )
    process.exit(1)
  }
}
