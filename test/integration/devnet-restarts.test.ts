/**
 * The devnet of `npm start` lasts (docs/decisions/0056-replaced-chain-and-lasting-devnet.md): ten
 * starts of one DATA_DIR, stopped gracefully and by SIGKILL in turn, a thousand blocks mined
 * between some of them (anvil then keeps only its recent blocks in its state file, and block 0
 * comes back with another hash). After every start the service is ready on the same chain, every
 * payment made before is completed as it was (same transaction, same block), the devnet's
 * contracts and the test wallet's tokens are there, and a new payment completes; nothing is
 * logged as an error or a reorg.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { createPublicClient, http } from 'viem'
import { freshDataDir } from '../helpers/databases.ts'
import { waitUntil } from '../helpers/chain.ts'
import { expectStatus } from '../helpers/expect.ts'
import { killAllProcesses, spawnServer } from '../helpers/processes.ts'

afterAll(killAllProcesses)

const KEY_RE = /sk_test_[A-Za-z0-9]{32,}/
const STARTS = 10

describe('the devnet across ten stops and starts of one DATA_DIR', () => {
  test('graceful stops and SIGKILLs in turn, a thousand blocks between some: every payment stays completed, the chain and its contracts stay, and each start is ready and takes a new payment', async () => {
    const dataDir = await freshDataDir()
    const env = {
      DATA_DIR: dataDir,
      PORT: '0',
      HTTP_PORT: '0',
      LOG_LEVEL: 'info',
      NETWORKS_CONFIG: '',
    }
    let key = ''
    const paid: { id: string; transaction_hash: string; block_number: number }[] = []
    try {
      for (let start = 0; start < STARTS; start++) {
        const server = await spawnServer(env)
        try {
          if (start === 0) key = (await server.waitFor('stdout', KEY_RE))[0]
          const rpcUrl = (
            await server.waitFor('stdout', /anvil at (http:\/\/127\.0\.0\.1:\d+)/)
          )[1]!
          const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
          const tx = async (id: string) =>
            (
              (await (
                await server.fetch(`/api/transactions/${id}`, { headers: auth })
              ).json()) as any
            ).transaction
          const last = paid.at(-1)?.block_number ?? 0
          await waitUntil(
            `start ${start}: ready, past the last payment`,
            async () => (await (await server.fetch('/readyz')).json()) as any,
            (r) => {
              const chain = r.checks?.find((c: { name: string }) => c.name === 'chain:devnet')
              const processed = Number(/processed (\d+)/.exec(chain?.detail ?? '')?.[1] ?? -1)
              return r.status === 'ready' && processed > last
            },
            60_000,
            200,
          )
          for (const p of paid)
            expect({ start, ...(await tx(p.id)) }).toMatchObject({
              start,
              status: 'completed',
              transaction_hash: p.transaction_hash,
              block_number: p.block_number,
            })
          // A new payment from the test wallet (its TUSD and the TUSD contract are the chain's).
          const created = await server.fetch('/api/transactions/create', {
            method: 'POST',
            headers: auth,
            body: `{"amount": ${start + 1}}`,
          })
          const id = ((await created.json()) as any).transaction.id as string
          await expectStatus(
            await server.fetch(`/pay/${id}/select`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: '{"token_symbol":"TUSD","blockchain_network":"devnet"}',
            }),
            200,
          )
          await expectStatus(await server.fetch(`/pay/${id}/test-wallet`, { method: 'POST' }), 200)
          const done = await waitUntil(
            `start ${start}: the new payment completed`,
            () => tx(id),
            (t) => t.status === 'completed',
            60_000,
            100,
          )
          paid.push({
            id,
            transaction_hash: done.transaction_hash,
            block_number: done.block_number,
          })
          // Every third start, a thousand blocks: more than anvil keeps in its state file.
          if (start % 3 === 1) {
            const node = createPublicClient({ transport: http(rpcUrl) })
            for (let i = 0; i < 5; i++)
              await node.request({ method: 'anvil_mine', params: ['0xc8'] } as never)
          }
          expect(server.stderr()).not.toContain('"level":"error"')
          expect(server.stderr()).not.toContain('chain reorganisation')
        } finally {
          if (start % 2 === 0) expect((await server.stop()).code).toBe(0)
          else {
            server.kill('SIGKILL')
            await server.exited
          }
        }
      }
    } finally {
      await killAllProcesses()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 600_000)
})
