/**
 * The local chain `npm start` runs when NETWORKS_CONFIG is absent
 * (docs/decisions/0016-networks-config-and-devnet.md): anvil with a deployed 6-decimal test
 * stablecoin (priced at a fixed $1), a Chainlink-style ETH/USD feed for the native coin, a test
 * euro stablecoin (TEUR, at par to EUR) and `EUR / USD`, `GBP / USD` and `JPY / USD` feeds, so
 * transactions can be priced in those currencies
 * (docs/decisions/0064-priced-in-the-merchants-currency.md), and a funded wallet to pay with. Test mode only: the wallet is anvil's first default account, whose
 * private key is public knowledge.
 *
 * Mining: automine plus a block every `blockTime` seconds (anvil `--mixed-mining`). Automine puts
 * each transaction in a block at once (deploys and payments need no waiting); the interval blocks
 * keep the head moving while the chain is idle, so a payment gains its confirmations
 * (docs/decisions/0015-confirmations-and-reorgs.md) even when nobody else transacts. Under pure
 * automine a lone payment would wait forever at one confirmation. One second takes a demo payment
 * to completion within a few seconds. The cost, measured on anvil 1.7.1 with `--prune-history`:
 * about 2.5 KB of anvil memory per empty block (~9 MB an hour, ~215 MB a day at 1 s;
 * `--transaction-block-keeper` does not reduce it), so a devnet left running for days should get a
 * larger `blockTime`. Also measured: 100 transactions within one second give 100 blocks with the
 * same timestamp, so automine does not push block time ahead of the wall clock.
 *
 * Kept between runs (`stateDir`, DATA_DIR/devnet under `npm start`): anvil keeps its chain in a
 * state file (written every 30 s and at a graceful stop; blocks keep their hashes), and the
 * contracts' addresses are kept beside it, so a restarted service finds the chain it followed and
 * its demo payments as they were. A state that is missing or whose contracts do not answer is
 * removed and a new chain is made (the server then follows it from its head). The file grows with
 * the chain (roughly 1 KB a block at one block a second); delete DATA_DIR/devnet to start over.
 *
 * Feed freshness: the price reader refuses a round older than `maxAgeSeconds` (3600 here), and
 * a devnet may run for days. An unref'd timer publishes a new round every `feedRefreshMs`
 * (default 60 s, 60 times below the limit, so a missed tick or a suspended laptop recovers at
 * the next one) with `setRoundData`, stamped with the injected clock's time rather than the
 * block's: a test that moves anvil's time with `evm_increaseTime` cannot make the feed look
 * future-dated to a service on the real clock. The refresher signs with anvil's second
 * default account so its transactions never race the wallet's nonces. `stop()` clears the
 * timer, waits for a refresh in flight, and stops anvil (which removes its temporary dir).
 */
import {
  bytesToHex,
  createWalletClient,
  getAddress,
  http,
  publicActions,
  type Address,
  type Hex,
} from 'viem'
import { mnemonicToAccount, privateKeyToAccount } from 'viem/accounts'
import { foundry } from 'viem/chains'
import { systemClock, type Clock } from '../lib/clock.ts'
import { decimalToUnits } from '../lib/money.ts'
import type { Logger } from '../lib/logger.ts'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startAnvil, type AnvilNode } from './anvil.ts'
import { MockAggregatorV3, TestMulticall3, TestStablecoin } from './artifacts/index.ts'
import { MULTICALL3 } from './deposit-account.ts'
import { type NetworkConfig, networksFileJson, RELAYER_RULE_DEFAULTS } from './networks-config.ts'

/** anvil's default mnemonic: its accounts are public test keys, never for real funds. */
export const ANVIL_DEFAULT_MNEMONIC = 'test test test test test test test test test test test junk'
export const DEVNET_CHAIN_ID = 31337
/** ETH/USD feeds on Chainlink report 8 decimals. */
export const DEVNET_FEED_DECIMALS = 8

