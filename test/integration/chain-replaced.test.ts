/**
 * docs/decisions/0056-replaced-chain-and-lasting-devnet.md: restarts and replaced chains.
 *  - The default devnet keeps its chain in DATA_DIR: a demo payment completed before a restart
 *    is still completed after it, with no error logged and no reorg on its timeline.
 *  - A chain replaced under the service (another anvil, another genesis block, behind the same
 *    RPC URL) is named once in the log and in readiness, and never turns into "reorged out"
 *    entries on a completed payment; once its position is forgotten, the new chain is followed.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { startAnvil } from '../../src/chain/anvil.ts'
import { runCommand } from '../../src/cli/commands.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { backends, freshDataDir } from '../helpers/databases.ts'
import { waitUntil } from '../helpers/chain.ts'
import { expectStatus } from '../helpers/expect.ts'
import { killAllProcesses, spawnServer } from '../helpers/processes.ts'
import { api } from '../helpers/server.ts'
import { startStack } from '../helpers/stack.ts'

afterAll(killAllProcesses)

const KEY_RE = /sk_test_[A-Za-z0-9]{32,}/
const reorgCauses = (timeline: { cause: string }[]) =>
  timeline.map((e) => e.cause).filter((c) => c.startsWith('payment.reorged'))

describe('the default devnet across a restart', () => {
  test('a demo payment completed before a restart is still completed after it: no error logged, no reorg entry', async () => {
    const dataDir = await freshDataDir()
    // NETWORKS_CONFIG empty: the real devnet of `npm start`.
    const env = {
      DATA_DIR: dataDir,
      PORT: '0',
      HTTP_PORT: '0',
      LOG_LEVEL: 'info',
      NETWORKS_CONFIG: '',
    }
    try {
      const first = await spawnServer(env)
      const key = (await first.waitFor('stdout', KEY_RE))[0]
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
      const created = await first.fetch('/api/transactions/create', {
        method: 'POST',
        headers: auth,
        body: '{"amount": 12.5}',
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
      const tx = async (server: typeof first) =>
        ((await (await server.fetch(`/api/transactions/${id}`, { headers: auth })).json()) as any)
          .transaction
      const before = await waitUntil(
        'completed',
        () => tx(first),
        (t) => t.status === 'completed',
        30_000,
        100,
      )
      expect((await first.stop()).code).toBe(0)

      const second = await spawnServer(env)
      try {
        expect(second.stderr()).toContain('"msg":"devnet restored"')
        // The follower is back in step with the chain it followed, past the blocks of the first
        // run.
        await waitUntil(
          'ready and past the payment',
          async () => (await (await second.fetch('/readyz')).json()) as any,
          (r) => {
            const chain = r.checks?.find((c: { name: string }) => c.name === 'chain:devnet')
            const processed = Number(/processed (\d+)/.exec(chain?.detail ?? '')?.[1] ?? -1)
            return r.status === 'ready' && processed > before.block_number + 3
          },
          30_000,
          200,
        )
        const after = await tx(second)
        expect(after).toMatchObject({
          status: 'completed',
          transaction_hash: before.transaction_hash,
          block_number: before.block_number,
          confirmed_at: before.confirmed_at,
        })
        const timeline = (
          (await (
            await second.fetch(`/api/transactions/${id}/timeline`, { headers: auth })
          ).json()) as any
        ).timeline
        expect(reorgCauses(timeline)).toEqual([])
        expect(second.stderr()).not.toContain('"level":"error"')
        expect(second.stderr()).not.toContain('reorg')
      } finally {
        await second.stop()
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 120_000)
})

for (const backend of backends()) {
  describe(`a chain replaced behind the same RPC URL [${backend}]`, () => {
    test('is named once in the log and in readiness; the completed payment keeps its status and no reorg is recorded; forgetting the position follows the new chain', async () => {
      // Another chain: its genesis block has another timestamp, so another hash.
      const b = await startAnvil({ noMining: true, extraArgs: ['--timestamp', '1000000'] })
      const logs: ({ level: string; msg: string } & Record<string, unknown>)[] = []
      const logger = createLogger('info', (line) => logs.push(JSON.parse(line)))
      const stack = await startStack(backend, {
        chain: true,
        proxy: true,
        network: { confirmations: 2 },
        env: { READY_CHAIN_MAX_LAG: '1h' },
        server: { logger },
        project: false,
      })
      const { chain: a, proxy, t } = stack
      try {
        const { key } = await t.project()
        const id = ((await (await api(t, key).create({ amount: 10 })).json()) as any).transaction
          .id as string
        const sel = await t.fetch(`/pay/${id}/select`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"token_symbol":"TUSD","blockchain_network":"localchain"}',
        })
        const quote = ((await sel.json()) as any).quote
        await a.sendRaw(
          await a.signTokenTransfer(quote.deposit_address, BigInt(quote.token_amount)),
        )
        await a.mine(3)
        const done = await waitUntil(
          'completed',
          async () =>
            ((await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any).transaction,
          (x) => x.status === 'completed',
        )
        await fetch(b.rpcUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_mine', params: ['0x14'] }),
        })

        proxy.target = b.rpcUrl
        const down = await waitUntil(
          'not ready',
          async () => (await (await t.fetch('/readyz')).json()) as any,
          (r) => r.status === 'not_ready',
          30_000,
          100,
        )
        expect(down.failed).toEqual(['chain:localchain'])
        expect(
          down.checks.find((c: { name: string }) => c.name === 'chain:localchain').detail,
        ).toContain('the RPC serves another chain')
        // Several more tries, still one log line.
        const callsThen = proxy.calls.length
        await waitUntil(
          'more tries',
          async () => proxy.calls.length,
          (n) => n >= callsThen + 3,
          30_000,
          50,
        )
        const said = logs.filter((l) => l.msg.startsWith('the RPC now serves another chain'))
        expect(said).toHaveLength(1)
        expect(said[0]).toMatchObject({
          level: 'error',
          network: 'localchain',
          fix: expect.stringContaining('network forget --network localchain'),
        })
        expect(logs.filter((l) => /reorg/.test(l.msg))).toEqual([])

        const tx = ((await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any)
          .transaction
        expect(tx).toMatchObject({
          status: 'completed',
          transaction_hash: done.transaction_hash,
          block_number: done.block_number,
        })
        const timeline = (
          (await (await api(t, key).get(`/api/transactions/${id}/timeline`)).json()) as any
        ).timeline
        expect(reorgCauses(timeline)).toEqual([])

        // The network was really reset: forget its position, and the new chain is followed from its
        // head.
        const forgot = await runCommand(t.server.services, ['network', 'forget'], {
          network: 'localchain',
        })
        expect(forgot).toEqual({ ok: true, result: { network: 'localchain', forgotten: true } })
        await waitUntil(
          'ready again',
          async () => (await t.fetch('/readyz')).status,
          (s) => s === 200,
          30_000,
          100,
        )
        expect(
          reorgCauses(
            ((await (await api(t, key).get(`/api/transactions/${id}/timeline`)).json()) as any)
              .timeline,
          ),
        ).toEqual([])
      } finally {
        await stack.stop()
        await b.stop()
      }
    }, 120_000)
  })
}
