import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { manualClock } from '../../src/lib/clock.ts'
import { backends } from '../helpers/databases.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const WINDOWS = ['Minute', 'Hour', 'Day'] as const
const headersOf = (res: Response) =>
  Object.fromEntries(
    WINDOWS.flatMap((w) =>
      ['Limit', 'Remaining', 'Reset'].map((k) => [
        `${k}-${w}`,
        res.headers.get(`x-ratelimit-${k.toLowerCase()}-${w.toLowerCase()}`),
      ]),
    ),
  )

for (const backend of backends()) {
  describe(`rate limits (docs/decisions/0023-rate-limits-exact.md) [${backend}]`, () => {
    // 10:00:30 UTC: half a minute into the window, so Retry-After values are predictable.
    const clock = manualClock(Date.parse('2030-03-04T10:00:30.000Z'))
    let t: TestServer
    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
    })
    afterAll(() => t?.stop())

    test('every /api response carries the nine headers, errors included', async () => {
      const p = await t.project({ limits: { minute: 100, hour: 1000, day: 10000 } })
      const responses = [
        await api(t, p.key).create({ amount: 1 }),
        await api(t, p.key).create({ amount: -1 }),
        await api(t, p.key).get('/api/transactions/not-a-uuid'),
        await api(t, p.key).get('/api/transactions/00000000-0000-4000-8000-000000000000'),
        await api(t, p.key).get('/api/no-such-route'),
        await api(t, null).get('/api/transactions/stats'),
        await api(t, 'sk_test_nonsense').get('/api/transactions/stats'),
      ]
      expect(responses.map((r) => r.status)).toEqual([200, 400, 400, 404, 404, 401, 401])
      for (const res of responses) {
        const h = headersOf(res)
        for (const [name, value] of Object.entries(h)) expect(value, name).not.toBeNull()
        expect(h['Reset-Minute']).toBe('2030-03-04T10:01:00.000Z')
        expect(h['Reset-Hour']).toBe('2030-03-04T11:00:00.000Z')
        expect(h['Reset-Day']).toBe('2030-03-05T00:00:00.000Z')
      }
    })

    test('Remaining counts down per request in each window, from the project limits', async () => {
      const p = await t.project({ limits: { minute: 7, hour: 50, day: 500 } })
      const seen = []
      for (let i = 0; i < 3; i++)
        seen.push(headersOf(await api(t, p.key).get('/api/transactions/stats')))
      expect(
        seen.map((h) => [
          h['Limit-Minute'],
          h['Remaining-Minute'],
          h['Limit-Hour'],
          h['Remaining-Hour'],
          h['Limit-Day'],
          h['Remaining-Day'],
        ]),
      ).toEqual([
        ['7', '6', '50', '49', '500', '499'],
        ['7', '5', '50', '48', '500', '498'],
        ['7', '4', '50', '47', '500', '497'],
      ])
    })

    test('over the minute limit: 429 rate_limit_error with Retry-After to the end of the minute', async () => {
      const p = await t.project({ limits: { minute: 3, hour: 100, day: 1000 } })
      for (let i = 0; i < 3; i++)
        expect((await api(t, p.key).get('/api/transactions/stats')).status).toBe(200)
      const res = await api(t, p.key).create({ amount: 1 })
      expect(res.status).toBe(429)
      expect(res.headers.get('retry-after')).toBe('30')
      expect(headersOf(res)['Remaining-Minute']).toBe('0')
      const body = await res.json()
      expect(body).toMatchObject({ success: false, error: { type: 'rate_limit_error' } })
    })

    test('refused requests are not counted, and the next minute starts afresh while the hour keeps counting', async () => {
      const p = await t.project({ limits: { minute: 2, hour: 3, day: 100 } })
      for (let i = 0; i < 2; i++)
        expect((await api(t, p.key).get('/api/transactions/stats')).status).toBe(200)
      expect((await api(t, p.key).get('/api/transactions/stats')).status).toBe(429)
      expect((await api(t, p.key).get('/api/transactions/stats')).status).toBe(429)
      clock.advance(60_000)
      const next = await api(t, p.key).get('/api/transactions/stats')
      expect(next.status).toBe(200)
      expect(headersOf(next)['Remaining-Minute']).toBe('1')
      expect(headersOf(next)['Remaining-Hour']).toBe('0')
      const hourOver = await api(t, p.key).get('/api/transactions/stats')
      expect(hourOver.status).toBe(429)
      // The hour window ends at 11:00:00; the clock is at 10:01:30.
      expect(hourOver.headers.get('retry-after')).toBe(String(58 * 60 + 30))
      clock.advance(-60_000)
    })

    test('test and live keys of one project share its limits', async () => {
      const p = await t.project({ limits: { minute: 4, hour: 100, day: 1000 } })
      const live = await t.key(p.id, 'live')
      expect(
        headersOf(await api(t, p.key).get('/api/transactions/stats'))['Remaining-Minute'],
      ).toBe('3')
      expect(
        headersOf(await api(t, live.key).get('/api/transactions/stats'))['Remaining-Minute'],
      ).toBe('2')
    })

    test('projects are limited separately', async () => {
      const a = await t.project({ limits: { minute: 1, hour: 100, day: 1000 } })
      const b = await t.project({ limits: { minute: 1, hour: 100, day: 1000 } })
      expect((await api(t, a.key).get('/api/transactions/stats')).status).toBe(200)
      expect((await api(t, a.key).get('/api/transactions/stats')).status).toBe(429)
      expect((await api(t, b.key).get('/api/transactions/stats')).status).toBe(200)
    })

    test('exact under concurrency: of 200 simultaneous requests with a limit of 60, exactly 60 pass', async () => {
      const p = await t.project({ limits: { minute: 60, hour: 1000, day: 10000 } })
      const responses = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          i % 2
            ? api(t, p.key).create({ amount: 1 })
            : api(t, p.key).get('/api/transactions/stats'),
        ),
      )
      const ok = responses.filter((r) => r.status === 200)
      const limited = responses.filter((r) => r.status === 429)
      expect(ok).toHaveLength(60)
      expect(limited).toHaveLength(140)
      const remaining = ok
        .map((r) => Number(r.headers.get('x-ratelimit-remaining-minute')))
        .sort((x, y) => x - y)
      expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => i))
      for (const r of limited) expect(r.headers.get('retry-after')).toBe('30')
      const stats = await t.server.services.stats.stats({ projectId: p.id, mode: 'test' }, {})
      expect(stats.ok && (stats.value as { total_transactions: number }).total_transactions).toBe(
        ok.filter((r) => r.url.endsWith('/create')).length,
      )
    })

    test('requests without a valid key are counted per client IP under the default limits', async () => {
      // A fresh server: this test spends the loopback address's whole anonymous minute.
      const fresh = await startTestServer(
        backend,
        {},
        { clock: manualClock(Date.parse('2030-03-04T10:00:30.000Z')) },
      )
      try {
        const statuses = []
        for (let i = 0; i < 61; i++)
          statuses.push(
            (await api(fresh, i % 2 ? null : 'sk_test_wrong').get('/api/transactions/stats'))
              .status,
          )
        expect(statuses.slice(0, 60).every((s) => s === 401)).toBe(true)
        expect(statuses[60]).toBe(429)
        const p = await fresh.project()
        expect((await api(fresh, p.key).get('/api/transactions/stats')).status).toBe(200)
      } finally {
        await fresh.stop()
      }
    })

    test('pages outside /api carry no rate-limit headers', async () => {
      const res = await t.fetch('/swagger/json')
      expect(res.status).toBe(200)
      expect(res.headers.get('x-ratelimit-limit-minute')).toBeNull()
      expect(res.headers.get('x-request-id')).toMatch(/^req_/)
    })
  })
}

