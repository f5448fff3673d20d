/**
 * Attacks on a transaction's x402_url (docs/decisions/0063-x402.md,
 * docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md), on a real chain mined by hand:
 * it is authorised by the transaction's id alone, so everything here is open to a stranger with no
 * key. It answers success only for a successful receipt: a relay that reverts (the payer moved its
 * tokens first) is x402's failure answer naming the transaction, and one not mined within
 * X402_SETTLE_WAIT is `settlement_pending`; the same payment sent again is answered from that
 * transaction and never sent twice; a lying contract wallet is refused before any gas.
 */
import { describe, expect, test } from 'bun:test'
import { type Hex, parseEther, parseGwei } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { decodeHeader, encodeHeader } from '../../src/x402/protocol.ts'
import { attackKit, attackNetwork, clientAt, EXPENSIVE, freshIp } from '../helpers/attack-kit.ts'
import { type ManualChain, waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import { RELAYER, relayerKeyDir } from '../helpers/relayer.ts'
import type { TestServer } from '../helpers/server.ts'
import { randomNonce, x402Payload } from '../helpers/signature-payments.ts'
import { useStack } from '../helpers/stack.ts'

const { keyFile } = relayerKeyDir('x402-url-attack-')

for (const backend of backends()) {
  describe(`a transaction's x402_url under attack [${backend}]`, () => {
    let t: TestServer
    let chain: ManualChain
    let key: string
    useStack(
      backend,
      {
        chain: true,
        networks: attackNetwork(),
        env: {
          RELAYER_KEY_FILE: keyFile,
          TRUST_PROXY: '1',
          PAY_RATE_LIMITS: '100000/1000000/10000000',
          X402_SETTLE_WAIT: '2s',
        },
        project: false,
      },
      async (s) => {
        t = s.t
        chain = s.chain
        key = (await t.project()).key
      },
    )
    const kit = attackKit(() => ({ t, chain }))

    /** A transaction's x402_url path and its 402 answer's requirements. */
    async function required(amount = 3) {
      const ip = freshIp()
      const created = await clientAt(t, ip, key).post('/api/transactions/create', { amount })
      const tx = ((await created.json()) as any).transaction
      const path = new URL(tx.x402_url).pathname
      const res = await clientAt(t, ip).get(path)
      expect(res.status).toBe(402)
      return {
        id: tx.id as string,
        path,
        required: decodeHeader(res.headers.get('payment-required')!) as any,
      }
    }
    /** The x402_url asked with `payload` in PAYMENT-SIGNATURE, from a fresh client. */
    const pay = (path: string, payload: unknown) =>
      clientAt(t, freshIp()).get(path, { 'payment-signature': encodeHeader(payload) })
    const settlement = (res: Response) => decodeHeader(res.headers.get('payment-response')!) as any
    /** Waits for the relayer's next transaction to reach the pool; its hash. */
    async function relayed(nonce: number): Promise<Hex> {
      await waitUntil(
        'the relayer sent',
        () => kit.relayerNonce(),
        (n) => n > nonce,
      )
      const pending = (await chain.client.request({
        method: 'txpool_content',
      } as never)) as { pending: Record<string, Record<string, { hash: Hex }>> }
      const mine = Object.entries(pending.pending).find(
        ([from]) => from.toLowerCase() === RELAYER.address.toLowerCase(),
      )
      return mine![1][String(nonce)]!.hash
    }

    test("a relay that reverts (the payer moved its tokens first) is answered with x402's failure naming the transaction, never success", async () => {
      const { path, required: r } = await required()
      const payer = await kit.customer(3_000_000n, parseEther('0.01'))
      const nonce = await kit.relayerNonce()
      const answer = pay(path, await x402Payload(payer, r))
      const hash = await relayed(nonce)
      await chain.client.writeContract({
        account: payer,
        address: chain.token,
        abi: TestStablecoin.abi,
        functionName: 'transfer',
        args: [chain.client.account.address, 3_000_000n],
        gas: 100_000n,
        maxPriorityFeePerGas: parseGwei('50'),
        maxFeePerGas: parseGwei('100'),
      })
      await chain.mine()
      const res = await answer
      expect(res.status).toBe(402)
      expect(settlement(res)).toMatchObject({
        success: false,
        errorReason: 'invalid_exact_evm_transaction_failed',
        transaction: hash,
        network: 'eip155:31337',
        payer: payer.address,
      })
      expect(res.headers.get('payment-required')).not.toBeNull()
      expect((await chain.client.getTransactionReceipt({ hash })).status).toBe('reverted')
    })

    test('a payment not mined within the wait is settlement_pending with its hash; sent again once mined, it is answered success from that transaction, and nothing is sent twice', async () => {
      const { id, path, required: r } = await required()
      const payer = await kit.customer(3_000_000n)
      const payload = await x402Payload(payer, r)
      const nonce = await kit.relayerNonce()
      const first = await pay(path, payload)
      expect(first.status).toBe(402)
      const pending = settlement(first)
      expect(pending).toMatchObject({ success: false, errorReason: 'settlement_pending' })
      expect(pending.transaction).toBe(await relayed(nonce))
      await chain.mine()
      const again = await pay(path, payload)
      expect(again.status).toBe(200)
      expect(settlement(again)).toMatchObject({ success: true, transaction: pending.transaction })
      expect(await kit.relayerNonce()).toBe(nonce + 1)
      // Once the follower saw it, the x402_url answers with the transaction and takes nothing.
      await waitUntil(
        'seen',
        async () => (await (await clientAt(t, freshIp()).get(`/pay/${id}/state`)).json()) as any,
        (x) => ['processing', 'confirming', 'completed'].includes(x.status),
      )
      const replay = await pay(path, payload)
      expect(replay.status).toBe(200)
      expect(replay.headers.get('payment-response')).toBeNull()
      expect(await kit.relayerNonce()).toBe(nonce + 1)
    })

    test('a lying contract wallet paying over x402 is refused with 402 and the reason, before any gas', async () => {
      const { path, required: r } = await required()
      const [liar] = await kit.liars(1, EXPENSIVE, 3_000_000n)
      const payload = await x402Payload(privateKeyToAccount(generatePrivateKey()), r)
      payload.payload.authorization.from = liar!
      payload.payload.signature = `0x${'ab'.repeat(65)}`
      payload.payload.authorization.nonce = randomNonce()
      const nonce = await kit.relayerNonce()
      const res = await pay(path, payload)
      expect(res.status).toBe(402)
      expect((decodeHeader(res.headers.get('payment-required')!) as any).error).toMatch(
        /is a smart-contract account/,
      )
      expect(await kit.relayerNonce()).toBe(nonce)
    })
  })
}
