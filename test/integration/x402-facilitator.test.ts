/**
 * The x402 facilitator for a merchant's own resources, with the x402 Foundation's packages
 * unmodified: the README's merchant app (its own process, docs/examples/x402-merchant.ts) charges
 * for `GET /weather` with `@x402/hono`, using this service as its facilitator with an API key; an
 * agent pays with `@x402/fetch` and gets the resource (and so does the README's agent,
 * docs/examples/x402-agent.ts). The tokens reach the project's x402 address, the
 * payment becomes a transaction of the project that completes at its confirmations, and
 * `transaction.completed` reaches the merchant's webhook receiver. Hostile settles are refused
 * with x402's reasons and move nothing; a flood of them is rate-limited like the API.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { type ChildProcess, spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ExactEvmScheme } from '@x402/evm'
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch'
import { bytesToHex, getAddress, type Hex } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { createDevnetClient, type Devnet, type DevnetClient } from '../../src/chain/devnet.ts'
import { transferAuthorizationTypedData } from '../../src/chain/eip3009.ts'
import { waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import { BUN, ROOT } from '../helpers/processes.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { RELAYER, relayerKeyDir, tusdHolder } from '../helpers/relayer.ts'
import { useStack } from '../helpers/stack.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'

const { dir, keyFile: KEY_FILE } = relayerKeyDir('x402-facilitator-')

/** The merchant's treasury: where its x402 payments go (any address the merchant holds). */
const TREASURY = privateKeyToAccount(generatePrivateKey()).address
/** The example charges one cent of the devnet's TUSD (6 decimals). */
const PRICE = 10_000n

/** Starts the merchant's app; its URL once it listens. */
async function startMerchant(env: Record<string, string>): Promise<{ url: string; stop(): void }> {
  const child: ChildProcess = spawn(BUN, [join(ROOT, 'docs/examples/x402-merchant.ts')], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let err = ''
  child.stderr!.on('data', (d) => {
    err += String(d)
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (d) => {
      out += String(d)
      const m = /listening (\S+)/.exec(out)
      if (m) resolve(m[1]!)
    })
    child.on('exit', (code) => reject(new Error(`merchant app exited ${code}: ${err}`)))
  })
  return { url, stop: () => child.kill() }
}

