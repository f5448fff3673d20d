/**
 * Network presets: what a merchant going live would otherwise type by hand, curated here. A
 * networks-config entry `{ "preset": "base", "rpcUrl": "..." }` takes every other field from its
 * preset, and may still override any of them (networks-config.ts merges, then validates the
 * result like any entry). At start-up every value below is checked against the chain itself
 * (network-verification.ts): a preset that went wrong refuses to start rather than quote a
 * wrong contract to a customer.
 *
 * Entries are written in the config file's own shape. Two fields exist for the verification:
 * - a token's `onchainSymbols`: what its contract's `symbol()` answers, per its issuer, when that
 *   differs from the label customers see (`symbol`). Tether's USDT0 migration renamed the token on
 *   Arbitrum, Optimism and Polygon (`USDT0`, shown by explorers as `USD₮0`); Avalanche's reads
 *   `USDt`. The label stays USDT.
 * - a Chainlink price's `descriptions`: what the feed's `description()` answers. Polygon's native
 *   coin was renamed MATIC -> POL; Chainlink's POL feed on Polygon still describes itself as
 *   "MATIC / USD", so both are accepted.
 *
 * Sources (each address below names the page it comes from):
 * - Circle, "USDC contract addresses": https://developers.circle.com/stablecoins/usdc-contract-addresses
 * - Tether: https://tether.to/en/supported-protocols/ ; USDT0 deployments: https://docs.usdt0.to/technical-documentation/developer#deployments
 * - The Superchain token list (OP Mainnet and Base; each token's symbol and decimals checked
 *   against the chain by the list's own CI): github.com/ethereum-optimism/ethereum-optimism.github.io,
 *   data/USDT/data.json (the bridged "Tether USD" of OP Mainnet and Base, symbol USDT) and
 *   data/USD₮0/data.json (USDT0 on OP Mainnet)
 * - Ava Labs' Avalanche Bridge: github.com/ava-labs/avalanche-bridge-resources,
 *   avalanche_contract_address.json ("USDT.e", the bridged USDT, 6 decimals)
 *
 * USDT: the contracts customers hold. Where two circulate under that name, both are offered with
 * labels of their own: on OP Mainnet, wallets list the bridged token as USDT and Tether's own as
 * USDT0; on Avalanche, Tether's own is USDT (its contract says USDt) and the bridged one USDT.e.
 * Base has no Tether-issued USDT; its bridged one (added to the Superchain list by Base's team) is
 * the USDT customers hold there.
 * - Chainlink, "Price Feed Contract Addresses": https://docs.chain.link/data-feeds/price-feeds/addresses
 *   (all the feeds below answer 8 decimals)
 * - BNB Chain's tokens are Binance's pegged ones (not issued by Circle or Tether) and have 18
 *   decimals: https://bscscan.com/token/0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d and
 *   https://bscscan.com/token/0x55d398326f99059fF775485246999027B3197955
 *
 * Confirmation depth and finality, per chain (what each preset's `depth` says in one line):
 * - Ethereum: one-block reorgs are routine, deeper ones rare since proof of stake (7 blocks on
 *   the beacon chain in May 2022, before proposer boost). 12 blocks is about
 *   2.4 minutes; finality (`"finality": "finalized"`) takes two epochs, about 13 minutes.
 * - OP Stack (Base, OP Mainnet) and Arbitrum: a block is the sequencer's promise until its batch
 *   is on Ethereum; sequencer reorgs are rare but happen. Safe's transaction service waits 100
 *   blocks on L2s (200 in its current settings), so 100: about 3.3 minutes on 2-second blocks,
 *   25 seconds on Arbitrum's 0.25-second blocks. `"finality": "safe"` waits for the batch on L1.
 * - Polygon PoS: counts are not enough (a 157-block reorg in February 2023), but since
 *   Heimdall v2 (2025) milestones finalize a block in 2-5 seconds, served as the `finalized` tag:
 *   the preset waits for it. Its `confirmations` (256, past the 2023 reorg) apply only if a
 *   merchant switches back to counting.
 * - BNB Chain: fast finality (BEP-126) finalizes block n by n+2, served as `finalized`; the
 *   preset waits for it, and 15 confirmations apply only to counting.
 * - Avalanche C-Chain: Snowman consensus; a node serves only accepted blocks and an accepted
 *   block is final, so one confirmation.
 * Test networks take their main network's rule, so a test payment behaves as a live one will.
 *
 * Price freshness (`maxAgeSeconds`): a Chainlink feed is written on a price move and at least once
 * per heartbeat; an answer older than its heartbeat means the feed stopped. 3,600 s except
 * Arbitrum's ETH/USD, whose heartbeat is 24 hours. An answer older than this at start-up refuses
 * the start with the age found; override `price.maxAgeSeconds` if Chainlink lists another
 * heartbeat.
 */
