/**
 * Paying by one signature on a real devnet: the customer holds TUSD (an EIP-3009 token as
 * Circle's FiatToken v2.2, contracts/TestStablecoin.sol) and no ETH, signs a
 * TransferWithAuthorization, and the relayer (RELAYER_KEY_FILE) submits it and pays the gas. The
 * payment is then found and confirmed by the follower like any transfer. Every hostile variant is
 * refused with a 4xx naming the reason, and the relayer sends nothing for any of them.
 */
import { describe, expect, test } from 'bun:test'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type Hex, bytesToHex, formatEther, getAddress } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { createDevnetClient, type Devnet, type DevnetClient } from '../../src/chain/devnet.ts'
import { transferAuthorizationTypedData } from '../../src/chain/eip3009.ts'
import { waitUntil } from '../helpers/chain.ts'
import { BUN, ROOT } from '../helpers/processes.ts'
import { backends } from '../helpers/databases.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { RELAYER, relayerKeyDir, tusdHolder } from '../helpers/relayer.ts'
import { useStack } from '../helpers/stack.ts'

const { dir: keyDir, keyFile: KEY_FILE } = relayerKeyDir('relayer-key-')

const randomNonce = () => bytesToHex(crypto.getRandomValues(new Uint8Array(32)))

for (const backend of backends()) {
  describe(`pay by signature on a real devnet [${backend}]`, () => {
    let devnet: Devnet
    let wallet: DevnetClient
    let t: TestServer
    let key: string
    useStack(
      backend,
      {
        devnet: { confirmations: 2, pollIntervalMs: 200 },
        env: { RELAYER_KEY_FILE: KEY_FILE },
      },
      (s) => {
        devnet = s.devnet
        wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
        t = s.t
        key = s.key
      },
    )

    const state = async (id: string) => (await (await t.fetch(`/pay/${id}/state`)).json()) as any
    const post = (path: string, body: unknown) =>
      t.fetch(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    /** A transaction with TUSD chosen: its pay state, with the signature offer. */
    async function prepared(amount = 12) {
      const r = await api(t, key).create({ amount })
      const id = ((await r.json()) as any).transaction.id as string
      const s = (await (
        await post(`/pay/${id}/select`, {
          token_symbol: 'TUSD',
          blockchain_network: 'devnet',
        })
      ).json()) as any
      expect(s.status).toBe('prepared')
      return s
    }
    /** A customer with `tokens` TUSD and no ETH at all. */
    const customer = (tokens: bigint) => tusdHolder(wallet, devnet.stablecoin, tokens)
    /** Signs what the page offers (overridden where a test lies), as a wallet would. */
    async function sign(
      account: ReturnType<typeof privateKeyToAccount>,
      s: any,
      over: Partial<{
        to: Hex
        value: bigint
        validBefore: bigint
        chainId: number
        verifyingContract: Hex
        nonce: Hex
      }> = {},
    ) {
      const a = s.authorization
      const message = {
        from: account.address,
        to: over.to ?? getAddress(a.to),
        value: over.value ?? BigInt(a.value),
        validAfter: 0n,
        validBefore: over.validBefore ?? BigInt(a.valid_before),
        nonce: over.nonce ?? randomNonce(),
      }
      const domain = {
        ...a.domain,
        chainId: over.chainId ?? a.domain.chainId,
        verifyingContract: over.verifyingContract ?? a.domain.verifyingContract,
      }
      const signature = await account.signTypedData(
        transferAuthorizationTypedData(domain, message) as never,
      )
      return {
        from: account.address,
        value: String(message.value),
        valid_after: '0',
        valid_before: String(message.validBefore),
        nonce: message.nonce,
        signature,
      }
    }
    // Pending included: a transaction the node took counts before it is mined.
    const relayerNonce = () =>
      wallet.getTransactionCount({ address: RELAYER.address, blockTag: 'pending' })

    test('a customer holding TUSD and no ETH pays by one signature; the relayer pays the gas and the payment confirms like any other', async () => {
      const s = await prepared(12)
      expect(s.authorization).toMatchObject({
        domain: {
          name: 'Test USD',
          version: '2',
          chainId: 31337,
          verifyingContract: devnet.stablecoin,
        },
        primary_type: 'TransferWithAuthorization',
        to: s.quote.deposit_address,
        value: '12000000',
        valid_after: '0',
        valid_before: String(Math.floor(Date.parse(s.expires_at) / 1000)),
        relayer: RELAYER.address,
      })
      const payer = await customer(12_000_000n)
      expect(await wallet.getBalance({ address: payer.address })).toBe(0n)
      const r = await post(`/pay/${s.id}/authorization`, await sign(payer, s))
      expect(r.status).toBe(200)
      const { transaction_hash } = (await r.json()) as any
      const receipt = await wallet.waitForTransactionReceipt({ hash: transaction_hash })
      expect(getAddress(receipt.from)).toBe(RELAYER.address)
      const done = await waitUntil(
        'completed',
        () => state(s.id),
        (x) => x.status === 'completed',
      )
      expect(done.transaction_hash).toBe(transaction_hash)
      expect(done.amount_received).toBe('12000000')
      // The customer spent tokens only: still no ETH, and the tokens are at the deposit address.
      expect(await wallet.getBalance({ address: payer.address })).toBe(0n)
      const held = (a: Hex) =>
        wallet.readContract({
          address: devnet.stablecoin,
          abi: TestStablecoin.abi,
          functionName: 'balanceOf',
          args: [a],
        })
      expect(await held(payer.address)).toBe(0n)
      expect(await held(s.quote.deposit_address)).toBe(12_000_000n)
      // Completed: nothing more is offered.
      expect(done.authorization).toBeNull()
    })

    test('hostile or wrong authorizations are refused with the reason, and the relayer sends nothing', async () => {
      const s = await prepared(7)
      const payer = await customer(7_000_000n)
      const poor = await customer(1_000_000n)
      const before = await relayerNonce()
      const expiry = BigInt(s.authorization.valid_before)
      const refused: [string, unknown, number, RegExp][] = [
        [
          'another amount',
          await sign(payer, s, { value: 6_999_999n }),
          400,
          /value: must be exactly 7000000/,
        ],
        [
          'signed for another chain',
          await sign(payer, s, { chainId: 1 }),
          400,
          /signature: is not by/,
        ],
        [
          'signed for another token',
          await sign(payer, s, { verifyingContract: devnet.feed }),
          400,
          /signature: is not by/,
        ],
        [
          'signed to another recipient',
          await sign(payer, s, { to: payer.address }),
          400,
          /signature: is not by/,
        ],
        [
          'valid past the expiry',
          await sign(payer, s, { validBefore: expiry + 1n }),
          400,
          /valid_before: must be no later than/,
        ],
        [
          'a window already closing',
          await sign(payer, s, { validBefore: BigInt(Math.floor(Date.now() / 1000) + 5) }),
          400,
          /valid_before: must leave at least 30 s/,
        ],
        [
          'a payer short of the amount',
          await sign(poor, s),
          400,
          /from: holds 1000000 of the token, less than the 7000000 due/,
        ],
        [
          'a signature claimed for someone else',
          { ...(await sign(poor, s)), from: payer.address },
          400,
          /signature: is not by/,
        ],
        ['an unknown field', { ...(await sign(payer, s)), to: payer.address }, 400, /to/],
      ]
      for (const [why, body, status, reason] of refused) {
        const r = await post(`/pay/${s.id}/authorization`, body)
        const text = await r.text()
        expect({ why, status: r.status, matches: reason.test(text) }).toEqual({
          why,
          status,
          matches: true,
        })
      }
      expect(await relayerNonce()).toBe(before)

      // The right one goes through; sent again (a replay, a double click), it is answered with
      // the same transaction and sends nothing more.
      const good = await sign(payer, s)
      const first = await post(`/pay/${s.id}/authorization`, good)
      expect(first.status).toBe(200)
      const after = await relayerNonce()
      expect(after).toBe(before + 1)
      const replay = await post(`/pay/${s.id}/authorization`, good)
      expect(replay.status).toBe(200)
      expect(((await replay.json()) as any).transaction_hash).toBe(
        ((await first.json()) as any).transaction_hash,
      )
      expect(await relayerNonce()).toBe(after)
      await waitUntil(
        'completed',
        () => state(s.id),
        (x) => x.status === 'completed',
      )
    })

    test('an authorization whose nonce the payer already used elsewhere is refused before any gas', async () => {
      const s = await prepared(3)
      const payer = await customer(6_000_000n)
      const nonce = randomNonce()
      // The payer spends that nonce on another transfer first (someone with gas submits it).
      const elsewhere = await sign(payer, s, {
        to: devnet.wallet.address,
        value: 3_000_000n,
        nonce,
      })
      const domain = s.authorization.domain
      await wallet.waitForTransactionReceipt({
        hash: await wallet.writeContract({
          address: devnet.stablecoin,
          abi: TestStablecoin.abi,
          functionName: 'transferWithAuthorization',
          args: [
            payer.address,
            devnet.wallet.address,
            3_000_000n,
            0n,
            BigInt(elsewhere.valid_before),
            nonce,
            elsewhere.signature,
          ],
        }),
      })
      expect(domain.verifyingContract).toBe(devnet.stablecoin)
      const before = await relayerNonce()
      const r = await post(`/pay/${s.id}/authorization`, await sign(payer, s, { nonce }))
      expect(r.status).toBe(409)
      expect(await r.text()).toMatch(/nonce was used or canceled already/)
      expect(await relayerNonce()).toBe(before)
    })

    test('a second signature for a transaction already paid by signature (a double click, a fresh nonce) is refused: the customer pays once', async () => {
      const s = await prepared(4)
      const payer = await customer(8_000_000n)
      const [first, second] = [await sign(payer, s), await sign(payer, s)]
      expect(first.nonce).not.toBe(second.nonce)
      const paid = await post(`/pay/${s.id}/authorization`, first)
      expect(paid.status).toBe(200)
      await wallet.waitForTransactionReceipt({
        hash: ((await paid.json()) as any).transaction_hash,
      })
      const before = await relayerNonce()
      const again = await post(`/pay/${s.id}/authorization`, second)
      expect(again.status).toBe(409)
      expect(await again.text()).toMatch(/earlier signature/)
      expect(await relayerNonce()).toBe(before)
      await waitUntil(
        'completed',
        () => state(s.id),
        (x) => x.status === 'completed',
      )
      expect(
        await wallet.readContract({
          address: devnet.stablecoin,
          abi: TestStablecoin.abi,
          functionName: 'balanceOf',
          args: [payer.address],
        }),
      ).toBe(4_000_000n)
    })

    test("the README's example pays a transaction by one signature from a key with no ETH", async () => {
      const created = await api(t, key).create({ amount: 3 })
      const id = ((await created.json()) as any).transaction.id as string
      const caFile = join(keyDir, 'ca.pem')
      writeFileSync(caFile, t.ca)
      const run = Bun.spawn(
        [BUN, join(ROOT, 'docs/examples/pay-by-signature.ts'), id, devnet.rpcUrl],
        {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', SERVICE_URL: t.url, NODE_EXTRA_CA_CERTS: caFile },
          stdout: 'pipe',
          stderr: 'pipe',
        },
      )
      const [out, err, code] = await Promise.all([
        new Response(run.stdout).text(),
        new Response(run.stderr).text(),
        run.exited,
      ])
      expect({ code, err }).toEqual({ code: 0, err: '' })
      const lines = out.trim().split('\n')
      expect(lines[1]).toMatch(/^relayed: 0x[0-9a-f]{64}$/)
      expect(JSON.parse(lines.at(-1)!)).toEqual({
        status: 'completed',
        amount_received: '3000000',
        eth: '0',
      })
      expect((await api(t, key).transaction(id)).status).toBe('completed')
    })

    test('a transaction with no token chosen yet has nothing to sign', async () => {
      const r = await api(t, key).create({ amount: 5 })
      const id = ((await r.json()) as any).transaction.id as string
      expect((await state(id)).authorization).toBeNull()
      const payer = await customer(0n)
      const refused = await post(`/pay/${id}/authorization`, {
        from: payer.address,
        value: '5000000',
        valid_after: '0',
        valid_before: '9999999999',
        nonce: randomNonce(),
        signature: `0x${'11'.repeat(65)}`,
      })
      expect(refused.status).toBe(409)
    })
  })
}

/** The relayer's bounds: past either, it sends nothing and the customer is told to pay by transfer. */
for (const [bound, env, reason] of [
  [
    'a fee cap below the network fee',
    { RELAYER_MAX_FEE_GWEI: '0.000000001' },
    /above the relayer's cap of 0\.000000001 gwei/,
  ],
  [
    'an hourly gas budget already spent',
    { RELAYER_MAX_SPEND_PER_HOUR: '0.000000000000000001' },
    /spent its gas allowance for this hour on devnet/,
  ],
] as const) {
  describe(`the relayer with ${bound} [pglite]`, () => {
    let devnet: Devnet
    let t: TestServer
    let key: string
    useStack(
      'pglite',
      {
        devnet: { confirmations: 2, pollIntervalMs: 200 },
        env: { RELAYER_KEY_FILE: KEY_FILE, ...env },
      },
      (s) => {
        devnet = s.devnet
        t = s.t
        key = s.key
      },
    )

    test('refuses with 503 and the reason, sending nothing', async () => {
      const wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
      const created = await api(t, key).create({ amount: 2 })
      const id = ((await created.json()) as any).transaction.id as string
      const s = (await (
        await t.fetch(`/pay/${id}/select`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ token_symbol: 'TUSD', blockchain_network: 'devnet' }),
        })
      ).json()) as any
      const payer = privateKeyToAccount(generatePrivateKey())
      await wallet.waitForTransactionReceipt({
        hash: await wallet.writeContract({
          address: devnet.stablecoin,
          abi: TestStablecoin.abi,
          functionName: 'mint',
          args: [payer.address, 2_000_000n],
        }),
      })
      const a = s.authorization
      const message = {
        from: payer.address,
        to: getAddress(a.to),
        value: BigInt(a.value),
        validAfter: 0n,
        validBefore: BigInt(a.valid_before),
        nonce: randomNonce(),
      }
      const signature = await payer.signTypedData(
        transferAuthorizationTypedData(a.domain, message) as never,
      )
      const before = await wallet.getTransactionCount({ address: RELAYER.address })
      const r = await t.fetch(`/pay/${id}/authorization`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          from: payer.address,
          value: a.value,
          valid_after: '0',
          valid_before: a.valid_before,
          nonce: message.nonce,
          signature,
        }),
      })
      expect(r.status).toBe(503)
      expect(await r.text()).toMatch(reason)
      expect(await wallet.getTransactionCount({ address: RELAYER.address })).toBe(before)
    })
  })
}

