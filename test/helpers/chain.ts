import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { bytesToHex, encodeFunctionData, type Address, type Hex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import {
  ANVIL_DEFAULT_MNEMONIC,
  createDevnetClient,
  type DevnetClient,
} from '../../src/chain/devnet.ts'
import { type NetworkConfig, networksFileJson } from '../../src/chain/networks-config.ts'

/**
 * Writes networks as an docs/decisions/0016-networks-config-and-devnet.md NETWORKS_CONFIG file, as
 * an operator would, and returns its path.
 */
export function writeNetworksFile(dir: string, networks: NetworkConfig[]): string {
  const path = join(dir, `networks-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(path, JSON.stringify(networksFileJson(networks), null, 2))
  return path
}

/** Sends `amount` smallest units of an ERC-20 and waits for its receipt. */
export async function payToken(
  client: DevnetClient,
  token: Address,
  to: string,
  amount: bigint,
): Promise<Hex> {
  const hash = await client.writeContract({
    address: token,
    abi: TestStablecoin.abi,
    functionName: 'transfer',
    args: [to as Address, amount],
  })
  await client.waitForTransactionReceipt({ hash })
  return hash
}

/** Sends `amount` wei and waits for its receipt. */
export async function payNative(client: DevnetClient, to: string, amount: bigint): Promise<Hex> {
  const hash = await client.sendTransaction({ to: to as Address, value: amount })
  await client.waitForTransactionReceipt({ hash })
  return hash
}

/**
 * Polls `read` until `pred` holds; throws after `timeoutMs` with `what` and the last value.
 * Every wait in the chain tests goes through this: no fixed sleeps.
 */
export async function waitUntil<T>(
  what: string,
  read: () => Promise<T>,
  pred: (v: T) => boolean,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<T> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const v = await read()
    if (pred(v)) return v
    if (Date.now() > end)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x))}`,
      )
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

/**
 * A chain the test mines by hand: anvil with `--no-mining` and 256 past states kept (so
 * `anvil_reorg` can replace recent blocks), a deployed 6-decimal TestStablecoin and a wallet
 * (anvil's first default account) holding plenty of it. Transactions are signed here and sent
 * raw, so a test can send the very same signed transaction again after a reorg dropped it.
 */
export interface ManualChain {
  node: AnvilNode
  rpcUrl: string
  client: DevnetClient
  token: Address
  /** Signs a TUSD transfer (not sent). */
  signTokenTransfer(to: string, amount: bigint): Promise<Hex>
  /** Signs a native transfer (not sent). */
  signNativeTransfer(to: string, amount: bigint): Promise<Hex>
  /** Puts a signed transaction into the mempool; the next mined block includes it. */
  sendRaw(raw: Hex): Promise<Hex>
  /** Mines `n` blocks (default 1); returns the new head. */
  mine(n?: number): Promise<bigint>
  head(): Promise<bigint>
  /**
   * `anvil_reorg`: replaces the last `depth` blocks, putting `txs` ([raw, blockOffset]) into the
   * new ones.
   */
  reorg(depth: number, txs?: Array<[Hex, number]>): Promise<void>
  /** Hash of the canonical block at `n`. */
  blockHash(n: bigint): Promise<Hex>
  /** A network entry for this chain (TUSD at a fixed $1), to write with `writeNetworksFile`. */
  network(overrides?: Partial<NetworkConfig>): NetworkConfig
  stop(): Promise<void>
}

/**
 * `slotsInAnEpoch`: anvil serves the `safe` block that many blocks below the head and `finalized`
 * twice that many (default 32). `historyStates` (default 256): past states kept, the deepest
 * reorg `reorg()` can make. `hardfork` (default cancun): `prague` for EIP-7702.
 */
export async function startManualChain(
  options: { slotsInAnEpoch?: number; historyStates?: number; hardfork?: 'cancun' | 'prague' } = {},
): Promise<ManualChain> {
  const node = await startAnvil({
    noMining: true,
    historyStates: options.historyStates ?? 256,
    ...(options.hardfork ? { hardfork: options.hardfork } : {}),
    extraArgs: options.slotsInAnEpoch
      ? ['--slots-in-an-epoch', String(options.slotsInAnEpoch)]
      : [],
  })
  try {
    const key = bytesToHex(
      mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 0 }).getHdKey().privateKey!,
    )
    const client = createDevnetClient(node.rpcUrl, key)
    const mine = async (n = 1) => {
      await client.request({ method: 'anvil_mine', params: [`0x${n.toString(16)}`] } as never)
      return client.getBlockNumber()
    }
    const sign = async (tx: { to: Address; value?: bigint; data?: Hex }) => {
      const request = await client.prepareTransactionRequest({ ...tx, gas: 100_000n })
      return client.signTransaction(request as Parameters<typeof client.signTransaction>[0])
    }
    const sendRaw = (raw: Hex) =>
      client.request({ method: 'eth_sendRawTransaction', params: [raw] })
    const settle = async (hash: Hex) => {
      await mine()
      const receipt = await client.getTransactionReceipt({ hash })
      if (receipt.status !== 'success') throw new Error(`${hash} reverted`)
      return receipt
    }
    const deploy = await client.deployContract({
      abi: TestStablecoin.abi,
      bytecode: TestStablecoin.bytecode,
      args: ['Test USD', 'TUSD'],
    })
    const token = (await settle(deploy)).contractAddress! as Address
    await settle(
      await client.writeContract({
        address: token,
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [client.account.address, 10n ** 15n],
      }),
    )
    return {
      node,
      rpcUrl: node.rpcUrl,
      client,
      token,
      signTokenTransfer: (to, amount) =>
        sign({
          to: token,
          data: encodeFunctionData({
            abi: TestStablecoin.abi,
            functionName: 'transfer',
            args: [to as Address, amount],
          }),
        }),
      signNativeTransfer: (to, amount) => sign({ to: to as Address, value: amount }),
      sendRaw,
      mine,
      head: () => client.getBlockNumber(),
      reorg: async (depth, txs = []) => {
        await client.request({ method: 'anvil_reorg', params: [depth, txs] } as never)
      },
      blockHash: async (n) => (await client.getBlock({ blockNumber: n })).hash,
      network: (overrides = {}) => ({
        name: 'localchain',
        chainId: 31337,
        rpcUrl: node.rpcUrl,
        fallbackRpcUrls: [],
        wsUrl: null,
        confirmations: 3,
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
