import { CHANNELS } from '../db/channels.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { createBlockFollower, decodeCursor, encodeCursor, type BlockFollower, type CursorStore } from './block-follower.ts'
import { createChainRepo, type ChainRepo } from './chain.repo.ts'
import type { NetworkConfig } from './networks-config.ts'
import { createPaymentTracker, type Lifecycle } from './payment-tracker.ts'
import { createPriceReader, type PriceReader } from './prices.ts'
import { createChainClient } from './rpc.ts'

/** Deposit addresses of transactions that finished longer ago than this are no longer watched. */
const WATCH_FINISHED_FOR_MS = 30 * 86_400_000

/** The follower's cursor, one row per network. */
function databaseCursorStore(repo: ChainRepo, network: string, clock: Clock): CursorStore {
  return {
    async load() {
      const stored = await repo.loadCursor(network)
      return stored === null ? null : decodeCursor(stored)
    },
    async save(cursor) {
      await repo.saveCursor(network, encodeCursor(cursor), new Date(clock.now()))
    },
  }
}

/**
 * One block follower per configured network (issue 4), feeding the payment tracker; the price
 * readers the pay page quotes with share the same clients. Every instance follows every network:
 * findings are recorded once (unique per transfer and block) and the lifecycle refuses an event
 * twice, so several instances cost RPC calls, not correctness.
 */
export function createChainWatcher(deps: { networks: NetworkConfig[]; database: Database; lifecycle: Lifecycle; clock: Clock; logger: Logger }) {
  const repo = createChainRepo(deps.database)
  const watched = new Set<string>()
  const clients = new Map(deps.networks.map((n) => [n.name, createChainClient({ rpcUrl: n.rpcUrl, fallbackRpcUrls: n.fallbackRpcUrls, chainId: n.chainId })]))
  const prices = new Map<string, PriceReader>(deps.networks.map((n) => [n.name, createPriceReader({ client: clients.get(n.name)!, clock: deps.clock })]))
  let followers: BlockFollower[] = []
  let unlisten: (() => Promise<void>) | null = null

  async function loadWatched() {
    for (const address of await repo.watchedAddresses(new Date(deps.clock.now() - WATCH_FINISHED_FOR_MS))) watched.add(address)
  }

  return {
    networks: deps.networks,
    /** The price reader for a network's tokens (null for an unknown network). */
    prices: (network: string) => prices.get(network) ?? null,
    /** Watch an address at once (this instance); others hear it through NOTIFY. */
    watch(address: string) {
      watched.add(address.toLowerCase())
    },
    async start() {
      unlisten = await deps.database.listen(CHANNELS.depositAddress, (a) => watched.add(a.toLowerCase()), () => void loadWatched())
      await loadWatched()
      followers = deps.networks.map((n) => createBlockFollower({
        network: {
          name: n.name,
          pollIntervalMs: n.pollIntervalMs,
          maxLogRange: n.maxLogRange,
          erc20Tokens: n.tokens.flatMap((t) => (t.kind === 'erc20' ? [t.address] : [])),
          scanNative: n.tokens.some((t) => t.kind === 'native'),
        },
        client: clients.get(n.name)!,
        store: databaseCursorStore(repo, n.name, deps.clock),
        watch: watched,
        handler: createPaymentTracker({ network: n, repo, lifecycle: deps.lifecycle, clock: deps.clock, logger: deps.logger }),
        // Polling and back-off run on real time whatever clock the lifecycle uses.
        logger: deps.logger,
      }))
      for (const f of followers) f.start()
    },
    /** Tests: the height each follower has processed. */
    syncedHeights: () => Object.fromEntries(deps.networks.map((n, i) => [n.name, followers[i]?.syncedHeight() ?? null])),
    async stop() {
      await Promise.all(followers.map((f) => f.stop()))
      await unlisten?.()
    },
  }
}

export type ChainWatcher = ReturnType<typeof createChainWatcher>
