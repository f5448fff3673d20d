/**
 * Stats from settled days (docs/decisions/0066-stats-from-settled-days.md), a property: for random
 * ranges (date and timestamp bounds, whole and partial days, open ends), `GET
 * /api/transactions/stats` and the dashboard's daily series equal a direct aggregate over the same
 * rows, before and after days are rolled up, after status changes (completions, cancellations,
 * expiries) and after reorgs that take a payment back; rolled up in bounded chunks, by two instances
 * at once, and at start. A seeded random history of 45 days on a manual clock; transactions move
 * only through the lifecycle, as in the service.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { TxEvent } from '../../machines/transaction.machine.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { createRollups } from '../../src/modules/transactions/rollups.ts'
import { backends } from '../helpers/databases.ts'
import { waitUntil } from '../helpers/chain.ts'
import { PATH_TO, TX_HASH } from '../helpers/lifecycle.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const DAY = 86_400_000
const T0 = Date.parse('2030-01-01T00:00:00.000Z')

/** Mulberry32: the same history on every run. */
function rng(seed: number) {
  let a = seed
  return () => {
    a |= 0
    a = (a + 0x6d2b79f5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296
  }
}

for (const backend of backends()) {
  describe(`stats from settled days equal a direct aggregate [${backend}]`, () => {
    const clock = manualClock(T0)
    const random = rng(38)
    let t: TestServer
    let p: { id: string; key: string }
    /** Transactions left open (processing), to settle later. */
    const open: string[] = []

    const apply = async (id: string, events: TxEvent[]) => {
      for (const e of events) {
        const r = await t.server.services.lifecycle.apply(id, e)
        if (!r.ok) throw new Error(`${e.type} on ${id}: ${r.message}`)
      }
    }

    /**
     * Waits for the deadlines `runDue` fired to be recorded (an actor's transition is written after
     * the call returns): nothing open but the `processing` ones left so on purpose.
     */
    const deadlinesRecorded = (processing: number) =>
      waitUntil(
        'the due deadlines recorded',
        async () =>
          (
            await t.server.services.database.query<{ status: string; n: string }>(
              `SELECT status, count(*)::text AS n FROM transactions WHERE project_id = $1
                 AND status IN ('created', 'prepared', 'pending', 'processing', 'confirming') GROUP BY 1`,
              [p.id],
            )
          ).map((r) => `${r.status}:${r.n}`),
        (open) => open.join() === (processing ? `processing:${processing}` : ''),
      )

    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
      p = await t.project()
      for (let day = 0; day < 45; day++) {
        const n = Math.floor(random() * 6)
        for (let i = 0; i < n; i++) {
          clock.set(T0 + day * DAY + Math.floor(random() * DAY))
          const amount = (Math.round(random() * 100_000) + 1) / 100
          const r = await api(t, p.key).create({ amount, expires_in_minutes: 60 })
          const id = ((await r.json()) as any).transaction.id as string
          const fate = random()
          if (fate < 0.45) await apply(id, PATH_TO.completed)
          else if (fate < 0.55) await apply(id, [{ type: 'cancel.requested', by: 'merchant' }])
          else if (fate < 0.62 && day < 30) {
            await apply(id, PATH_TO.processing)
            open.push(id)
          } else if (fate < 0.7) await apply(id, PATH_TO.pending)
          // The rest stay created or prepared and expire at their deadline.
          t.server.services.scheduler.runDue()
        }
      }
      // A busy day (600 more, left to expire): the list's deep pages start 500 rows in.
      clock.set(T0 + 44 * DAY)
      for (let i = 0; i < 600; i++) {
        clock.advance(1_000)
        const r = await api(t, p.key).create({ amount: 1, expires_in_minutes: 1 })
        if (r.status !== 200) throw new Error(`create: ${r.status}`)
      }
      clock.set(T0 + 48 * DAY)
      t.server.services.scheduler.runDue()
      await deadlinesRecorded(open.length)
    })
    afterAll(() => t?.stop())

    /** The reference: the same selection straight from the rows. */
    async function direct(start: Date | null, end: Date | null, endInclusive: boolean) {
      const rows = await t.server.services.database.query<{
        status: string
        day: string
        n: string
        usd: string | null
      }>(
        `SELECT status, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*)::text AS n, sum(amount_usd)::text AS usd
         FROM transactions WHERE project_id = $1 AND testing_mode
           AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
           AND ($3::timestamptz IS NULL OR (CASE WHEN $4 THEN created_at <= $3::timestamptz ELSE created_at < $3::timestamptz END))
         GROUP BY 1, 2`,
        [p.id, start?.toISOString() ?? null, end?.toISOString() ?? null, endInclusive],
      )
      const byStatus: Record<string, number> = {}
      const days = new Map<string, { total: number; completed: number; cents: bigint }>()
      let total = 0
      let cents = 0n
      for (const r of rows) {
        const n = Number(r.n)
        byStatus[r.status] = (byStatus[r.status] ?? 0) + n
        total += n
        const d = days.get(r.day) ?? { total: 0, completed: 0, cents: 0n }
        d.total += n
        if (r.status === 'completed') {
          const c = BigInt(Math.round(Number(r.usd) * 100))
          cents += c
          d.completed += n
          d.cents += c
        }
        days.set(r.day, d)
      }
      return { total, byStatus, cents, days }
    }

    /**
     * A random bound at `ms`: open (null), the date it falls on, or the timestamp itself; a date
     * end covers its whole day.
     */
    function bound(ms: number, edge: 'start' | 'end'): { query: string | null; at: Date | null } {
      const x = random()
      if (x < 0.15) return { query: null, at: null }
      if (x < 0.55) {
        const day = new Date(ms).toISOString().slice(0, 10)
        const at = Date.parse(`${day}T00:00:00Z`) + (edge === 'end' ? DAY : 0)
        return { query: day, at: new Date(at) }
      }
      return { query: new Date(ms).toISOString(), at: new Date(ms) }
    }

    async function checkRanges(count: number) {
      for (let i = 0; i < count; i++) {
        const [a, b] = [0, 0]
          .map(() => T0 - 2 * DAY + Math.floor(random() * 52 * DAY))
          .sort((x, y) => x - y) as [number, number]
        const s = bound(a, 'start')
        const e = bound(b, 'end')
        if (s.at && e.at && s.at >= e.at) continue
        const endDateOnly = e.query !== null && e.query.length === 10
        const qs = new URLSearchParams({
          ...(s.query ? { start_date: s.query } : {}),
          ...(e.query ? { end_date: e.query } : {}),
        })
        const res = await api(t, p.key).get(`/api/transactions/stats?${qs}`)
        const answer = (await res.json()) as any
        if (res.status !== 200) throw new Error(`${qs}: ${JSON.stringify(answer)}`)
        const body = answer.stats
        const want = await direct(s.at, e.at, !endDateOnly)
        const label = `range ${qs}`
        expect({ label, total: body.total_transactions }).toEqual({ label, total: want.total })
        for (const [status, n] of Object.entries(body.by_status))
          expect({ label, status, n }).toEqual({ label, status, n: want.byStatus[status] ?? 0 })
        expect({ label, cents: Math.round(body.total_volume_usd * 100) }).toEqual({
          label,
          cents: Number(want.cents),
        })
        const selected = {
          ...(s.query ? { start_date: s.query } : {}),
          ...(e.query ? { end_date: e.query } : {}),
        }
        const daily = await t.server.services.stats.daily(
          { projectId: p.id, mode: 'test' },
          selected,
        )
        if (!daily.ok) throw new Error(daily.message)
        // The dashboard's overview reads both at once: the same numbers.
        const overview = await t.server.services.stats.overview(
          { projectId: p.id, mode: 'test' },
          selected,
        )
        if (!overview.ok) throw new Error(overview.message)
        expect({ label, overview: overview.value }).toEqual({
          label,
          overview: { stats: body, daily: daily.value },
        })
        expect({
          label,
          days: daily.value.map((d) => [
            d.date,
            d.total_transactions,
            d.completed_transactions,
            Math.round(d.total_volume_usd * 100),
          ]),
        }).toEqual({
          label,
          days: [...want.days.keys()]
            .sort()
            .map((d) => [
              d,
              want.days.get(d)!.total,
              want.days.get(d)!.completed,
              Number(want.days.get(d)!.cents),
            ]),
        })
      }
    }

    const marked = async () =>
      (
        await t.server.services.database.query<{ through: string | null }>(
          `SELECT to_char(through_day, 'YYYY-MM-DD') AS through FROM transaction_rollup_marks WHERE project_id = $1 AND testing_mode`,
          [p.id],
        )
      )[0]?.through ?? null
    const rolledUp = async () =>
      Number(
        (
          await t.server.services.database.query<{ n: string }>(
            'SELECT coalesce(sum(n), 0)::text AS n FROM transaction_rollups WHERE project_id = $1',
            [p.id],
          )
        )[0]!.n,
      )

    const rowsByDay = async () =>
      new Map(
        (
          await t.server.services.database.query<{ day: string; n: string }>(
            `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*)::text AS n
             FROM transactions WHERE project_id = $1 AND testing_mode GROUP BY 1`,
            [p.id],
          )
        ).map((r) => [r.day, Number(r.n)]),
      )

    test('random ranges, with days rolled up up to the first one holding an open payment', async () => {
      expect(open.length).toBeGreaterThan(0)
      await checkRanges(40)
      await t.server.services.rollups.idle()
      // Rolled up: every day before the first open one, and not that day.
      const firstOpen = await t.server.services.database.query<{ day: string }>(
        `SELECT to_char(min(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM transactions WHERE project_id = $1 AND status = 'processing'`,
        [p.id],
      )
      const through = await marked()
      expect(through).not.toBeNull()
      expect(new Date(`${through}T00:00:00Z`).getTime()).toBe(
        Date.parse(`${firstOpen[0]!.day}T00:00:00Z`) - DAY,
      )
      expect(await rolledUp()).toBeGreaterThan(0)
    })

    test('after the open payments complete, are reorged away or revert: the rest of the history rolls up and still adds up', async () => {
      const before = await rolledUp()
      for (const [i, id] of open.entries()) {
        if (i % 3 === 0) await apply(id, PATH_TO.completed.slice(3))
        else if (i % 3 === 1) {
          // A reorg takes the payment back: pending again, then its deadline (long past) fails it.
          await apply(id, [{ type: 'payment.reorged', txHash: TX_HASH }])
        } else await apply(id, [{ type: 'payment.reverted', txHash: TX_HASH }])
      }
      t.server.services.scheduler.runDue()
      await deadlinesRecorded(0)
      // Read before the newly settled days are rolled up: the rest read directly.
      await checkRanges(10)
      // A restart asks for every project's settled days at start, before any stats call.
      await t.restart()
      await t.server.services.rollups.idle()
      expect(await marked()).toBe(new Date(T0 + 45 * DAY).toISOString().slice(0, 10))
      await checkRanges(30)
      expect(await rolledUp()).toBeGreaterThan(before)
      // Every transaction of the history is rolled up now: nothing is open, the last day is 3 days old.
      const all = await t.server.services.database.query<{ n: string }>(
        'SELECT count(*)::text AS n FROM transactions WHERE project_id = $1',
        [p.id],
      )
      expect(await rolledUp()).toBe(Number(all[0]!.n))
    })
    test('a history without rollups (an upgrade), rolled up by two instances at once in bounded chunks: whole days, about chunkRows each, each day once', async () => {
      const { database } = t.server.services
      await database.query('DELETE FROM transaction_rollups WHERE project_id = $1', [p.id])
      await database.query('DELETE FROM transaction_rollup_marks WHERE project_id = $1', [p.id])
      const [a, b] = [
        createRollups({ database, clock, chunkRows: 20 }),
        createRollups({ database, clock, chunkRows: 20 }),
      ]
      const moved = (await Promise.all([a.catchUp(p.id, true), b.catchUp(p.id, true)])).flat()
      const marks = [...new Set(moved)].sort()
      expect(marks.length).toBe(moved.length)
      expect(marks.length).toBeGreaterThan(3)
      // Each chunk is the days after the previous mark up to its own: more than one day only
      // while its rows stay within chunkRows.
      const days = await rowsByDay()
      let prior = '0000-00-00'
      for (const mark of marks) {
        const inChunk = [...days].filter(([d]) => d > prior && d <= mark)
        if (inChunk.length > 1)
          expect({ mark, rows: inChunk.reduce((s, [, n]) => s + n, 0) <= 20 }).toEqual({
            mark,
            rows: true,
          })
        prior = mark
      }
      expect(await marked()).toBe(marks.at(-1)!)
      const rolled = [...days].filter(([d]) => d <= marks.at(-1)!).reduce((s, [, n]) => s + n, 0)
      expect(await rolledUp()).toBe(rolled)
      expect(marks.at(-1)).toBe(new Date(T0 + 45 * DAY).toISOString().slice(0, 10))
      // Caught up: nothing more until days settle.
      expect(await a.catchUp(p.id, true)).toEqual([])
      await checkRanges(10)
    })

    test('the list over rolled-up days: its total and any page, deep ones included, are those of the rows themselves', async () => {
      const rows = await t.server.services.database.query<{ id: string; status: string }>(
        'SELECT id, status FROM transactions WHERE project_id = $1 AND testing_mode ORDER BY created_at DESC, id DESC',
        [p.id],
      )
      // Every day is rolled up by now: the pages are read from the days' rollup counts.
      expect(await marked()).toBe(new Date(T0 + 45 * DAY).toISOString().slice(0, 10))
      for (const [status, offset, limit] of [
        [undefined, 0, 50],
        [undefined, 510, 37],
        [undefined, rows.length - 5, 20],
        ['expired', 520, 40],
        ['completed', 3, 10],
        [undefined, rows.length + 3, 10],
      ] as const) {
        const want = rows.filter((r) => !status || r.status === status)
        const qs = new URLSearchParams({
          limit: String(limit),
          offset: String(offset),
          ...(status ? { status } : {}),
        })
        const res = await api(t, p.key).get(`/api/transactions/project/${p.id}?${qs}`)
        const body = (await res.json()) as any
        expect({ qs: String(qs), total: body.pagination.total }).toEqual({
          qs: String(qs),
          total: want.length,
        })
        expect(body.transactions.map((x: any) => x.id)).toEqual(
          want.slice(offset, offset + limit).map((r) => r.id),
        )
      }
    })

    test("bounds at the calendar's edges, with days rolled up, answer 200 or 400 and never 500: stats and the export", async () => {
      const edges = [
        '9999-12-31T23:59:59.999Z',
        '9999-12-31T23:59:59Z',
        '9999-12-31',
        '9999-12-30T00:00:01+00:00',
        '0001-01-01',
        '0001-01-01T00:00:00.001Z',
        '0001-01-01T00:00:00+01:00',
        '2030-01-10T23:59:59.999-23:59',
      ]
      for (const start of [...edges, undefined])
        for (const end of [...edges, undefined]) {
          const qs = new URLSearchParams({
            ...(start ? { start_date: start } : {}),
            ...(end ? { end_date: end } : {}),
          })
          for (const path of ['/api/transactions/stats', '/api/transactions/export']) {
            const res = await api(t, p.key).get(`${path}?${qs}`)
            await res.arrayBuffer()
            expect({ path, qs: String(qs), ok: [200, 400].includes(res.status) }).toEqual({
              path,
              qs: String(qs),
              ok: true,
            })
          }
        }
    })
  })
}
