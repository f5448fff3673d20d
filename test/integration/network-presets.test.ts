/**
 * Presets on a real chain (docs/decisions/0042-network-presets-checked-against-the-chain.md): an
 * anvil with Base's chain id whose contracts sit at the preset's own addresses (code and storage
 * copied there with anvil_setCode / anvil_setStorageAt), so the start-up check reads the real
 * answers a node would give. A preset entry starts and takes a payment; a node that disagrees with
 * the config (decimals, symbol, chain id, feed) refuses the start with a message naming network,
 * token, expected and found; one that does not answer does not refuse it, and readiness says the
 * network is not followed yet.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { bytesToHex, getAddress, type Address, type Hex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import {
  MockAggregatorV3,
  TestPlainToken,
  TestStablecoin,
} from '../../src/chain/artifacts/index.ts'
import {
  ANVIL_DEFAULT_MNEMONIC,
  createDevnetClient,
  type DevnetClient,
} from '../../src/chain/devnet.ts'
import { NETWORK_PRESETS } from '../../src/chain/presets.ts'
import { loadConfig } from '../../src/config.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { startServer } from '../../src/server/start.ts'
import { backends, freshDataDir } from '../helpers/databases.ts'
import { payToken, waitUntil } from '../helpers/chain.ts'
import { startRpcProxy } from '../helpers/rpc-proxy.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const BASE = NETWORK_PRESETS.base!
const erc20 = (symbol: string) => BASE.tokens.find((t) => t.symbol === symbol)!
const BASE_USDC = erc20('USDC').address!
/** The bridged Tether USD customers hold on Base (its contract says USDT, 6 decimals). */
const BASE_USDT = erc20('USDT').address!
const BASE_ETH_FEED = (erc20('ETH').price as { chainlinkFeed: Address }).chainlinkFeed

let anvil: AnvilNode
let wallet: DevnetClient
let dir: string
/**
 * Another ERC-20 (symbol TUSD), and a feed describing itself as BTC / USD, at addresses of their
 * own.
 */
let otherToken: Address
let otherFeed: Address
/** An ETH / USD feed whose last round is two hours old. */
let staleFeed: Address

async function deployed(hash: Hex): Promise<Address> {
  return getAddress((await wallet.waitForTransactionReceipt({ hash })).contractAddress!)
}

/** Puts the code and the first `slots` storage slots of `from` at `to`. */
async function copyContract(from: Address, to: Address, slots: number) {
  const code = await wallet.getCode({ address: from })
  await wallet.request({ method: 'anvil_setCode', params: [to, code!] } as never)
  for (let slot = 0; slot < slots; slot++) {
    const key = `0x${slot.toString(16).padStart(64, '0')}` as Hex
    const value = await wallet.getStorageAt({ address: from, slot: key })
    await wallet.request({ method: 'anvil_setStorageAt', params: [to, key, value] } as never)
  }
}

