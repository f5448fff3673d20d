/**
 * Every preset's every token and feed, planted at its real address on an anvil running the
 * preset's chain id, as the real contract answers (docs/decisions/0042-network-presets-checked-against-the-chain.md):
 * a token that takes EIP-3009 authorizations (Circle's FiatToken) as contracts/TestStablecoin.sol
 * with the token's own EIP-712 domain, any other (Tether's, Binance's pegged ones) as
 * contracts/TestPlainToken.sol with no domain at all, each with its decimals and symbol. The start-up
 * check must then pass on every preset, with a domain read for exactly the tokens flagged
 * `eip3009`: a flag the real token does not honour refuses the start ("no EIP-712 domain"), and
 * this test with it.
 *
 * What each real token is comes from its issuer, not from presets.ts:
 * - Circle's USDC and EURC are FiatToken v2.2 (github.com/circlefin/stablecoin-evm: EIP-3009 since
 *   v2.0). The EIP-712 names below are those x402's reference package signs in (@x402/evm 2.27,
 *   src/defaultAssets.ts); where it lists none, the token is planted under its symbol: start-up
 *   reads whatever name the contract states.
 * - Tether's USDT (TetherToken), the bridged USDTs and USDT0 as configured here, and Binance's
 *   pegged USDC and USDT on BNB Chain (BEP20TokenImplementation, BscScan's verified source) have no
 *   EIP-712 domain or transferWithAuthorization.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { bytesToHex, getAddress, type Address, type Hex, stringToHex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import {
  MockAggregatorV3,
  TestPlainToken,
  TestStablecoin,
} from '../../src/chain/artifacts/index.ts'
import { ANVIL_DEFAULT_MNEMONIC, createDevnetClient } from '../../src/chain/devnet.ts'
import { verifyNetwork } from '../../src/chain/network-verification.ts'
import { parseNetworksConfig } from '../../src/chain/networks-config.ts'
import { NETWORK_PRESETS, PRESET_NAMES } from '../../src/chain/presets.ts'
import { systemClock } from '../../src/lib/clock.ts'

/** Circle's FiatToken contracts of the presets, by address, with their EIP-712 name where cited. */
const FIAT_TOKENS: Record<string, string | null> = {
  // @x402/evm 2.27 src/defaultAssets.ts: name "USD Coin", version "2".
  '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48': 'USD Coin', // Ethereum
  '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913': 'USD Coin', // Base
  '0xaf88d065e77c8cc2239327c5edb3a432268e5831': 'USD Coin', // Arbitrum One
  '0x3c499c542cef5e3811e1192ce70d8cc03d5c3359': 'USD Coin', // Polygon
  '0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e': 'USD Coin', // Avalanche C-Chain
  '0x75faf114eafb1bdbe2f0316df893fd58ce46aa4d': 'USD Coin', // Arbitrum Sepolia
  // @x402/evm 2.27 src/defaultAssets.ts: name "USDC", version "2".
  '0x036cbd53842c5426634e7929541ec2318f3dcf7e': 'USDC', // Base Sepolia
  // Circle's USDC (Circle, "USDC contract addresses"), FiatToken v2.2; no name cited.
  '0x0b2c639c533813f4aa9d7837caf62653d097ff85': null, // OP Mainnet
  '0x1c7d4b196cb0c7b01d743fbc6116a902379c7238': null, // Ethereum Sepolia
  '0x5fd84259d66cd46123540766be93dfe6d43130d7': null, // OP Sepolia
  '0x41e94eb019c0762f9bfcf9fb1e58725bfb0e7582': null, // Polygon Amoy
  // Circle's EURC (Circle, "EURC contract addresses"), FiatToken v2.2; no name cited.
  '0x1abaea1f7c830bd89acc67ec4af516284b1bc33c': null, // Ethereum
  '0x60a3e35cc302bfa44cb288bc5a4f316fdb1adb42': null, // Base
  '0xc891eb4cbdeff6e073e859e987815ed1505c2acd': null, // Avalanche C-Chain
  '0x08210f9170f89ab7658f0b5e3ff39b0e03c594d4': null, // Ethereum Sepolia
  '0x808456652fdb597867f38412077a9182bf77359f': null, // Base Sepolia
}

let anvil: AnvilNode
let wallet: ReturnType<typeof createDevnetClient>

beforeAll(async () => {
  anvil = await startAnvil({})
  const key = bytesToHex(
    mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 0 }).getHdKey().privateKey!,
  )
  wallet = createDevnetClient(anvil.rpcUrl, key)
})
afterAll(() => anvil?.stop())

const rpc = (method: string, params: unknown[]) =>
  wallet.request({ method, params } as never) as Promise<unknown>

