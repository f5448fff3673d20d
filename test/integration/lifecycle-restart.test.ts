import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import { killAllProcesses, runCli, spawnServer, type ServerProcess } from '../helpers/processes.ts'

type Status = 'created' | 'prepared' | 'pending' | 'processing' | 'confirming'
const NON_FINAL: Status[] = ['created', 'prepared', 'pending', 'processing', 'confirming']

/**
 * docs/decisions/0027-transaction-actors.md: SIGKILL the server while transactions sit in every
 * non-final status, restart it, and nothing is lost or doubled; the deadlines keep their original
 * time (docs/decisions/0013-absolute-deadlines.md). That an overdue one fires at once, and the
 * others at their deadline to the millisecond, is shown on a virtual clock in
 * actors-restart.test.ts.
 */
for (const backend of backends()) {
  describe(`SIGKILL and restart [${backend}]`, () => {
    const cleanups: (() => Promise<void> | void)[] = []
    afterAll(async () => {
      await killAllProcesses()
      for (const c of cleanups.reverse()) await c()
    })

    test('every non-final transaction survives with its status, deadline and history, and carries on', async () => {
      const dataDir = await freshDataDir()
      cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
      const pg = backend === 'postgres' ? await freshPostgres() : null
      if (pg) cleanups.push(() => pg.drop())
      const env = {
        DATA_DIR: dataDir,
        PORT: '0',
        HTTP_PORT: '0',
        LOG_LEVEL: 'info',
        ACTOR_LEASE_MS: '1000',
        ...(pg ? pg.env : {}),
      }
      const cli = async (...args: string[]) => {
        const r = await runCli([...args, '--json'], { env })
        if (r.code !== 0) throw new Error(`cli ${args.join(' ')}: ${r.stderr}`)
        return r.json
      }

      let server: ServerProcess = await spawnServer(env)
      const project = await cli('project', 'create', '--name', 'Restart')
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
      const { key } = await cli(
        'key',
        'create',
        '--project',
        project.id,
        '--mode',
        'test',
        '--name',
        'k',
      )
      const create = async () => {
        const res = await server.fetch('/api/transactions/create', {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: '{"amount": 25, "expires_in_minutes": 30}',
        })
        return (await res.json()).transaction as { id: string; expires_at: string }
      }
      const ids: Record<Status, string> = {} as never
      for (const status of NON_FINAL) {
        ids[status] = (await create()).id
        if (status !== 'created')
          for (const e of PATH_TO[status])
            await cli('transaction', 'event', '--id', ids[status], '--event', JSON.stringify(e))
      }

      const read = async (id: string) =>
        (
          await (
            await server.fetch(`/api/transactions/${id}`, {
              headers: { authorization: `Bearer ${key}` },
            })
          ).json()
        ).transaction
      const history = async (id: string) =>
        (
          await (
            await server.fetch(`/api/transactions/${id}/timeline`, {
              headers: { authorization: `Bearer ${key}` },
            })
          ).json()
        ).timeline
      const before: Record<string, { status: string; expires_at: string; timeline: unknown[] }> = {}
      for (const [name, id] of Object.entries(ids))
        before[name] = {
          status: (await read(id)).status,
          expires_at: (await read(id)).expires_at,
          timeline: await history(id),
        }
      expect(NON_FINAL.map((s) => before[s].status)).toEqual(NON_FINAL)

      server.kill('SIGKILL')
      await server.exited

      server = await spawnServer(env)
      cleanups.push(async () => void (await server.stop()))

      for (const status of NON_FINAL) {
        const now = await read(ids[status])
        expect(now.status).toBe(status)
        expect(now.expires_at).toBe(before[status].expires_at)
        expect(await history(ids[status])).toEqual(before[status].timeline)
      }

      // The restored actors carry on: a confirmation completes, a cancel cancels, and only once.
      const done = await cli(
        'transaction',
        'event',
        '--id',
        ids.confirming,
        '--event',
        JSON.stringify({ type: 'confirmations.updated', confirmations: 3, at: Date.now() }),
      )
      expect(done.status).toBe('completed')
      const cancel = await server.fetch(`/api/transactions/${ids.pending}/cancel`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
      })
      expect(cancel.status).toBe(200)
      expect(
        (
          await server.fetch(`/api/transactions/${ids.pending}/cancel`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}` },
          })
        ).status,
      ).toBe(409)
      expect(
        (await history(ids.pending)).filter(
          (e: { to_status: string }) => e.to_status === 'cancelled',
        ),
      ).toHaveLength(1)
    })
  })
}