import type { Address } from 'viem'

export type Finality = 'confirmations' | 'safe' | 'finalized'

/** A token of a preset, in the networks file's shape. */
export interface PresetToken {
  /** The label customers see. */
  symbol: string
  decimals: number
  /** ERC-20 contract (EIP-55); absent for the native coin. */
  address?: Address
  native?: true
  /** What the contract's `symbol()` answers when it is not the label. */
  onchainSymbols?: string[]
  /** The contract takes EIP-3009 authorizations (Circle's FiatToken v2.2: USDC, EURC). */
  eip3009?: true
  price:
    | { fixedUsd: string }
    | { chainlinkFeed: Address; maxAgeSeconds: number; descriptions?: string[] }
}

export interface NetworkPreset {
  chainId: number
  testnet: boolean
  /** Typical seconds between blocks; the poll interval follows from it. */
  blockTimeSeconds: number
  confirmations: number
  finality: Finality
  /** Why this depth, in one line (the README's preset table quotes it). */
  depth: string
  tokens: PresetToken[]
}

const HOUR = 3600
const fixedDollar = { fixedUsd: '1' } as const
const usdc = (address: Address, decimals = 6): PresetToken => ({
  symbol: 'USDC',
  decimals,
  address,
  // Circle's USDC is FiatToken v2.2 on every chain listed here: EIP-3009 transferWithAuthorization
  // (Circle, "USDC on ...": https://developers.circle.com/stablecoins/usdc-contract-addresses).
  eip3009: true,
  price: fixedDollar,
})
const usdt = (address: Address, onchainSymbols?: string[], decimals = 6): PresetToken => ({
  symbol: 'USDT',
  decimals,
  address,
  ...(onchainSymbols ? { onchainSymbols } : {}),
  price: fixedDollar,
})
/** Tether's USDT0 (the in-place migration): its docs call it USDT0, explorers show USD₮0. */
const USDT0 = ['USDT0', 'USD₮0']
const native = (
  symbol: string,
  chainlinkFeed: Address,
  maxAgeSeconds = HOUR,
  descriptions?: string[],
): PresetToken => ({
  symbol,
  decimals: 18,
  native: true,
  price: { chainlinkFeed, maxAgeSeconds, ...(descriptions ? { descriptions } : {}) },
})
const POL_FEED_NAMES = ['POL / USD', 'MATIC / USD']

const ETHEREUM_DEPTH =
  '12 blocks (~2.4 min): one-block reorgs are routine, deeper ones rare since proof of stake; "finalized" waits ~13 min'
const L2_DEPTH =
  '100 blocks: sequencer blocks are promises until posted to Ethereum; Safe waits 100+ blocks on L2s'
const POLYGON_DEPTH =
  'the finalized tag (milestones, 2-5 s since Heimdall v2); counting would need 256+ (a 157-block reorg in 2023)'
const BSC_DEPTH = 'the finalized tag (fast finality, BEP-126: final by n+2); counting: 15'
const AVALANCHE_DEPTH = '1 block: Snowman consensus, an accepted block is final'

