import { createLifecycleRepo } from './actors/lifecycle.repo.ts'
import { createScheduler } from './actors/scheduler.ts'
import { createTransactionRegistry } from './actors/transaction-registry.ts'
import { createChangeFeed, type ChangeFeed } from './db/change-feed.ts'
import type { Database } from './db/client.ts'
import { createKeyService } from './keys/key.service.ts'
import type { Clock } from './lib/clock.ts'
import { newId } from './lib/ids.ts'
import type { Logger } from './lib/logger.ts'
import { createRateLimitRepo } from './limits/rate-limit.repo.ts'
import { createRateLimiter } from './limits/rate-limiter.ts'
import { createStatsService } from './modules/stats/service.ts'
import { createTransactionRepo } from './modules/transactions/transaction.repo.ts'
import { createTransactionService } from './modules/transactions/service.ts'
import { createProjectService, type RateLimits } from './projects/project.service.ts'
import { createUserService } from './users/user.service.ts'

/** R23 defaults: per project unless configured, and for requests without a valid key per IP. */
export const DEFAULT_LIMITS: RateLimits = { minute: 60, hour: 1000, day: 10_000 }

/** Every domain service, wired once; the HTTP app, the CLI and the admin socket share them. */
/** How long an instance's hold on its actors lasts without renewal (issue 3: takeover within seconds). */
export const DEFAULT_LEASE_MS = 10_000

export async function createServices(deps: { database: Database; clock: Clock; logger: Logger; baseUrl: string; leaseMs?: number }) {
  const { database, clock, logger } = deps
  const changes: ChangeFeed = await createChangeFeed(database)
  const rateLimitRepo = createRateLimitRepo(database)
  const transactionRepo = createTransactionRepo(database.db)
  const scheduler = createScheduler(clock)
  // Started by the server (src/server/start.ts), never by the CLI: only servers run actors.
  const lifecycle = createTransactionRegistry({
    database,
    repo: createLifecycleRepo(database.db),
    clock,
    logger,
    scheduler,
    instanceId: newId('inst'),
    leaseMs: deps.leaseMs ?? DEFAULT_LEASE_MS,
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
    transactions: createTransactionService({ repo: transactionRepo, lifecycle, clock, baseUrl: deps.baseUrl }),
    stats: createStatsService({ db: database.db }),
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
