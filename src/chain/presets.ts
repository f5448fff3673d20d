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
 * - Circle, "EURC contract addresses": https://developers.circle.com/stablecoins/eurc-contract-addresses
 *   (6 decimals; Circle's FiatToken, so EIP-3009 like USDC, checked against each contract at
 *   start-up). Priced `par` to EUR: it pays EUR transactions one token per euro, others at the
 *   EUR rate.
 * - Chainlink's fiat feeds (`fx`, "<CODE> / USD", 8 decimals): the addresses of Chainlink's feed
 *   directory as published in its npm package `@chainlink/mcp-server` 0.0.1-alpha.17,
 *   data/feeds/<chain>.json (generated 2025-11-03), the same as Chainlink's "Price Feed Contract
 *   Addresses" page. Ethereum's fiat feeds have a 24-hour heartbeat and 0.15% deviation
 *   (Chainlink's feeds-mainnet.json); the other chains' are an hour or a day, so every fiat feed
 *   allows 24 hours and 5 minutes. Base has no JPY feed, Optimism no GBP, CHF or CAD, BNB Chain no
 *   CAD, Avalanche no GBP, CAD or AUD; of the testnets only Sepolia, OP Sepolia and Amoy have any.
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
  /**
   * The contract takes EIP-3009 authorizations (Circle's FiatToken v2.2: USDC, EURC), as its
   * source (cited where the token is) says; start-up reads its EIP-712 domain and refuses the
   * network without one.
   */
  eip3009?: true
  price:
    | { fixedUsd: string }
    | { chainlinkFeed: Address; maxAgeSeconds: number; descriptions?: string[] }
    | { par: string }
}

/** A Chainlink `<CODE> / USD` feed of a preset, in the networks file's shape. */
export interface PresetRate {
  chainlinkFeed: Address
  /** The feed's heartbeat (Chainlink lists 86,400 s for its fiat feeds) plus a margin. */
  maxAgeSeconds: number
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
  /** Fiat currencies' USD rates on this chain, by ISO 4217 code. */
  fx?: Record<string, PresetRate>
}

const HOUR = 3600
/** Chainlink's fiat feeds beat every 24 hours at most; five minutes' margin for the write. */
const FX_MAX_AGE = 24 * HOUR + 300
const fx = (chainlinkFeed: Address): PresetRate => ({ chainlinkFeed, maxAgeSeconds: FX_MAX_AGE })
const fixedDollar = { fixedUsd: '1' } as const
/** Circle's EURC: the same FiatToken v2.2 as USDC (Circle's stablecoin-evm), so EIP-3009. */
const eurc = (address: Address): PresetToken => ({
  symbol: 'EURC',
  decimals: 6,
  address,
  eip3009: true,
  price: { par: 'EUR' },
})
/**
 * Circle's native USDC: FiatToken v2.2 behind Circle's proxy on every chain listed here, which
 * takes EIP-3009 authorizations (Circle's stablecoin-evm, contracts/v2/EIP3009.sol, in every
 * FiatToken since v2.0; x402's reference package lists each of these contracts as an EIP-3009
 * asset with its EIP-712 domain: @x402/evm 2.27, src/defaultAssets.ts). `pegged` USDC (Binance's on
 * BNB Chain) is not Circle's and takes no signatures.
 */