for (const backend of backends()) {
  describe(`x402 facilitator [${backend}]`, () => {
    let devnet: Devnet
    let wallet: DevnetClient
    let t: TestServer
    let key: string
    let projectId: string
    let merchant: { url: string; stop(): void }
    let sink: WebhookSink
    const hook = '/x402-hooks'
    useStack(
      backend,
      {
        devnet: { confirmations: 2, pollIntervalMs: 200 },
        env: { RELAYER_KEY_FILE: KEY_FILE },
      },
      async (s) => {
        devnet = s.devnet
        wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
        t = s.t
        key = s.key
        projectId = s.projectId
        const set = await t.server.services.facilitator.setPayTo(projectId, 'test', TREASURY)
        expect(set.ok).toBe(true)
        sink = await startWebhookSink()
        const ep = await t.server.services.endpoints.create({
          projectId,
          mode: 'test',
          url: sink.url(hook),
          eventTypes: ['transaction.completed'],
        })
        if (!ep.ok) throw new Error(ep.message)
        await sink.configure(hook, { secret: ep.value.secret, mode: 'ok' })
        const caFile = join(dir, `ca-${backend}.pem`)
        writeFileSync(caFile, t.ca)
        merchant = await startMerchant({
          SERVICE_URL: t.url,
          API_KEY: key,
          PORT: '0',
          NODE_EXTRA_CA_CERTS: caFile,
        })
      },
    )
    afterAll(async () => {
      merchant?.stop()
      await sink?.stop()
    })

    const agent = (tokens: bigint) => tusdHolder(wallet, devnet.stablecoin, tokens)
    const held = (a: Hex) =>
      wallet.readContract({
        address: devnet.stablecoin,
        abi: TestStablecoin.abi,
        functionName: 'balanceOf',
        args: [a],
      })
    // Pending included: a transaction the node took counts before it is mined.
    const relayerNonce = () =>
      wallet.getTransactionCount({ address: RELAYER.address, blockTag: 'pending' })
    const x402 = (path: string, body: unknown) => api(t, key).post(`/api/x402/${path}`, body)

    test("an agent pays a merchant's own endpoint: the resource is served, the tokens reach the treasury, and the transaction completes with its webhook", async () => {
      const payer = await agent(PRICE)
      const pay = wrapFetchWithPayment(
        fetch,
        new x402Client().register('eip155:31337', new ExactEvmScheme(payer)).setSpendControls({
          allowedAssets: [{ network: 'eip155:31337', asset: devnet.stablecoin }],
        }),
      )
      const unpaid = await fetch(`${merchant.url}/weather`)
      expect(unpaid.status).toBe(402)
      const res = await pay(`${merchant.url}/weather`)
      expect(res.status).toBe(200)
      expect(await res.json()).toEqual({ forecast: 'sunny', temperature_c: 21 })
      const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!)
      expect(settled).toMatchObject({
        success: true,
        network: 'eip155:31337',
        payer: payer.address,
      })
      // Settled means mined: the tokens are at the treasury, and the payer paid no gas.
      expect(await held(TREASURY)).toBe(PRICE)
      expect(await held(payer.address)).toBe(0n)
      const receipt = await wallet.getTransactionReceipt({ hash: settled.transaction as Hex })
      expect(getAddress(receipt.from)).toBe(RELAYER.address)

      // The payment is a transaction of the project, found by the follower and completed.
      const list = (await (
        await api(t, key).get(`/api/transactions/project/${projectId}?limit=5`)
      ).json()) as any
      const recorded = list.transactions.find((x: any) => x.metadata?.x402_payer === payer.address)
      expect(recorded).toMatchObject({
        amount_usd: 0.01,
        token_symbol: 'TUSD',
        token_amount: PRICE.toString(),
        blockchain_network: 'devnet',
        deposit_address: TREASURY,
        // What the caller said of its resource is kept as its word, marked, never as the
        // merchant's order description.
        metadata: {
          x402_caller_resource: `${merchant.url}/weather`,
          x402_caller_description: 'Weather for agents',
          x402_payer: payer.address,
        },
        order_description: 'x402 payment',
      })
      const done = await waitUntil(
        'completed',
        () => api(t, key).transaction(recorded.id),
        (x) => x.status === 'completed',
      )
      expect(done.transaction_hash).toBe(settled.transaction)
      expect(done.amount_received).toBe(PRICE.toString())
      const delivered = await sink.waitFor(hook, (r) =>
        r.some((x) => JSON.parse(x.body).data?.transaction_id === recorded.id),
      )
      const completed = delivered.find(
        (x) => JSON.parse(x.body).data?.transaction_id === recorded.id,
      )!
      expect(completed.verified).toBe(true)
      expect(JSON.parse(completed.body).event).toBe('transaction.completed')
      // The caller's words reach the merchant's webhook only as marked metadata.
      expect(JSON.parse(completed.body).data.metadata).toEqual({
        x402_caller_resource: `${merchant.url}/weather`,
        x402_caller_description: 'Weather for agents',
        x402_payer: payer.address,
      })
      // Paid to the treasury, not to a deposit address: the treasury tool has nothing to refund
      // it from, and says so.
      const refund = await api(t, key).post(`/api/transactions/${recorded.id}/refunds`, {
        address: payer.address,
      })
      expect(refund.status).toBe(409)
      expect(await refund.text()).toMatch(/over x402 .* refund it from that wallet/)
    })

    test("the README's agent pays the README's merchant with a fresh key and no ETH", async () => {
      const before = await held(TREASURY)
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(
          BUN,
          [join(ROOT, 'docs/examples/x402-agent.ts'), `${merchant.url}/weather`, devnet.rpcUrl],
          { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
        )
        let text = ''
        let err = ''
        child.stdout!.on('data', (d) => {
          text += String(d)
        })
        child.stderr!.on('data', (d) => {
          err += String(d)
        })
        child.on('exit', (code) =>
          code === 0 ? resolve(text) : reject(new Error(`exit ${code}: ${err}`)),
        )
      })
      const printed = JSON.parse(out.trim())
      expect(printed).toMatchObject({
        status: 200,
        body: { forecast: 'sunny', temperature_c: 21 },
        settlement: { success: true, network: 'eip155:31337' },
        eth: '0',
      })
      expect(await held(TREASURY)).toBe(before + PRICE)
    })

    test('the facilitator says what it settles and where payments go; keys without x402:settle are refused', async () => {
      const supported = (await (await api(t, key).get('/api/x402/supported')).json()) as any
      expect(supported).toEqual({
        kinds: [{ x402Version: 2, scheme: 'exact', network: 'eip155:31337' }],
        extensions: [],
        signers: { 'eip155:*': [RELAYER.address] },
      })
      const payTo = (await (await api(t, key).get('/api/x402/pay-to')).json()) as any
      expect(payTo).toMatchObject({
        success: true,
        mode: 'test',
        pay_to: TREASURY,
        assets: [
          {
            network: 'eip155:31337',
            blockchain_network: 'devnet',
            token_symbol: 'TUSD',
            asset: devnet.stablecoin,
            extra: { name: 'Test USD', version: '2' },
          },
          {
            network: 'eip155:31337',
            blockchain_network: 'devnet',
            token_symbol: 'TEUR',
            asset: devnet.euroCoin,
            extra: { name: 'Test Euro', version: '2' },
          },
        ],
      })
      const narrow = await t.key(projectId, 'test', ['transactions:read'])
      const r = await api(t, narrow.key).get('/api/x402/supported')
      expect(r.status).toBe(403)
      expect(((await r.json()) as any).error.message).toMatch(/x402:settle/)
    })

    test('settles for a requirement this service did not issue, or a payment that does not match it, are refused with the reason; nothing is sent', async () => {
      const payer = await agent(PRICE)
      const requirements = {
        scheme: 'exact',
        network: 'eip155:31337',
        asset: devnet.stablecoin,
        amount: PRICE.toString(),
        payTo: TREASURY,
        maxTimeoutSeconds: 300,
        extra: { name: 'Test USD', version: '2' },
      }
      const now = Math.floor(Date.now() / 1000)
      async function payment(
        over: Partial<{ to: Hex; value: bigint; validBefore: bigint; chainId: number }> = {},
      ) {
        const message = {
          from: payer.address,
          to: over.to ?? TREASURY,
          value: over.value ?? PRICE,
          validAfter: 0n,
          validBefore: over.validBefore ?? BigInt(now + 300),
          nonce: bytesToHex(crypto.getRandomValues(new Uint8Array(32))),
        }
        const signature = await payer.signTypedData(
          transferAuthorizationTypedData(
            {
              name: 'Test USD',
              version: '2',
              chainId: over.chainId ?? 31337,
              verifyingContract: devnet.stablecoin,
            },
            message,
          ) as never,
        )
        return {
          x402Version: 2,
          accepted: requirements,
          payload: {
            authorization: {
              ...message,
              value: String(message.value),
              validAfter: '0',
              validBefore: String(message.validBefore),
            },
            signature,
          },
        }
      }
      const other = privateKeyToAccount(generatePrivateKey()).address
      const before = await relayerNonce()
      const cases: [string, unknown, unknown, string][] = [
        [
          'payTo not the project address',
          { ...requirements, payTo: other },
          { ...(await payment({ to: other })), accepted: { ...requirements, payTo: other } },
          'invalid_exact_evm_recipient_mismatch',
        ],
        [
          'a network the service does not settle',
          { ...requirements, network: 'eip155:8453' },
          { ...(await payment()), accepted: { ...requirements, network: 'eip155:8453' } },
          'invalid_network',
        ],
        [
          'an asset that is not a signature token',
          { ...requirements, asset: devnet.feed },
          { ...(await payment()), accepted: { ...requirements, asset: devnet.feed } },
          'invalid_payment_requirements',
        ],
        [
          'a wrong domain version in extra',
          { ...requirements, extra: { name: 'Test USD', version: '1' } },
          await payment(),
          'invalid_exact_evm_token_version_mismatch',
        ],
        [
          'an authorization for less than required',
          requirements,
          await payment({ value: PRICE - 1n }),
          'invalid_exact_evm_payload_authorization_value_mismatch',
        ],
        [
          'a signature for another chain',
          requirements,
          await payment({ chainId: 8453 }),
          'invalid_exact_evm_signature',
        ],
        [
          'an expired window',
          requirements,
          await payment({ validBefore: BigInt(now - 10) }),
          'invalid_exact_evm_payload_authorization_valid_before',
        ],
        [
          'a window longer than maxTimeoutSeconds allows',
          requirements,
          await payment({ validBefore: BigInt(now + 3600) }),
          'invalid_exact_evm_payload_authorization_valid_before',
        ],
      ]
      for (const [why, paymentRequirements, paymentPayload, reason] of cases) {
        const body = { x402Version: 2, paymentPayload, paymentRequirements }
        const v = (await (await x402('verify', body)).json()) as any
        const s = await x402('settle', body)
        const settled = (await s.json()) as any
        expect({
          why,
          verify: v.invalidReason,
          status: s.status,
          settle: settled.errorReason,
        }).toEqual({
          why,
          verify: reason,
          status: 200,
          settle: reason,
        })
        expect(settled.success).toBe(false)
      }
      // A payer short of the amount.
      const poor = privateKeyToAccount(generatePrivateKey())
      const message = {
        from: poor.address,
        to: TREASURY,
        value: PRICE,
        validAfter: 0n,
        validBefore: BigInt(now + 300),
        nonce: bytesToHex(crypto.getRandomValues(new Uint8Array(32))),
      }
      const poorSig = await poor.signTypedData(
        transferAuthorizationTypedData(
          { name: 'Test USD', version: '2', chainId: 31337, verifyingContract: devnet.stablecoin },
          message,
        ) as never,
      )
      const short = (await (
        await x402('settle', {
          x402Version: 2,
          paymentRequirements: requirements,
          paymentPayload: {
            x402Version: 2,
            accepted: requirements,
            payload: {
              authorization: {
                ...message,
                value: String(PRICE),
                validAfter: '0',
                validBefore: String(message.validBefore),
              },
              signature: poorSig,
            },
          },
        })
      ).json()) as any
      expect(short.errorReason).toBe('invalid_exact_evm_insufficient_balance')
      expect(await relayerNonce()).toBe(before)
      expect(await held(TREASURY)).toBe(2n * PRICE) // only the two payments above

      // The real one settles once; replayed, it is refused before any gas.
      const good = {
        x402Version: 2,
        paymentPayload: await payment(),
        paymentRequirements: requirements,
      }
      const first = (await (await x402('settle', good)).json()) as any
      expect(first).toMatchObject({ success: true, payer: payer.address })
      expect(first.extra.transaction_id).toMatch(/^[0-9a-f-]{36}$/)
      const replay = (await (await x402('settle', good)).json()) as any
      expect(replay).toMatchObject({
        success: false,
        errorReason: 'invalid_exact_evm_nonce_already_used',
      })
      expect(await relayerNonce()).toBe(before + 1)
      // A malformed body is a 400 naming the field.
      const bad = await x402('settle', { x402Version: 2, paymentRequirements: requirements })
      expect(bad.status).toBe(400)
    })

    test('a flood of settles is rate-limited per project like every API call', async () => {
      const flooded = await t.project({ limits: { minute: 10, hour: 1000, day: 10000 } })
      const body = { x402Version: 2, paymentRequirements: {}, paymentPayload: {} }
      const statuses: number[] = []
      for (let i = 0; i < 12; i++)
        statuses.push((await api(t, flooded.key).post('/api/x402/settle', body)).status)
      // Each one counted (the malformed ones too), then refused before it is read.
      expect(statuses).toEqual([...Array(10).fill(400), 429, 429])
      const limited = await api(t, flooded.key).post('/api/x402/settle', body)
      expect(limited.headers.get('retry-after')).toMatch(/^[0-9]+$/)
      // Another project's limit is its own.
      expect((await x402('settle', body)).status).toBe(400)
    })
  })
}
