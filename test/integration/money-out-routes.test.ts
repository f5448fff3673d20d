/**
 * How money leaves deposit addresses, per chain (src/chain/eip7702-probe.ts,
 * src/treasury/route.ts): through EIP-7702 where the chain runs it, by topping up each address's
 * fee where it does not. Which one is asked of the node, never assumed from the chain's name. Three
 * kinds of node: one that runs EIP-7702 (anvil under Prague), one that refuses an authorization
 * list (anvil under Cancun: "Eip7702 is not supported"), and one that drops it without a word, as
 * Avalanche's coreth does (a Prague anvil behind a proxy that deletes `authorizationList` from
 * every call). Then `treasury check` on every preset main network, each an anvil with the preset's
 * chain id, the hardfork its real chain runs, and the preset's contracts at their real addresses.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { bytesToHex, getAddress, type Address, type Hex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { MockAggregatorV3, TestStablecoin } from '../../src/chain/artifacts/index.ts'
import {
  ANVIL_DEFAULT_MNEMONIC,
  createDevnetClient,
  type DevnetClient,
} from '../../src/chain/devnet.ts'
import { NETWORK_PRESETS, type PresetToken } from '../../src/chain/presets.ts'
import { waitUntil } from '../helpers/chain.ts'
import { runTreasuryTool } from '../helpers/processes.ts'
import { startRpcProxy, type RpcProxy } from '../helpers/rpc-proxy.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'
import { toolKey, useMerchantKey, writeMerchantFiles } from '../helpers/treasury.ts'

const ANVIL_KEY: Hex = bytesToHex(
  mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 0 }).getHdKey().privateKey!,
)
/** TestStablecoin's `decimals` is a constant in its code. */
const TEST_STABLECOIN_DECIMALS = 6
const TOKEN_NAMES: Record<string, string> = {
  USDC: 'USD Coin',
  USDT: 'Tether USD',
  USDT0: 'USDT0',
  'USDT.e': 'Tether USD',
}

let dir: string
const anvils: AnvilNode[] = []
const proxies: RpcProxy[] = []

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'money-out-routes-'))
})
afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close()))
  await Promise.all(anvils.map((a) => a.stop()))
  if (dir) rmSync(dir, { recursive: true, force: true })
})

async function anvil(o: { hardfork: 'prague' | 'cancun'; chainId: number }): Promise<AnvilNode> {
  const node = await startAnvil(o)
  anvils.push(node)
  return node
}

/**
 * A proxy in front of `rpcUrl` that behaves like Avalanche's coreth: its calls take no
 * authorization list, and an unknown field is dropped, not refused. `dropped` counts the lists
 * it threw away, so a test can tell the probe really sent one.
 */
async function corethLike(rpcUrl: string): Promise<{ url: string; dropped: () => number }> {
  const proxy = await startRpcProxy(rpcUrl)
  proxies.push(proxy)
  let dropped = 0
  proxy.beforeCall = async (call) => {
    if (call.method !== 'eth_call' && call.method !== 'eth_estimateGas') return
    const tx = (call.params as unknown[] | undefined)?.[0] as Record<string, unknown> | undefined
    if (tx && 'authorizationList' in tx) {
      delete tx.authorizationList
      dropped++
    }
  }
  return { url: proxy.url, dropped: () => dropped }
}

