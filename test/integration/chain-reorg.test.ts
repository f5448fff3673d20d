/**
 * docs/decisions/0015-confirmations-and-reorgs.md on a real chain: anvil mining only when told, a
 * real TestStablecoin, real signed transfers, and `anvil_reorg` replacing the payment's block.
 * anvil never reports `removed` logs (docs/development.md#anvil): the service must notice the reorg
 * itself, take the payment back, and never complete on it.
 */
import { describe, expect, test } from 'bun:test'
import type { Hex } from 'viem'
import { backends } from '../helpers/databases.ts'
import { waitUntil, type ManualChain } from '../helpers/chain.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

const CONFIRMATIONS = 3

for (const backend of backends()) {
  describe(`reorgs on a real chain [${backend}]`, () => {
    let chain: ManualChain
    let t: TestServer
    let key: string
    useStack(
      backend,
      { chain: true, network: { confirmations: CONFIRMATIONS, pollIntervalMs: 100 } },
      (s) => {
        chain = s.chain
        t = s.t
        key = s.key
      },
    )

    const tx = (id: string) => api(t, key).transaction(id)
    const timeline = async (id: string) =>
      ((await (await api(t, key).get(`/api/transactions/${id}/timeline`)).json()) as any)
        .timeline as any[]
    const synced = () => t.server.services.chain.syncedHeights().localchain ?? -1n
    /** Until the follower has processed the chain up to the current head. */
    const caughtUp = async () => {
      const head = await chain.head()
      await waitUntil(
        `the follower to reach block ${head}`,
        async () => synced(),
        (h) => h >= head,
      )
    }

    /** A transaction with TUSD selected; returns its id, deposit address and quote. */
    const selected = (amountUsd = 25) => api(t, key).quoted(amountUsd)

    /**
     * Pays in full, mines it, and waits until the transaction is confirming with 2 of 3
     * confirmations.
     */
    async function paidAndConfirming(id: string, address: string, units: bigint) {
      const raw = await chain.signTokenTransfer(address, units)
      const hash = await chain.sendRaw(raw)
      const block = await chain.mine()
      const confirming = await waitUntil(
        'confirming',
        () => tx(id),
        (x) => x.status === 'confirming' && x.confirmations === 1,
      )
      expect(confirming).toMatchObject({
        transaction_hash: hash,
        block_number: Number(block),
        amount_received: units.toString(),
      })
      await chain.mine()
      await waitUntil(
        '2 confirmations',
        () => tx(id),
        (x) => x.confirmations === 2,
      )
      expect((await tx(id)).status).toBe('confirming')
      return { raw, hash: hash as Hex, block }
    }

    test('a reorg removing the payment block takes the transaction back to pending; it never completes on the new chain, and completes once the same transfer is mined again', async () => {
      const { id, address, units } = await selected(25)
      const { raw, hash, block } = await paidAndConfirming(id, address, units)
      const oldHash = await chain.blockHash(block)

      // Replace the payment's block and the one after it with empty blocks at the same heights.
      await chain.reorg(2)
      expect(await chain.blockHash(block)).not.toBe(oldHash)
      const back = await waitUntil(
        'pending after the reorg',
        () => tx(id),
        (x) => x.status !== 'confirming',
      )
      expect(back).toMatchObject({
        status: 'pending',
        amount_received: '0',
        block_number: null,
        confirmations: null,
      })
      const reorged = (await timeline(id)).filter((e) => e.cause === 'payment.reorged')
      expect(reorged).toEqual([
        expect.objectContaining({
          from_status: 'confirming',
          to_status: 'pending',
          details: expect.objectContaining({ txHash: hash, received: '0' }),
        }),
      ])

      // Far more blocks than the confirmations needed: the payment is gone, so nothing completes.
      await chain.mine(CONFIRMATIONS + 3)
      await caughtUp()
      expect((await tx(id)).status).toBe('pending')
      const state = (await (await t.fetch(`/pay/${id}/state`)).json()) as any
      expect(state).toMatchObject({
        status: 'pending',
        amount_received: '0',
        amount_due: units.toString(),
      })
      expect((await timeline(id)).map((e) => e.to_status)).not.toContain('completed')

      // The very same signed transfer lands in a new block: paid again, and it completes there.
      expect(await chain.sendRaw(raw)).toBe(hash)
      const again = await chain.mine()
      await waitUntil(
        'confirming in the new block',
        () => tx(id),
        (x) => x.status === 'confirming',
      )
      await chain.mine(CONFIRMATIONS - 1)
      const done = await waitUntil(
        'completed',
        () => tx(id),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({
        transaction_hash: hash,
        block_number: Number(again),
        amount_received: units.toString(),
        confirmations: CONFIRMATIONS,
      })
      // How many intermediate confirmation counts a poll sees depends on timing; the moves do not.
      const moves = (await timeline(id))
        .filter((e) => e.from_status !== e.to_status)
        .map((e) => `${e.cause}:${e.to_status}`)
      expect(moves).toEqual([
        'transaction.created:created',
        'token.selected:prepared',
        'payment.detected:processing',
        'payment.included:confirming',
        'payment.reorged:pending',
        'payment.detected:processing',
        'payment.included:confirming',
        'confirmations.updated:completed',
      ])
    })

    test('a reorg that puts the same transfer into the replacement block: taken back, found again in its new block, completes there', async () => {
      const { id, address, units } = await selected(12)
      const { raw, hash, block } = await paidAndConfirming(id, address, units)
      const oldHash = await chain.blockHash(block)

      // Two blocks replaced; the transfer goes into the first replacement, at the same height.
      await chain.reorg(2, [[raw, 0]])
      expect(await chain.blockHash(block)).not.toBe(oldHash)
      await waitUntil(
        'the reorg to be recorded',
        () => timeline(id),
        (tl) => tl.some((e) => e.cause === 'payment.reorged'),
      )
      await chain.mine()
      const done = await waitUntil(
        'completed',
        () => tx(id),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({
        transaction_hash: hash,
        block_number: Number(block),
        amount_received: units.toString(),
      })
      const entries = await timeline(id)
      const reorgAt = entries.findIndex((e) => e.cause === 'payment.reorged')
      expect(entries[reorgAt]).toMatchObject({ from_status: 'confirming', to_status: 'pending' })
      // Completion counts from the new block: found again after the reorg, then confirmed.
      expect(entries.slice(reorgAt + 1).map((e) => e.to_status)).toEqual(
        expect.arrayContaining(['processing', 'confirming', 'completed']),
      )
      expect(entries.findIndex((e) => e.to_status === 'completed')).toBeGreaterThan(reorgAt)
    })

    test('a reorg taking away only an extra transfer (an overpayment) leaves the covering payment confirming, and it completes', async () => {
      const { id, address, units } = await selected(20)
      const hash = await chain.sendRaw(await chain.signTokenTransfer(address, units))
      const block = await chain.mine()
      await waitUntil(
        'confirming',
        () => tx(id),
        (x) => x.status === 'confirming' && x.confirmations === 1,
      )
      // A second, extra transfer in the next block: recorded as an overpayment while confirming.
      const extra = await chain.sendRaw(await chain.signTokenTransfer(address, 5n * 10n ** 6n))
      await chain.mine()
      await waitUntil(
        'the extra transfer counted',
        () => tx(id),
        (x) => x.amount_received === (units + 5n * 10n ** 6n).toString() && x.confirmations === 2,
      )
      expect((await tx(id)).status).toBe('confirming')

      // Only the extra transfer's block is replaced; the covering payment's block stays canonical.
      await chain.reorg(1)
      await waitUntil(
        'the reorg recorded',
        () => timeline(id),
        (tl) => tl.some((e) => e.cause === 'payment.reorged'),
      )
      // The payment that stayed still covers the quote and is in a block: it keeps confirming.
      expect((await timeline(id)).find((e) => e.cause === 'payment.reorged')).toMatchObject({
        from_status: 'confirming',
        to_status: 'confirming',
        details: expect.objectContaining({ txHash: extra, received: units.toString() }),
      })
      await chain.mine()
      const done = await waitUntil(
        'completed on the payment that stayed',
        () => tx(id),
        (x) => x.status === 'completed',
        10_000,
      )
      expect(done).toMatchObject({
        transaction_hash: hash,
        block_number: Number(block),
        amount_received: units.toString(),
      })
    })
  })
}
