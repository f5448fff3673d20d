import { CHANNELS } from '../db/channels.ts'
import { createClaims } from '../instances/claims.ts'
import type { InstanceLease } from '../instances/lease.ts'
import { createWorkLoop } from '../instances/work-loop.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import { errorSummary, type Logger } from '../lib/logger.ts'
import {
  createBlockFollower,
  type BlockFollower,
  type FollowerStatus,
} from './follower/block-follower.ts'
import {
  decodeCursor,
  decodeHalt,
  encodeCursor,
  resumeCursor,
  type CursorStore,
  type Halt,
} from './follower/cursor.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import { isRateLimit, rpcErrorKind, type Metrics } from '../metrics/metrics.ts'
import type { AuthorizationDomain } from './eip3009.ts'
import type { PublicClient } from 'viem'
import { createChainRepo, type ChainRepo } from './chain.repo.ts'
import { nativeToken, type NetworkConfig } from './networks-config.ts'
import { createPaymentTracker, type Lifecycle } from './payment-tracker.ts'
import { createOutgoingTracker, type OutgoingLedger } from './outgoing-tracker.ts'
import { createPriceReader, type PriceReader } from './prices.ts'
import { createRateBook } from './fx-rates.ts'
import { modeOf } from '../projects/mode.ts'
import { createChainClient } from './rpc.ts'
import { subscribeHeads, type HeadSubscription } from './follower/head-subscription.ts'
import {
  NetworkMismatchError,
  multicall3Of,
  verifyNetwork,
  type Verdict,
} from './network-verification.ts'
import type { ChainReader } from './record-checks.ts'
import { createL1FeeReader } from './l1-fee.ts'
import type { Address } from 'viem'

/** Deposit addresses of transactions that finished longer ago than this are no longer watched. */
const WATCH_FINISHED_FOR_MS = 30 * 86_400_000
/**
 * A network's start-up check that takes longer than this counts as unreachable (checked again
 * before following).
 */
const VERIFY_TIMEOUT_MS = 15_000

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
 * One block follower per configured network
 * (docs/decisions/0030-block-follower-finds-reorgs-itself.md), feeding the payment tracker; the
 * price readers the pay page quotes with share the same clients. Each network is followed by one
 * instance at a time (docs/decisions/0045-one-follower-per-network.md): the one that claimed it in
 * `chain_followers` while its lease lives, so a network's transfers are recorded and judged by one
 * instance, in order, and a reorg is applied before anything found after it. The others take a
 * network over once its follower's lease has ended (or at once after a graceful shutdown); every
 * instance keeps the set of watched addresses, so whoever follows next has it.
 */
