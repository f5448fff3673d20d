import type { Hex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { createRelayer } from './chain/signature-pay/relayer.ts'
import { createRelayerRepo } from './chain/signature-pay/relayer.repo.ts'
import type { RelayLimits } from './chain/signature-pay/relay-limits.ts'
import { type NetworkConfig, relayerRules } from './chain/networks-config.ts'
import { createInstanceLease } from './instances/lease.ts'
import { createInstanceRepo } from './instances/instance.repo.ts'
import { createLifecycleRepo } from './actors/lifecycle.repo.ts'
import { createScheduler } from './actors/scheduler.ts'
import { createTransactionRegistry } from './actors/transaction-registry.ts'
import { createChangeFeed, type ChangeFeed } from './db/change-feed.ts'
import type { Database } from './db/client.ts'
import { createKeyService } from './keys/key.service.ts'
import { createKeyRepo } from './keys/key.repo.ts'
import type { Clock } from './lib/clock.ts'
import type { TxEvent } from '../machines/transaction.machine.ts'
import { newId } from './lib/ids.ts'
import { deny } from './lib/outcome.ts'
import type { Logger } from './lib/logger.ts'
import { createRateLimitRepo } from './limits/rate-limit.repo.ts'
import { createEmbeddedRateLimiter, createRateLimiter } from './limits/rate-limiter.ts'
import { createStatsService } from './modules/stats/service.ts'
import { createSettingsRepo } from './db/settings.repo.ts'
import { ConfigError } from './config.ts'
import { createSecretBox, type SecretBox } from './lib/secret-box.ts'
import { DEFAULT_RETRY_SCHEDULE_MS } from '../machines/webhook-delivery.machine.ts'
import { createDeliveryRepo } from './webhooks/delivery.repo.ts'
import { createWebhookDispatcher } from './webhooks/dispatcher.ts'
import { createDeliveryRunner } from './webhooks/delivery-runner.ts'
import { createEndpointService } from './webhooks/endpoint.service.ts'
import { createEndpointRepo } from './webhooks/endpoint.repo.ts'
import { createEndpointHealth, DEFAULT_DISABLE_AFTER_MS } from './webhooks/endpoint-health.ts'
import { createMetrics } from './metrics/metrics.ts'
import { createReadiness, DEFAULT_CHAIN_MAX_LAG_MS } from './operations/readiness.ts'
import type { Resolver } from './webhooks/url-guard.ts'
import { createChainWatcher } from './chain/chain-watcher.ts'
import { createOutgoingClaims } from './chain/outgoing-claims.repo.ts'
import { createDepositService } from './chain/deposit.service.ts'
import type { TestWallet } from './chain/test-wallet.ts'
import { createPayService } from './modules/pay/service.ts'
import { createCommerceService } from './modules/commerce/service.ts'
import { createCommerceRepo } from './modules/commerce/commerce.repo.ts'
import { createStatusStreams } from './modules/pay/status-streams.ts'
import { createWebhookService } from './webhooks/webhook.service.ts'
import { createTransactionRepo } from './modules/transactions/transaction.repo.ts'
import { createTransactionService } from './modules/transactions/service.ts'
import { createRollups } from './modules/transactions/rollups.ts'
import { createTransactionExport } from './modules/transactions/export.ts'
import { createExportRepo } from './modules/transactions/export.repo.ts'
import { createProjectService, type RateLimits } from './projects/project.service.ts'
import { createProjectRepo } from './projects/project.repo.ts'
import { createUserService } from './users/user.service.ts'
import { createUsersRepo } from './users/users.repo.ts'
import { createSessionService } from './users/session.service.ts'
import { createDashboardService } from './modules/dashboard/service.ts'
import { createRefundRepo } from './modules/refunds/refund.repo.ts'
import { createRefundChanges } from './modules/refunds/changes.ts'
import { createRefundService } from './modules/refunds/service.ts'
import { createFacilitatorService } from './modules/x402/service.ts'
import { createRefundSettlement } from './modules/refunds/settlement.ts'
import { createTreasuryRepo } from './modules/treasury/treasury.repo.ts'
import { createTreasuryService } from './modules/treasury/service.ts'

/**
 * docs/decisions/0023-rate-limits-exact.md defaults: per project unless configured, and for
 * requests without a valid key per IP.
 */
export const DEFAULT_LIMITS: RateLimits = { minute: 60, hour: 1000, day: 10_000 }
/**
 * docs/decisions/0026-pay-page-endpoints.md: the pay page's per-IP limits; generous, because an
 * open page polls and streams.
 */
export const DEFAULT_PAY_LIMITS: RateLimits = { minute: 300, hour: 5_000, day: 50_000 }
/**
 * Outbox events are kept this long after they were fanned out into deliveries, then pruned (every
 * ten minutes). Nothing reads them after fan-out: each delivery keeps its own copy of the event's
 * data, and the delivery log and timeline are kept whole; the week is for looking into a problem.
 */
export const OUTBOX_KEPT_MS = 7 * 86_400_000
/**
 * On the embedded database every fan-out pass runs in the server's own thread (when this was set,
 * a pass cost about as much as the create it served): under load, announced events are gathered
 * for at most this long, so one pass serves many (an idle server still fans out at once).
 */
export const EMBEDDED_FANOUT_GATHER_MS = 10
/**
 * docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md: x402 verifies and settles per API
 * key, beside the project's own limits (X402_SETTLE_RATE_LIMITS).
 */
export const DEFAULT_X402_SETTLE_LIMITS: RateLimits = { minute: 60, hour: 1000, day: 10_000 }
/** Dashboard sign-in attempts per client IP (accounts also lock after repeated wrong passwords). */
export const SIGN_IN_LIMITS: RateLimits = { minute: 10, hour: 100, day: 500 }

/** Every domain service, wired once; the HTTP app, the CLI and the admin socket share them. */
export async function createServices(deps: {
  database: Database
  clock: Clock
  logger: Logger
  baseUrl: string
  /** Seals secrets at rest (SECRET_KEY or the embedded default's generated key). */
  secretKey: Buffer
  leaseMs?: number
  /** This instance (src/server/instance-id.ts); a new one when not given. */
  instanceId?: string
  /**
   * docs/decisions/0019-retry-schedule.md delays between automatic webhook attempts
   * (WEBHOOK_RETRY_SCHEDULE).
   */
  webhookRetryScheduleMs?: readonly number[]
  /** Tests: how webhook host names resolve (the SSRF check). */
  resolver?: Resolver
  /**
   * docs/decisions/0021-webhook-endpoints-and-private-addresses.md: test endpoints may target
   * loopback and private addresses (WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS); not unless said.
   */
  allowPrivateTestEndpoints?: boolean
  /**
   * docs/decisions/0016-networks-config-and-devnet.md networks (the devnet's, or NETWORKS_CONFIG);
   * none: no payments are taken.
   */
  networks?: NetworkConfig[]
  /** The devnet's funded wallet, when this server runs its own devnet. */
  testWallet?: TestWallet | null
  /**
   * The relayer's key and limits (docs/decisions/0062-pay-by-signature.md): it pays the gas of
   * customers' signed payments and holds nobody's funds. Absent: payment by signature is not
   * offered.
   */
  relayer?: { privateKey: Hex; limits: RelayLimits; minBalanceWei: bigint } | null
  /** Per-IP limits of the pay routes (PAY_RATE_LIMITS). */
  payLimits?: RateLimits | null
  /** Per-key limits of x402 verifies and settles (X402_SETTLE_RATE_LIMITS). */
  x402SettleLimits?: RateLimits | null
  /** How long an x402 settle waits for the relayer's receipt (X402_SETTLE_WAIT). */
  x402SettleWaitMs?: number
  /**
   * WEBHOOK_DISABLE_AFTER: an endpoint failing every attempt this long is disabled (default 5
   * days).
   */
  webhookDisableAfterMs?: number
  /**
   * READY_CHAIN_MAX_LAG: how long a follower may be out of step with the head before readiness
   * fails.
   */
  readyChainMaxLagMs?: number
  /** DATA_DIR, whose writability readiness checks; null where there is none to check. */
  dataDir?: string | null
}) {
  const { database, clock, logger } = deps
  const secrets = createSecretBox(deps.secretKey)
  await checkSecretKey(database, secrets)
  const changes: ChangeFeed = await createChangeFeed(database)
  const instanceId = deps.instanceId ?? newId('inst')
  const scheduleMs = deps.webhookRetryScheduleMs ?? DEFAULT_RETRY_SCHEDULE_MS
  const addressRules = { allowPrivateTestEndpoints: deps.allowPrivateTestEndpoints ?? false }
  const endpoints = createEndpointService({
    repo: createEndpointRepo(database),
    changes,
    clock,
    secrets,
    addressRules,
  })
  const singleInstance = database.kind === 'pglite'
  // One lease covers every actor this instance runs, transactions and deliveries alike. Only
  // servers take it (src/server/start.ts starts the registry and the dispatcher); the CLI never
  // does.
  const lease = createInstanceLease({
    repo: createInstanceRepo(database.leaseDb),
    clock,
    logger,
    instanceId,
    // Takeover within seconds when an instance dies (ACTOR_LEASE_MS, default 10 s).
    leaseMs: deps.leaseMs ?? 10_000,
    exclusive: singleInstance,
  })
  const scheduler = createScheduler(clock)
  const metrics = createMetrics()
  const deliveryRepo = createDeliveryRepo(database)
  const health = createEndpointHealth({
    endpoints,
    deliveries: deliveryRepo,
    database,
    clock,
    logger,
    metrics,
    disableAfterMs: deps.webhookDisableAfterMs ?? DEFAULT_DISABLE_AFTER_MS,
  })
  const runner = createDeliveryRunner({
    repo: deliveryRepo,
    endpoints,
    health,
    metrics,
    changes,
    clock,
    logger,
    scheduler,
    instanceId,
    scheduleMs,
    addressRules,
    resolver: deps.resolver,
    // Made below, from the transactions and pay services; only asked once deliveries run.
    commerceEvent: (d) => commerce.deliveryEvent(d),
  })
  const dispatcher = createWebhookDispatcher({
    database,
    repo: deliveryRepo,
    runner,
    lease,
    clock,
    logger,
    scheduler,
    singleInstance,
    eventsGatherMs: singleInstance ? EMBEDDED_FANOUT_GATHER_MS : 0,
  })
  const rateLimitRepo = createRateLimitRepo(database)
  // Stats and the list's counts read settled days from rollups
  // (docs/decisions/0066-stats-from-settled-days.md).
  const rollups = createRollups({ database, clock, logger })
  const transactionRepo = createTransactionRepo(database, rollups)
  const lifecycle = createTransactionRegistry({
    database,
    repo: createLifecycleRepo(database),
    lease,
    clock,
    logger,
    scheduler,
    singleInstance,
    metrics,
  })
  // Outbox events committed here are fanned out here (or announced to the servers, from the CLI).
  lifecycle.onChange((c) => {
    if ('id' in c && c.here && c.outbox) dispatcher.eventsWritten()
  })
  const deposits = createDepositService({ database, clock })
  // Money out (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md): refunds and
  // sweeps the merchant's treasury tool pays and records, settled by each network's follower.
  const refundRepo = createRefundRepo(database)
  const refundChanges = createRefundChanges({
    repo: refundRepo,
    clock,
    eventsWritten: () => dispatcher.eventsWritten(),
  })
  // A signed transaction is recorded as a sweep or as a refund's payment, never as both.
  const outgoingClaims = createOutgoingClaims(database)
  const refunds = createRefundService({
    repo: refundRepo,
    changes: refundChanges,
    claims: outgoingClaims,
    chain: { eip7702: (n) => chain.eip7702(n), reader: (n) => chain.reader(n) },
    transactions: transactionRepo,
    networks: deps.networks ?? [],
    clock,
    logger,
  })
  const treasury = createTreasuryService({
    repo: createTreasuryRepo(database),
    claims: outgoingClaims,
    deposits,
    clock,
    logger,
    chain: {
      networks: deps.networks ?? [],
      verified: (n) => chain.verified(n),
      eip7702: (n) => chain.eip7702(n),
      prices: (n) => chain.prices(n),
      reader: (n) => chain.reader(n),
    },
  })
  // Started by the server (src/server/start.ts): only servers follow chains.
  const chain = createChainWatcher({
    networks: deps.networks ?? [],
    database,
    lifecycle,
    lease,
    clock,
    logger,
    metrics,
    outgoing: [
      createRefundSettlement({
        repo: refundRepo,
        changes: refundChanges,
        networks: deps.networks ?? [],
        logger,
      }),
      treasury.ledger,
    ],
  })
  const relayer = deps.relayer
    ? createRelayer({
        account: privateKeyToAccount(deps.relayer.privateKey),
        limits: deps.relayer.limits,
        networks: chain.networks.map((n) => ({
          name: n.name,
          chainId: n.chainId,
          pollIntervalMs: n.pollIntervalMs,
          rules: relayerRules(n),
          client: chain.client(n.name)!,
        })),
        repo: createRelayerRepo(database),
        exclusive: (key, fn) => database.exclusive(key, fn),
        authorizationDomain: chain.authorizationDomain,
        clock,
        logger,
        metrics,
      })
    : null
  metrics.networksKnown(chain.networks.map((n) => n.name))
  if (relayer) metrics.relayerNetworks(chain.networks.map((n) => n.name))
  metrics.setSources({
    activeByStatus: () => {
      const counts: Record<string, number> = {}
      for (const id of lifecycle.runningIds()) {
        const status = lifecycle.statusOf(id)
        if (status) counts[status] = (counts[status] ?? 0) + 1
      }
      return counts
    },
    webhookPending: () => runner.size,
    payStreams: () => payStreams.size,
    relayerBalances: () => relayer?.balances() ?? Promise.resolve([]),
    rates: () => chain.rates.status(),
    chains: () =>
      chain.followerStatus().flatMap(({ network, status }) =>
        status
          ? [
              {
                network,
                head: status.head,
                synced: status.synced,
                halted: status.halted !== null,
              },
            ]
          : [],
      ),
  })
  // docs/decisions/0023-rate-limits-exact.md: exact across instances through one shared statement;
  // on the embedded database one process owns the counts, so they are kept in memory and written
  // behind.
  const limiter = singleInstance
    ? createEmbeddedRateLimiter({
        repo: rateLimitRepo,
        clock,
        metrics,
        onError: (e) =>
          logger.warn('rate-limit counts not stored yet; retrying', { error: String(e) }),
      })
    : createRateLimiter({ repo: rateLimitRepo, clock, metrics })
  const stopController = new AbortController()
  const readiness = createReadiness({
    database,
    chain,
    dataDir: deps.dataDir ?? null,
    maxChainLagMs: deps.readyChainMaxLagMs ?? DEFAULT_CHAIN_MAX_LAG_MS,
    instanceId,
    relayer:
      relayer && deps.relayer
        ? { balances: relayer.balances, minBalanceWei: deps.relayer.minBalanceWei }
        : null,
  })
  const projects = createProjectService({ repo: createProjectRepo(database), changes, clock })
  const keys = createKeyService({
    repo: createKeyRepo(database),
    changes,
    clock,
    onError: (e) => logger.warn('last_used_at update failed', { error: String(e) }),
  })
  const webhooks = createWebhookService({
    database,
    repo: deliveryRepo,
    runner,
    endpoints,
    transactions: transactionRepo,
    clock,
    instanceId,
    scheduleMs,
  })
  const transactions = createTransactionService({
    repo: transactionRepo,
    lifecycle,
    clock,
    baseUrl: deps.baseUrl,
    rates: chain.rates,
  })
  const stats = createStatsService({ rollups })
  const usersRepo = createUsersRepo(database)
  const transactionExport = createTransactionExport({ repo: createExportRepo(database), clock })
  const pay = createPayService({
    database,
    clock,
    baseUrl: deps.baseUrl,
    networks: chain.networks,
    verified: chain.verified,
    nativeBalance: chain.nativeBalance,
    prices: chain.prices,
    rates: chain.rates,
    deposits,
    watch: chain.watch,
    lifecycle,
    testWallet: deps.testWallet,
    relayer,
    authorizationDomain: chain.authorizationDomain,
    client: chain.client,
    settleWaitMs: deps.x402SettleWaitMs,
  })
  const facilitator = createFacilitatorService({
    database,
    clock,
    networks: chain.networks,
    verified: chain.verified,
    relayer,
    authorizationDomain: chain.authorizationDomain,
    client: chain.client,
    prices: chain.prices,
    settleWaitMs: deps.x402SettleWaitMs,
    lifecycle,
    watch: chain.watch,
  })
  // The Coinbase Commerce API (docs/decisions/0065-coinbase-commerce-drop-in.md): charges are
  // transactions, made and paid by the same services.
  const commerce = createCommerceService({
    repo: createCommerceRepo(database, rollups),
    transactions,
    pay,
    decimals: (network, symbol) =>
      chain.networks.find((n) => n.name === network)?.tokens.find((t) => t.symbol === symbol)
        ?.decimals ?? null,
    clock,
    baseUrl: deps.baseUrl,
  })
  const payStreams = createStatusStreams({
    state: pay.state,
    changes: lifecycle.onChange,
    stopping: stopController.signal,
  })
  return {
    database,
    clock,
    changes,
    deposits,
    chain,
    refunds,
    treasury,
    pay,
    /** Submits customers' signed payments, paying gas only; null when none is configured. */
    relayer,
    /** x402 verify and settle for merchants' own resources. */
    facilitator,
    /** The pay page's event streams, moved by committed changes. */
    payStreams,
    anonymousLimits: DEFAULT_LIMITS,
    payLimits: deps.payLimits ?? DEFAULT_PAY_LIMITS,
    x402SettleLimits: deps.x402SettleLimits ?? DEFAULT_X402_SETTLE_LIMITS,
    projects,
    keys,
    users: createUserService({ repo: usersRepo }),
    sessions: createSessionService({ repo: usersRepo, clock, secretKey: deps.secretKey }),
    signInLimits: SIGN_IN_LIMITS,
    dashboard: createDashboardService({
      transactions,
      webhooks,
      endpoints,
      keys,
      stats,
      deposits,
      projects,
      refunds,
      treasury,
    }),
    limiter,
    lifecycle,
    endpoints,
    webhooks,
    dispatcher,
    /** The webhook delivery actors this instance runs. */
    deliveries: runner,
    /** This instance's Prometheus metrics (GET /metrics). */
    metrics,
    /** GET /readyz and `status`: what a balancer and an operator read. */
    readiness,
    /**
     * The graceful stop begins: readiness fails and event streams end, before the listeners close.
     */
    beginStop() {
      readiness.beginStop()
      stopController.abort()
    },
    lease,
    /**
     * Every deadline of this instance's actors (tests move a manual clock, then run what is due).
     */
    scheduler,
    transactions,
    /** The Coinbase Commerce API over the transactions. */
    commerce,
    stats,
    /**
     * Rollups of settled days, written in the background (at start, and after a stats call finds
     * newly settled days).
     */
    rollups,
    /** CSV and JSON lines downloads of transactions and refunds, read page by page. */
    transactionExport,
    /**
     * Applies a lifecycle event to a test-mode transaction by hand: for trying webhooks and
     * integrations before a chain is connected. Live transactions only move on real payments.
     */
    async driveTestTransaction(id: string, event: TxEvent) {
      const testingMode = await transactionRepo.testingModeOf(id)
      if (testingMode === null) return deny('not_found', `No transaction ${id}`)
      if (!testingMode)
        return deny('forbidden', 'Only test-mode transactions can be driven by hand')
      return lifecycle.apply(id, event)
    },
    /** Drops rate-limit windows and idempotency records nobody can use any more. */
    async prune() {
      const now = clock.now()
      await rateLimitRepo.prune(now)
      await transactionRepo.pruneIdempotencyKeys(new Date(now - 24 * 3_600_000))
      await deliveryRepo.pruneOutbox(new Date(now - OUTBOX_KEPT_MS))
    },
    async stop() {
      await rollups.stop()
      await relayer?.stop()
      await chain.stop()
      await dispatcher.stop()
      await lifecycle.stop()
      await lease.stop()
      scheduler.stop()
      await limiter.flush()
      await changes.stop()
    },
  }
}

export type Services = Awaited<ReturnType<typeof createServices>>

/**
 * Refuses to start with another SECRET_KEY than the one this database's secrets were sealed
 * with: every webhook signature would otherwise fail at delivery time, far from the cause.
 */
async function checkSecretKey(database: Database, secrets: SecretBox) {
  const sealedWith = await createSettingsRepo(database).firstOf(
    'secret_key_fingerprint',
    secrets.fingerprint,
  )
  if (sealedWith !== secrets.fingerprint) {
    throw new ConfigError(
      'SECRET_KEY',
      "differs from the key this database's secrets were sealed with; use the original SECRET_KEY (or DATA_DIR/secret.key)",
    )
  }
}