const usdc = (address: Address, o: { decimals?: number; pegged?: true } = {}): PresetToken => ({
  symbol: 'USDC',
  decimals: o.decimals ?? 6,
  address,
  ...(o.pegged ? {} : { eip3009: true as const }),
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
      eurc('0x1aBaEA1f7C830bD89Acc67eC4af516284b1bC33c'), // Circle, EURC contract addresses: Ethereum
    ],
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/ethereum.json), Ethereum Mainnet
    fx: {
      EUR: fx('0xb49f677943BC038e9857d61E7d053CaA2C1734C1'),
      GBP: fx('0x5c0Ab2d9b5a7ed9f470386e82BB36A3613cDd4b5'),
      JPY: fx('0xBcE206caE7f0ec07b545EddE332A47C2F75bbeb3'),
      CHF: fx('0x449d117117838fFA61263B61dA6301AA2a88B13A'),
      CAD: fx('0xa34317DB73e77d453b1B8d04550c44D10e981C8e'),
      AUD: fx('0x77F9710E7d0A19669A13c055F62cd80d313dF022'),
    },
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
      eurc('0x60a3E35Cc302bFA44Cb288Bc5a4F316Fdb1adb42'), // Circle, EURC contract addresses: Base
    ],
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/base.json), Base Mainnet
    fx: {
      EUR: fx('0xc91D87E81faB8f93699ECf7Ee9B44D11e1D53F0F'),
      GBP: fx('0xCceA6576904C118037695eB71195a5425E69Fa15'),
      CHF: fx('0x3A1d6444fb6a402470098E23DaD0B7E86E14252F'),
      CAD: fx('0xA840145F87572E82519d578b1F36340368a25D5d'),
      AUD: fx('0x46e51B8cA41d709928EdA9Ae43e42193E6CDf229'),
    },
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
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/arbitrum.json), Arbitrum Mainnet
    fx: {
      EUR: fx('0xA14d53bC1F1c0F31B4aA3BD109344E5009051a84'),
      GBP: fx('0x9C4424Fd84C6661F97D8d6b3fc3C1aAc2BeDd137'),
      JPY: fx('0x3dD6e51CB9caE717d5a8778CF79A04029f9cFDF8'),
      CHF: fx('0xe32AccC8c4eC03F6E75bd3621BfC9Fbb234E1FC3'),
      CAD: fx('0xf6DA27749484843c4F02f5Ad1378ceE723dD61d4'),
      AUD: fx('0x9854e9a850e7C354c1de177eA953a6b1fba8Fc22'),
    },
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
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/optimism.json), OP Mainnet
    fx: {
      EUR: fx('0x3626369857A10CcC6cc3A6e4f5C2f5984a519F20'),
      JPY: fx('0x536944c3A71FEb7c1E5C66Ee37d1a148d8D8f619'),
      AUD: fx('0x39be70E93D2D285C9E71be7f70FC5a45A7777B14'),
    },
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
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/polygon.json), Polygon Mainnet
    fx: {
      EUR: fx('0x73366Fe0AA0Ded304479862808e02506FE556a98'),
      GBP: fx('0x099a2540848573e94fb1Ca0Fa420b00acbBc845a'),
      JPY: fx('0xD647a6fC9BC6402301583C91decC5989d8Bc382D'),
      CHF: fx('0xc76f762CedF0F78a439727861628E0fdfE1e70c2'),
      CAD: fx('0xACA44ABb8B04D07D883202F99FA5E3c53ed57Fb5'),
      AUD: fx('0x062Df9C4efd2030e243ffCc398b652e8b8F95C6f'),
    },
  },
  bsc: {
    chainId: 56,
    testnet: false,
    blockTimeSeconds: 0.75,
    confirmations: 15,
    finality: 'finalized',
    depth: BSC_DEPTH,
    tokens: [
      // BscScan: Binance-Peg USD Coin (18 decimals; Circle issues none on BNB Chain). Its verified
      // source (BEP20TokenImplementation) has no EIP-712 domain and no transferWithAuthorization.
      usdc('0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d', { decimals: 18, pegged: true }),
      usdt('0x55d398326f99059fF775485246999027B3197955', undefined, 18), // BscScan: Binance-Peg BSC-USD (symbol() USDT, 18 decimals)
      native('BNB', '0x0567F2323251f0Aab15c8dFb1967E4e8A7D42aeE'), // Chainlink, BNB Chain Mainnet: BNB / USD
    ],
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/bnb-chain.json), BNB Chain Mainnet
    fx: {
      EUR: fx('0x0bf79F617988C472DcA68ff41eFe1338955b9A80'),
      GBP: fx('0x8FAf16F710003E538189334541F5D4a391Da46a0'),
      JPY: fx('0x22Db8397a6E77E41471dE256a7803829fDC8bC57'),
      CHF: fx('0x964261740356cB4aaD0C3D2003Ce808A4176a46d'),
      AUD: fx('0x498F912B09B5dF618c77fcC9E8DA503304Df92bF'),
    },
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
      eurc('0xC891EB4cbdEFf6e073e859e987815Ed1505c2ACD'), // Circle, EURC contract addresses: Avalanche C-Chain
    ],
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/avalanche.json), Avalanche Mainnet
    fx: {
      EUR: fx('0x192f2DBA961Bb0277520C082d6bfa87D5961333E'),
      JPY: fx('0xf8B283aD4d969ECFD70005714DD5910160565b94'),
      CHF: fx('0xA418573AB5226711c8564Eeb449c3618ABFaf677'),
    },
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
      eurc('0x08210F9170F89Ab7658F0B5E3fF39b0E03C594D4'), // Circle, EURC contract addresses (testnet): Ethereum Sepolia
    ],
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/ethereum.json), Ethereum Sepolia
    fx: {
      EUR: fx('0x1a81afB8146aeFfCFc5E50e8479e826E7D55b910'),
      GBP: fx('0x91FAB41F5f3bE955963a986366edAcff1aaeaa83'),
      JPY: fx('0x8A6af2B75F23831ADc973ce6288e5329F63D86c6'),
      AUD: fx('0xB0C712f98daE15264c8E26132BCC91C40aD4d5F9'),
    },
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
      eurc('0x808456652fdb597867f38412077A9182bf77359F'), // Circle, EURC contract addresses (testnet): Base Sepolia
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
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/optimism.json), OP Sepolia
    fx: {
      EUR: fx('0x828eda6b1B7266AD4d04Eb18468B965fc70940bd'),
      GBP: fx('0xbC1d7d0fb258164ad94B26D6718F256Aa85e1CaF'),
      AUD: fx('0x9AD8e9Fb2b2E6a25c1E89250Ff61945d68477977'),
    },
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
    // Chainlink feed directory (@chainlink/mcp-server data/feeds/polygon.json), Polygon Amoy
    fx: { EUR: fx('0xa73B1C149CB4a0bf27e36dE347CBcfbe88F65DB2') },
  },
}

export const PRESET_NAMES = Object.keys(NETWORK_PRESETS)

/** How often a preset network's follower asks for new blocks: its block time, within 1-4 s. */
export const presetPollIntervalMs = (p: NetworkPreset) =>
  Math.min(4000, Math.max(1000, Math.round(p.blockTimeSeconds * 1000)))
