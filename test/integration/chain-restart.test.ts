/**
 * docs/decisions/0030-block-follower-finds-reorgs-itself.md: the server is SIGKILLed while a
 * payment is confirming, and another payment is mined while it is down. After a restart on the same
 * DATA_DIR (and database) the follower catches up from its stored cursor: both transactions
 * complete, each exactly once. Separate server processes (Bun), a real anvil mined by hand, real
 * signed TUSD transfers.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { startManualChain, waitUntil, writeNetworksFile } from '../helpers/chain.ts'
import { expectStatus } from '../helpers/expect.ts'
import { killAllProcesses, runCli, spawnServer, type ServerProcess } from '../helpers/processes.ts'

const CONFIRMATIONS = 3

for (const backend of backends()) {
  describe(`chain payments across a SIGKILL [${backend}]`, () => {
    const cleanups: (() => Promise<unknown> | unknown)[] = []
    afterAll(async () => {
      await killAllProcesses()
      for (const c of cleanups.reverse()) await c()
    })

    test('a payment confirming at the kill and one mined during the downtime both complete after the restart', async () => {
      const chain = await startManualChain()
      cleanups.push(() => chain.stop())
      const dir = mkdtempSync(join(tmpdir(), 'chain-restart-'))
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
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
        NETWORKS_CONFIG: writeNetworksFile(dir, [
          chain.network({ confirmations: CONFIRMATIONS, pollIntervalMs: 100 }),
        ]),
        ...(pg ? pg.env : {}),
      }
      const cli = async (...args: string[]) => {
        const r = await runCli([...args, '--json'], { env })
        if (r.code !== 0) throw new Error(`cli ${args.join(' ')}: ${r.stderr}`)
        return r.json
      }

      let server: ServerProcess = await spawnServer(env)
      cleanups.push(() => server.stop())
      const project = await cli('project', 'create', '--name', 'Chain restart')
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
      const auth = { authorization: `Bearer ${key}` }
      const tx = async (id: string) =>
        ((await (await server.fetch(`/api/transactions/${id}`, { headers: auth })).json()) as any)
          .transaction
      const timeline = async (id: string) =>
        (
          (await (
            await server.fetch(`/api/transactions/${id}/timeline`, { headers: auth })
          ).json()) as any
        ).timeline as any[]
      async function selected() {
        const created = await server.fetch('/api/transactions/create', {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: '{"amount": 25}',
        })
        await expectStatus(created, 200)
        const id = ((await created.json()) as any).transaction.id as string
        const r = await server.fetch(`/pay/${id}/select`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"token_symbol":"TUSD","blockchain_network":"localchain"}',
        })
        await expectStatus(r, 200)
        const s = (await r.json()) as any
        return {
          id,
          address: s.quote.deposit_address as string,
          units: BigInt(s.quote.token_amount),
        }
      }

      const a = await selected()
      const b = await selected()
      const hashA = await chain.sendRaw(await chain.signTokenTransfer(a.address, a.units))
      const blockA = await chain.mine()
      await waitUntil(
        'A confirming',
        () => tx(a.id),
        (x) => x.status === 'confirming' && x.confirmations === 1,
      )

      server.kill('SIGKILL')
      await server.exited

      // While it is down: B pays, and the chain moves well past both payments' confirmations.
      const hashB = await chain.sendRaw(await chain.signTokenTransfer(b.address, b.units))
      const blockB = await chain.mine()
      await chain.mine(CONFIRMATIONS + 2)

      server = await spawnServer(env)
      const doneA = await waitUntil(
        'A completed',
        () => tx(a.id),
        (x) => x.status === 'completed',
      )
      const doneB = await waitUntil(
        'B completed',
        () => tx(b.id),
        (x) => x.status === 'completed',
      )
      expect(doneA).toMatchObject({
        transaction_hash: hashA,
        block_number: Number(blockA),
        amount_received: a.units.toString(),
      })
      expect(doneB).toMatchObject({
        transaction_hash: hashB,
        block_number: Number(blockB),
        amount_received: b.units.toString(),
      })
      expect(doneB.confirmations).toBeGreaterThanOrEqual(CONFIRMATIONS)

      // Each transfer counted once, each transaction completed once, across the crash.
      for (const id of [a.id, b.id]) {
        const moves = (await timeline(id))
          .filter((e) => e.from_status !== e.to_status)
          .map((e) => e.to_status)
        expect(moves).toEqual(['created', 'prepared', 'processing', 'confirming', 'completed'])
      }
    })
  })
}