/** A short string (under 32 bytes) as Solidity keeps it in its slot: bytes, then length x 2. */
function shortString(s: string): Hex {
  const bytes = stringToHex(s).slice(2)
  if (bytes.length > 62) throw new Error(`${s} is not a short string`)
  const len = (bytes.length / 2) * 2
  return `0x${bytes.padEnd(62, '0')}${len.toString(16).padStart(2, '0')}`
}
const slot = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as Hex
const word = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as Hex

/** Puts `code` at `at` with the given storage slots. */
async function plant(at: Address, code: Hex, slots: [number, Hex][]) {
  await rpc('anvil_setCode', [at, code])
  for (const [n, value] of slots) await rpc('anvil_setStorageAt', [at, slot(n), value])
}

/** A feed answering `description` and a fresh round at `at` (8 decimals are in its code). */
async function plantFeed(at: Address, description: string) {
  await plant(at, MockAggregatorV3.deployedBytecode as Hex, [[0, shortString(description)]])
  await wallet.waitForTransactionReceipt({
    hash: await wallet.writeContract({
      address: at,
      abi: MockAggregatorV3.abi,
      functionName: 'updateAnswer',
      args: [1_00000000n],
      // The chain id is the preset's, set a moment ago: not the client's.
      chain: null,
    }),
  })
}

describe('every preset against faithful contracts at its real addresses', () => {
  for (const name of PRESET_NAMES) {
    test(`${name}: starts, with an EIP-712 domain read for exactly its EIP-3009 tokens`, async () => {
      const preset = NETWORK_PRESETS[name]!
      await rpc('anvil_setChainId', [preset.chainId])
      const expected: Address[] = []
      for (const token of preset.tokens) {
        const symbol = token.onchainSymbols?.[0] ?? token.symbol
        if (token.native) {
          const price = token.price as { chainlinkFeed: Address; descriptions?: string[] }
          await plantFeed(price.chainlinkFeed, price.descriptions?.[0] ?? `${token.symbol} / USD`)
          continue
        }
        const address = token.address!
        const fiat = FIAT_TOKENS[address.toLowerCase()]
        if (fiat !== undefined) {
          // TestStablecoin keeps name and symbol in slots 0 and 1; its 6 decimals are in its code.
          expect({ token: `${name} ${token.symbol}`, decimals: token.decimals }).toEqual({
            token: `${name} ${token.symbol}`,
            decimals: 6,
          })
          await plant(address, TestStablecoin.deployedBytecode as Hex, [
            [0, shortString(fiat ?? symbol)],
            [1, shortString(symbol)],
          ])
          expected.push(getAddress(address))
        } else {
          // TestPlainToken: name, symbol and decimals in slots 0, 1 and 2.
          await plant(address, TestPlainToken.deployedBytecode as Hex, [
            [0, shortString(symbol)],
            [1, shortString(symbol)],
            [2, word(token.decimals)],
          ])
        }
        if (token.price && 'chainlinkFeed' in token.price)
          await plantFeed(token.price.chainlinkFeed, `${token.symbol} / USD`)
      }
      for (const [currency, rate] of Object.entries(preset.fx ?? {}))
        await plantFeed(rate.chainlinkFeed, `${currency} / USD`)
      const [network] = parseNetworksConfig([{ preset: name, rpcUrl: anvil.rpcUrl }])
      const verdict = await verifyNetwork(network!, wallet, systemClock)
      expect(verdict.status === 'verified' ? 'verified' : verdict).toBe('verified')
      if (verdict.status !== 'verified') return
      expect(verdict.authorizationDomains.map((d) => d.verifyingContract).sort()).toEqual(
        expected.sort(),
      )
      for (const d of verdict.authorizationDomains) {
        const cited = FIAT_TOKENS[d.verifyingContract.toLowerCase()]
        if (cited) expect(d.name).toBe(cited)
        expect(d.version).toBe('2')
      }
    })
  }

  test('a flag the real token does not honour refuses the start: bsc with its pegged USDC declared EIP-3009', async () => {
    await rpc('anvil_setChainId', [NETWORK_PRESETS.bsc!.chainId])
    const [network] = parseNetworksConfig([
      {
        preset: 'bsc',
        rpcUrl: anvil.rpcUrl,
        tokens: [
          {
            symbol: 'USDC',
            decimals: 18,
            address: '0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d',
            eip3009: true,
            price: { fixedUsd: '1' },
          },
        ],
      },
    ])
    const verdict = await verifyNetwork(network!, wallet, systemClock)
    expect(verdict.status).toBe('mismatch')
    expect(JSON.stringify(verdict)).toMatch(/EIP-712 domain/)
  })
})