function configFile(networks: unknown[]): string {
  const path = join(dir, `networks-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(path, JSON.stringify(networks))
  return path
}

/** `treasury check --network <network> --json` with the merchant's deposit mnemonic. */
async function treasuryCheck(
  t: TestServer,
  key: string,
  files: { ca: string; mnemonic: string },
  network: string,
  rpcUrl: string,
) {
  const r = await runTreasuryTool([
    'check',
    '--api-url',
    t.url,
    '--api-key',
    key,
    '--ca-file',
    files.ca,
    '--network',
    network,
    '--rpc-url',
    rpcUrl,
    '--mnemonic-file',
    files.mnemonic,
    '--json',
  ])
  if (r.code !== 0)
    throw new Error(`treasury check --network ${network} exited ${r.code}: ${r.stdout} ${r.stderr}`)
  return r.json
}

describe('whether a chain runs EIP-7702 is asked of its node, and decides how money leaves deposit addresses', () => {
  const ETH = { symbol: 'ETH', decimals: 18, native: true, price: { fixedUsd: '3000' } }
  const entry = (name: string, chainId: number, rpcUrl: string) => ({
    name,
    chainId,
    rpcUrl,
    confirmations: 1,
    pollIntervalMs: 200,
    testnet: true,
    tokens: [ETH],
  })
  let t: TestServer
  /** A shop's key that may read networks (deposits:read), and the treasury tool's key. */
  let readKey: string
  let tool: string
  let files: ReturnType<typeof writeMerchantFiles>
  let corethNode: AnvilNode
  let coreth: Awaited<ReturnType<typeof corethLike>>
  let pragueNode: AnvilNode

  beforeAll(async () => {
    const [prague, cancun, behindProxy] = await Promise.all([
      anvil({ hardfork: 'prague', chainId: 31337 }),
      anvil({ hardfork: 'cancun', chainId: 31338 }),
      anvil({ hardfork: 'prague', chainId: 31339 }),
    ])
    pragueNode = prague
    corethNode = behindProxy
    coreth = await corethLike(behindProxy.rpcUrl)
    t = await startTestServer('pglite', {
      NETWORKS_CONFIG: configFile([
        entry('prague', 31337, prague.rpcUrl),
        entry('cancun', 31338, cancun.rpcUrl),
        entry('coreth-like', 31339, coreth.url),
      ]),
    })
    const p = await t.project({ scopes: ['deposits:read'] })
    readKey = p.key
    tool = await toolKey(t, p.id)
    await useMerchantKey(t, p.id)
    files = writeMerchantFiles(dir, { gasKey: ANVIL_KEY, ca: t.ca })
  })
  afterAll(async () => {
    await t?.stop()
  })

  test('GET /api/networks: a Prague node runs EIP-7702 (route eip7702); one that refuses the authorization and one that drops it silently do not (route top-up)', async () => {
    const r = await api(t, readKey).get('/api/networks')
    expect(r.status).toBe(200)
    const networks = ((await r.json()) as any).networks as any[]
    expect(
      networks.map((n) => ({
        name: n.name,
        verified: n.verified,
        eip7702: n.eip7702,
        money_out_route: n.money_out_route,
      })),
    ).toEqual([
      { name: 'prague', verified: true, eip7702: true, money_out_route: 'eip7702' },
      { name: 'cancun', verified: true, eip7702: false, money_out_route: 'top-up' },
      { name: 'coreth-like', verified: true, eip7702: false, money_out_route: 'top-up' },
    ])
    // The coreth-like node was sent an authorization and answered without it: the answer decided,
    // not an error.
    expect(coreth.dropped()).toBeGreaterThan(0)
  })

  test('readiness says, for each followed network, which way money leaves it', async () => {
    const ready = await waitUntil(
      'every network followed',
      async () => (await (await t.fetch('/readyz')).json()) as any,
      (r) =>
        ['prague', 'cancun', 'coreth-like'].every((n) =>
          r.checks?.some((c: any) => c.name === `chain:${n}` && c.ok),
        ),
    )
    const detail = (n: string) =>
      ready.checks.find((c: any) => c.name === `chain:${n}`).detail as string
    expect(detail('prague')).toEndWith('; money out through EIP-7702')
    expect(detail('cancun')).toEndWith('; money out by top-up (no EIP-7702 on this chain)')
    expect(detail('coreth-like')).toEndWith('; money out by top-up (no EIP-7702 on this chain)')
  })

  test('treasury check asks its own node too, and takes the EIP-7702 route only when both nodes run it', async () => {
    // The tool's node drops the authorization where the service's ran it.
    const toolBehindCoreth = await corethLike(pragueNode.rpcUrl)
    const mineSaysNo = await treasuryCheck(t, tool, files, 'prague', toolBehindCoreth.url)
    expect(mineSaysNo).toMatchObject({
      network: 'prague',
      money_out_route: 'top-up',
      service_says_eip7702: true,
    })
    expect(mineSaysNo.route_detail).toStartWith(
      'no EIP-7702: the node ran the call without its authorization',
    )
    // The tool's node runs it where the service's dropped it.
    const serviceSaysNo = await treasuryCheck(t, tool, files, 'coreth-like', corethNode.rpcUrl)
    expect(serviceSaysNo).toMatchObject({
      network: 'coreth-like',
      money_out_route: 'top-up',
      service_says_eip7702: false,
    })
    expect(serviceSaysNo.route_detail).toStartWith(
      "this tool's node runs EIP-7702, but the service's node said it does not",
    )
  })
})

describe('treasury check on each preset main network says how money leaves its deposit addresses there', () => {
  /** Every preset main network runs EIP-7702 except Avalanche's C-Chain (coreth has none). */
  const MAIN: { name: string; hardfork: 'prague' | 'cancun'; route: 'eip7702' | 'top-up' }[] = [
    { name: 'ethereum', hardfork: 'prague', route: 'eip7702' },
    { name: 'base', hardfork: 'prague', route: 'eip7702' },
    { name: 'optimism', hardfork: 'prague', route: 'eip7702' },
    { name: 'arbitrum', hardfork: 'prague', route: 'eip7702' },
    { name: 'polygon', hardfork: 'prague', route: 'eip7702' },
    { name: 'bsc', hardfork: 'prague', route: 'eip7702' },
    { name: 'avalanche', hardfork: 'cancun', route: 'top-up' },
  ]
  /**
   * TestStablecoin's decimals are a constant 6: it cannot stand in for BNB Chain's 18-decimal
   * USDC and USDT, so those are left out of that network's entry (its BNB feed is still checked).
   */
  const placeable = (token: PresetToken) =>
    token.native || token.decimals === TEST_STABLECOIN_DECIMALS
  let t: TestServer
  let tool: string
  let files: ReturnType<typeof writeMerchantFiles>
  const rpcUrls = new Map<string, string>()

  beforeAll(async () => {
    await Promise.all(
      MAIN.map(async ({ name, hardfork }) => {
        const preset = NETWORK_PRESETS[name]!
        const node = await anvil({ hardfork, chainId: preset.chainId })
        await placePresetContracts(createDevnetClient(node.rpcUrl, ANVIL_KEY, preset.chainId), [
          ...preset.tokens.filter(placeable),
          // The preset's fiat feeds, placed as feeds of tokens without a contract.
          ...Object.entries(preset.fx ?? {}).map(
            ([currency, rate]): PresetToken => ({
              symbol: currency,
              decimals: 8,
              price: { chainlinkFeed: rate.chainlinkFeed, maxAgeSeconds: rate.maxAgeSeconds },
            }),
          ),
        ])
        rpcUrls.set(name, node.rpcUrl)
      }),
    )
    t = await startTestServer('pglite', {
      NETWORKS_CONFIG: configFile(
        MAIN.map(({ name }) => ({
          preset: name,
          rpcUrl: rpcUrls.get(name),
          testnet: true,
          confirmations: 1,
          pollIntervalMs: 200,
          tokens: NETWORK_PRESETS[name]!.tokens.filter(placeable).map((x) => x.symbol),
        })),
      ),
    })
    // Each network must have been checked against its chain (tokens, feeds, EIP-7702) for the tool
    // to be told a route.
    const verdicts = t.server.services.chain
      .verdicts()
      .map((v) => `${v.network}: ${v.status === 'mismatch' ? v.problems.join('; ') : v.status}`)
    expect(verdicts.sort()).toEqual(MAIN.map(({ name }) => `${name}: verified`).sort())
    const p = await t.project()
    tool = await toolKey(t, p.id)
    await useMerchantKey(t, p.id)
    files = writeMerchantFiles(dir, { gasKey: ANVIL_KEY, ca: t.ca })
  })
  afterAll(async () => {
    await t?.stop()
  })

  for (const { name, route } of MAIN) {
    test(`${name}: money leaves by ${route === 'eip7702' ? 'EIP-7702' : 'top-up'}, and the tool's node and the service's agree`, async () => {
      const out = await treasuryCheck(t, tool, files, name, rpcUrls.get(name)!)
      expect(out).toMatchObject({
        network: name,
        chain_id: NETWORK_PRESETS[name]!.chainId,
        deposit_key: "matches the project's",
        money_out_route: route,
        service_says_eip7702: route === 'eip7702',
      })
      expect(out.route_detail).toStartWith(
        route === 'eip7702'
          ? "EIP-7702: the node ran a delegated account's code (this tool's node, and the service's)"
          : "no EIP-7702: the node refused the probe's authorization",
      )
    })
  }
})

/**
 * A Solidity storage word holding a string of at most 31 bytes (kept inline: data left, length * 2
 * in the last byte).
 */
function shortString(s: string): Hex {
  const bytes = new TextEncoder().encode(s)
  if (bytes.length > 31) throw new Error(`${s} does not fit in one storage word`)
  const word = new Uint8Array(32)
  word.set(bytes)
  word[31] = bytes.length * 2
  return bytesToHex(word)
}

const slot = (n: number): Hex => `0x${n.toString(16).padStart(64, '0')}`

/**
 * Puts the preset's ERC-20s and Chainlink feeds at the preset's own addresses: TestStablecoin's
 * code with its name (slot 0) and the symbol its issuer's contract answers (slot 1); a
 * MockAggregatorV3 (decimals 8 are in its code, so it is deployed, then copied with its
 * description in slot 0) answering a fresh round.
 */
async function placePresetContracts(wallet: DevnetClient, tokens: PresetToken[]) {
  const set = (method: string, params: unknown[]) => wallet.request({ method, params } as never)
  for (const token of tokens) {
    if (token.address) {
      await set('anvil_setCode', [token.address, TestStablecoin.deployedBytecode])
      await set('anvil_setStorageAt', [
        token.address,
        slot(0),
        shortString(TOKEN_NAMES[token.symbol] ?? token.symbol),
      ])
      await set('anvil_setStorageAt', [
        token.address,
        slot(1),
        shortString(token.onchainSymbols?.[0] ?? token.symbol),
      ])
    }
    if ('chainlinkFeed' in token.price) {
      const feed = token.price.chainlinkFeed
      const description = token.price.descriptions?.[0] ?? `${token.symbol} / USD`
      const hash = await wallet.deployContract({
        abi: MockAggregatorV3.abi,
        bytecode: MockAggregatorV3.bytecode,
        args: [8, description, 100_00000000n],
      })
      const deployed = getAddress(
        (await wallet.waitForTransactionReceipt({ hash })).contractAddress!,
      ) as Address
      await set('anvil_setCode', [feed, await wallet.getCode({ address: deployed })])
      await set('anvil_setStorageAt', [
        feed,
        slot(0),
        await wallet.getStorageAt({ address: deployed, slot: slot(0) }),
      ])
      await wallet.waitForTransactionReceipt({
        hash: await wallet.writeContract({
          address: feed,
          abi: MockAggregatorV3.abi,
          functionName: 'updateAnswer',
          args: [100_00000000n],
        }),
      })
    }
  }
}
