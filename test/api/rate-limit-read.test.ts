/**
 * The shared rate limiter reads a GET's transaction in the grant's own statement
 * (docs/decisions/0023-rate-limits-exact.md, "One round trip"): a batch of requests costs one
 * statement, grants and reads together, on a real database. Also with reads the grant stays
 * exact across two limiters (two instances) sharing the counter, a refused request reads
 * nothing it is given, and over HTTP a read transaction is still the caller's own or a 404.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { transactions } from '../../src/db/schema.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { createRateLimitRepo } from '../../src/limits/rate-limit.repo.ts'
import { createRateLimiter } from '../../src/limits/rate-limiter.ts'
import { backends } from '../helpers/databases.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const NOW = Date.parse('2030-01-01T00:00:10Z')

for (const backend of backends()) {
  describe(`a grant that reads [${backend}]`, () => {
    let t: TestServer
    let own: { id: string; key: string }
    let other: { id: string; key: string }
    const ids: string[] = []
    let othersTx: string

    beforeAll(async () => {
      t = await startTestServer(backend)
      own = await t.project()
      other = await t.project()
      for (let i = 0; i < 3; i++) {
        const r = await api(t, own.key).create({ amount: 10 + i })
        ids.push(((await r.json()) as any).transaction.id)
      }
      const r = await api(t, other.key).create({ amount: 5 })
      othersTx = ((await r.json()) as any).transaction.id
    })
    afterAll(() => t?.stop())

    /** A limiter over the server's database, counting the statements it sends. */
    function countingLimiter() {
      const database = t.server.services.database
      const sent: string[] = []
      const repo = createRateLimitRepo({
        ...database,
        query: (text, params) => {
          sent.push(text)
          return database.query(text, params)
        },
      })
      return { limiter: createRateLimiter({ repo, clock: manualClock(NOW) }), sent }
    }

    test('one statement per batch grants it and reads each request its transaction', async () => {
      const { limiter, sent } = countingLimiter()
      const limits = { minute: 100, hour: 1000, day: 10_000 }
      const missing = '00000000-0000-4000-8000-000000000000'
      const subject = `project:${crypto.randomUUID()}`
      // The first goes alone; the rest wait for it and go together.
      const decisions = await Promise.all(
        [ids[0]!, ids[1]!, ids[2]!, ids[1]!, missing, othersTx, undefined].map((id) =>
          limiter.check(subject, limits, id),
        ),
      )
      expect(sent).toHaveLength(2)
      expect(decisions.map((d) => d.allowed)).toEqual(Array(7).fill(true))
      expect(decisions.map((d) => d.windows.minute.remaining)).toEqual([99, 98, 97, 96, 95, 94, 93])
      expect(decisions.map((d) => d.read && [d.read.id, d.read.row?.id ?? null])).toEqual([
        [ids[0], ids[0]],
        [ids[1], ids[1]],
        [ids[2], ids[2]],
        [ids[1], ids[1]],
        [missing, null],
        // Read by id alone: the route checks the scope (below, over HTTP).
        [othersTx, othersTx],
        undefined,
      ])
      // Read as the service's own read gives it: the same row, decoded alike.
      const row = decisions[0]!.read!.row!
      const [stored] = await t.server.services.database.db
        .select()
        .from(transactions)
        .where(eq(transactions.id, ids[0]!))
      expect(row).toEqual(stored!)
      expect(row.createdAt).toBeInstanceOf(Date)
      expect(row.projectId).toBe(own.id)
    })

    test('a refused request is given nothing read, and still costs one statement', async () => {
      const { limiter, sent } = countingLimiter()
      const limits = { minute: 2, hour: 1000, day: 10_000 }
      const subject = `project:${crypto.randomUUID()}`
      await limiter.check(subject, limits, ids[0])
      await limiter.check(subject, limits, ids[0])
      const refused = await limiter.check(subject, limits, ids[0])
      expect(sent).toHaveLength(3)
      expect(refused.allowed).toBe(false)
      expect(refused.read).toBeUndefined()
      expect(refused.windows.minute.remaining).toBe(0)
    })

    test('two limiters on one counter, every request reading: exactly the limit is admitted, Remaining exact', async () => {
      const a = countingLimiter()
      const b = countingLimiter()
      const limits = { minute: 25, hour: 1000, day: 10_000 }
      const subject = `project:${crypto.randomUUID()}`
      const decisions = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          (i % 2 ? a : b).limiter.check(subject, limits, ids[i % 3]),
        ),
      )
      const admitted = decisions.filter((d) => d.allowed)
      expect(admitted).toHaveLength(25)
      // Every admitted request saw a distinct remaining count, 24 down to 0: none counted twice.
      expect(admitted.map((d) => d.windows.minute.remaining).sort((x, y) => x - y)).toEqual(
        Array.from({ length: 25 }, (_, i) => i),
      )
      expect(admitted.every((d) => d.read?.row?.id === d.read?.id)).toBe(true)
      expect(decisions.filter((d) => !d.allowed).every((d) => d.read === undefined)).toBe(true)
    })

    test('over HTTP: the own transaction is served, another project’s is a 404 like none', async () => {
      const mine = await api(t, own.key).get(`/api/transactions/${ids[0]}`)
      expect(mine.status).toBe(200)
      expect(((await mine.json()) as any).transaction.id).toBe(ids[0])
      const theirs = await api(t, own.key).get(`/api/transactions/${othersTx}`)
      expect(theirs.status).toBe(404)
      const none = await api(t, own.key).get(
        '/api/transactions/00000000-0000-4000-8000-000000000000',
      )
      expect(none.status).toBe(404)
      const [a, b] = (await Promise.all([theirs.json(), none.json()])) as any[]
      expect(a.error.type).toBe(b.error.type)
      expect(a.error.message).toBe(`No transaction ${othersTx}`)
    })
  })
}
