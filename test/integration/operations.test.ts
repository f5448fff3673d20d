/**
 * docs/decisions/0047-metrics-and-probes.md: what an operator scrapes and probes. /metrics parses
 * with an independent parser of the Prometheus text format and its counters move with real traffic
 * (a create, a payment mined on anvil, a webhook that lands and one that fails, a 429); scraping is
 * refused to a client that is not on loopback (as TRUST_PROXY's forwarded address says) and needs
 * METRICS_TOKEN when one is set; /readyz turns 503 naming the check when the RPC stays unreachable
 * beyond READY_CHAIN_MAX_LAG or PostgreSQL goes away, and 200 again once they are back.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import { backends, freshPostgres } from '../helpers/databases.ts'
import { waitUntil, type ManualChain } from '../helpers/chain.ts'
import { awayFromMinuteEnd, expectStatus } from '../helpers/expect.ts'
import type { RpcProxy } from '../helpers/rpc-proxy.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'
import { startTcpProxy } from '../helpers/tcp-proxy.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'

type Family = {
  name: string
  type: string
  metrics: {
    value?: string
    labels?: Record<string, string>
    count?: string
    buckets?: Record<string, string>
  }[]
}

async function scrape(
  fetchFn: (path: string, init?: RequestInit) => Promise<Response>,
  headers: Record<string, string> = {},
) {
  const r = await fetchFn('/metrics', { headers })
  await expectStatus(r, 200)
  expect(r.headers.get('content-type')).toStartWith('text/plain; version=0.0.4')
  const text = await r.text()
  const families = parsePrometheusTextFormat(text) as Family[]
  const family = (name: string) => families.find((f) => f.name === name)
  /**
   * The sum of the samples carrying these labels (0 when none does yet): counters start at zero
   * for every label set they know, so one label may name several series.
   */
  const value = (name: string, labels: Record<string, string> = {}) =>
    (family(name)?.metrics ?? [])
      .filter((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v))
      .reduce((sum, m) => sum + Number(m.value ?? m.count ?? 0), 0)
  /**
   * A histogram's observation count for one label set. The parser keeps a histogram's buckets
   * but drops its labels, `_count` and `_sum`, so this one reads the `_count` sample's line.
   */
  const observed = (name: string, labels: Record<string, string> = {}) => {
    const line = text
      .split('\n')
      .find(
        (l) =>
          l.startsWith(`${name}_count`) &&
          Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)),
      )
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0
  }
  return { families, family, value, observed }
}

const READY_LAG = '2s'

