import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { erc20Abi, parseEther } from 'viem'
import { deriveAddress, generateDevnetXpub } from '../../src/chain/deposit-addresses.ts'
import {
  createDevnetClient,
  startDevnet,
  type Devnet,
  type DevnetClient,
} from '../../src/chain/devnet.ts'
import { parseNetworksConfig, type TokenConfig } from '../../src/chain/networks-config.ts'
import { createPriceReader } from '../../src/chain/prices.ts'
import { manualClock } from '../../src/lib/clock.ts'

/** Polls `check` until it returns a value other than undefined, or fails at the deadline. */
async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const clock = manualClock(Date.now())
let devnet: Devnet
let client: DevnetClient
let anvilHome: string | undefined

beforeAll(async () => {
  devnet = await startDevnet({ clock })
  client = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
  // anvil.ts gives each node a private temporary HOME; find it to check stop() removes it.
  if (existsSync(`/proc/${devnet.pid}/cmdline`)) {
    const args = readFileSync(`/proc/${devnet.pid}/cmdline`, 'utf8').split('\0')
    anvilHome = args[args.indexOf('--cache-path') + 1]?.replace(/\/cache$/, '')
  }
})
afterAll(async () => {
  await devnet?.stop()
})

const token = (symbol: string): TokenConfig =>
  devnet.networks[0]!.tokens.find((t) => t.symbol === symbol)!

describe('startDevnet()', () => {
  test('describes one valid testnet network with TUSD, ETH and TEUR, and EUR, GBP and JPY feeds', async () => {
    expect(devnet.networks).toHaveLength(1)
    const network = devnet.networks[0]!
    expect(network).toMatchObject({
      name: 'devnet',
      chainId: 31337,
      rpcUrl: devnet.rpcUrl,
      testnet: true,
    })
    expect(token('TUSD')).toEqual({
      kind: 'erc20',
      symbol: 'TUSD',
      decimals: 6,
      address: devnet.stablecoin,
      eip3009: true,
      price: { kind: 'fixedUsd', usd: '1' },
    })
    expect(token('ETH')).toEqual({
      kind: 'native',
      symbol: 'ETH',
      decimals: 18,
      price: { kind: 'chainlink', feed: devnet.feed, maxAgeSeconds: 3600 },
    })
    expect(token('TEUR')).toEqual({
      kind: 'erc20',
      symbol: 'TEUR',
      decimals: 6,
      address: devnet.euroCoin,
      eip3009: true,
      price: { kind: 'par', currency: 'EUR' },
    })
    expect(network.fx!.map((f) => f.currency)).toEqual(['EUR', 'GBP', 'JPY'])
    for (const f of network.fx!)
      expect(
        await client.readContract({
          address: devnet.fxFeeds[f.currency]!,
          abi: [
            {
              type: 'function',
              name: 'description',
              stateMutability: 'view',
              inputs: [],
              outputs: [{ type: 'string' }],
            },
          ] as const,
          functionName: 'description',
        }),
      ).toBe(`${f.currency} / USD`)
    // The same network written as docs/decisions/0016-networks-config-and-devnet.md JSON passes the
    // config validator. (No call limit and no WebSocket are the fields left out.)
    const { tokens, maxRequestsPerSecond, wsUrl, fx, ...rest } = network
    expect([maxRequestsPerSecond, wsUrl]).toEqual([null, null])
    const asJson = {
      ...rest,
      tokens: [
        {
          symbol: 'TUSD',
          decimals: 6,
          address: devnet.stablecoin,
          eip3009: true,
          price: { fixedUsd: '1' },
        },
        {
          symbol: 'ETH',
          decimals: 18,
          native: true,
          price: { chainlinkFeed: devnet.feed, maxAgeSeconds: 3600 },
        },
        {
          symbol: 'TEUR',
          decimals: 6,
          address: devnet.euroCoin,
          eip3009: true,
          price: { par: 'EUR' },
        },
      ],
      fx: Object.fromEntries(
        fx!.map((f) => [
          f.currency,
          { chainlinkFeed: devnet.fxFeeds[f.currency], maxAgeSeconds: 3600 },
        ]),
      ),
    }
    expect(parseNetworksConfig([asJson])).toEqual(devnet.networks)
  })

  test('funds the wallet with TUSD and ETH', async () => {
    const tusd = await client.readContract({
      address: devnet.stablecoin,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [devnet.wallet.address],
    })
    expect(tusd).toBe(1_000_000n * 10n ** 6n)
    expect(
      await client.readContract({
        address: devnet.stablecoin,
        abi: erc20Abi,
        functionName: 'decimals',
      }),
    ).toBe(6)
    expect(await client.getBalance({ address: devnet.wallet.address })).toBeGreaterThan(
      parseEther('1000'),
    )
  })

  test('serves a fresh ETH price through the price reader', async () => {
    const result = await createPriceReader({ client, clock }).read(token('ETH'))
    if (!result.ok) throw new Error(result.message)
    expect([result.answer, result.decimals]).toEqual([3000_00000000n, 8])
  })

  test('lands a TUSD and an ETH transfer from the wallet to a derived deposit address', async () => {
    const deposit = deriveAddress(generateDevnetXpub().xpub, 0)
    const tusd = await client.writeContract({
      address: devnet.stablecoin,
      abi: erc20Abi,
      functionName: 'transfer',
      args: [deposit, 25_000_000n],
    })
    expect((await client.waitForTransactionReceipt({ hash: tusd })).status).toBe('success')
    const eth = await client.sendTransaction({ to: deposit, value: parseEther('0.01') })
    expect((await client.waitForTransactionReceipt({ hash: eth })).status).toBe('success')
    expect(
      await client.readContract({
        address: devnet.stablecoin,
        abi: erc20Abi,
        functionName: 'balanceOf',
        args: [deposit],
      }),
    ).toBe(25_000_000n)
    expect(await client.getBalance({ address: deposit })).toBe(parseEther('0.01'))
  })

  test('mines blocks while idle, so a payment gains confirmations', async () => {
    const start = await client.getBlockNumber()
    await eventually(
      async () => ((await client.getBlockNumber()) >= start + 2n ? true : undefined),
      'two idle blocks',
      5_000,
    )
  })

  // Last: it stops the devnet.
  test('stop() leaves no anvil process and no temporary directory', async () => {
    if (anvilHome) expect(existsSync(anvilHome)).toBe(true)
    await devnet.stop()
    expect(() => process.kill(devnet.pid, 0)).toThrow()
    if (anvilHome) expect(existsSync(anvilHome)).toBe(false)
    await devnet.stop() // idempotent
  })
})

