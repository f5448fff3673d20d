import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { inArray } from 'drizzle-orm'
import { transactions } from '../../src/db/schema.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { backends } from '../helpers/databases.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const STATUSES = [
  'created',
  'prepared',
  'pending',
  'processing',
  'confirming',
  'completed',
  'failed',
  'expired',
  'cancelled',
]

for (const backend of backends()) {
  describe(`GET /api/transactions/stats [${backend}]`, () => {
    const clock = manualClock(Date.parse('2030-05-01T12:00:00.000Z'))
    let t: TestServer
    let p: { id: string; key: string }
    let liveKey: string
    const stats = async (key: string, query = '') => {
      const res = await api(t, key).get(`/api/transactions/stats${query}`)
      return { status: res.status, body: await res.json() }
    }
    const at = async (iso: string, key: string, amount: number, status?: string) => {
      clock.set(Date.parse(iso))
      const tx = (await (await api(t, key).create({ amount })).json()).transaction
      if (status)
        await t.server.services.database.db
          .update(transactions)
          .set({ status })
          .where(inArray(transactions.id, [tx.id]))
      return tx
    }

    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
      p = await t.project()
      liveKey = (await t.key(p.id, 'live')).key
      // Test mode: 3 completed (10.10 + 20.20 + 0.01), 1 failed, 2 created; spread over three days.
      await at('2030-05-01T00:00:00.000Z', p.key, 10.1, 'completed')
      await at('2030-05-01T23:59:59.999Z', p.key, 20.2, 'completed')
      await at('2030-05-02T08:00:00.000Z', p.key, 0.01, 'completed')
      await at('2030-05-02T09:00:00.000Z', p.key, 99, 'failed')
      await at('2030-05-03T00:00:00.000Z', p.key, 5)
      await at('2030-05-03T10:00:00.000Z', p.key, 6)
      // Live mode: 1 completed (1000), 2 expired.
      await at('2030-05-01T10:00:00.000Z', liveKey, 1000, 'completed')
      await at('2030-05-02T10:00:00.000Z', liveKey, 7, 'expired')
      await at('2030-05-02T11:00:00.000Z', liveKey, 8, 'expired')
    })
    afterAll(() => t?.stop())

    test('a test key counts test transactions: volume of completed ones, exact cents, rate to two decimals', async () => {
      const { status, body } = await stats(p.key)
      expect(status).toBe(200)
      expect(body).toEqual({
        success: true,
        stats: {
          total_transactions: 6,
          total_volume_usd: 30.31,
          volume_by_currency: { USD: 30.31 },
          completed_transactions: 3,
          conversion_rate: 50,
          by_status: Object.fromEntries(
            STATUSES.map((s) => [s, { created: 2, completed: 3, failed: 1 }[s] ?? 0]),
          ),
        },
      })
    })

    test('the daily series (the dashboard chart) splits the same selection by UTC day, each mode apart', async () => {
      const daily = await t.server.services.stats.daily(
        { projectId: p.id, mode: 'test' },
        { start_date: '2030-05-01', end_date: '2030-05-03' },
      )
      expect(daily).toEqual({
        ok: true,
        value: [
          {
            date: '2030-05-01',
            total_transactions: 2,
            completed_transactions: 2,
            total_volume_usd: 30.3,
            conversion_rate: 100,
          },
          {
            date: '2030-05-02',
            total_transactions: 2,
            completed_transactions: 1,
            total_volume_usd: 0.01,
            conversion_rate: 50,
          },
          {
            date: '2030-05-03',
            total_transactions: 2,
            completed_transactions: 0,
            total_volume_usd: 0,
            conversion_rate: 0,
          },
        ],
      })
      const live = await t.server.services.stats.daily(
        { projectId: p.id, mode: 'live' },
        { start_date: '2030-05-02', end_date: '2030-05-02' },
      )
      expect(live).toEqual({
        ok: true,
        value: [
          {
            date: '2030-05-02',
            total_transactions: 2,
            completed_transactions: 0,
            total_volume_usd: 0,
            conversion_rate: 0,
          },
        ],
      })
      expect(
        await t.server.services.stats.daily(
          { projectId: p.id, mode: 'test' },
          { start_date: '2030-05-03', end_date: '2030-05-01' },
        ),
      ).toMatchObject({ ok: false, code: 'invalid_request' })
    })

    test('a test key ignores testing_mode=false: it never sees live data', async () => {
      expect((await stats(p.key, '?testing_mode=false')).body.stats.total_transactions).toBe(6)
    })

    test('a live key counts live transactions; with testing_mode=true test ones as well', async () => {
      const live = (await stats(liveKey)).body.stats
      expect(live).toMatchObject({
        total_transactions: 3,
        total_volume_usd: 1000,
        completed_transactions: 1,
        conversion_rate: 33.33,
      })
      expect(live.by_status.expired).toBe(2)
      const both = (await stats(liveKey, '?testing_mode=true')).body.stats
      expect(both).toMatchObject({
        total_transactions: 9,
        total_volume_usd: 1030.31,
        completed_transactions: 4,
        conversion_rate: 44.44,
      })
    })

    test('a date-only end_date covers that whole UTC day; start_date is inclusive', async () => {
      expect(
        (await stats(p.key, '?start_date=2030-05-01&end_date=2030-05-01')).body.stats,
      ).toMatchObject({ total_transactions: 2, total_volume_usd: 30.3 })
      expect((await stats(p.key, '?start_date=2030-05-02')).body.stats.total_transactions).toBe(4)
      expect((await stats(p.key, '?end_date=2030-05-02')).body.stats.total_transactions).toBe(4)
    })

    test('timestamps bound exactly, inclusive at both ends, with offsets understood', async () => {
      expect(
        (
          await stats(
            p.key,
            '?start_date=2030-05-01T23:59:59.999Z&end_date=2030-05-02T08:00:00.000Z',
          )
        ).body.stats.total_transactions,
      ).toBe(2)
      expect(
        (
          await stats(
            p.key,
            '?start_date=2030-05-02T10:00:00%2B02:00&end_date=2030-05-02T09:00:00Z',
          )
        ).body.stats.total_transactions,
      ).toBe(2)
      expect(
        (
          await stats(
            p.key,
            '?start_date=2030-05-02T10:00:00.001%2B02:00&end_date=2030-05-02T09:00:00Z',
          )
        ).body.stats.total_transactions,
      ).toBe(1)
    })

    test('an empty range gives zeros and a conversion rate of 0', async () => {
      const { body } = await stats(p.key, '?start_date=2031-01-01')
      expect(body.stats).toEqual({
        total_transactions: 0,
        total_volume_usd: 0,
        volume_by_currency: {},
        completed_transactions: 0,
        conversion_rate: 0,
        by_status: Object.fromEntries(STATUSES.map((s) => [s, 0])),
      })
    })

    test("another project's transactions are never counted", async () => {
      const other = await t.project({ name: 'Other' })
      await at('2030-05-01T12:00:00.000Z', other.key, 1, 'completed')
      expect((await stats(p.key)).body.stats.total_transactions).toBe(6)
      expect((await stats(other.key)).body.stats.total_transactions).toBe(1)
    })

    test('the widest ranges work: year 0001 to 9999-12-31, offsets at the edges included', async () => {
      for (const q of [
        '?start_date=0001-01-01&end_date=9999-12-31',
        '?start_date=0001-01-01T00:00:00%2B01:00&end_date=9999-12-31T23:59:59-01:00',
      ]) {
        const { status, body } = await stats(p.key, q)
        expect(status).toBe(200)
        expect(body.stats.total_transactions).toBe(6)
      }
    })

    const bad: [string, string][] = [
      ['?start_date=0000-01-01', 'start_date'],
      ['?start_date=2030-05-02&end_date=2030-05-01', 'start_date'],
      ['?start_date=yesterday', 'start_date'],
      ['?start_date=2030-13-01', 'start_date'],
      ['?start_date=2030-02-30', 'start_date'],
      ['?end_date=2030-05-01T25:00:00Z', 'end_date'],
      ['?end_date=05/01/2030', 'end_date'],
      ['?start_date=2030-05-03&end_date=2030-05-01', 'start_date'],
      ['?testing_mode=yes', 'testing_mode'],
    ]
    for (const [query, path] of bad) {
      test(`400 for ${query}`, async () => {
        const { status, body } = await stats(p.key, query)
        expect(status).toBe(400)
        expect(body.error.details.map((d: { path: string }) => d.path)).toEqual([path])
      })
    }
  })
}
