import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { transactions } from '../../src/db/schema.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { backends } from '../helpers/databases.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

for (const backend of backends()) {
  describe(`GET /api/transactions/{id} and /api/transactions/project/{projectId} [${backend}]`, () => {
    const clock = manualClock(Date.parse('2030-01-01T00:00:00.000Z'))
    let t: TestServer
    let p: { id: string; key: string }
    const created: { id: string; created_at: string; status: string }[] = []

    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
      p = await t.project()
      // 12 transactions a second apart, then 3 in the same millisecond (ties).
      for (let i = 0; i < 12; i++) {
        clock.advance(1000)
        created.push(
          (await (await api(t, p.key).create({ amount: i + 1, order_id: `o-${i}` })).json())
            .transaction,
        )
      }
      clock.advance(1000)
      for (let i = 0; i < 3; i++)
        created.push((await (await api(t, p.key).create({ amount: 100 + i })).json()).transaction)
      // Give a few of them other statuses, as the lifecycle will.
      for (const [i, status] of [
        [0, 'completed'],
        [1, 'completed'],
        [2, 'expired'],
        [3, 'pending'],
      ] as const) {
        await t.server.services.database.db
          .update(transactions)
          .set({ status })
          .where(eq(transactions.id, created[i].id))
        created[i].status = status
      }
    })
    afterAll(() => t?.stop())

    describe('get', () => {
      test('returns the same full object create returned', async () => {
        const first = (
          await (
            await api(t, p.key).create({ amount: 9.99, order_id: 'same', metadata: { a: 1 } })
          ).json()
        ).transaction
        const res = await api(t, p.key).get(`/api/transactions/${first.id}`)
        expect(res.status).toBe(200)
        expect(await res.json()).toEqual({ success: true, transaction: first })
      })

      test('400 for an id that is not a UUID, 404 for an unknown one', async () => {
        const bad = await api(t, p.key).get('/api/transactions/12345')
        expect(bad.status).toBe(400)
        expect((await bad.json()).error.details).toEqual([
          { path: 'id', message: 'must be a UUID' },
        ])
        expect(
          (await api(t, p.key).get('/api/transactions/00000000-0000-4000-8000-000000000000'))
            .status,
        ).toBe(404)
      })
    })

    describe('list', () => {
      const list = async (query = '') => {
        const res = await api(t, p.key).get(`/api/transactions/project/${p.id}${query}`)
        return { status: res.status, body: await res.json() }
      }
      const expectedOrder = () =>
        [...created]
          .sort((a, b) =>
            a.created_at === b.created_at
              ? a.id < b.id
                ? 1
                : -1
              : a.created_at < b.created_at
                ? 1
                : -1,
          )
          .map((x) => x.id)

      test('newest first, ties broken by id descending, default limit 50', async () => {
        const { status, body } = await list()
        expect(status).toBe(200)
        expect(body.success).toBe(true)
        const ids = body.transactions
          .map((x: { id: string }) => x.id)
          .filter((id: string) => created.some((c) => c.id === id))
        expect(ids).toEqual(expectedOrder())
        expect(body.pagination.limit).toBe(50)
        expect(body.pagination.offset).toBe(0)
      })

      test('pages with limit and offset cover everything exactly once', async () => {
        const all = (await list('?limit=100')).body
        const total = all.pagination.total
        const seen: string[] = []
        for (let offset = 0; offset < total; offset += 4) {
          const { body } = await list(`?limit=4&offset=${offset}`)
          expect(body.pagination).toEqual({ limit: 4, offset, total, has_more: offset + 4 < total })
          seen.push(...body.transactions.map((x: { id: string }) => x.id))
        }
        expect(seen).toEqual(all.transactions.map((x: { id: string }) => x.id))
        const past = await list(`?offset=${total}`)
        expect(past.body.transactions).toEqual([])
        expect(past.body.pagination.has_more).toBe(false)
      })

      test('filters by status', async () => {
        const { body } = await list('?status=completed')
        expect(body.transactions.map((x: { id: string }) => x.id).sort()).toEqual(
          [created[0].id, created[1].id].sort(),
        )
        expect(body.pagination.total).toBe(2)
        expect((await list('?status=cancelled')).body.pagination.total).toBe(0)
      })

      const bad: [string, string][] = [
        ['?status=done', 'status'],
        ['?status=', 'status'],
        ['?limit=0', 'limit'],
        ['?limit=101', 'limit'],
        ['?limit=abc', 'limit'],
        ['?limit=1.5', 'limit'],
        ['?limit=-1', 'limit'],
        ['?offset=-1', 'offset'],
        ['?offset=x', 'offset'],
        ['?limit=5&limit=6', 'limit'],
      ]
      for (const [query, path] of bad) {
        test(`400 for ${query}`, async () => {
          const { status, body } = await list(query)
          expect(status).toBe(400)
          expect(body.error.type).toBe('invalid_request_error')
          expect(body.error.details.map((d: { path: string }) => d.path)).toEqual([path])
        })
      }
    })
  })
}