describe('startDevnet() feed refresher', () => {
  const refreshClock = manualClock(Date.now())
  const warnings: string[] = []
  const logger = {
    debug() {},
    info() {},
    warn: (msg: string) => void warnings.push(msg),
    error: (msg: string) => void warnings.push(msg),
  }
  let fast: Devnet
  beforeAll(async () => {
    fast = await startDevnet({ clock: refreshClock, feedRefreshMs: 100, logger })
  })
  afterAll(async () => {
    await fast?.stop()
  })

  test('keeps the feed fresh as time passes (no stale refusals after an hour)', async () => {
    const fastClient = createDevnetClient(fast.rpcUrl, fast.wallet.privateKey)
    const eth = fast.networks[0]!.tokens.find((t) => t.kind === 'native')!
    const reader = createPriceReader({ client: fastClient, clock: refreshClock })
    expect((await reader.read(eth)).ok).toBe(true)
    refreshClock.advance(2 * 3600 * 1000)
    const result = await eventually(async () => {
      const r = await reader.read(eth)
      return r.ok ? r : undefined
    }, 'the feed refresher to publish a round at the new time')
    expect(result.updatedAt.getTime()).toBeGreaterThanOrEqual(refreshClock.now() - 1000)
  })

  test('stop() ends the refresher cleanly: no failed refresh against a stopped node', async () => {
    await fast.stop()
    // A check that something does NOT happen has to wait: three refresh periods.
    await new Promise((resolve) => setTimeout(resolve, 350))
    expect(warnings).toEqual([])
  })
})
