import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Address, Hex } from 'viem'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import type { DevnetClient } from '../../src/chain/devnet.ts'
import type { NetworkConfig } from '../../src/chain/networks-config.ts'

/** Writes networks as an R16 NETWORKS_CONFIG file, as an operator would, and returns its path. */
export function writeNetworksFile(dir: string, networks: NetworkConfig[]): string {
  const json = networks.map((n) => ({
    name: n.name,
    chainId: n.chainId,
    rpcUrl: n.rpcUrl,
    ...(n.fallbackRpcUrls.length ? { fallbackRpcUrls: n.fallbackRpcUrls } : {}),
    confirmations: n.confirmations,
    pollIntervalMs: n.pollIntervalMs,
    testnet: n.testnet,
    tokens: n.tokens.map((t) => ({
      symbol: t.symbol,
      decimals: t.decimals,
      ...(t.kind === 'erc20' ? { address: t.address } : { native: true }),
      price: t.price.kind === 'fixedUsd' ? { fixedUsd: t.price.usd } : { chainlinkFeed: t.price.feed, maxAgeSeconds: t.price.maxAgeSeconds },
    })),
  }))
  const path = join(dir, `networks-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(path, JSON.stringify(json, null, 2))
  return path
}

/** Sends `amount` smallest units of an ERC-20 and waits for its receipt. */
export async function payToken(client: DevnetClient, token: Address, to: string, amount: bigint): Promise<Hex> {
  const hash = await client.writeContract({ address: token, abi: TestStablecoin.abi, functionName: 'transfer', args: [to as Address, amount] })
  await client.waitForTransactionReceipt({ hash })
  return hash
}

/** Sends `amount` wei and waits for its receipt. */
export async function payNative(client: DevnetClient, to: string, amount: bigint): Promise<Hex> {
  const hash = await client.sendTransaction({ to: to as Address, value: amount })
  await client.waitForTransactionReceipt({ hash })
  return hash
}
