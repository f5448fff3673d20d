/**
 * docs/decisions/0051-graceful-stop-drains.md: a graceful stop drains. On SIGTERM the readiness
 * probe turns 503 at once (so a balancer sends new requests elsewhere during SHUTDOWN_DRAIN), an
 * open pay-page event stream ends cleanly instead of holding the stop for the whole grace period,
 * and the process exits 0. `npm run cli -- status --json` prints the readiness report an operator
 * reads.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { killAllProcesses, spawnServer } from '../helpers/processes.ts'
import { cliProject, cliWith, createTransaction, waitUntil } from '../helpers/webhook-cli.ts'

afterAll(killAllProcesses)

for (const backend of backends()) {
  describe(`graceful stop [${backend}]`, () => {
    test('SIGTERM: /readyz turns 503 naming "stopping", an open event stream ends cleanly, then the process exits 0', async () => {
      const pg = backend === 'postgres' ? await freshPostgres() : null
      const env = {
        DATA_DIR: await freshDataDir(),
        PORT: '0',
        HTTP_PORT: '0',
        LOG_LEVEL: 'info',
        SHUTDOWN_DRAIN: '2s',
        ...(pg?.env ?? {}),
      }
      const server = await spawnServer(env)
      try {
        const cli = cliWith(env)
        const status = await cli.run('status')
        expect(status.code).toBe(0)
        expect(status.json).toMatchObject({ status: 'ready', failed: [] })
        expect(status.json.checks.map((c: { name: string }) => c.name)).toEqual([
          'database',
          'migrations',
          'data_dir',
        ])

        const { key } = await cliProject(cli, 'Draining shop')
        const id = await createTransaction(server.fetch, key)
        const res = await server.fetch(`/pay/${id}/events`)
        expect(res.headers.get('content-type')).toStartWith('text/event-stream')
        const reader = res.body!.getReader()
        const first = new TextDecoder().decode((await reader.read()).value)
        expect(first).toContain('retry:')

        const order: string[] = []
        const ended = (async () => {
          for (;;) {
            const { done } = await reader.read()
            if (done) return order.push('stream ended cleanly')
          }
        })().catch((e) => order.push(`stream broke: ${e}`))
        const exited = server.exited.then((exit) => {
          order.push('exited')
          return exit
        })

        server.kill('SIGTERM')
        let draining: any = null
        await waitUntil(async () => {
          const r = await server.fetch('/readyz')
          draining = r.status === 503 ? await r.json() : null
          return draining !== null
        })
        order.push('not ready')
        expect(draining).toMatchObject({ status: 'not_ready', failed: ['stopping'] })
        await ended
        expect((await exited).code).toBe(0)
        // The stream ended by itself (not cut off by a forced close) before the process went away.
        expect(order.filter((o) => o !== 'not ready')).toEqual(['stream ended cleanly', 'exited'])
        expect(order.indexOf('not ready')).toBeLessThan(order.indexOf('exited'))
      } finally {
        server.kill('SIGKILL')
        await pg?.drop()
      }
    })
  })
}
