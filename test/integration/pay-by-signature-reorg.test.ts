/**
 * A reorg that drops a relayed payment takes the transaction back like any other: a customer with
 * TUSD and no ETH pays by an EIP-3009 signature, the relayer's transaction is mined and found, then
 * `anvil_reorg` replaces its block before the confirmations are reached. The transaction goes back
 * to pending and never completes on the new chain, where the authorization is unused again; the
 * same signature, posted again, is sent again by the relayer (the customer signs nothing more)
 * and that payment completes.
 */
import { describe, expect, test } from 'bun:test'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { type Hex, bytesToHex, getAddress } from 'viem'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { transferAuthorizationTypedData } from '../../src/chain/eip3009.ts'
import { type ManualChain, waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { RELAYER, relayerKeyDir } from '../helpers/relayer.ts'
import { useStack } from '../helpers/stack.ts'

const CONFIRMATIONS = 3
const { keyFile: KEY_FILE } = relayerKeyDir('relayer-key-')

const randomNonce = () => bytesToHex(crypto.getRandomValues(new Uint8Array(32)))

for (const backend of backends()) {
  describe(`a reorg dropping a relayed payment [${backend}]`, () => {
    let chain: ManualChain
    let t: TestServer
    let key: string
    useStack(
      backend,
      {
        chain: true,
        // The manual chain's TUSD, declared as taking EIP-3009 authorizations (it does).
        networks: ({ chain, rpcUrl }) => {
          const n = chain!.network({ rpcUrl, confirmations: CONFIRMATIONS, pollIntervalMs: 100 })
          return [{ ...n, tokens: n.tokens.map((x) => ({ ...x, eip3009: true as const })) }]
        },
        env: { RELAYER_KEY_FILE: KEY_FILE },
      },
      (s) => {
        chain = s.chain
        t = s.t
        key = s.key
      },
    )

    const tx = (id: string) => api(t, key).transaction(id)
    const state = async (id: string) => (await (await t.fetch(`/pay/${id}/state`)).json()) as any
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
    const held = (a: Hex) =>
      chain.client.readContract({
        address: chain.token,
        abi: TestStablecoin.abi,
        functionName: 'balanceOf',
        args: [a],
      })
    const nonceUsed = (payer: Hex, nonce: Hex) =>
      chain.client.readContract({
        address: chain.token,
        abi: TestStablecoin.abi,
        functionName: 'authorizationState',
        args: [payer, nonce],
      })
    /** A customer with `units` TUSD (minted and mined) and no ETH at all. */
    async function customer(units: bigint) {
      const account = privateKeyToAccount(generatePrivateKey())
      const hash = await chain.client.writeContract({
        address: chain.token,
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [account.address, units],
      })
      await chain.mine()
      expect((await chain.client.getTransactionReceipt({ hash })).status).toBe('success')
      return account
    }
    /** Signs what the pay state offers, with a fresh nonce, as the pay page's wallet would. */
    async function sign(account: ReturnType<typeof privateKeyToAccount>, offer: any) {
      const message = {
        from: account.address,
        to: getAddress(offer.to),
        value: BigInt(offer.value),
        validAfter: 0n,
        validBefore: BigInt(offer.valid_before),
        nonce: randomNonce(),
      }
      const signature = await account.signTypedData(
        transferAuthorizationTypedData(offer.domain, message) as never,
      )
      return {
        from: account.address,
        value: offer.value as string,
        valid_after: '0',
        valid_before: offer.valid_before as string,
        nonce: message.nonce,
        signature,
      }
    }
    /** Hands a signed authorization to the relayer; its transaction hash (in the mempool). */
    async function relay(id: string, body: unknown): Promise<Hex> {
      const r = await t.fetch(`/pay/${id}/authorization`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      expect(r.status).toBe(200)
      return ((await r.json()) as any).transaction_hash
    }

    test('the relayed payment is taken back to pending, never completes on the new chain, and the same signature relayed again completes it', async () => {
      const { id, address, units } = await api(t, key).quoted(12)
      const payer = await customer(units)
      expect(await chain.client.getBalance({ address: payer.address })).toBe(0n)
      const offer = (await state(id)).authorization
      expect(offer).toMatchObject({
        to: address,
        value: units.toString(),
        relayer: RELAYER.address,
      })

      // The relayer submits the signed authorization; mined, the follower finds it.
      const signed = await sign(payer, offer)
      const hash = await relay(id, signed)
      const block = await chain.mine()
      const receipt = await chain.client.getTransactionReceipt({ hash })
      expect(receipt).toMatchObject({ status: 'success', blockNumber: block })
      expect(getAddress(receipt.from)).toBe(RELAYER.address)
      const relayerNonce = (await chain.client.getTransaction({ hash })).nonce
      expect(await held(address as Hex)).toBe(units)
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
        `2 of ${CONFIRMATIONS} confirmations`,
        () => tx(id),
        (x) => x.confirmations === 2,
      )
      expect((await tx(id)).status).toBe('confirming')

      // The relayer's block and the one after it are replaced by empty blocks at the same heights.
      const oldHash = await chain.blockHash(block)
      await chain.reorg(2)
      expect(await chain.blockHash(block)).not.toBe(oldHash)
      expect(await chain.client.getTransactionReceipt({ hash }).catch(() => null)).toBeNull()
      // On the new chain the payment never happened: the tokens are the payer's, the nonce unused.
      expect(await held(payer.address)).toBe(units)
      expect(await held(address as Hex)).toBe(0n)
      expect(await nonceUsed(payer.address, signed.nonce)).toBe(false)

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
      expect((await timeline(id)).filter((e) => e.cause === 'payment.reorged')).toEqual([
        expect.objectContaining({
          from_status: 'confirming',
          to_status: 'pending',
          details: expect.objectContaining({ txHash: hash, received: '0' }),
        }),
      ])

      // Far more blocks than the confirmations needed: the relayed payment is gone, nothing completes.
      await chain.mine(CONFIRMATIONS + 3)
      await caughtUp()
      expect((await tx(id)).status).toBe('pending')
      expect((await timeline(id)).map((e) => e.to_status)).not.toContain('completed')
      // The pay page owes the whole amount again and offers to pay by signature again.
      const again = await state(id)
      expect(again).toMatchObject({
        status: 'pending',
        amount_received: '0',
        amount_due: units.toString(),
      })
      expect(again.authorization).toMatchObject({ to: address, value: units.toString() })

      // The page posts the same signature again: the relayer's earlier transaction left the chain
      // and the node no longer holds it, so the relayer sends it again, and it completes after its
      // confirmations.
      const hash2 = await relay(id, signed)
      expect(hash2).not.toBe(hash)
      // It takes the relayer nonce the reorg freed: the dropped transaction can never land as well.
      expect((await chain.client.getTransaction({ hash: hash2 })).nonce).toBe(relayerNonce)
      const block2 = await chain.mine()
      expect(await chain.client.getTransactionReceipt({ hash: hash2 })).toMatchObject({
        status: 'success',
        blockNumber: block2,
      })
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
        transaction_hash: hash2,
        block_number: Number(block2),
        amount_received: units.toString(),
        confirmations: CONFIRMATIONS,
      })
      // Paid once, gas by the relayer: the payer still holds no ETH and no longer the tokens.
      expect(await held(payer.address)).toBe(0n)
      expect(await held(address as Hex)).toBe(units)
      expect(await chain.client.getBalance({ address: payer.address })).toBe(0n)
      expect((await state(id)).authorization).toBeNull()
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
  })
}