function configFile(networks: unknown[]): string {
  const path = join(dir, `networks-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(path, JSON.stringify(networks))
  return path
}

/** A base preset entry on this anvil; a test network here so test-mode keys can use it. */
const base = (overrides: Record<string, unknown> = {}) => ({
  preset: 'base',
  rpcUrl: anvil.rpcUrl,
  testnet: true,
  confirmations: 2,
  pollIntervalMs: 200,
  ...overrides,
})

beforeAll(async () => {
  anvil = await startAnvil({ chainId: BASE.chainId, blockTime: 1 })
  const key = bytesToHex(
    mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 0 }).getHdKey().privateKey!,
  )
  wallet = createDevnetClient(anvil.rpcUrl, key, BASE.chainId)
  // TestStablecoin keeps name and symbol in slots 0 and 1 (short strings: inline); decimals (6) is
  // in its code.
  const usdc = await deployed(
    await wallet.deployContract({
      abi: TestStablecoin.abi,
      bytecode: TestStablecoin.bytecode,
      args: ['USD Coin', 'USDC'],
    }),
  )
  await copyContract(usdc, BASE_USDC, 2)
  await wallet.waitForTransactionReceipt({
    hash: await wallet.writeContract({
      address: BASE_USDC,
      abi: TestStablecoin.abi,
      functionName: 'mint',
      args: [wallet.account.address, 10n ** 12n],
    }),
  })
  // The bridged Tether USD takes no signatures: a plain ERC-20 (name, symbol, decimals in slots 0-2).
  const usdt = await deployed(
    await wallet.deployContract({
      abi: TestPlainToken.abi,
      bytecode: TestPlainToken.bytecode,
      args: ['Tether USD', 'USDT', 6],
    }),
  )
  await copyContract(usdt, BASE_USDT, 3)
  // MockAggregatorV3 keeps its description in slot 0 and its decimals (8) in its code; a fresh
  // round is written at the preset's address.
  const feed = await deployed(
    await wallet.deployContract({
      abi: MockAggregatorV3.abi,
      bytecode: MockAggregatorV3.bytecode,
      args: [8, 'ETH / USD', 3000_00000000n],
    }),
  )
  await copyContract(feed, BASE_ETH_FEED, 1)
  await wallet.waitForTransactionReceipt({
    hash: await wallet.writeContract({
      address: BASE_ETH_FEED,
      abi: MockAggregatorV3.abi,
      functionName: 'updateAnswer',
      args: [3000_00000000n],
    }),
  })
  // Circle's EURC and Chainlink's fiat feeds at the preset's addresses too.
  const eurc = await deployed(
    await wallet.deployContract({
      abi: TestStablecoin.abi,
      bytecode: TestStablecoin.bytecode,
      args: ['EURC', 'EURC'],
    }),
  )
  await copyContract(eurc, erc20('EURC').address!, 2)
  for (const [currency, rate] of Object.entries(BASE.fx ?? {})) {
    const fx = await deployed(
      await wallet.deployContract({
        abi: MockAggregatorV3.abi,
        bytecode: MockAggregatorV3.bytecode,
        args: [8, `${currency} / USD`, 1_10000000n],
      }),
    )
    await copyContract(fx, rate.chainlinkFeed, 1)
    await wallet.waitForTransactionReceipt({
      hash: await wallet.writeContract({
        address: rate.chainlinkFeed,
        abi: MockAggregatorV3.abi,
        functionName: 'updateAnswer',
        args: [1_10000000n],
      }),
    })
  }
  otherToken = await deployed(
    await wallet.deployContract({
      abi: TestStablecoin.abi,
      bytecode: TestStablecoin.bytecode,
      args: ['Test USD', 'TUSD'],
    }),
  )
  otherFeed = await deployed(
    await wallet.deployContract({
      abi: MockAggregatorV3.abi,
      bytecode: MockAggregatorV3.bytecode,
      args: [8, 'BTC / USD', 90000_00000000n],
    }),
  )
  staleFeed = await deployed(
    await wallet.deployContract({
      abi: MockAggregatorV3.abi,
      bytecode: MockAggregatorV3.bytecode,
      args: [8, 'ETH / USD', 3000_00000000n],
    }),
  )
  const twoHoursAgo = BigInt(Math.floor(Date.now() / 1000) - 7200)
  await wallet.waitForTransactionReceipt({
    hash: await wallet.writeContract({
      address: staleFeed,
      abi: MockAggregatorV3.abi,
      functionName: 'setRoundData',
      args: [2n, 3000_00000000n, twoHoursAgo, twoHoursAgo, 2n],
    }),
  })
  dir = mkdtempSync(join(tmpdir(), 'presets-'))
})

afterAll(async () => {
  await anvil?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

for (const backend of backends()) {
  describe(`a preset network on a chain with its chain id and contracts [${backend}]`, () => {
    let t: TestServer
    let key: string
    beforeAll(async () => {
      t = await startTestServer(backend, { NETWORKS_CONFIG: configFile([base()]) })
      key = (await t.project()).key
    })
    afterAll(async () => {
      await t?.stop()
    })

    test('{ preset: "base", rpcUrl } starts, offers the preset\'s tokens (USDC, the bridged USDT, ETH, EURC) and takes a USDC payment at the preset\'s address', async () => {
      const id = ((await (await api(t, key).create({ amount: 12.5 })).json()) as any).transaction
        .id as string
      const offered = (await (await t.fetch(`/pay/${id}/state`)).json()) as any
      expect(
        offered.tokens.map((x: any) => `${x.token_symbol}@${x.blockchain_network}`).sort(),
      ).toEqual(['ETH@base', 'EURC@base', 'USDC@base', 'USDT@base'])
      const selected = await t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: 'USDC', blockchain_network: 'base' }),
      })
      const quote = ((await selected.json()) as any).quote
      expect(quote.token_amount).toBe('12500000')
      expect(quote.payment_uri).toStartWith(`ethereum:${BASE_USDC}@8453/transfer?`)
      const hash = await payToken(wallet, BASE_USDC, quote.deposit_address, 12_500_000n)
      const done = await waitUntil(
        'completed',
        async () =>
          ((await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any).transaction,
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({
        transaction_hash: hash,
        token_symbol: 'USDC',
        blockchain_network: 'base',
        amount_received: '12500000',
      })
    })

    test('readiness reports the network followed once verified', async () => {
      const ready = await waitUntil(
        'ready',
        async () => (await (await t.fetch('/readyz')).json()) as any,
        (r) => r.checks?.some((c: any) => c.name === 'chain:base' && c.ok),
      )
      expect(ready.checks.find((c: any) => c.name === 'chain:base').detail).toStartWith(
        'followed here',
      )
    })
  })
}

describe('a node that disagrees with the config refuses the start, naming network, token, expected and found', () => {
  async function refusal(networks: unknown[]): Promise<string> {
    const dataDir = await freshDataDir()
    try {
      const config = loadConfig({
        PORT: '0',
        HTTP_PORT: '0',
        DATA_DIR: dataDir,
        LOG_LEVEL: 'silent',
        NETWORKS_CONFIG: configFile(networks),
      })
      return await startServer(config, { logger: createLogger('silent') }).then(
        async (s) => {
          const verdicts = s.services.chain.verdicts()
          await s.stop()
          throw new Error(`the server started; its checks: ${JSON.stringify(verdicts)}`)
        },
        (e: Error) => e.message,
      )
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  }

  test('decimals: the config says 18 where the contract answers 6', async () => {
    const message = await refusal([base({ tokens: [{ symbol: 'USDC', decimals: 18 }] })])
    expect(message).toStartWith('NETWORKS_CONFIG: the chain disagrees with the networks config')
    expect(message).toContain(
      `network base, token USDC: decimals() of ${BASE_USDC}: expected 18, found 6`,
    )
  })

  test('symbol: another token at the configured address', async () => {
    const message = await refusal([base({ tokens: [{ symbol: 'USDC', address: otherToken }] })])
    expect(message).toContain(
      `network base, token USDC: symbol() of ${otherToken}: expected "USDC", found "TUSD"`,
    )
  })

  test('chain id: the ethereum preset pointed at a Base node', async () => {
    const message = await refusal([{ preset: 'ethereum', rpcUrl: anvil.rpcUrl }])
    expect(message).toContain('network ethereum: chain id expected 1, found 8453')
  })

  test('no contract at an address, and a feed describing another pair, all named at once', async () => {
    const nowhere = '0x000000000000000000000000000000000000dEaD'
    const message = await refusal([
      base({
        tokens: [
          { symbol: 'USDC', address: nowhere },
          { symbol: 'ETH', price: { chainlinkFeed: otherFeed } },
        ],
      }),
    ])
    expect(message).toContain(
      `network base, token USDC: no ERC-20 answers decimals() at ${nowhere} (no contract code, or not this function)`,
    )
    expect(message).not.toContain('symbol()')
    expect(message).toContain(
      `network base, token ETH: description() of the price feed ${otherFeed}: expected "ETH / USD", found "BTC / USD"`,
    )
  })

  test('a node that answers a call with an error now and then (anvil while it mines) is asked again: the disagreement still refuses the start', async () => {
    const proxy = await startRpcProxy(anvil.rpcUrl)
    try {
      proxy.callErrorNext = 1
      const message = await refusal([
        base({ rpcUrl: proxy.url, tokens: [{ symbol: 'USDC', decimals: 18 }] }),
      ])
      expect(message).toContain(
        `network base, token USDC: decimals() of ${BASE_USDC}: expected 18, found 6`,
      )
      expect(proxy.callErrors).toHaveLength(1)
    } finally {
      await proxy.close()
    }
  })

  test('a stale feed: the age found and the limit, with the way out', async () => {
    const message = await refusal([
      base({ tokens: [{ symbol: 'ETH', price: { chainlinkFeed: staleFeed } }] }),
    ])
    expect(message).toMatch(
      /network base, token ETH: latestRoundData\(\) of the price feed 0x[0-9a-fA-F]{40}: stale: price feed .* was last updated 72\d\d s ago \(limit 3600 s\) \(if Chainlink lists a longer heartbeat for this feed, set price\.maxAgeSeconds\)/,
    )
  })
})

describe('a node that does not answer does not refuse the start', () => {
  test('the server starts; readiness says the network is not verified yet, and nothing on it is quoted', async () => {
    const t = await startTestServer('pglite', {
      NETWORKS_CONFIG: configFile([
        { preset: 'base', rpcUrl: 'http://127.0.0.1:9', testnet: true },
      ]),
    })
    try {
      const ready = (await (await t.fetch('/readyz')).json()) as any
      const check = ready.checks.find((c: any) => c.name === 'chain:base')
      expect(check.ok).toBe(false)
      expect(check.detail).toStartWith(
        'not followed yet: not verified against its chain, the RPC does not answer',
      )
      // An address never checked against the chain is not one to send a customer to.
      const key = (await t.project()).key
      const id = ((await (await api(t, key).create({ amount: 5 })).json()) as any).transaction
        .id as string
      expect(((await (await t.fetch(`/pay/${id}/state`)).json()) as any).tokens).toEqual([])
    } finally {
      await t.stop()
    }
  })

  test('a node that answers every call with an error: the server starts, and readiness names the error', async () => {
    const proxy = await startRpcProxy(anvil.rpcUrl)
    proxy.callErrorNext = Number.MAX_SAFE_INTEGER
    const t = await startTestServer('pglite', {
      NETWORKS_CONFIG: configFile([base({ rpcUrl: proxy.url, tokens: ['USDC'] })]),
    })
    try {
      // Asked three times before the start went on: two calls (decimals, symbol) each time.
      expect(proxy.callErrors.length).toBeGreaterThanOrEqual(6)
      const check = ((await (await t.fetch('/readyz')).json()) as any).checks.find(
        (c: any) => c.name === 'chain:base',
      )
      expect(check.ok).toBe(false)
      expect(check.detail).toStartWith('not followed yet: not verified against its chain')
      expect(check.detail).toContain('BlockOutOfRangeError')
    } finally {
      await t.stop()
      await proxy.close()
    }
  })

  test('when it answers later and disagrees: not followed, readiness says why, and its tokens are not offered', async () => {
    const proxy = await startRpcProxy(anvil.rpcUrl)
    proxy.mode = 'refuse'
    // The ethereum preset (chain id 1) in front of this Base node: unreachable at start, wrong once
    // it answers.
    const t = await startTestServer('pglite', {
      NETWORKS_CONFIG: configFile([
        { preset: 'ethereum', rpcUrl: proxy.url, testnet: true, tokens: ['USDC'] },
      ]),
      ACTOR_LEASE_MS: '1000',
    })
    try {
      const check = async () =>
        ((await (await t.fetch('/readyz')).json()) as any).checks.find(
          (c: any) => c.name === 'chain:ethereum',
        )
      expect((await check()).detail).toStartWith('not followed yet: not verified against its chain')
      proxy.mode = 'pass'
      const refused = await waitUntil('the disagreement found', check, (c) =>
        c.detail.startsWith('not followed: the chain disagrees'),
      )
      expect(refused).toMatchObject({
        ok: false,
        detail:
          'not followed: the chain disagrees with the config: network ethereum: chain id expected 1, found 8453',
      })
      expect(t.server.services.chain.following()).toEqual([])
      const key = (await t.project()).key
      const id = ((await (await api(t, key).create({ amount: 5 })).json()) as any).transaction
        .id as string
      expect(((await (await t.fetch(`/pay/${id}/state`)).json()) as any).tokens).toEqual([])
      const chosen = await t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: 'USDC', blockchain_network: 'ethereum' }),
      })
      expect(chosen.status).toBe(400)
    } finally {
      await t.stop()
      await proxy.close()
    }
  })
})

describe('a node that answers a price read with an error now and then (anvil while it mines)', () => {
  test('the read is made again and the customer gets the quote', async () => {
    const proxy = await startRpcProxy(anvil.rpcUrl)
    const t = await startTestServer('pglite', {
      NETWORKS_CONFIG: configFile([base({ rpcUrl: proxy.url, tokens: ['ETH'] })]),
    })
    try {
      await waitUntil(
        'verified',
        async () => (await (await t.fetch('/readyz')).json()) as any,
        (r) => r.checks?.some((c: any) => c.name === 'chain:base' && c.ok),
      )
      const key = (await t.project()).key
      const id = ((await (await api(t, key).create({ amount: 30 })).json()) as any).transaction
        .id as string
      proxy.callErrorNext = 1
      const selected = await t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: 'ETH', blockchain_network: 'base' }),
      })
      expect(selected.status).toBe(200)
      // 30 USD at 3,000 USD per ETH.
      expect(((await selected.json()) as any).quote.token_amount).toBe('10000000000000000')
      expect(proxy.callErrors).toHaveLength(1)
    } finally {
      await t.stop()
      await proxy.close()
    }
  })
})