export interface DevnetOptions {
  logger?: Logger
  clock?: Clock
  /** Seconds between idle blocks (default 1). */
  blockTime?: number
  /** How often the ETH/USD feed gets a fresh round (default 60,000 ms). */
  feedRefreshMs?: number
  /** ETH price in USD as a decimal string (default "3000"). */
  ethUsd?: string
  /** USD per unit of each fiat currency the devnet offers (default EUR 1.08, GBP 1.27, JPY 0.0067). */
  fxUsd?: Record<string, string>
  /** Confirmations the devnet network requires (default 2). */
  confirmations?: number
  /** Follower poll interval for the devnet network (default 500 ms). */
  pollIntervalMs?: number
  /**
   * anvil's port (default 0: a free one). A fixed one, e.g. 8545, lets a browser wallet connect.
   */
  port?: number
  /** Stablecoin minted to the wallet, in whole tokens (default 1,000,000). */
  mintTokens?: bigint
  /**
   * Where the chain is kept between runs (DATA_DIR/devnet for `npm start`): anvil's state and the
   * addresses of the contracts deployed on it. Unset: a new chain every time.
   */
  stateDir?: string
}

export interface Devnet {
  /**
   * One network, "devnet" (testnet: true): TUSD (ERC-20, 6 decimals, $1) and ETH (native, priced by
   * the feed).
   */
  networks: NetworkConfig[]
  /** Funded with ETH (anvil's 10,000) and TUSD: pays test transactions. */
  wallet: { address: Address; privateKey: Hex }
  /**
   * The relayer's key on the devnet (anvil's account 8, funded with its 10,000 ETH): it pays the
   * gas of payments made by signature (src/chain/signature-pay/relayer.ts).
   */
  relayerKey: Hex
  stablecoin: Address
  feed: Address
  /** TEUR: a 6-decimal test euro stablecoin taking EIP-3009 authorizations, priced at par to EUR. */
  euroCoin: Address
  /** The fiat feeds (`<CODE> / USD`, 8 decimals) by currency code. */
  fxFeeds: Record<string, Address>
  rpcUrl: string
  /** anvil's process id (tests check it is gone after stop). */
  pid: number
  /** The chain of an earlier run was loaded from `stateDir` (false: a new chain). */
  restored: boolean
  stop(): Promise<void>
}

/** What a kept devnet remembers besides anvil's state: the contracts deployed on it. */
interface DevnetManifest {
  chainId: number
  stablecoin: Address
  feed: Address
  /** Absent in a devnet kept from before it offered currencies: deployed then. */
  euroCoin?: Address
  fxFeeds?: Record<string, Address>
}

/** What the devnet's fiat feeds answer unless told otherwise. */
export const DEVNET_FX_USD: Readonly<Record<string, string>> = {
  EUR: '1.08',
  GBP: '1.27',
  JPY: '0.0067',
}

/**
 * The kept chain and its contracts, when both are there and the contracts answer on it; else
 * null after removing whatever was left, so the devnet starts afresh (and says so).
 */
async function restoreDevnet(
  stateDir: string | undefined,
  start: (stateFile: string | undefined) => Promise<AnvilNode>,
): Promise<{ node: AnvilNode; manifest: DevnetManifest | null }> {
  if (!stateDir) return { node: await start(undefined), manifest: null }
  mkdirSync(stateDir, { recursive: true, mode: 0o700 })
  const stateFile = join(stateDir, 'anvil-state.json')
  const manifestFile = join(stateDir, 'devnet.json')
  let manifest: DevnetManifest | null = null
  try {
    manifest = existsSync(stateFile)
      ? (JSON.parse(readFileSync(manifestFile, 'utf8')) as DevnetManifest)
      : null
  } catch {
    manifest = null
  }
  if (manifest && manifest.chainId === DEVNET_CHAIN_ID) {
    const node = await start(stateFile)
    const client = createDevnetClient(node.rpcUrl, anvilKey(0))
    const [coin, feed] = await Promise.all([
      client.getCode({ address: manifest.stablecoin }),
      client.getCode({ address: manifest.feed }),
    ]).catch(() => [undefined, undefined])
    // The stablecoin must be today's contract: one kept from an older version of the service may
    // lack what the devnet offers now (EIP-3009 authorizations), and the start would fail on it.
    if (coin === TestStablecoin.deployedBytecode && feed && feed !== '0x') return { node, manifest }
    await node.stop()
  }
  rmSync(stateFile, { force: true })
  rmSync(manifestFile, { force: true })
  return { node: await start(stateFile), manifest: null }
}

