/**
 * Attacks on what the service believes a token and a currency are worth
 * (docs/decisions/0064-priced-in-the-merchants-currency.md), on the devnet's own Chainlink-style
 * feeds, set here as a broken or manipulated feed would answer:
 * - a price of zero, a negative one, a round dated in the future or one past its feed's
 *   heartbeat quotes nothing in that token (503), locks nothing, and leaves the others quoted;
 * - a rate that moves after the quote changes nothing due: a customer who pays what the new rate
 *   would ask underpays, and the transaction never completes on it;
 * - an x402 payment signed at the old rate is refused, and the amount at the new one offered.
 */
import { describe, expect, test } from 'bun:test'
import { MockAggregatorV3, TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { createDevnetClient, type Devnet, type DevnetClient } from '../../src/chain/devnet.ts'
import { decodeHeader, encodeHeader } from '../../src/x402/protocol.ts'
import { payToken, waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import { relayerKeyDir, tusdHolder } from '../helpers/relayer.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { x402Payload } from '../helpers/signature-payments.ts'
import { useStack } from '../helpers/stack.ts'

const { keyFile } = relayerKeyDir('rates-attack-')

for (const backend of backends()) {
  describe(`exchange rates under attack [${backend}]`, () => {
    let t: TestServer
    let key: string
    let devnet: Devnet
    let wallet: DevnetClient
    useStack(
      backend,
      {
        // The devnet writes no rounds of its own during the tests: every answer is the test's.
        devnet: { confirmations: 2, pollIntervalMs: 100, feedRefreshMs: 3_600_000 },
        env: { RELAYER_KEY_FILE: keyFile },
      },
      (s) => {
        t = s.t
        key = s.key
        devnet = s.devnet
        wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
      },
    )

    /** Sets `feed`'s latest round, as a broken or manipulated feed would answer. */
    async function round(feed: `0x${string}`, answer: bigint, updatedAtSeconds: number) {
      const now = BigInt(updatedAtSeconds)
      const roundId = BigInt(Date.now())
      await wallet.waitForTransactionReceipt({
        hash: await wallet.writeContract({
          address: feed,
          abi: MockAggregatorV3.abi,
          functionName: 'setRoundData',
          args: [roundId, answer, now, now, roundId],
        }),
      })
    }
    const nowSeconds = () => Math.floor(Date.now() / 1000)
    const select = (id: string, token_symbol: string) =>
      t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol, blockchain_network: 'devnet' }),
      })
    const create = async (body: Record<string, unknown>) =>
      ((await (await api(t, key).create(body)).json()) as any).transaction

    test('a feed answering zero, a negative price, a round from the future or one past its heartbeat quotes nothing in its token and locks nothing; the others are still quoted', async () => {
      const broken: [string, bigint, number][] = [
        ['zero', 0n, nowSeconds()],
        ['negative', -3000_00000000n, nowSeconds()],
        ['an hour in the future', 3000_00000000n, nowSeconds() + 3600],
        ['two hours old (heartbeat one)', 3000_00000000n, nowSeconds() - 7200],
      ]
      for (const [why, answer, at] of broken) {
        await round(devnet.feed, answer, at)
        const tx = await create({ amount: 5 })
        const r = await select(tx.id, 'ETH')
        expect({ why, status: r.status }).toEqual({ why, status: 503 })
        const state = (await (await t.fetch(`/pay/${tx.id}/state`)).json()) as any
        expect({ why, status: state.status, quote: state.quote }).toEqual({
          why,
          status: 'created',
          quote: null,
        })
        expect({ why, tusd: (await select(tx.id, 'TUSD')).status }).toEqual({ why, tusd: 200 })
      }
      await round(devnet.feed, 3000_00000000n, nowSeconds())
    })

    test('a rate that falls after the quote changes nothing due: paying what the new rate asks underpays, and it never completes on that', async () => {
      const tx = await create({ amount: 10, currency: 'EUR' })
      const quoted = (await (await select(tx.id, 'TUSD')).json()) as any
      // 10 EUR at the devnet's 1.08: 10.80 TUSD, locked.
      expect(quoted.quote.token_amount).toBe('10800000')
      await round(devnet.fxFeeds.EUR!, 90_000_000n, nowSeconds())
      const later = (await (await t.fetch(`/pay/${tx.id}/state`)).json()) as any
      expect(later.quote.token_amount).toBe('10800000')
      // What 10 EUR would cost at the new 0.90: 9.00 TUSD.
      await payToken(wallet, devnet.stablecoin, quoted.quote.deposit_address, 9_000_000n)
      const partial = await waitUntil(
        'the payment seen',
        async () => (await (await t.fetch(`/pay/${tx.id}/state`)).json()) as any,
        (s) => s.amount_due === '1800000',
      )
      expect(partial.status).not.toBe('completed')
      await round(devnet.fxFeeds.EUR!, 108_000_000n, nowSeconds())
    })

    test('an x402 payment signed at the old rate is refused after the rate moved, and the amount at the new rate is offered', async () => {
      const tx = await create({ amount: 10 })
      const path = new URL(tx.x402_url).pathname
      const before = decodeHeader((await t.fetch(path)).headers.get('payment-required')!) as any
      const teur = before.accepts.find(
        (a: any) => a.asset.toLowerCase() === devnet.euroCoin.toLowerCase(),
      )
      // $10 at EUR 1.08.
      expect(teur.amount).toBe('9259260')
      const payer = await tusdHolder(wallet, devnet.stablecoin, 0n)
      await wallet.waitForTransactionReceipt({
        hash: await wallet.writeContract({
          address: devnet.euroCoin,
          abi: TestStablecoin.abi,
          functionName: 'mint',
          args: [payer.address, 20_000_000n],
        }),
      })
      const payload = await x402Payload(payer, before, teur)
      // The euro weakens to 0.90: the same dollars now take more TEUR.
      await round(devnet.fxFeeds.EUR!, 90_000_000n, nowSeconds())
      const res = await t.fetch(path, { headers: { 'payment-signature': encodeHeader(payload) } })
      expect(res.status).toBe(402)
      const now = decodeHeader(res.headers.get('payment-required')!) as any
      expect(now.error).toMatch(/not a requirement this transaction offers now/)
      expect(
        now.accepts.find((a: any) => a.asset.toLowerCase() === devnet.euroCoin.toLowerCase())
          .amount,
      ).toBe('11111112')
      await round(devnet.fxFeeds.EUR!, 108_000_000n, nowSeconds())
    })
  })
}
