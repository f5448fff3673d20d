/**
 * What the treasury tests share (docs/decisions/0039-sweeps-by-eip-7702-or-top-up.md): a real anvil
 * under Prague (EIP-7702) with a deployed 6-decimal TestStablecoin and the Multicall3 stand-in at
 * Multicall3's address; the merchant's key files as a merchant would keep them; paid, completed
 * transactions; and the tool's command line against a test server.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { HDKey } from '@scure/bip32'
import { bytesToHex, type Address, type Hex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import {
  ANVIL_DEFAULT_MNEMONIC,
  createDevnetClient,
  deployTestStablecoin,
  installMulticall3,
  type DevnetClient,
} from '../../src/chain/devnet.ts'
import { ETHEREUM_ACCOUNT_PATH } from '../../src/chain/deposit-addresses.ts'
import { TREASURY_SCOPES } from '../../src/keys/api-key.ts'
import { mnemonicToSeed } from '../../src/lib/bip39.ts'
import type { NetworkConfig } from '../../src/chain/networks-config.ts'
import { payNative, payToken, waitUntil } from './chain.ts'
import { startProcess } from './processes.ts'
import { startRpcProxy } from './rpc-proxy.ts'
import { api, type TestServer } from './server.ts'

/** The merchant's deposit mnemonic in these tests (BIP-39's "legal winner" test vector). */
export const MERCHANT_MNEMONIC =
  'legal winner thank year wave sausage worth useful legal winner thank yellow'
export const MERCHANT_PASSPHRASE = 'correct horse battery staple'
export const ETH_USD = '3000'

const anvilKey = (i: number): Hex =>
  bytesToHex(mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: i }).getHdKey().privateKey!)

export interface TreasuryChain {
  node: AnvilNode
  rpcUrl: string
  /** The customer's wallet (anvil's account 0), holding plenty of TUSD and ETH. */
  customer: DevnetClient
  /** The merchant's gas account (anvil's account 5, with anvil's 10,000 ETH). */
  gas: { key: Hex; address: Address }
  token: Address
  tokenBalance(address: string): Promise<bigint>
  ethBalance(address: string): Promise<bigint>
  mine(n?: number): Promise<bigint>
  head(): Promise<bigint>
  /** `anvil_reorg`: replaces the last `depth` blocks with empty ones. */
  reorg(depth: number): Promise<void>
  /** A network entry: TUSD at $1, ETH at a fixed $3000. */
  network(overrides?: Partial<NetworkConfig>): NetworkConfig
  stop(): Promise<void>
}

/**
 * anvil mining a block per transaction (and on `mine()`), with 256 past states kept for reorgs.
 * Prague by default (EIP-7702); `cancun` is a chain without it, as Avalanche's C-Chain is.
 */
export async function startTreasuryChain(
  o: { hardfork?: 'prague' | 'cancun' } = {},
): Promise<TreasuryChain> {
  const node = await startAnvil({ hardfork: o.hardfork ?? 'prague', historyStates: 256 })
  try {
    const customer = createDevnetClient(node.rpcUrl, anvilKey(0))
    const token = await deployTestStablecoin(customer)
    await customer.waitForTransactionReceipt({
      hash: await customer.writeContract({
        address: token,
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [customer.account.address, 10n ** 15n],
      }),
    })
    await installMulticall3(customer)
    const gasKey = anvilKey(5)
    return {
      node,
      rpcUrl: node.rpcUrl,
      customer,
      gas: {
        key: gasKey,
        address: mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 5 }).address,
      },
      token,
      tokenBalance: (address) =>
        customer.readContract({
          address: token,
          abi: TestStablecoin.abi,
          functionName: 'balanceOf',
          args: [address as Address],
        }),
      ethBalance: (address) => customer.getBalance({ address: address as Address }),
      async mine(n = 1) {
        await customer.request({ method: 'anvil_mine', params: [`0x${n.toString(16)}`] } as never)
        return customer.getBlockNumber()
      },
      head: () => customer.getBlockNumber(),
      reorg: async (depth) => {
        await customer.request({ method: 'anvil_reorg', params: [depth, []] } as never)
      },
      network: (overrides = {}) => ({
        name: 'localchain',
        chainId: 31337,
        rpcUrl: node.rpcUrl,
        fallbackRpcUrls: [],
        wsUrl: null,
        confirmations: 2,
        finality: 'confirmations',
        pollIntervalMs: 100,
        maxLogRange: 1000,
        maxRequestsPerSecond: null,
        testnet: true,
        tokens: [
          {
            kind: 'erc20',
            symbol: 'TUSD',
            decimals: 6,
            address: token,
            price: { kind: 'fixedUsd', usd: '1' },
          },
          {
            kind: 'native',
            symbol: 'ETH',
            decimals: 18,
            price: { kind: 'fixedUsd', usd: ETH_USD },
          },
        ],
        ...overrides,
      }),
      stop: () => node.stop(),
    }
  } catch (e) {
    await node.stop()
    throw e
  }
}

/**
 * The merchant's files: the deposit mnemonic (and passphrase), the gas account's key, and the
 * service's certificate.
 */
