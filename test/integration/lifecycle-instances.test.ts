import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import postgres from 'postgres'
import { freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import { killAllProcesses, runCli, spawnServer, type ServerProcess } from '../helpers/processes.ts'

/**
 * docs/decisions/0029-several-instances-leases-and-claims.md, several instances on one PostgreSQL:
 * each actor is run by one live instance; when one is SIGKILLed its actors are taken over within
 * seconds; events reaching any instance apply exactly once. PGlite is one instance by design, so
 * this runs only with DATABASE_URL.
 */
const describeIfPg = process.env.DATABASE_URL ? describe : describe.skip

for (const count of [2, 3]) {
  describeIfPg(`${count} instances on one PostgreSQL`, () => {
    const cleanups: (() => Promise<void> | void)[] = []
    afterAll(async () => {
      await killAllProcesses()
      for (const c of cleanups.reverse()) await c()
    })

    test("a killed instance's actors are taken over and every event applies exactly once", async () => {
      const pg = await freshPostgres()
      cleanups.push(() => pg.drop())
      const servers: ServerProcess[] = []
      for (let i = 0; i < count; i++) {
        const dataDir = await freshDataDir()
        cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
        servers.push(
          await spawnServer({
            DATA_DIR: dataDir,
            PORT: '0',
            HTTP_PORT: '0',
            LOG_LEVEL: 'info',
            ACTOR_LEASE_MS: '1000',
            ...pg.env,
          }),
        )
      }
      const env = { ...pg.env, DATA_DIR: '/nonexistent' }
      const cli = async (...args: string[]) => {
        const r = await runCli([...args, '--json'], { env })
        return { code: r.code, json: r.json }
      }
      const project = (await cli('project', 'create', '--name', 'Instances')).json
      await cli(
        'project',
        'set-limits',
        '--project',
        project.id,
        '--minute',
        '100000',
        '--hour',
        '100000',
        '--day',
        '100000',
      )
      const { key } = (
        await cli('key', 'create', '--project', project.id, '--mode', 'test', '--name', 'k')
      ).json
      const auth = { authorization: `Bearer ${key}` }
      const [a, ...survivors] = servers

      // Every transaction is created (and so owned) by instance A; half are moved to pending
      // through the database by the CLI, a non-owner whose change reaches A by NOTIFY.
      const ids: string[] = []
      for (let i = 0; i < 8; i++) {
        const res = await a.fetch('/api/transactions/create', {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: '{"amount": 25}',
        })
        ids.push((await res.json()).transaction.id)
      }
      const pendingIds = ids.slice(0, 4)
      const createdIds = ids.slice(4)
      for (const id of pendingIds)
        for (const e of PATH_TO.pending)
          expect(
            (await cli('transaction', 'event', '--id', id, '--event', JSON.stringify(e))).code,
          ).toBe(0)

      const sql = postgres(pg.url, { max: 1, onnotice: () => {} })
      cleanups.push(() => sql.end())
      const owners = async () =>
        (await sql`select a.transaction_id, a.owner, coalesce(i.lease_until > now(), false) as live from transaction_actors a left join instances i on i.id = a.owner order by a.transaction_id`) as unknown as {
          transaction_id: string
          owner: string | null
          live: boolean
        }[]
      const initial = await owners()
      expect(initial).toHaveLength(8)
      const ownerA = initial[0].owner
      expect(initial.every((r) => r.owner === ownerA && r.live)).toBe(true)

      a.kill('SIGKILL')
      await a.exited
      let taken = await owners()
      for (
        let i = 0;
        i < 200 && !taken.every((r) => r.owner !== ownerA && r.owner !== null && r.live);
        i++
      ) {
        await Bun.sleep(50)
        taken = await owners()
      }
      expect(taken.every((r) => r.owner !== ownerA && r.owner !== null && r.live)).toBe(true)

      // Concurrent, conflicting events through different doors: cancels on every survivor and
      // a payment through the database (the CLI). Each transaction leaves pending exactly once.
      await Promise.all(
        pendingIds.map((id, i) =>
          Promise.all([
            ...survivors.map((s) =>
              s.fetch(`/api/transactions/${id}/cancel`, { method: 'POST', headers: auth }),
            ),
            cli(
              'transaction',
              'event',
              '--id',
              id,
              '--event',
              JSON.stringify({ type: 'payment.detected', txHash: `0x${i}`, amount: '25000000' }),
            ),
          ]),
        ),
      )
      await Promise.all(
        createdIds.map((id) =>
          Promise.all(
            survivors.map((s) =>
              s.fetch(`/api/transactions/${id}/cancel`, { method: 'POST', headers: auth }),
            ),
          ),
        ),
      )

      const history = async (id: string) =>
        (
          await (
            await survivors[0].fetch(`/api/transactions/${id}/timeline`, { headers: auth })
          ).json()
        ).timeline as { from_status: string | null; to_status: string }[]
      for (const id of pendingIds) {
        const h = await history(id)
        expect(h.filter((e) => e.from_status === 'pending')).toHaveLength(1)
        expect(['cancelled', 'processing']).toContain(h.at(-1)!.to_status)
      }
      for (const id of createdIds) {
        const h = await history(id)
        expect(h.map((e) => e.to_status)).toEqual(['created', 'cancelled'])
      }
      const outbox =
        (await sql`select transaction_id, event_type, count(*)::int as n from outbox group by 1, 2 having count(*) > 1`) as unknown as unknown[]
      expect(outbox).toEqual([])
    })
  })
}