export const NETWORK_PRESETS: Readonly<Record<string, NetworkPreset>> = {
  ethereum: {
    chainId: 1,
    testnet: false,
    blockTimeSeconds: 12,
    confirmations: 12,
    finality: 'confirmations',
    depth: ETHEREUM_DEPTH,
    tokens: [
      usdc('0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'), // Circle, USDC contract addresses: Ethereum
      usdt('0xdAC17F958D2ee523a2206206994597C13D831ec7'), // Tether, supported protocols: Ethereum (ERC-20)
      native('ETH', '0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419'), // Chainlink, Ethereum Mainnet: ETH / USD
    ],
  },
  base: {
    chainId: 8453,
    testnet: false,
    blockTimeSeconds: 2,
    confirmations: 100,
    finality: 'confirmations',
    depth: L2_DEPTH,
    tokens: [
      usdc('0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'), // Circle, USDC contract addresses: Base
      usdt('0xfde4C96c8593536E31F229EA8f37b2ADa2699bb2'), // Superchain token list, data/USDT/data.json: base (bridged Tether USD; Tether issues none on Base)
      native('ETH', '0x71041dddad3595F9CEd3DcCFBe3D1F4b0a16Bb70'), // Chainlink, Base Mainnet: ETH / USD
    ],
  },
  arbitrum: {
    chainId: 42161,
    testnet: false,
    blockTimeSeconds: 0.25,
    confirmations: 100,
    finality: 'confirmations',
    depth: L2_DEPTH,
    tokens: [
      usdc('0xaf88d065e77c8cC2239327C5EDb3A432268e5831'), // Circle, USDC contract addresses: Arbitrum
      usdt('0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9', USDT0), // USDT0 deployments: Arbitrum One (migrated in place)
      native('ETH', '0x639Fe6ab55C921f74e7fac1ee960C0B6293ba612', 24 * HOUR + 300), // Chainlink, Arbitrum Mainnet: ETH / USD (24 h heartbeat)
    ],
  },
  optimism: {
    chainId: 10,
    testnet: false,
    blockTimeSeconds: 2,
    confirmations: 100,
    finality: 'confirmations',
    depth: L2_DEPTH,
    tokens: [
      usdc('0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85'), // Circle, USDC contract addresses: OP Mainnet
      usdt('0x94b008aA00579c1307B0EF2c499aD98a8ce58e58'), // Superchain token list, data/USDT/data.json: optimism (the bridged Tether USD wallets list as USDT)
      { ...usdt('0x01bFF41798a0BcF287b996046Ca68b395DbC1071', USDT0), symbol: 'USDT0' }, // USDT0 deployments: Optimism; Superchain token list, data/USD₮0/data.json: optimism
      native('ETH', '0x13e3Ee699D1909E989722E753853AE30b17e08c5'), // Chainlink, OP Mainnet: ETH / USD
    ],
  },
  polygon: {
    chainId: 137,
    testnet: false,
    blockTimeSeconds: 2,
    confirmations: 256,
    finality: 'finalized',
    depth: POLYGON_DEPTH,
    tokens: [
      usdc('0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359'), // Circle, USDC contract addresses: Polygon PoS (native USDC, not USDC.e)
      usdt('0xc2132D05D31c914a87C6611C10748AEb04B58e8F', [...USDT0, 'USDT']), // USDT0 deployments: Polygon PoS (migrated in place; read USDT before)
      native('POL', '0xAB594600376Ec9fD91F8e885dADF0CE036862dE0', HOUR, POL_FEED_NAMES), // Chainlink, Polygon Mainnet: POL (MATIC) / USD
    ],
  },
  bsc: {
    chainId: 56,
    testnet: false,
    blockTimeSeconds: 0.75,
    confirmations: 15,
    finality: 'finalized',
    depth: BSC_DEPTH,
    tokens: [
      usdc('0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d', 18), // BscScan: Binance-Peg USD Coin (18 decimals; Circle issues none on BNB Chain)
      usdt('0x55d398326f99059fF775485246999027B3197955', undefined, 18), // BscScan: Binance-Peg BSC-USD (symbol() USDT, 18 decimals)
      native('BNB', '0x0567F2323251f0Aab15c8dFb1967E4e8A7D42aeE'), // Chainlink, BNB Chain Mainnet: BNB / USD
    ],
  },
  avalanche: {
    chainId: 43114,
    testnet: false,
    blockTimeSeconds: 2,
    confirmations: 1,
    finality: 'confirmations',
    depth: AVALANCHE_DEPTH,
    tokens: [
      usdc('0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E'), // Circle, USDC contract addresses: Avalanche C-Chain
      usdt('0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7', ['USDt']), // Tether, supported protocols: Avalanche C-Chain (USDt)
      { ...usdt('0xc7198437980c041c805A1EDcbA50c1Ce5db95118'), symbol: 'USDT.e' }, // Ava Labs, avalanche-bridge-resources, avalanche_contract_address.json: USDT.e (bridged)
      native('AVAX', '0x0A77230d17318075983913bC2145DB16C7366156'), // Chainlink, Avalanche Mainnet: AVAX / USD
    ],
  },
  sepolia: {
    chainId: 11155111,
    testnet: true,
    blockTimeSeconds: 12,
    confirmations: 12,
    finality: 'confirmations',
    depth: ETHEREUM_DEPTH,
    tokens: [
      usdc('0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238'), // Circle, USDC contract addresses (testnet): Ethereum Sepolia
      native('ETH', '0x694AA1769357215DE4FAC081bf1f309aDC325306'), // Chainlink, Ethereum Sepolia: ETH / USD
    ],
  },
  'base-sepolia': {
    chainId: 84532,
    testnet: true,
    blockTimeSeconds: 2,
    confirmations: 100,
    finality: 'confirmations',
    depth: L2_DEPTH,
    tokens: [
      usdc('0x036CbD53842c5426634e7929541eC2318f3dCF7e'), // Circle, USDC contract addresses (testnet): Base Sepolia
      native('ETH', '0x4aDC67696bA383F43DD60A9e78F2C97Fbbfc7cb1'), // Chainlink, Base Sepolia: ETH / USD
    ],
  },
  'arbitrum-sepolia': {
    chainId: 421614,
    testnet: true,
    blockTimeSeconds: 0.25,
    confirmations: 100,
    finality: 'confirmations',
    depth: L2_DEPTH,
    tokens: [
      usdc('0x75faf114eafb1BDbe2F0316DF893fd58CE46AA4d'), // Circle, USDC contract addresses (testnet): Arbitrum Sepolia
      native('ETH', '0xd30e2101a97dcbAeBCBC04F14C3f624E67A35165', 24 * HOUR + 300), // Chainlink, Arbitrum Sepolia: ETH / USD
    ],
  },
  'optimism-sepolia': {
    chainId: 11155420,
    testnet: true,
    blockTimeSeconds: 2,
    confirmations: 100,
    finality: 'confirmations',
    depth: L2_DEPTH,
    tokens: [
      usdc('0x5fd84259d66Cd46123540766Be93DFE6D43130D7'), // Circle, USDC contract addresses (testnet): OP Sepolia
      native('ETH', '0x61Ec26aA57019C486B10502285c5A3D4A4750AD7'), // Chainlink, OP Sepolia: ETH / USD
    ],
  },
  'polygon-amoy': {
    chainId: 80002,
    testnet: true,
    blockTimeSeconds: 2,
    confirmations: 256,
    finality: 'finalized',
    depth: POLYGON_DEPTH,
    tokens: [
      usdc('0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582'), // Circle, USDC contract addresses (testnet): Polygon PoS Amoy
      native('POL', '0x001382149eBa3441043c1c66972b4772963f5D43', HOUR, POL_FEED_NAMES), // Chainlink, Polygon Amoy: POL (MATIC) / USD
    ],
  },
}

export const PRESET_NAMES = Object.keys(NETWORK_PRESETS)

/** How often a preset network's follower asks for new blocks: its block time, within 1-4 s. */
export const presetPollIntervalMs = (p: NetworkPreset) =>
  Math.min(4000, Math.max(1000, Math.round(p.blockTimeSeconds * 1000)))