export function writeMerchantFiles(
  dir: string,
  o: { mnemonic?: string; passphrase?: string; gasKey: Hex; ca: string },
) {
  const file = (name: string, text: string) => {
    const path = join(dir, name)
    writeFileSync(path, text, { mode: 0o600 })
    return path
  }
  return {
    mnemonic: file('deposit-mnemonic.txt', `${o.mnemonic ?? MERCHANT_MNEMONIC}\n`),
    ...(o.passphrase === undefined
      ? {}
      : { passphrase: file('deposit-passphrase.txt', `${o.passphrase}\n`) }),
    gasKey: file('gas-key.txt', `${o.gasKey}\n`),
    ca: file('service-ca.pem', o.ca),
  }
}

/**
 * The treasury tool's API key for a project's test mode: the tool's scopes only (the shop's key has
 * none of its writes).
 */
export async function toolKey(t: TestServer, projectId: string): Promise<string> {
  return (await t.key(projectId, 'test', [...TREASURY_SCOPES])).key
}

/** The project's test-mode deposit key: the xpub of the merchant's mnemonic (with `passphrase`). */
export async function useMerchantKey(t: TestServer, projectId: string, passphrase = '') {
  const xpub = HDKey.fromMasterSeed(mnemonicToSeed(MERCHANT_MNEMONIC, passphrase)).derive(
    ETHEREUM_ACCOUNT_PATH,
  ).publicExtendedKey
  const r = await t.server.services.deposits.setXpub(projectId, 'test', xpub)
  if (!r.ok) throw new Error(r.message)
}

/**
 * The merchant the treasury tests act for, on a project: its deposit key (the merchant's mnemonic,
 * with `passphrase`), the treasury tool's API key, and the files the tool reads, written to `dir`.
 */
export async function setUpMerchant(
  t: TestServer,
  projectId: string,
  dir: string,
  chain: TreasuryChain,
  passphrase?: string,
) {
  const tool = await toolKey(t, projectId)
  await useMerchantKey(t, projectId, passphrase)
  const files = writeMerchantFiles(dir, { passphrase, gasKey: chain.gas.key, ca: t.ca })
  return { tool, files }
}

/**
 * `count` transactions whose customers paid their quote in full (`token` on the chain) and that
 * completed: each one's id, deposit address and what it received.
 */
export async function paidTransactions(
  t: TestServer,
  key: string,
  chain: TreasuryChain,
  count: number,
  token: 'TUSD' | 'ETH',
  usd = 10,
) {
  const a = api(t, key)
  const paid: { id: string; address: string; units: bigint }[] = []
  for (let i = 0; i < count; i++) {
    const q = await a.quoted(usd + i, token)
    if (token === 'TUSD') await payToken(chain.customer, chain.token, q.address, q.units)
    else await payNative(chain.customer, q.address, q.units)
    paid.push({ id: q.id, address: q.address, units: q.units })
  }
  // Automine makes a block per payment: the last ones need blocks after them for their
  // confirmations.
  await chain.mine(3)
  for (const p of paid)
    await waitUntil(
      `transaction ${p.id} completed`,
      () => a.transaction(p.id),
      (x) => x.status === 'completed',
      60_000,
    )
  return paid
}

/** The tool's connection flags against a test server and the chain. */
export const toolArgs = (
  t: TestServer,
  key: string,
  chain: TreasuryChain,
  files: { ca: string },
  rpcUrl = chain.rpcUrl,
) => [
  '--api-url',
  t.url,
  '--api-key',
  key,
  '--ca-file',
  files.ca,
  '--network',
  'localchain',
  '--rpc-url',
  rpcUrl,
]

/**
 * Runs the treasury tool with `args` (its RPC through a proxy in front of `rpcUrl`) and SIGKILLs
 * it at its `nth` eth_sendRawTransaction (or the first whose signed transaction `nth` picks),
 * which never reaches the chain: a run that recorded a transaction and died before sending it.
 */
export async function killedAtSend(
  rpcUrl: string,
  args: (rpcUrl: string) => string[],
  nth: number | ((raw: Hex) => boolean) = 1,
): Promise<void> {
  const proxy = await startRpcProxy(rpcUrl)
  let sends = 0
  let reached!: () => void
  const held = new Promise<void>((r) => (reached = r))
  const picked = (raw: Hex) => (typeof nth === 'number' ? ++sends === nth : nth(raw))
  proxy.beforeCall = async (call) => {
    if (call.method !== 'eth_sendRawTransaction' || !picked((call.params as Hex[])[0]!)) return
    reached()
    await new Promise(() => {})
  }
  const run = startProcess('src/treasury/main.ts', { args: args(proxy.url) })
  try {
    await Promise.race([
      held,
      run.exited.then((e) => {
        throw new Error(
          `the tool ended (${e.code}) before its send #${nth}: ${run.stdout()} ${run.stderr()}`,
        )
      }),
    ])
    run.kill('SIGKILL')
    if ((await run.exited).signal !== 'SIGKILL') throw new Error('the tool was not killed')
  } finally {
    await proxy.close()
  }
}