/** The relayer's balance, for an operator: /metrics, and a readiness warning below the level. */
for (const [level, warns] of [
  ['0.02', false],
  ['1000000', true],
] as const) {
  describe(`the relayer's balance with RELAYER_MIN_BALANCE=${level} [pglite]`, () => {
    let devnet: Devnet
    let t: TestServer
    useStack(
      'pglite',
      {
        devnet: { confirmations: 2, pollIntervalMs: 200 },
        env: { RELAYER_KEY_FILE: KEY_FILE, RELAYER_MIN_BALANCE: level },
      },
      (s) => {
        devnet = s.devnet
        t = s.t
      },
    )

    test(`is scraped in whole coins, and readiness ${warns ? 'warns but stays ready' : 'passes without a warning'}`, async () => {
      const held = await createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey).getBalance({
        address: RELAYER.address,
      })
      const metrics = await (await t.fetch('/metrics')).text()
      const line = metrics.split('\n').find((l) => l.startsWith('cryptopay_relayer_balance{'))
      expect(line).toBe(`cryptopay_relayer_balance{network="devnet"} ${Number(formatEther(held))}`)
      const r = await t.fetch('/readyz')
      const body = (await r.json()) as any
      expect(r.status).toBe(200)
      expect(body.warnings).toEqual(warns ? ['relayer:devnet'] : [])
      const check = body.checks.find((c: any) => c.name === 'relayer:devnet')
      expect(check.ok).toBe(true)
      expect(check.detail).toMatch(
        warns
          ? /holds [0-9.]+ of the native coin, below RELAYER_MIN_BALANCE \(1000000\): fund it/
          : /^holds [0-9.]+ of the native coin$/,
      )
    })
  })
}