export function createChainWatcher(deps: {
  networks: NetworkConfig[]
  database: Database
  lifecycle: Lifecycle
  lease: InstanceLease
  clock: Clock
  logger: Logger
  metrics: Metrics
  /**
   * The treasury's recorded transactions (refund payments, sweeps), settled from each head
   * (docs/decisions/0040-the-service-records-only-what-it-verifies.md).
   */
  outgoing?: readonly OutgoingLedger[]
}) {
  const repo = createChainRepo(deps.database)
  const watched = new Set<string>()
  const clients = new Map(
    deps.networks.map((n) => [
      n.name,
      createChainClient({
        rpcUrl: n.rpcUrl,
        fallbackRpcUrls: n.fallbackRpcUrls,
        chainId: n.chainId,
        // Every 429 counts and is said, also one the client's retry gets past. The URL may carry an
        // API key: only its host is logged.
        onRateLimited: (url, retryAfter) => {
          deps.metrics.rpcError(n.name, 'rate_limited')
          deps.logger.warn('the RPC provider answered 429 (rate limited); backing off', {
            network: n.name,
            host: URL.parse(url)?.host ?? '?',
            retryAfter,
          })
        },
      }),
    ]),
  )
  const l1Fees = new Map(
    deps.networks.map((n) => [n.name, createL1FeeReader(clients.get(n.name)!)]),
  )
  const prices = new Map<string, PriceReader>(
    deps.networks.map((n) => [
      n.name,
      createPriceReader({
        client: clients.get(n.name)!,
        network: n.name,
        clock: deps.clock,
        // A stablecoin of another currency is worth that currency's rate in its network's mode.
        par: (currency) => rates.read(modeOf(n.testnet), currency),
      }),
    ]),
  )
  /** Fiat currencies' USD rates (fx-rates.ts), read through the same price readers. */
  const rates = createRateBook({
    networks: deps.networks,
    readers: (n) => prices.get(n) ?? null,
    verified: (n) => verdicts.get(n)?.status === 'verified',
    clock: deps.clock,
  })
  const followers = new Map<string, BlockFollower>()
  const pushes = new Map<string, HeadSubscription>()
  /**
   * Each network's last check against its chain (network-verification.ts); followed only once
   * verified.
   */
  const verdicts = new Map<string, Verdict>()
  const verifying = new Map<string, Promise<void>>()
  const me = deps.lease.instanceId
  let unlisten: (() => Promise<void>) | null = null
  let stopped = false

  async function loadWatched() {
    for (const address of await repo.watchedAddresses(
      new Date(deps.clock.now() - WATCH_FINISHED_FOR_MS),
    ))
      watched.add(address)
  }

  function follow(n: NetworkConfig) {
    const native = nativeToken(n)
    const payments = createPaymentTracker({
      network: n,
      repo,
      lifecycle: deps.lifecycle,
      clock: deps.clock,
      logger: deps.logger,
      metrics: deps.metrics,
    })
    const outgoing = createOutgoingTracker({
      network: n.name,
      client: clients.get(n.name)!,
      ledgers: deps.outgoing ?? [],
      confirmations: n.confirmations,
      maxLogRange: n.maxLogRange,
    })
    const follower = createBlockFollower({
      network: {
        name: n.name,
        pollIntervalMs: n.pollIntervalMs,
        maxLogRange: n.maxLogRange,
        erc20Tokens: n.tokens.flatMap((t) => (t.kind === 'erc20' ? [t.address] : [])),
        scanNative: native !== null,
        confirmations: n.confirmations,
        ...(n.finality === 'confirmations' ? {} : { finalityTag: n.finality }),
        ...(n.maxRequestsPerSecond ? { maxRequestsPerSecond: n.maxRequestsPerSecond } : {}),
      },
      client: clients.get(n.name)!,
      store: databaseCursorStore(repo, n.name, deps.clock),
      watch: watched,
      handler: async (event) => {
        await payments(event)
        if (event.type !== 'head') return
        // Sent transactions are settled after the block's payments; a failure waits for the next
        // head and holds up nothing.
        await outgoing
          .onHead(event.number, event.final)
          .catch((e) =>
            deps.logger.error(
              "settling the treasury's transactions failed; tried again at the next head",
              { network: n.name, error: errorSummary(e) },
            ),
          )
      },
      // Polling and back-off run on real time whatever clock the lifecycle uses.
      logger: deps.logger,
      // A rate limit was counted when its answer came (onRateLimited above); any other failure is
      // counted here.
      onTickFailed: (e) => isRateLimit(e) || deps.metrics.rpcError(n.name, rpcErrorKind(e)),
      onLogRangeRefused: () => deps.metrics.rpcError(n.name, 'log_range'),
      ...(native ? { balanceWatch: () => repo.nativeQuotedAddresses(n.name, native.symbol) } : {}),
      multicall3: multicall3Of(verdicts.get(n.name)),
      pushed: () => pushes.get(n.name)?.connected() ?? false,
      recorded: async (from) =>
        (await repo.recordedBlocks(n.name, from)).map((b) => ({
          number: b.number,
          hash: b.hash as `0x${string}`,
        })),
      onHalt: () => deps.metrics.deepReorg(n.name),
    })
    followers.set(n.name, follower)
    follower.start()
    if (n.wsUrl)
      pushes.set(
        n.name,
        subscribeHeads({
          wsUrl: n.wsUrl,
          network: n.name,
          onHead: () => follower.wake(),
          onDown: () => follower.wake(),
          logger: deps.logger,
        }),
      )
    deps.logger.info('following network', { network: n.name, instanceId: me })
  }

  async function unfollow(name: string) {
    const f = followers.get(name)
    followers.delete(name)
    pushes.get(name)?.stop()
    pushes.delete(name)
    await f?.stop()
  }

  async function verify(n: NetworkConfig): Promise<Verdict> {
    const timeout = new Promise<Verdict>((resolve) => {
      const timer = setTimeout(
        () =>
          resolve({
            network: n.name,
            status: 'unreachable',
            error: `no answer within ${VERIFY_TIMEOUT_MS / 1000} s`,
          }),
        VERIFY_TIMEOUT_MS,
      )
      ;(timer as { unref?: () => void }).unref?.()
    })
    const verdict = await Promise.race([
      verifyNetwork(n, clients.get(n.name)!, deps.clock),
      timeout,
    ])
    const before = verdicts.get(n.name)
    verdicts.set(n.name, verdict)
    // Said when it changes, not at every try.
    if (verdict.status === 'verified' && before && before.status !== 'verified')
      deps.logger.info('network verified against its chain; following it now', { network: n.name })
    if (verdict.status === 'mismatch' && JSON.stringify(before) !== JSON.stringify(verdict)) {
      deps.logger.error(
        'the chain disagrees with the networks config: this network is not followed',
        { network: n.name, problems: verdict.problems },
      )
    }
    if (verdict.status === 'unreachable' && before?.status !== 'unreachable') {
      deps.logger.warn(
        'network not verified yet: its RPC does not answer; checked again before it is followed',
        { network: n.name, error: verdict.error },
      )
    }
    return verdict
  }

  /**
   * Checks a network not verified yet in the background (one check at a time), and claims it once
   * it is.
   */
  function verifyAgain(n: NetworkConfig) {
    if (verifying.has(n.name)) return
    verifying.set(
      n.name,
      verify(n).then((v) => {
        verifying.delete(n.name)
        if (v.status !== 'verified' || stopped || !deps.lease.held()) return
        claim().catch((e) =>
          deps.logger.warn('claiming networks failed; tried again at the next lease tick', {
            error: errorSummary(e),
          }),
        )
      }),
    )
  }

  /**
   * Follows every network this instance may follow, and stops following any another instance
   * took. One pass at a time (the lease's tick and a network verified in the background may both
   * ask): a request during a pass runs one more pass after it, so no network is followed twice.
   */
  const claimPasses = createWorkLoop({ run: claimPass })
  const claim = () => claimPasses.request()

  /**
   * A network is claimed and kept by one statement each tick (chain.repo.ts `claimNetwork`), so
   * claiming is the reconcile.
   */
  const claims = createClaims<never>({
    lease: deps.lease,
    clock: deps.clock,
    logger: deps.logger,
    what: 'network',
    reconcileEvery: 1,
    singleInstance: false,
    tick: async () => {},
    work: {
      resume: claim,
      reconcile: claim,
      // Another instance may take the networks once this lease ends: stop following first.
      drop: () => {
        for (const name of [...followers.keys()]) void unfollow(name)
      },
      releaseAll: () => repo.releaseNetworks(me),
    },
  })

  async function claimPass() {
    for (const n of deps.networks) {
      if (stopped) return
      if (verdicts.get(n.name)?.status !== 'verified') {
        verifyAgain(n)
        continue
      }
      const mine = await repo.claimNetwork(n.name, me, new Date(deps.clock.now()))
      if (mine && !followers.has(n.name)) follow(n)
      else if (!mine && followers.has(n.name)) await unfollow(n.name)
    }
  }

  return {
    networks: deps.networks,
    /**
     * The native balance of `address` on `network` at its latest block (null when the node cannot
     * say).
     */
    async nativeBalance(network: string, address: string): Promise<bigint | null> {
      const client = clients.get(network)
      return client
        ? client
            .getBalance({ address: address as `0x${string}`, blockTag: 'latest' })
            .catch(() => null)
        : null
    },
    /** The network's JSON-RPC client (null for an unknown network): the relayer sends through it. */
    client: (network: string): PublicClient | null => clients.get(network) ?? null,
    /** The price reader for a network's tokens (null for an unknown network). */
    prices: (network: string) => prices.get(network) ?? null,
    /** The USD rates of the fiat currencies transactions may be priced in. */
    rates,
    /**
     * Checks every network against its chain (start-up): throws NetworkMismatchError naming every
     * disagreement; an RPC that does not answer is checked again before its network is followed.
     */
    async verify(): Promise<Verdict[]> {
      const found = await Promise.all(deps.networks.map(verify))
      const problems = found.flatMap((v) => (v.status === 'mismatch' ? v.problems : []))
      if (problems.length) throw new NetworkMismatchError(problems)
      return found
    },
    /** Each network's last check against its chain; absent before the first. */
    verdicts: (): Verdict[] => [...verdicts.values()],
    /**
     * Whether the network has been checked against its chain and agrees (only then are its tokens
     * quoted).
     */
    verified: (network: string): boolean => verdicts.get(network)?.status === 'verified',
    /**
     * Whether the network's chain runs EIP-7702, as its node answered when it was verified (null
     * before).
     */
    eip7702(network: string): boolean | null {
      const v = verdicts.get(network)
      return v?.status === 'verified' ? v.eip7702.supported : null
    },
    /**
     * The EIP-712 domain a token's EIP-3009 authorizations are signed in, as its contract stated it
     * when the network was verified; null for a token that takes none (or before verification).
     */
    authorizationDomain(network: string, token: string): AuthorizationDomain | null {
      const v = verdicts.get(network)
      if (v?.status !== 'verified') return null
      return (
        v.authorizationDomains.find(
          (d) => d.verifyingContract.toLowerCase() === token.toLowerCase(),
        ) ?? null
      )
    },
    /**
     * What the treasury's records are checked against (src/chain/record-checks.ts): an account's
     * nonce and balance and the latest block's time, read from the network's node now. Null for a
     * network not configured here.
     */
    reader(network: string): ChainReader | null {
      const client = clients.get(network)
      if (!client) return null
      const l1Fee = l1Fees.get(network)!
      return {
        l1Fee,
        transactionCount: (address) =>
          client.getTransactionCount({ address: address as Address, blockTag: 'latest' }),
        balance: (address) =>
          client.getBalance({ address: address as Address, blockTag: 'latest' }),
        latestTimestamp: async () => (await client.getBlock({ blockTag: 'latest' })).timestamp,
        request: (method, params) => client.request({ method, params } as never),
      }
    },
    /** Watch an address at once (this instance); others hear it through NOTIFY. */
    watch(address: string) {
      watched.add(address.toLowerCase())
    },
    async start() {
      if (deps.networks.length === 0) return
      unlisten = await deps.database.listen(
        CHANNELS.depositAddress,
        (a) => watched.add(a.toLowerCase()),
        () => void loadWatched(),
      )
      await loadWatched()
      await claims.start()
      await rates.start()
    },
    /**
     * The networks whose new heads are pushed to this instance now (a live WebSocket subscription).
     */
    pushing: (): string[] => [...pushes].flatMap(([name, p]) => (p.connected() ? [name] : [])),
    /** The networks this instance follows now. */
    following: (): string[] => [...followers.keys()],
    /**
     * Forgets where a network's follower stands: after its chain was really reset (a testnet
     * regenesis, a devnet whose saved state was lost), so the new chain is followed from its
     * head rather than taken for a reorg. Nothing recorded of the old chain changes.
     */
    async forget(network: string): Promise<Outcome<{ network: string; forgotten: boolean }>> {
      if (!deps.networks.some((n) => n.name === network))
        return deny(
          'not_found',
          `No network ${network} is configured (${deps.networks.map((n) => n.name).join(', ') || 'none'})`,
        )
      return ok({ network, forgotten: await repo.forgetCursor(network) })
    },
    /**
     * Ends a network's halt (a reorg deeper than its follower remembers): whoever follows it
     * re-checks what was recorded from `fromBlock` (default: one window below the lowest block
     * remembered at the halt) against the chain as it is now, takes back what is no longer on
     * it, and scans from there again. Works whether or not this instance follows the network:
     * the request is written into the network's cursor, which its follower reads while halted.
     */
    async resume(
      network: string,
      fromBlock?: bigint,
    ): Promise<
      Outcome<{ network: string; from_block: number; halted_window: string; halted_at: string }>
    > {
      if (!deps.networks.some((n) => n.name === network))
        return deny(
          'not_found',
          `No network ${network} is configured (${deps.networks.map((n) => n.name).join(', ') || 'none'})`,
        )
      const stored = await repo.loadCursor(network)
      const r = resumeCursor(stored === null ? null : decodeCursor(stored), network, fromBlock)
      if (!r.ok) return r
      if (
        !(await repo.replaceCursor(
          network,
          stored!,
          encodeCursor(r.value.cursor),
          new Date(deps.clock.now()),
        ))
      ) {
        return deny(
          'conflict',
          `The position of network ${network} changed meanwhile; run the command again`,
        )
      }
      deps.logger.warn('network resume requested', { network, fromBlock: r.value.from.toString() })
      followers.get(network)?.wake()
      const h = r.value.halt
      return ok({
        network,
        from_block: Number(r.value.from),
        halted_window: `${h.windowFrom}-${h.windowTo}`,
        halted_at: new Date(h.at).toISOString(),
      })
    },
    /** Each network's follower here (null where another instance follows it). */
    followerStatus: (): { network: string; status: FollowerStatus | null }[] =>
      deps.networks.map((n) => ({
        network: n.name,
        status: followers.get(n.name)?.status() ?? null,
      })),
    /**
     * Which instance follows each network, and its halt, as recorded (for readiness on the
     * instances that do not follow it).
     */
    async followers(): Promise<
      { network: string; owner: string | null; live: boolean; halted: Halt | null }[]
    > {
      return (await repo.followers(new Date(deps.clock.now()))).map((r) => {
        let halted: Halt | null = null
        try {
          halted = r.halted === null ? null : decodeHalt(JSON.parse(r.halted))
        } catch {
          deps.logger.warn("the halt recorded in a network's cursor does not read", {
            network: r.network,
          })
        }
        return { ...r, halted }
      })
    },
    /** Tests: the height each follower of this instance has processed. */
    syncedHeights: () =>
      Object.fromEntries(
        deps.networks.map((n) => [n.name, followers.get(n.name)?.syncedHeight() ?? null]),
      ),
    async stop() {
      stopped = true
      await rates.stop()
      await claims.stop(async () => {
        await claimPasses.stop()
        await Promise.all([...followers.keys()].map(unfollow))
        await unlisten?.()
      })
    },
  }
}

export type ChainWatcher = ReturnType<typeof createChainWatcher>