for (const backend of backends()) {
  describe(`metrics and readiness [${backend}]`, () => {
    let chain: ManualChain
    let proxy: RpcProxy
    let sink: WebhookSink
    let t: TestServer

    beforeAll(async () => {
      sink = await startWebhookSink()
    })
    afterAll(() => sink?.stop())
    useStack(
      backend,
      {
        chain: true,
        proxy: true,
        network: { confirmations: 2, pollIntervalMs: 100 },
        env: { READY_CHAIN_MAX_LAG: READY_LAG, WEBHOOK_RETRY_SCHEDULE: '1h' },
        project: false,
      },
      (s) => {
        chain = s.chain
        proxy = s.proxy
        t = s.t
      },
    )

    test('counters move with real traffic: a create, a payment on anvil, a webhook success and a failure, a 429', async () => {
      const p = await t.project({ limits: { minute: 3, hour: 1000, day: 10_000 } })
      for (const [path, mode] of [
        ['/ops-ok', 'ok'],
        ['/ops-fail', 'fail'],
      ] as const) {
        const ep = await t.server.services.endpoints.create({
          projectId: p.id,
          mode: 'test',
          url: sink.url(path),
          eventTypes: ['transaction.created', 'transaction.completed'],
        })
        if (!ep.ok) throw new Error(ep.message)
        await sink.configure(path, { secret: ep.value.secret, mode })
      }
      const before = await scrape(t.fetch)

      // The project's limit is 3 requests a minute: the create uses one, so of three reads the last
      // is refused. The create and the reads share one minute window: made at once, not near the
      // minute's end (the payment below takes a while).
      await awayFromMinuteEnd()
      const created = await api(t, p.key).create({ amount: 25 })
      await expectStatus(created, 200)
      const id = ((await created.json()) as any).transaction.id as string
      const statuses: number[] = []
      for (let i = 0; i < 3; i++)
        statuses.push((await api(t, p.key).get(`/api/transactions/${id}`)).status)
      expect(statuses).toEqual([200, 200, 429])
      const sel = await t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"token_symbol":"TUSD","blockchain_network":"localchain"}',
      })
      await expectStatus(sel, 200)
      const quote = ((await sel.json()) as any).quote
      await chain.sendRaw(
        await chain.signTokenTransfer(quote.deposit_address, BigInt(quote.token_amount)),
      )
      await chain.mine(3)
      // transaction.created and transaction.completed, each to both endpoints: two successes and
      // two failures.
      await sink.waitFor('/ops-ok', (r) => r.length === 2)
      await sink.waitFor('/ops-fail', (r) => r.length === 2)
      await t.server.services.deliveries.settled()

      const after = await scrape(t.fetch)
      const moved = (name: string, labels: Record<string, string> = {}) =>
        after.value(name, labels) - before.value(name, labels)
      const observedMore = (name: string, labels: Record<string, string> = {}) =>
        after.observed(name, labels) - before.observed(name, labels)
      expect(
        moved('cryptopay_http_requests_total', {
          route: '/api/transactions/create',
          method: 'POST',
          status: '200',
        }),
      ).toBe(1)
      expect(
        moved('cryptopay_http_requests_total', {
          route: '/api/transactions/:id',
          method: 'GET',
          status: '429',
        }),
      ).toBeGreaterThanOrEqual(1)
      expect(
        observedMore('cryptopay_http_request_duration_seconds', {
          route: '/api/transactions/create',
          method: 'POST',
        }),
      ).toBe(1)
      expect(after.family('cryptopay_http_request_duration_seconds')?.type).toBe('HISTOGRAM')
      expect(moved('cryptopay_rate_limited_total', { surface: 'api' })).toBeGreaterThanOrEqual(1)
      expect(moved('cryptopay_transactions_total', { status: 'created' })).toBe(1)
      expect(moved('cryptopay_transactions_total', { status: 'completed' })).toBe(1)
      expect(moved('cryptopay_webhook_deliveries_total', { result: 'success' })).toBe(2)
      expect(moved('cryptopay_webhook_deliveries_total', { result: 'failure' })).toBe(2)
      expect(observedMore('cryptopay_webhook_delivery_lag_seconds')).toBe(4)
      // The failed deliveries wait for their retry (in an hour) on this instance.
      expect(after.value('cryptopay_webhook_pending')).toBeGreaterThanOrEqual(2)
      const head = await chain.head()
      expect(after.value('cryptopay_chain_head_block', { network: 'localchain' })).toBe(
        Number(head),
      )
      expect(after.value('cryptopay_chain_follower_lag_blocks', { network: 'localchain' })).toBe(0)
      // The runtime's metrics are there too, under the standard names dashboards look for.
      expect(after.family('process_resident_memory_bytes')?.type).toBe('GAUGE')
      expect(after.family('process_cpu_seconds_total')?.type).toBe('COUNTER')
      expect(after.family('nodejs_eventloop_lag_seconds')?.type).toBe('GAUGE')
      expect(after.family('cryptopay_process_resident_memory_bytes')).toBeUndefined()
      // Label values are bounded: route templates, never a raw path with an id.
      const routes = after
        .family('cryptopay_http_requests_total')!
        .metrics.map((m) => m.labels!.route)
      expect(routes.some((r) => r.includes(id))).toBe(false)
    })

    test('/healthz answers while the process serves; /readyz lists every check', async () => {
      const live = await t.fetch('/healthz')
      await expectStatus(live, 200)
      expect(await live.json()).toEqual({ status: 'ok' })
      const ready = await t.fetch('/readyz')
      await expectStatus(ready, 200)
      const body = (await ready.json()) as any
      expect(body.status).toBe('ready')
      expect(body.failed).toEqual([])
      expect(body.checks.map((c: { name: string; ok: boolean }) => [c.name, c.ok])).toEqual([
        ['database', true],
        ['migrations', true],
        ['data_dir', true],
        ['chain:localchain', true],
      ])
    })

    test('/readyz turns 503 naming the chain when the RPC stays unreachable beyond READY_CHAIN_MAX_LAG, and 200 once it answers again', async () => {
      proxy.mode = 'refuse'
      const down = await waitUntil(
        'not ready',
        async () => (await t.fetch('/readyz')).json() as Promise<any>,
        (b) => b.status === 'not_ready',
        30_000,
        200,
      )
      expect(down.failed).toEqual(['chain:localchain'])
      expect(down.checks.find((c: any) => c.name === 'chain:localchain').detail).toContain(
        'the RPC fails',
      )
      expect((await t.fetch('/readyz')).status).toBe(503)
      const refused = await scrape(t.fetch)
      expect(
        refused.value('cryptopay_rpc_errors_total', { network: 'localchain' }),
      ).toBeGreaterThanOrEqual(1)
      proxy.mode = 'pass'
      const up = await waitUntil(
        'ready again',
        async () => t.fetch('/readyz'),
        (r) => r.status === 200,
        30_000,
        200,
      )
      expect(((await up.json()) as any).status).toBe('ready')
    })

    test('an unauthenticated scrape from a non-loopback client is refused (TRUST_PROXY forwarded address); with METRICS_TOKEN the token is required', async () => {
      const proxied = await startTestServer(backend, { TRUST_PROXY: '1' })
      try {
        const from = (ip: string) =>
          proxied.fetch('/metrics', {
            headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': ip },
          })
        const outside = await from('203.0.113.7')
        expect(outside.status).toBe(403)
        expect(await outside.text()).not.toContain('cryptopay_')
        expect((await from('127.0.0.1')).status).toBe(200)
        // The probes stay open to anyone, with nothing secret in them.
        expect(
          (
            await proxied.fetch('/readyz', {
              headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': '203.0.113.7' },
            })
          ).status,
        ).toBe(200)
      } finally {
        await proxied.stop()
      }
      const token = 'metrics-token-0123456789abcdef'
      const guarded = await startTestServer(backend, { METRICS_TOKEN: token })
      try {
        expect((await guarded.fetch('/metrics')).status).toBe(401)
        expect(
          (
            await guarded.fetch('/metrics', {
              headers: { authorization: 'Bearer wrong-token-0123456789abcdef' },
            })
          ).status,
        ).toBe(401)
        const ok = await scrape(guarded.fetch, { authorization: `Bearer ${token}` })
        expect(ok.family('cryptopay_http_requests_total')).toBeDefined()
      } finally {
        await guarded.stop()
      }
    })

    if (backend === 'postgres') {
      test('/readyz turns 503 naming the database while PostgreSQL is away, and 200 once it is back', async () => {
        const pg = await freshPostgres()
        const url = new URL(pg.url)
        const tcp = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) })
        url.port = String(tcp.port)
        const s = await startTestServer('postgres', { ...pg.env, DATABASE_URL: url.toString() })
        try {
          await expectStatus(await s.fetch('/readyz'), 200)
          tcp.cut()
          const down = await waitUntil(
            'not ready',
            async () => (await s.fetch('/readyz')).json() as Promise<any>,
            (b) => b.status === 'not_ready',
            30_000,
            200,
          )
          expect(down.failed).toContain('database')
          expect(down.failed).toContain('migrations')
          // Liveness is not readiness: the process still serves.
          await expectStatus(await s.fetch('/healthz'), 200)
          tcp.restore()
          await waitUntil(
            'ready again',
            async () => (await s.fetch('/readyz')).status,
            (st) => st === 200,
            30_000,
            200,
          )
        } finally {
          await s.stop()
          await tcp.close()
          await pg.drop()
        }
      })
    }
  })
}
