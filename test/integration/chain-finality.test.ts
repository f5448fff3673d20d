/**
 * Finality per network (docs/decisions/0043-finality-per-network.md) on a real chain: anvil mining
 * only when told, serving its `finalized` block 2 x `--slots-in-an-epoch` blocks below the head (8
 * here) and `safe` half as far. A network with `"finality": "finalized"` completes a payment only
 * once that block has reached the payment's block, however many confirmations it has before; the
 * API says what it waits for.
 */
import { describe, expect, test } from 'bun:test'
import { backends } from '../helpers/databases.ts'
import { waitUntil, type ManualChain } from '../helpers/chain.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

const SLOTS = 4 // finalized = head - 8

for (const backend of backends()) {
  describe(`a network that waits for its finalized block [${backend}]`, () => {
    let chain: ManualChain
    let t: TestServer
    let key: string
    useStack(
      backend,
      {
        chain: { slotsInAnEpoch: SLOTS },
        network: { confirmations: 1, finality: 'finalized', pollIntervalMs: 100 },
      },
      (s) => {
        chain = s.chain
        t = s.t
        key = s.key
      },
    )

    const tx = (id: string) => api(t, key).transaction(id)

    test("confirming until the finalized block reaches the payment's block, then completed", async () => {
      const { id, quote } = await api(t, key).quoted(10)
      expect(quote).toMatchObject({ finality: 'finalized' })
      expect(await tx(id)).toMatchObject({
        status: 'prepared',
        finality: 'finalized',
        required_confirmations: null,
      })

      await chain.sendRaw(
        await chain.signTokenTransfer(quote.deposit_address, BigInt(quote.token_amount)),
      )
      const block = Number(await chain.mine())
      // 8 blocks on top: 8 confirmations (far past the 1 configured), finalized still at block - 1.
      await chain.mine(SLOTS * 2 - 1)
      const waiting = await waitUntil(
        '8 confirmations',
        () => tx(id),
        (x) => x.confirmations === SLOTS * 2,
      )
      expect(waiting).toMatchObject({
        status: 'confirming',
        block_number: block,
        finality: 'finalized',
      })
      const finalized = await chain.client.getBlock({ blockTag: 'finalized' })
      expect(finalized.number).toBe(BigInt(block - 1))
      const page = (await (await t.fetch(`/pay/${id}/state`)).json()) as any
      expect(page).toMatchObject({
        status: 'confirming',
        confirmations: SLOTS * 2,
        quote: { finality: 'finalized' },
      })

      // One more block: the finalized block is the payment's.
      await chain.mine()
      const done = await waitUntil(
        'completed',
        () => tx(id),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({
        block_number: block,
        finality: 'finalized',
        required_confirmations: null,
      })
      // Its count is the follower's head when it read the finalized block: the new head, or (when
      // the block was mined between the follower's two reads) the one before it. Either is right.
      expect([SLOTS * 2, SLOTS * 2 + 1]).toContain(done.confirmations)
      expect((await chain.client.getBlock({ blockTag: 'finalized' })).number).toBe(BigInt(block))
    })
  })
}