for (const backend of backends()) {
  describe(`rate limits and idempotency across a restart [${backend}]`, () => {
    // Ten minutes into the hour, so the restart stays inside every window.
    const clock = manualClock(Date.parse('2030-03-04T10:10:05.000Z'))
    let t: TestServer
    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
    })
    afterAll(() => t?.stop())

    test('a restart inside a window keeps its counts', async () => {
      const p = await t.project({ limits: { minute: 5, hour: 50, day: 500 } })
      for (let i = 0; i < 3; i++)
        expect((await api(t, p.key).get('/api/transactions/stats')).status).toBe(200)
      await t.restart()
      const after = await api(t, p.key).get('/api/transactions/stats')
      expect(after.status).toBe(200)
      expect([
        headersOf(after)['Remaining-Minute'],
        headersOf(after)['Remaining-Hour'],
        headersOf(after)['Remaining-Day'],
      ]).toEqual(['1', '46', '496'])
      expect((await api(t, p.key).get('/api/transactions/stats')).status).toBe(200)
      const refused = await api(t, p.key).get('/api/transactions/stats')
      expect(refused.status).toBe(429)
      expect(refused.headers.get('retry-after')).toBe('55')
    })

    test('an idempotency key survives a restart: the same body replays the first response, another is 409', async () => {
      const p = await t.project()
      const body = { amount: 12.5, order_id: 'restart-1' }
      const first = await api(t, p.key).create(body, { 'idempotency-key': 'restart-key' })
      expect(first.status).toBe(200)
      const firstText = await first.text()
      await t.restart()
      const replay = await api(t, p.key).create(body, { 'idempotency-key': 'restart-key' })
      expect(replay.status).toBe(200)
      expect(replay.headers.get('idempotent-replayed')).toBe('true')
      expect(await replay.text()).toBe(firstText)
      const other = await api(t, p.key).create(
        { ...body, amount: 13 },
        { 'idempotency-key': 'restart-key' },
      )
      expect(other.status).toBe(409)
      const list = await api(t, p.key).get(`/api/transactions/project/${p.id}`)
      expect(((await list.json()) as { pagination: { total: number } }).pagination.total).toBe(1)
    })
  })
}