/** A wallet client with public actions on a devnet/anvil node, for deploys and test payments. */
/**
 * A wallet on an anvil node; `chainId` when the node runs another chain id than the devnet's (tests
 * of presets).
 */
export function createDevnetClient(rpcUrl: string, privateKey: Hex, chainId = DEVNET_CHAIN_ID) {
  return createWalletClient({
    account: privateKeyToAccount(privateKey),
    chain: chainId === DEVNET_CHAIN_ID ? foundry : { ...foundry, id: chainId }, // foundry: id 31337 = DEVNET_CHAIN_ID
    transport: http(rpcUrl, { retryCount: 0 }),
    pollingInterval: 50,
    cacheTime: 0,
  }).extend(publicActions)
}
export type DevnetClient = ReturnType<typeof createDevnetClient>

export async function deployTestStablecoin(
  client: DevnetClient,
  name = 'Test USD',
  symbol = 'TUSD',
): Promise<Address> {
  const hash = await client.deployContract({
    abi: TestStablecoin.abi,
    bytecode: TestStablecoin.bytecode,
    args: [name, symbol],
  })
  return deployedAddress(client, hash)
}

export async function deployMockAggregator(
  client: DevnetClient,
  {
    decimals = DEVNET_FEED_DECIMALS,
    description = 'ETH / USD',
    answer,
  }: { decimals?: number; description?: string; answer: bigint },
): Promise<Address> {
  const hash = await client.deployContract({
    abi: MockAggregatorV3.abi,
    bytecode: MockAggregatorV3.bytecode,
    args: [decimals, description, answer],
  })
  return deployedAddress(client, hash)
}

async function deployedAddress(client: DevnetClient, hash: Hex): Promise<Address> {
  const receipt = await client.waitForTransactionReceipt({ hash })
  if (receipt.status !== 'success' || !receipt.contractAddress)
    throw new Error(`deployment ${hash} failed`)
  return getAddress(receipt.contractAddress) // receipts carry it in lower case
}

/** The private key of account `index` of anvil's default mnemonic. */
function anvilKey(index: number): Hex {
  return bytesToHex(
    mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: index }).getHdKey().privateKey!,
  )
}

