import { createLifecycleRepo } from './actors/lifecycle.repo.ts'
import { createScheduler } from './actors/scheduler.ts'
import { createTransactionRegistry } from './actors/transaction-registry.ts'
import { createChangeFeed, type ChangeFeed } from './db/change-feed.ts'
import type { Database } from './db/client.ts'
import { createKeyService } from './keys/key.service.ts'
import type { Clock } from './lib/clock.ts'
import { eq } from 'drizzle-orm'
import type { TxEvent } from '../machines/transaction.machine.ts'
import { newId, UUID_RE } from './lib/ids.ts'
import { deny } from './lib/outcome.ts'
import type { Logger } from './lib/logger.ts'
import { createRateLimitRepo } from './limits/rate-limit.repo.ts'
import { createRateLimiter } from './limits/rate-limiter.ts'
import { createStatsService } from './modules/stats/service.ts'
import { transactions as transactionsTable } from './db/schema.ts'
import { createTransactionRepo } from './modules/transactions/transaction.repo.ts'
import { createTransactionService } from './modules/transactions/service.ts'
import { createProjectService, type RateLimits } from './projects/project.service.ts'
import { createUserService } from './users/user.service.ts'

/** R23 defaults: per project unless configured, and for requests without a valid key per IP. */
export const DEFAULT_LIMITS: RateLimits = { minute: 60, hour: 1000, day: 10_000 }

/** Every domain service, wired once; the HTTP app, the CLI and the admin socket share them. */
export async function createServices(deps: { database: Database; clock: Clock; logger: Logger; baseUrl: string; leaseMs?: number }) {
  const { database, clock, logger } = deps
  const changes: ChangeFeed = await createChangeFeed(database)
  const rateLimitRepo = createRateLimitRepo(database)
  const lifecycleRepo = createLifecycleRepo(database)
  const transactionRepo = createTransactionRepo(database, lifecycleRepo)
  const scheduler = createScheduler(clock)
  // Started by the server (src/server/start.ts), never by the CLI: only servers run actors.
  const lifecycle = createTransactionRegistry({
    database,
    repo: lifecycleRepo,
    clock,
    logger,
    scheduler,
    instanceId: newId('inst'),
    // Takeover within seconds when an instance dies (ACTOR_LEASE_MS, default 10 s).
    leaseMs: deps.leaseMs ?? 10_000,
    singleInstance: database.kind === 'pglite',
  })
  return {
    database,
    changes,
    anonymousLimits: DEFAULT_LIMITS,
    projects: createProjectService({ database, changes }),
    keys: createKeyService({ database, changes, clock, onError: (e) => logger.warn('last_used_at update failed', { error: String(e) }) }),
    users: createUserService({ database }),
    limiter: createRateLimiter({ repo: rateLimitRepo, clock }),
    lifecycle,
    /** Every deadline of this instance's actors (tests move a manual clock, then run what is due). */
    scheduler,
    transactions: createTransactionService({ repo: transactionRepo, lifecycle, clock, baseUrl: deps.baseUrl }),
    stats: createStatsService({ db: database.db }),
    /**
     * Applies a lifecycle event to a test-mode transaction by hand: for trying webhooks and
     * integrations before a chain is connected. Live transactions only move on real payments.
     */
    async driveTestTransaction(id: string, event: TxEvent) {
      if (!UUID_RE.test(id)) return deny('not_found', `No transaction ${id}`)
      const [row] = await database.db.select({ testingMode: transactionsTable.testingMode }).from(transactionsTable).where(eq(transactionsTable.id, id))
      if (!row) return deny('not_found', `No transaction ${id}`)
      if (!row.testingMode) return deny('forbidden', 'Only test-mode transactions can be driven by hand')
      return lifecycle.apply(id, event)
    },
    /** Drops rate-limit windows and idempotency records nobody can use any more. */
    async prune() {
      const now = clock.now()
      await rateLimitRepo.prune(now)
      await transactionRepo.pruneIdempotencyKeys(new Date(now - 24 * 3_600_000))
    },
    async stop() {
      await lifecycle.stop()
      scheduler.stop()
      await changes.stop()
    },
  }
}

export type Services = Awaited<ReturnType<typeof createServices>>
