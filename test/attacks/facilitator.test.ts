/**
 * Attacks on the x402 facilitator (docs/decisions/0063-x402.md,
 * docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md) by a holder of an `x402:settle`
 * key (a merchant's middleware, a stolen key, one tenant of a shared deployment) and by anyone
 * watching the chain, on a real chain mined by hand:
 * - dust below the network's floor is refused before any gas; a settle at the floor goes through;
 * - the key settles only to the project's own address, and its words about the resource are kept
 *   as marked metadata, never as the merchant's order description;
 * - a settle answers success only for a successful receipt: one front-run from the mempool (the
 *   merchant is paid anyway) is a failure whose revert counts; a slow one is settlement_pending,
 *   answered success once from the same transaction, and a replay after that is refused;
 * - a lying contract wallet is refused before any gas; settles count per key.
 */
import { describe, expect, test } from 'bun:test'
import { getAddress, type Hex, parseGwei } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { attackKit, attackNetwork, clientAt, EXPENSIVE, freshIp } from '../helpers/attack-kit.ts'
import { type ManualChain, waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import { RELAYER, relayerKeyDir } from '../helpers/relayer.ts'
import type { TestServer } from '../helpers/server.ts'
import { x402Payload } from '../helpers/signature-payments.ts'
import { useStack } from '../helpers/stack.ts'

const { keyFile } = relayerKeyDir('facilitator-attack-')
/** The merchant's treasury, where its x402 payments go (set by the operator). */
const TREASURY = getAddress('0x5c7c3a3bd5f2e1f6d3d0d2e1a8c7b6e5f4d3c2b1')

for (const backend of backends()) {
  describe(`the x402 facilitator under attack [${backend}]`, () => {
    let t: TestServer
    let chain: ManualChain
    let project: { id: string; key: string; keyId: string }
    useStack(
      backend,
      {
        chain: true,
        networks: attackNetwork(),
        env: {
          RELAYER_KEY_FILE: keyFile,
          TRUST_PROXY: '1',
          X402_SETTLE_WAIT: '2s',
          X402_SETTLE_RATE_LIMITS: '20/1000/10000',
        },
        project: false,
      },
      async (s) => {
        t = s.t
        chain = s.chain
        project = await t.project({ scopes: ['x402:settle', 'transactions:read'] })
        const set = await t.server.services.facilitator.setPayTo(project.id, 'test', TREASURY)
        if (!set.ok) throw new Error(set.message)
      },
    )
    const kit = attackKit(() => ({ t, chain }))

    /** A requirement of `amount` TUSD to `payTo`, as the merchant's middleware names it. */
    const requirement = (amount: bigint, payTo: string = TREASURY) => ({
      scheme: 'exact',
      network: 'eip155:31337',
      asset: getAddress(chain.token),
      amount: amount.toString(),
      payTo: getAddress(payTo),
      maxTimeoutSeconds: 120,
      extra: { name: 'Test USD', version: '2' },
    })
    /** A facilitator request for `payer` paying `req`, the resource described as the caller likes. */
    async function request(
      payer: ReturnType<typeof privateKeyToAccount>,
      req: ReturnType<typeof requirement>,
      description = 'Weather for agents',
    ) {
      const resource = { url: 'https://merchant.example/weather', description }
      return {
        x402Version: 2,
        paymentPayload: await x402Payload(payer, { resource, accepts: [req] }, req),
        paymentRequirements: req,
      }
    }
    const x402 = async (op: 'verify' | 'settle', body: unknown, key = project.key) => {
      const res = await clientAt(t, freshIp(), key).post(`/api/x402/${op}`, body)
      return { status: res.status, body: (await res.json()) as any }
    }
    const floor = async () => {
      const res = await clientAt(t, freshIp(), project.key).get('/api/x402/pay-to')
      return BigInt(((await res.json()) as any).assets[0].min_amount)
    }
    /** Waits for the relayer's next transaction in the pool: its hash and calldata. */
    async function relayed(nonce: number): Promise<{ hash: Hex; input: Hex }> {
      await waitUntil(
        'the relayer sent',
        () => kit.relayerNonce(),
        (n) => n > nonce,
      )
      const pool = (await chain.client.request({ method: 'txpool_content' } as never)) as {
        pending: Record<string, Record<string, { hash: Hex; input: Hex }>>
      }
      const [, txs] = Object.entries(pool.pending).find(
        ([from]) => from.toLowerCase() === RELAYER.address.toLowerCase(),
      )!
      return txs[String(nonce)]!
    }
    const held = (a: string) =>
      chain.client.readContract({
        address: chain.token,
        abi: TestStablecoin.abi,
        functionName: 'balanceOf',
        args: [a as Hex],
      })

    test('dust below the floor is refused before any gas; the floor is in pay-to and a settle at it goes through', async () => {
      const min = await floor()
      // What one relay's gas can cost here, at the fixed $3,000 of this chain's ETH: far above dust.
      expect(min).toBeGreaterThan(10_000n)
      const payer = await kit.customer(min)
      const nonce = await kit.relayerNonce()
      // The floor follows the fees, which fall block by block on this idle chain: well below it.
      for (const amount of [1n, min / 10n]) {
        const r = await x402('settle', await request(payer, requirement(amount)))
        expect(r.body).toMatchObject({
          success: false,
          errorReason: 'invalid_exact_evm_authorization_value',
          errorMessage: expect.stringMatching(/below this facilitator's smallest settle/),
        })
      }
      expect(await kit.relayerNonce()).toBe(nonce)
      const settling = x402('settle', await request(payer, requirement(min)))
      await relayed(nonce)
      await chain.mine()
      expect((await settling).body).toMatchObject({ success: true })
      expect(await held(TREASURY)).toBe(min)
    })

    test("a stolen key settles only to the project's address, and the caller's words are kept marked, never as the order's description", async () => {
      const min = await floor()
      const payer = await kit.customer(min)
      const nonce = await kit.relayerNonce()
      const elsewhere = privateKeyToAccount(generatePrivateKey()).address
      const redirected = await x402('settle', await request(payer, requirement(min, elsewhere)))
      expect(redirected.body).toMatchObject({
        success: false,
        errorReason: 'invalid_exact_evm_recipient_mismatch',
      })
      expect(await kit.relayerNonce()).toBe(nonce)
      const settling = x402(
        'settle',
        await request(payer, requirement(min), 'Order #1001 - 1 laptop, ship to attacker'),
      )
      await relayed(nonce)
      await chain.mine()
      const settled = (await settling).body
      expect(settled.success).toBe(true)
      const recorded = (
        (await (
          await clientAt(t, freshIp(), project.key).get(
            `/api/transactions/${settled.extra.transaction_id}`,
          )
        ).json()) as any
      ).transaction
      expect(recorded).toMatchObject({
        order_description: 'x402 payment',
        metadata: {
          x402_caller_description: 'Order #1001 - 1 laptop, ship to attacker',
          x402_caller_resource: 'https://merchant.example/weather',
          x402_payer: payer.address,
        },
      })
    })

    test('a slow settle is settlement_pending with its hash, answered success once from that transaction; a replay after that is refused', async () => {
      const min = await floor()
      const payer = await kit.customer(min)
      const body = await request(payer, requirement(min))
      const nonce = await kit.relayerNonce()
      const first = await x402('settle', body)
      expect(first.body).toMatchObject({ success: false, errorReason: 'settlement_pending' })
      expect(first.body.transaction).toBe((await relayed(nonce)).hash)
      await chain.mine()
      const retry = await x402('settle', body)
      expect(retry.body).toMatchObject({ success: true, transaction: first.body.transaction })
      const replay = await x402('settle', body)
      expect(replay.body).toMatchObject({
        success: false,
        errorReason: 'invalid_exact_evm_nonce_already_used',
      })
      expect(await kit.relayerNonce()).toBe(nonce + 1)
    })

    test('front-run from the mempool: the merchant is paid anyway, the settle answers failure, and the revert counts', async () => {
      const min = await floor()
      const payer = await kit.customer(min)
      const before = await held(TREASURY)
      const nonce = await kit.relayerNonce()
      const settling = x402('settle', await request(payer, requirement(min)))
      const sent = await relayed(nonce)
      // A watcher copies the relayer's call and lands it first with a higher tip.
      await chain.client.sendTransaction({
        to: chain.token,
        data: sent.input,
        gas: 200_000n,
        maxPriorityFeePerGas: parseGwei('50'),
        maxFeePerGas: parseGwei('100'),
      })
      await chain.mine()
      expect((await settling).body).toMatchObject({
        success: false,
        errorReason: 'invalid_exact_evm_transaction_failed',
        transaction: sent.hash,
      })
      expect((await chain.client.getTransactionReceipt({ hash: sent.hash })).status).toBe(
        'reverted',
      )
      expect((await held(TREASURY)) - before).toBe(min)
      await kit.revertsRecorded(1)
    })

    test('a lying contract wallet is refused before any gas', async () => {
      const min = await floor()
      const [liar] = await kit.liars(1, EXPENSIVE, min)
      const body = await request(privateKeyToAccount(generatePrivateKey()), requirement(min))
      body.paymentPayload.payload.authorization.from = liar!
      body.paymentPayload.payload.signature = `0x${'ab'.repeat(65)}`
      const nonce = await kit.relayerNonce()
      for (const op of ['verify', 'settle'] as const) {
        const r = await x402(op, body)
        expect(r.body).toMatchObject(
          op === 'verify'
            ? { isValid: false, invalidReason: 'invalid_exact_evm_signature' }
            : { success: false, errorReason: 'invalid_exact_evm_signature' },
        )
        expect(JSON.stringify(r.body)).toMatch(/is a smart-contract account/)
      }
      expect(await kit.relayerNonce()).toBe(nonce)
    })

    test("settles count per key: a key over X402_SETTLE_RATE_LIMITS gets 429, the project's other key goes on", async () => {
      const first = await t.key(project.id, 'test', ['x402:settle'])
      const second = await t.key(project.id, 'test', ['x402:settle'])
      const payer = await kit.customer(1_000_000n)
      const body = await request(payer, requirement(1_000_000n))
      const statuses: number[] = []
      for (let i = 0; i < 21; i++) statuses.push((await x402('verify', body, first.key)).status)
      expect(statuses).toEqual([...Array(20).fill(200), 429])
      expect((await x402('verify', body, second.key)).status).toBe(200)
    })
  })
}
