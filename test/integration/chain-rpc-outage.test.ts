/**
 * docs/decisions/0030-block-follower-finds-reorgs-itself.md: the node goes away for a while (its
 * RPC refuses connections) while payments are mined; when it is back, the follower catches up from
 * its cursor without missing a block and the payments complete. The server's rpcUrl points at a
 * JSON-RPC proxy in front of a real anvil that the test switches to refusing and back.
 */
import { describe, expect, test } from 'bun:test'
import { backends } from '../helpers/databases.ts'
import { waitUntil, type ManualChain } from '../helpers/chain.ts'
import { expectStatus } from '../helpers/expect.ts'
import type { RpcProxy } from '../helpers/rpc-proxy.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

const CONFIRMATIONS = 3

for (const backend of backends()) {
  describe(`an RPC outage [${backend}]`, () => {
    let chain: ManualChain
    let proxy: RpcProxy
    let t: TestServer
    let key: string
    useStack(
      backend,
      {
        chain: true,
        proxy: true,
        network: { confirmations: CONFIRMATIONS, pollIntervalMs: 100 },
      },
      (s) => {
        chain = s.chain
        proxy = s.proxy
        t = s.t
        key = s.key
      },
    )

    const tx = async (id: string) =>
      ((await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any).transaction
    const synced = () => t.server.services.chain.syncedHeights().localchain ?? -1n
    async function selected() {
      const id = ((await (await api(t, key).create({ amount: 25 })).json()) as any).transaction
        .id as string
      const r = await t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"token_symbol":"TUSD","blockchain_network":"localchain"}',
      })
      await expectStatus(r, 200)
      const s = (await r.json()) as any
      return { id, address: s.quote.deposit_address as string, units: BigInt(s.quote.token_amount) }
    }

    test('payments mined while the node refuses connections complete once it is back, and every block in between is scanned', async () => {
      const a = await selected()
      const b = await selected()
      const before = await chain.head()
      await waitUntil(
        'the follower at the head',
        async () => synced(),
        (h) => h >= before,
      )

      proxy.mode = 'refuse'
      await waitUntil(
        'the follower to hit the outage',
        async () => proxy.refused,
        (n) => n >= 2,
      )

      // During the outage: A pays in the first new block, B several blocks later, and the chain
      // moves on.
      const hashA = await chain.sendRaw(await chain.signTokenTransfer(a.address, a.units))
      const blockA = await chain.mine()
      await chain.mine(5)
      const hashB = await chain.sendRaw(await chain.signTokenTransfer(b.address, b.units))
      const blockB = await chain.mine()
      const head = await chain.mine(CONFIRMATIONS + 2)
      const refusedAfterMining = proxy.refused
      // Still trying, and nothing seen: the service does not make up what it cannot read.
      await waitUntil(
        'another refused attempt',
        async () => proxy.refused,
        (n) => n > refusedAfterMining,
      )
      expect(synced()).toBe(before)
      expect((await tx(a.id)).status).toBe('prepared')

      const callsBefore = proxy.calls.length
      proxy.mode = 'pass'
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
      await waitUntil(
        'the follower at the head',
        async () => synced(),
        (h) => h >= head,
      )

      // No block missed: after the outage every height from the last one seen to the head was
      // fetched.
      const fetched = new Set(
        proxy.calls
          .slice(callsBefore)
          .filter((c) => c.method === 'eth_getBlockByNumber')
          .map((c) => BigInt((c.params as [string])[0])),
      )
      for (let n = before + 1n; n <= head; n++)
        expect({ n, fetched: fetched.has(n) }).toEqual({ n, fetched: true })
      // And the stored cursor matches the canonical chain over that range.
      const [row] = await t.server.services.database.query<{ cursor: string }>(
        `SELECT cursor FROM chain_cursors WHERE network = 'localchain'`,
        [],
      )
      const recent = new Map(
        (JSON.parse(row!.cursor).recent as [string, string][]).map(([n, h]) => [BigInt(n), h]),
      )
      for (let n = before; n <= head; n++) expect(recent.get(n)).toBe(await chain.blockHash(n))
    })
  })
}
