import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { freshPostgres } from '../helpers/databases.ts'
import { awayFromMinuteEnd } from '../helpers/expect.ts'
import { killAllProcesses, runCli, spawnServer, type ServerProcess } from '../helpers/processes.ts'

// docs/decisions/0023-rate-limits-exact.md: "exact under concurrency and across several instances".
// Two `bun src/main.ts` processes share one PostgreSQL database; PGlite is one process's database,
// so this needs DATABASE_URL.

const LIMITS = { minute: 50, hour: 1000, day: 10_000 }
const REQUESTS = 150

if (!process.env.DATABASE_URL) {
  test.skip('rate limits across two server processes: set DATABASE_URL (PGlite cannot be shared by two processes)', () => {})
} else {
  describe('rate limits across two server processes on one PostgreSQL database', () => {
    let pg: Awaited<ReturnType<typeof freshPostgres>>
    const dirs = [0, 1].map(() => mkdtempSync(join(tmpdir(), 'crypto-pay-instance-')))
    let servers: ServerProcess[]
    let projectId: string
    let key: string

    beforeAll(async () => {
      pg = await freshPostgres()
      // Both start at once on the empty database, so they also race to migrate it.
      servers = await Promise.all(
        dirs.map((d) => spawnServer({ ...pg.env, DATA_DIR: d, PORT: '0', HTTP_PORT: '0' })),
      )
      const cli = async (...args: string[]) => {
        const r = await runCli([...args, '--json'], { env: { ...pg.env, DATA_DIR: dirs[0] } })
        expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
        return r.json
      }
      projectId = (await cli('project', 'create', '--name', 'Two instances')).id
      await cli(
        'project',
        'set-limits',
        '--project',
        projectId,
        '--minute',
        String(LIMITS.minute),
        '--hour',
        String(LIMITS.hour),
        '--day',
        String(LIMITS.day),
      )
      key = (
        await cli('key', 'create', '--project', projectId, '--mode', 'test', '--name', 'Burst')
      ).key
    })
    afterAll(async () => {
      await Promise.all((servers ?? []).map((s) => s.stop()))
      await killAllProcesses()
      await pg?.drop()
      for (const d of dirs) rmSync(d, { recursive: true, force: true })
    })

    const create = (server: ServerProcess, i: number) =>
      server.fetch('/api/transactions/create', {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ amount: 1, order_id: `burst-${i}` }),
      })

    test(`${REQUESTS} concurrent creates split between the two: exactly ${LIMITS.minute} admitted, the rest 429 with Retry-After`, async () => {
      await awayFromMinuteEnd()
      const responses = await Promise.all(
        Array.from({ length: REQUESTS }, (_, i) => create(servers[i % 2], i)),
      )
      const admitted = responses.filter((r) => r.status === 200)
      const refused = responses.filter((r) => r.status === 429)
      expect(responses.map((r) => r.status).filter((s) => s !== 200 && s !== 429)).toEqual([])
      expect(admitted).toHaveLength(LIMITS.minute)
      expect(refused).toHaveLength(REQUESTS - LIMITS.minute)

      // Each admitted request got its own place in the window: Remaining is 49, 48, ... 0, each
      // once.
      const remaining = admitted
        .map((r) => Number(r.headers.get('x-ratelimit-remaining-minute')))
        .sort((x, y) => x - y)
      expect(remaining).toEqual(Array.from({ length: LIMITS.minute }, (_, i) => i))

      const resets = new Set(responses.map((r) => r.headers.get('x-ratelimit-reset-minute')))
      expect(resets.size).toBe(1)
      const reset = Date.parse([...resets][0]!)
      expect(reset % 60_000).toBe(0)
      for (const r of responses) {
        expect(r.headers.get('x-ratelimit-limit-minute')).toBe(String(LIMITS.minute))
        expect(r.headers.get('x-ratelimit-limit-hour')).toBe(String(LIMITS.hour))
        expect(r.headers.get('x-ratelimit-limit-day')).toBe(String(LIMITS.day))
        expect(r.headers.get('x-request-id')).toMatch(/^req_/)
      }
      for (const r of refused) {
        expect(r.headers.get('x-ratelimit-remaining-minute')).toBe('0')
        const retryAfter = Number(r.headers.get('retry-after'))
        // Whole seconds until the minute window ends.
        expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true)
        const body = await r.json()
        expect(body).toMatchObject({ success: false, error: { type: 'rate_limit_error' } })
      }
      // Hour and day windows counted the same 50 admissions.
      const minHour = Math.min(
        ...responses.map((r) => Number(r.headers.get('x-ratelimit-remaining-hour'))),
      )
      expect(minHour).toBe(LIMITS.hour - LIMITS.minute)

      // The refused requests created nothing.
      const sql = postgres(pg.url, { max: 1, onnotice: () => {} })
      try {
        const [{ n }] = await sql<
          { n: number }[]
        >`select count(*)::int as n from transactions where project_id = ${projectId}`
        expect(n).toBe(LIMITS.minute)
      } finally {
        await sql.end()
      }
    })

    test('a request without a valid key is counted per client IP, shared by both instances, not against the project', async () => {
      await awayFromMinuteEnd()
      const anonymous = async (server: ServerProcess, headers: Record<string, string> = {}) => {
        const res = await server.fetch('/api/transactions/stats', { headers })
        expect(res.status).toBe(401)
        expect(res.headers.get('x-ratelimit-limit-minute')).toBe('60') // the per-IP default, not the project's 50
        return Number(res.headers.get('x-ratelimit-remaining-minute'))
      }
      // The project's minute is used up; this client IP's is not, and both instances count it.
      const first = await anonymous(servers[0])
      expect(first).toBe(59)
      expect(await anonymous(servers[1])).toBe(58)
      expect(
        await anonymous(servers[0], { authorization: `Bearer sk_test_${'x'.repeat(40)}` }),
      ).toBe(57)
    })
  })
}
