import { describe, expect, test } from 'bun:test'
import { mnemonicToAccount } from 'viem/accounts'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { xpubFromMnemonic } from '../../src/chain/deposit-addresses.ts'
import { createDevnetClient, deployTestStablecoin } from '../../src/chain/devnet.ts'
import { DEFAULT_PAY_LIMITS as PAY_LIMITS } from '../../src/services.ts'
import { backends } from '../helpers/databases.ts'
import { runCli } from '../helpers/processes.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

const MNEMONIC = 'test test test test test test test test test test test junk'
const TOKEN = '0x5FbDB2315678afecb367f032d93F642f64180aa3'

for (const backend of backends()) {
  describe(`deposit addresses (docs/decisions/0017-deposit-addresses-from-an-xpub.md) [${backend}]`, () => {
    let t: TestServer
    let node: AnvilNode
    useStack(
      backend,
      {
        project: false,
        networks: async ({ defer }) => {
          // A live network on a node of its own (chain id 1), with a USDC-like token: the first
          // contract anvil's first account deploys sits at TOKEN. The network must check out before
          // anything on it is quoted.
          node = await startAnvil({ chainId: 1 })
          defer(() => node.stop())
          const deployer = createDevnetClient(
            node.rpcUrl,
            '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
            1,
          )
          expect(await deployTestStablecoin(deployer, 'USD Coin', 'USDC')).toBe(TOKEN)
          return [
            {
              name: 'mainnet-ish',
              chainId: 1,
              rpcUrl: node.rpcUrl,
              fallbackRpcUrls: [],
              wsUrl: null,
              confirmations: 12,
              finality: 'confirmations',
              pollIntervalMs: 60_000,
              maxLogRange: 1000,
              maxRequestsPerSecond: null,
              testnet: false,
              tokens: [
                {
                  kind: 'erc20',
                  symbol: 'USDC',
                  decimals: 6,
                  address: TOKEN,
                  price: { kind: 'fixedUsd', usd: '1' },
                },
              ],
            },
          ]
        },
      },
      (s) => {
        t = s.t
      },
    )

    const select = (id: string) =>
      t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: 'USDC', blockchain_network: 'mainnet-ish' }),
      })

    test('live payments are refused with a clear 503 until the operator sets an xpub', async () => {
      const p = await t.project({ mode: 'live' })
      const created = (await (await api(t, p.key).create({ amount: 10 })).json()) as any
      const r = await select(created.transaction.id)
      expect(r.status).toBe(503)
      expect((await r.json()).error.message).toContain('not set up live payments')
      expect(
        ((await (await t.fetch(`/pay/${created.transaction.id}/state`)).json()) as any).status,
      ).toBe('created')
    })

    test("addresses are the xpub's children in order, equal to mnemonicToAccount for the same seed, one per transaction", async () => {
      const p = await t.project({ mode: 'live' })
      const xpub = xpubFromMnemonic(MNEMONIC)
      const env = t.cliEnv
      const set = await runCli(
        ['project', 'set-xpub', '--project', p.id, '--mode', 'live', '--xpub', xpub, '--json'],
        { env },
      )
      expect(set.code).toBe(0)
      const expected = [0, 1, 2].map(
        (i) => mnemonicToAccount(MNEMONIC, { addressIndex: i }).address,
      )
      expect(JSON.parse(set.stdout).first_addresses).toEqual(expected)
      const addresses: string[] = []
      for (let i = 0; i < 2; i++) {
        const created = (await (await api(t, p.key).create({ amount: 10 + i })).json()) as any
        const s = (await (await select(created.transaction.id)).json()) as any
        expect(s.status).toBe('prepared')
        addresses.push(s.quote.deposit_address)
        // Selecting again keeps the address (the quote is replaced,
        // docs/decisions/0012-transaction-lifecycle.md).
        expect(
          ((await (await select(created.transaction.id)).json()) as any).quote.deposit_address,
        ).toBe(s.quote.deposit_address)
      }
      expect(addresses).toEqual(expected.slice(0, 2))
      // Setting the same xpub again keeps counting; nothing is ever handed out twice.
      expect(
        (
          await runCli(
            ['project', 'set-xpub', '--project', p.id, '--mode', 'live', '--xpub', xpub],
            { env },
          )
        ).code,
      ).toBe(0)
      const third = (await (await api(t, p.key).create({ amount: 13 })).json()) as any
      expect(
        ((await (await select(third.transaction.id)).json()) as any).quote.deposit_address,
      ).toBe(expected[2])
    })

    test('a test transaction is not offered a live network', async () => {
      const p = await t.project({ mode: 'test' })
      const created = (await (await api(t, p.key).create({ amount: 10 })).json()) as any
      const state = (await (await t.fetch(`/pay/${created.transaction.id}/state`)).json()) as any
      expect(state.tokens).toEqual([])
      expect((await select(created.transaction.id)).status).toBe(400)
    })

    test('an unknown transaction id is 404 on every pay endpoint', async () => {
      const id = crypto.randomUUID()
      expect((await t.fetch(`/pay/${id}/state`)).status).toBe(404)
      expect((await select(id)).status).toBe(404)
      expect((await t.fetch(`/pay/${id}/confirm`, { method: 'POST' })).status).toBe(404)
      expect((await t.fetch(`/pay/not-a-uuid/state`)).status).toBe(404)
    })

    test('pay endpoints are rate-limited per client IP (docs/decisions/0026-pay-page-endpoints.md): 429 with Retry-After past the minute limit', async () => {
      const id = crypto.randomUUID()
      let last: Response | null = null
      // Counted per IP whatever the id: guessing ids gets slowed down like anything else.
      for (let i = 0; i < PAY_LIMITS.minute + 1; i++) {
        last = await t.fetch(`/pay/${id}/state`)
        if (last.status === 429) break
        await last.body?.cancel()
      }
      expect(last!.status).toBe(429)
      expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0)
      expect((await last!.json()).error.type).toBe('rate_limit_error')
    })
  })
}
