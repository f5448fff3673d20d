/**
 * A transaction paid over x402 by the reference client, unmodified: `@x402/fetch` with
 * `@x402/evm`'s ExactEvmScheme asks the transaction's x402_url, gets 402 with a PAYMENT-REQUIRED
 * naming the devnet's TUSD (EIP-3009) to the deposit address, signs, and is answered 200 with a
 * PAYMENT-RESPONSE once the relayer sent the payment; the follower then confirms it like any
 * transfer. Payments that name a requirement the transaction does not offer, or replay one, are
 * refused with 402 and the reason, and the relayer sends nothing.
 */
import { describe, expect, test } from 'bun:test'
import { ExactEvmScheme } from '@x402/evm'
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch'
import { getAddress } from 'viem'
import type { privateKeyToAccount } from 'viem/accounts'
import { createDevnetClient, type Devnet, type DevnetClient } from '../../src/chain/devnet.ts'
import { decodeHeader, encodeHeader } from '../../src/x402/protocol.ts'
import { waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { RELAYER, relayerKeyDir, tusdHolder } from '../helpers/relayer.ts'
import { useStack } from '../helpers/stack.ts'

const { keyFile: KEY_FILE } = relayerKeyDir('relayer-key-')

for (const backend of backends()) {
  describe(`x402 on a transaction [${backend}]`, () => {
    let devnet: Devnet
    let wallet: DevnetClient
    let t: TestServer
    let key: string
    useStack(
      backend,
      { devnet: { confirmations: 2, pollIntervalMs: 200 }, env: { RELAYER_KEY_FILE: KEY_FILE } },
      (s) => {
        devnet = s.devnet
        wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
        t = s.t
        key = s.key
      },
    )

    /** fetch as a program would use it, reaching this test server over its TLS. */
    const transport = async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = new Request(input, init)
      const url = new URL(req.url)
      return t.fetch(url.pathname + url.search, {
        method: req.method,
        headers: req.headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : await req.text(),
      })
    }
    async function transaction(amount: number) {
      const r = await api(t, key).create({ amount })
      return ((await r.json()) as any).transaction as { id: string; x402_url: string }
    }
    const agent = (tokens: bigint) => tusdHolder(wallet, devnet.stablecoin, tokens)
    /** The reference client, told that the devnet's TUSD is an asset it may spend. */
    const payingFetch = (account: ReturnType<typeof privateKeyToAccount>) =>
      wrapFetchWithPayment(
        transport as typeof fetch,
        new x402Client().register('eip155:31337', new ExactEvmScheme(account)).setSpendControls({
          allowedAssets: [{ network: 'eip155:31337', asset: devnet.stablecoin }],
        }),
      )
    const pathOf = (url: string) => new URL(url).pathname
    // Pending included: a transaction the node took counts before it is mined.
    const relayerNonce = () =>
      wallet.getTransactionCount({ address: RELAYER.address, blockTag: 'pending' })

    test('@x402/fetch pays an x402_url: 402 with the requirement, then 200 with PAYMENT-RESPONSE, and the payment completes', async () => {
      const tx = await transaction(12)
      expect(tx.x402_url).toBe(`${t.url}/pay/${tx.id}/x402`)
      const unpaid = await t.fetch(pathOf(tx.x402_url))
      expect(unpaid.status).toBe(402)
      const required = decodeHeader(unpaid.headers.get('payment-required')!) as any
      const deposit = (await (await t.fetch(`/pay/${tx.id}/state`)).json()) as any
      expect(required).toMatchObject({
        x402Version: 2,
        resource: { url: tx.x402_url },
        accepts: [
          {
            scheme: 'exact',
            network: 'eip155:31337',
            asset: devnet.stablecoin,
            amount: '12000000',
            extra: { name: 'Test USD', version: '2' },
          },
          // The devnet's euro stablecoin takes signatures too: $12 at EUR 1.08, rounded up.
          {
            scheme: 'exact',
            network: 'eip155:31337',
            asset: devnet.euroCoin,
            amount: '11111112',
            extra: { name: 'Test Euro', version: '2' },
          },
        ],
      })
      // Still `created`: the 402 locks nothing; the address it names is the transaction's own.
      expect(deposit.status).toBe('created')
      const payTo = required.accepts[0].payTo as `0x${string}`
      expect(required.accepts[0].maxTimeoutSeconds).toBeGreaterThanOrEqual(30)

      const payer = await agent(12_000_000n)
      const res = await payingFetch(payer)(tx.x402_url)
      expect(res.status).toBe(200)
      const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!)
      expect(settled).toMatchObject({
        success: true,
        network: 'eip155:31337',
        payer: payer.address,
      })
      const body = (await res.json()) as any
      expect(body.id).toBe(tx.id)
      expect(body.quote.deposit_address).toBe(getAddress(payTo))
      const receipt = await wallet.waitForTransactionReceipt({
        hash: settled.transaction as `0x${string}`,
      })
      expect(getAddress(receipt.from)).toBe(RELAYER.address)
      const done = await waitUntil(
        'completed',
        () => api(t, key).transaction(tx.id),
        (x) => x.status === 'completed',
      )
      expect(done.transaction_hash).toBe(settled.transaction)
      expect(done.amount_received).toBe('12000000')
      expect(await wallet.getBalance({ address: payer.address })).toBe(0n)
      // Paid: the x402_url now answers with the transaction, and takes nothing more.
      const after = await t.fetch(pathOf(tx.x402_url))
      expect(after.status).toBe(200)
      expect(((await after.json()) as any).status).toBe('completed')
    })

    test('a payment naming a requirement not offered, a replay, or a garbled header is refused with 402 and the reason; the relayer sends nothing', async () => {
      const tx = await transaction(5)
      const payer = await agent(5_000_000n)
      // Capture what the reference client sends, without letting it through.
      let signed: string | null = null
      const capture = wrapFetchWithPayment(
        (async (input: RequestInfo | URL, init?: RequestInit) => {
          const req = new Request(input, init)
          const header = req.headers.get('payment-signature')
          if (header) {
            signed = header
            return new Response('{}', { status: 500 })
          }
          return transport(input, init)
        }) as typeof fetch,
        new x402Client().register('eip155:31337', new ExactEvmScheme(payer)).setSpendControls({
          allowedAssets: [{ network: 'eip155:31337', asset: devnet.stablecoin }],
        }),
      )
      await capture(tx.x402_url)
      expect(signed).not.toBeNull()
      const good = decodeHeader(signed!) as any
      const before = await relayerNonce()
      const send = (payload: unknown) =>
        t.fetch(pathOf(tx.x402_url), {
          headers: {
            'payment-signature': typeof payload === 'string' ? payload : encodeHeader(payload),
          },
        })
      const cases: [string, unknown, RegExp][] = [
        ['garbled header', 'not base64!', /not base64/],
        ['version 1', { ...good, x402Version: 1 }, /x402Version 1/],
        [
          'a lower amount accepted and signed',
          {
            ...good,
            accepted: { ...good.accepted, amount: '1' },
            payload: {
              ...good.payload,
              authorization: { ...good.payload.authorization, value: '1' },
            },
          },
          /not a requirement this transaction offers/,
        ],
        [
          'another payTo',
          { ...good, accepted: { ...good.accepted, payTo: payer.address } },
          /not a requirement this transaction offers/,
        ],
        [
          'another asset',
          { ...good, accepted: { ...good.accepted, asset: devnet.feed } },
          /not a requirement this transaction offers/,
        ],
        [
          'another chain',
          { ...good, accepted: { ...good.accepted, network: 'eip155:8453' } },
          /not a requirement this transaction offers/,
        ],
        [
          'an authorization to another address',
          {
            ...good,
            payload: {
              ...good.payload,
              authorization: { ...good.payload.authorization, to: payer.address },
            },
          },
          /must be the requirement's payTo/,
        ],
        [
          'a signature over another nonce',
          {
            ...good,
            payload: {
              ...good.payload,
              authorization: { ...good.payload.authorization, nonce: `0x${'11'.repeat(32)}` },
            },
          },
          /signature: is not by/,
        ],
      ]
      for (const [why, payload, reason] of cases) {
        const r = await send(payload)
        const pr = decodeHeader(r.headers.get('payment-required') ?? '') as any
        expect({ why, status: r.status, error: reason.test(pr?.error ?? '') }).toEqual({
          why,
          status: 402,
          error: true,
        })
        // A refusal still says what would be taken.
        expect(pr.accepts.length).toBe(2)
      }
      expect(await relayerNonce()).toBe(before)
      // The real one goes through once; sent again, it is refused before any gas.
      const paid = await send(good)
      expect(paid.status).toBe(200)
      const settled = decodeHeader(paid.headers.get('payment-response')!) as any
      await wallet.waitForTransactionReceipt({ hash: settled.transaction })
      const afterFirst = await relayerNonce()
      expect(afterFirst).toBe(before + 1)
      await waitUntil(
        'seen',
        () => api(t, key).transaction(tx.id),
        (x) => ['processing', 'confirming', 'completed'].includes(x.status),
      )
      const again = await send(good)
      expect(again.status).toBe(200)
      expect(again.headers.get('payment-response')).toBeNull()
      expect(await relayerNonce()).toBe(afterFirst)
    })

    test('the same signed payment replayed against another transaction is refused', async () => {
      const first = await transaction(3)
      const second = await transaction(3)
      const payer = await agent(6_000_000n)
      const res = await payingFetch(payer)(first.x402_url)
      expect(res.status).toBe(200)
      // Re-addressed to the second transaction: its payTo differs, so it is not its requirement.
      const unpaid = await t.fetch(pathOf(second.x402_url))
      const offer = (decodeHeader(unpaid.headers.get('payment-required')!) as any).accepts[0]
      expect(offer.payTo).not.toBe(
        ((await (await t.fetch(`/pay/${first.id}/state`)).json()) as any).quote.deposit_address,
      )
      const before = await relayerNonce()
      const forged = {
        x402Version: 2,
        accepted: offer,
        payload: {
          authorization: {
            from: payer.address,
            to: offer.payTo,
            value: offer.amount,
            validAfter: '0',
            validBefore: String(Math.floor(Date.now() / 1000) + 120),
            nonce: `0x${'22'.repeat(32)}`,
          },
          signature: `0x${'ab'.repeat(65)}`,
        },
      }
      const r = await t.fetch(pathOf(second.x402_url), {
        headers: { 'payment-signature': encodeHeader(forged) },
      })
      expect(r.status).toBe(402)
      expect((decodeHeader(r.headers.get('payment-required')!) as any).error).toMatch(
        /signature: is not by/,
      )
      expect(await relayerNonce()).toBe(before)
    })
  })
}