export async function startDevnet(options: DevnetOptions = {}): Promise<Devnet> {
  const clock = options.clock ?? systemClock
  const blockTime = options.blockTime ?? 1
  const feedRefreshMs = options.feedRefreshMs ?? 60_000
  const ethUsd = options.ethUsd ?? '3000'
  const answer = decimalToUnits(ethUsd, DEVNET_FEED_DECIMALS)
  if (answer === null)
    throw new RangeError(
      `ethUsd: not a decimal with at most ${DEVNET_FEED_DECIMALS} places: ${ethUsd}`,
    )
  const fxUsd = options.fxUsd ?? DEVNET_FX_USD
  const fxAnswers = Object.entries(fxUsd).map(([currency, usd]) => {
    const a = decimalToUnits(usd, DEVNET_FEED_DECIMALS)
    if (a === null)
      throw new RangeError(
        `fxUsd.${currency}: not a decimal with at most ${DEVNET_FEED_DECIMALS} places: ${usd}`,
      )
    return { currency, answer: a }
  })

  const { node, manifest } = await restoreDevnet(options.stateDir, (stateFile) =>
    // Prague: EIP-7702, which the treasury's sweeps and refunds use
    // (docs/decisions/0039-sweeps-by-eip-7702-or-top-up.md). About 8 ms of anvil's time per block
    // (cancun: well under 1 ms), nothing at one block a second.
    startAnvil({
      chainId: DEVNET_CHAIN_ID,
      blockTime,
      port: options.port,
      stateFile,
      hardfork: 'prague',
      // A call on `latest` racing a new block asks for the state of the block before it: keep
      // the last 64, as a real node serves recent states (with none, such calls fail now and
      // then and a payment by signature is refused with 503).
      historyStates: 64,
      extraArgs: ['--mixed-mining'],
    }),
  )
  let refresher: FeedRefresher | undefined
  try {
    const walletKey = anvilKey(0)
    const wallet = createDevnetClient(node.rpcUrl, walletKey)
    const oracle = createDevnetClient(node.rpcUrl, anvilKey(1))
    let stablecoin: Address
    let feed: Address
    let euroCoin: Address
    let fxFeeds: Record<string, Address>
    const mintTo = async (coin: Address) => {
      const mint = await wallet.writeContract({
        address: coin,
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [wallet.account.address, (options.mintTokens ?? 1_000_000n) * 10n ** 6n],
      })
      await wallet.waitForTransactionReceipt({ hash: mint })
    }
    if (manifest) {
      ;({ stablecoin, feed } = manifest)
    } else {
      // Different signers, so the two deployments can run side by side.
      ;[stablecoin, feed] = await Promise.all([
        deployTestStablecoin(wallet),
        deployMockAggregator(oracle, { answer }),
      ])
      await mintTo(stablecoin)
    }
    // The currencies' contracts: kept ones, or deployed now (also on a devnet kept from before
    // they existed, whose chain stays as it was).
    const keptFx = manifest?.fxFeeds ?? {}
    if (manifest?.euroCoin && fxAnswers.every((f) => keptFx[f.currency])) {
      euroCoin = manifest.euroCoin
      fxFeeds = keptFx
    } else {
      euroCoin = await deployTestStablecoin(wallet, 'Test Euro', 'TEUR')
      await mintTo(euroCoin)
      fxFeeds = {}
      for (const f of fxAnswers)
        fxFeeds[f.currency] = await deployMockAggregator(oracle, {
          description: `${f.currency} / USD`,
          answer: f.answer,
        })
    }
    if (options.stateDir && (!manifest || manifest.euroCoin !== euroCoin))
      writeFileSync(
        join(options.stateDir, 'devnet.json'),
        JSON.stringify({
          chainId: DEVNET_CHAIN_ID,
          stablecoin,
          feed,
          euroCoin,
          fxFeeds,
        } satisfies DevnetManifest),
      )

    await installMulticall3(wallet)

    const running = startFeedRefresher({
      oracle,
      feeds: [
        { feed, answer },
        ...fxAnswers.map((f) => ({ feed: fxFeeds[f.currency]!, answer: f.answer })),
      ],
      clock,
      everyMs: feedRefreshMs,
      logger: options.logger,
    })
    refresher = running
    await running.refresh() // stamp the first round with our clock too

    const networks: NetworkConfig[] = [
      {
        name: 'devnet',
        chainId: DEVNET_CHAIN_ID,
        rpcUrl: node.rpcUrl,
        fallbackRpcUrls: [],
        wsUrl: null,
        confirmations: options.confirmations ?? 2,
        finality: 'confirmations',
        pollIntervalMs: options.pollIntervalMs ?? 500,
        maxLogRange: 1000,
        maxRequestsPerSecond: null,
        testnet: true,
        tokens: [
          {
            kind: 'erc20',
            symbol: 'TUSD',
            decimals: 6,
            address: stablecoin,
            // contracts/TestStablecoin.sol takes EIP-3009 authorizations as USDC does.
            eip3009: true,
            price: { kind: 'fixedUsd', usd: '1' },
          },
          {
            kind: 'native',
            symbol: 'ETH',
            decimals: 18,
            price: { kind: 'chainlink', feed, maxAgeSeconds: 3600 },
          },
          {
            kind: 'erc20',
            symbol: 'TEUR',
            decimals: 6,
            address: euroCoin,
            eip3009: true,
            price: { kind: 'par', currency: 'EUR' },
          },
        ],
        fx: fxAnswers.map((f) => ({
          currency: f.currency,
          rate: { kind: 'chainlink', feed: fxFeeds[f.currency]!, maxAgeSeconds: 3600 },
        })),
        // The devnet's gas is play money: the facilitator settles down to a cent here (on a real
        // network its floor defaults to what the relay's gas costs).
        relayer: { ...RELAYER_RULE_DEFAULTS, minSettleUsd: '0.01' },
      },
    ]
    // The devnet as a NETWORKS_CONFIG file, for another instance on the same database to follow
    // (docs/operating/instances.md): written at every start, since the port may change.
    if (options.stateDir)
      writeFileSync(
        join(options.stateDir, 'networks.json'),
        `${JSON.stringify(networksFileJson(networks), null, 2)}\n`,
      )
    options.logger?.info(manifest ? 'devnet restored' : 'devnet started', {
      rpcUrl: node.rpcUrl,
      chainId: DEVNET_CHAIN_ID,
      stablecoin,
      feed,
      wallet: wallet.account.address,
    })

    let stopping: Promise<void> | null = null
    return {
      networks,
      wallet: { address: wallet.account.address, privateKey: walletKey },
      relayerKey: anvilKey(8),
      stablecoin,
      feed,
      euroCoin,
      fxFeeds,
      rpcUrl: node.rpcUrl,
      pid: node.pid,
      restored: manifest !== null,
      stop() {
        stopping ??= (async () => {
          await running.stop()
          await node.stop()
        })()
        return stopping
      },
    }
  } catch (error) {
    await refresher?.stop()
    await node.stop()
    throw error
  }
}

