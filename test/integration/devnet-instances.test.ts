/**
 * The devnet of `npm start` is one instance's (docs/operating/instances.md): two instances on one
 * PostgreSQL without NETWORKS_CONFIG would each run a chain of their own, and a payment through
 * one would land where the other never looks, while both said ready. The second start is refused,
 * naming NETWORKS_CONFIG and the file the first wrote; given that file, it follows the same
 * chain and sees the first's payment complete.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { waitUntil } from '../helpers/chain.ts'
import { expectStatus } from '../helpers/expect.ts'
import { killAllProcesses, runCli, spawnServer, startProcess } from '../helpers/processes.ts'

afterAll(killAllProcesses)

describe.skipIf(!process.env.DATABASE_URL)(
  'the devnet with two instances on one PostgreSQL',
  () => {
    test("the second without NETWORKS_CONFIG is refused and told the first devnet's file; with it, it follows the same chain", async () => {
      const pg = await freshPostgres()
      const [a, b] = [await freshDataDir(), await freshDataDir()]
      const base = { ...pg.env, PORT: '0', HTTP_PORT: '0', LOG_LEVEL: 'info', NETWORKS_CONFIG: '' }
      try {
        const first = await spawnServer({ ...base, DATA_DIR: a })
        try {
          const second = startProcess('src/main.ts', { env: { ...base, DATA_DIR: b } })
          const exit = await second.exited
          expect(exit.code).not.toBe(0)
          const file = join(a, 'devnet', 'networks.json')
          expect(second.stderr()).toContain('NETWORKS_CONFIG')
          expect(second.stderr()).toContain(`NETWORKS_CONFIG=${file}`)

          // `cli status` with an instance's DATA_DIR is that instance's readiness, as /readyz says.
          const readyz = (await (await first.fetch('/readyz')).json()) as any
          const status = await runCli(['status', '--json'], { env: { ...pg.env, DATA_DIR: a } })
          expect(status.json.checks.map((c: any) => c.name)).toEqual(
            readyz.checks.map((c: any) => c.name),
          )
          expect(readyz.checks.map((c: any) => c.name)).toContain('relayer:devnet')

          const follower = await spawnServer({ ...base, DATA_DIR: b, NETWORKS_CONFIG: file })
          try {
            await waitUntil(
              'the second follows the devnet',
              async () => (await (await follower.fetch('/readyz')).json()) as any,
              (r) =>
                r.status === 'ready' &&
                r.checks.some((c: any) => c.name === 'chain:devnet' && c.ok),
              60_000,
              200,
            )
            // A payment through the first completes as the second sees it.
            const cliEnv = { env: { ...pg.env, DATA_DIR: a } }
            const project = await runCli(['project', 'create', '--name', 'Two', '--json'], cliEnv)
            const made = await runCli(
              [
                'key',
                'create',
                '--project',
                project.json.id,
                '--mode',
                'test',
                '--name',
                'k',
                '--json',
              ],
              cliEnv,
            )
            const auth = {
              authorization: `Bearer ${made.json.key}`,
              'content-type': 'application/json',
            }
            const created = await first.fetch('/api/transactions/create', {
              method: 'POST',
              headers: auth,
              body: '{"amount": 3}',
            })
            const id = ((await created.json()) as any).transaction.id as string
            await expectStatus(
              await first.fetch(`/pay/${id}/select`, {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: '{"token_symbol":"TUSD","blockchain_network":"devnet"}',
              }),
              200,
            )
            await expectStatus(await first.fetch(`/pay/${id}/test-wallet`, { method: 'POST' }), 200)
            await waitUntil(
              'completed, read through the second',
              async () =>
                (
                  (await (
                    await follower.fetch(`/api/transactions/${id}`, { headers: auth })
                  ).json()) as any
                ).transaction,
              (t) => t.status === 'completed',
              60_000,
              200,
            )
          } finally {
            await follower.stop()
          }
        } finally {
          await first.stop()
        }
      } finally {
        await pg.drop()
        for (const d of [a, b]) rmSync(d, { recursive: true, force: true })
      }
    }, 180_000)
  },
)