/**
 * Puts the Multicall3 stand-in (contracts/TestMulticall3.sol) at Multicall3's address, where real
 * networks have it and anvil has nothing, so the treasury reads balances the way it does there.
 */
export async function installMulticall3(client: DevnetClient): Promise<void> {
  await client.request({
    method: 'anvil_setCode',
    params: [MULTICALL3, TestMulticall3.deployedBytecode],
  } as never)
}

interface FeedRefresher {
  refresh(): Promise<void>
  stop(): Promise<void>
}

function startFeedRefresher(deps: {
  oracle: DevnetClient
  feeds: { feed: Address; answer: bigint }[]
  clock: Clock
  everyMs: number
  logger?: Logger
}): FeedRefresher {
  const { oracle, clock, logger } = deps
  let inFlight: Promise<void> | null = null
  let stopped = false

  async function publish() {
    // One after another: they share the oracle's nonces.
    for (const { feed, answer } of deps.feeds) await publishRound(feed, answer)
  }

  async function publishRound(feed: Address, answer: bigint) {
    const [roundId] = await oracle.readContract({
      address: feed,
      abi: MockAggregatorV3.abi,
      functionName: 'latestRoundData',
    })
    const next = roundId + 1n
    const now = BigInt(Math.floor(clock.now() / 1000))
    const hash = await oracle.writeContract({
      address: feed,
      abi: MockAggregatorV3.abi,
      functionName: 'setRoundData',
      args: [next, answer, now, now, next],
    })
    await oracle.waitForTransactionReceipt({ hash })
  }

  function refresh(): Promise<void> {
    // One refresh at a time: a slow one is not overtaken by the next tick.
    inFlight ??= publish().finally(() => {
      inFlight = null
    })
    return inFlight
  }

  const timer = setInterval(() => {
    if (stopped) return
    refresh().catch((error) =>
      logger?.warn('devnet price feed refresh failed', { error: String(error) }),
    )
  }, deps.everyMs)
  unrefTimer(timer)

  return {
    refresh,
    async stop() {
      stopped = true
      clearInterval(timer)
      await inFlight?.catch(() => {})
    },
  }
}

/**
 * Never keep the process alive for a timer alone: Node/Bun timers have unref(), Deno's are numbers.
 */
function unrefTimer(timer: unknown) {
  if (typeof timer === 'object' && timer !== null && 'unref' in timer)
    (timer as { unref(): void }).unref()
  else (globalThis as { Deno?: { unrefTimer(id: number): void } }).Deno?.unrefTimer(timer as number)
}
