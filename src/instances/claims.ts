import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { InstanceLease } from './lease.ts'

/**
 * Claiming units of work one at a time from a table (actors, deliveries), in batches: each
 * kind supplies its own statements (kept in its repository) and what taking a unit means.
 */
export interface BatchClaim<U> {
  /**
   * Claims up to `limit` units nobody works on (unclaimed, or claimed by an instance whose lease
   * ended) for this instance; with `all` (a database only this instance uses), every unit not
   * already ours.
   */
  claim(o: { all: boolean; limit: number; now: Date }): Promise<U[]>
  /** Starts work on a unit claimed for this instance; one that throws has its claim given back. */
  take(unit: U): void | Promise<void>
  /** Gives one unit's claim back (it could not be taken here), so any instance may claim it. */
  releaseOne(unit: U): Promise<void>
  /** Names a unit in log lines. */
  describe(unit: U): Record<string, unknown>
}

/** What a kind of work shared across instances does as this instance's lease goes. */
export interface SharedWork<U> {
  /** Batch claims (transactions, deliveries); absent where `reconcile` claims (networks). */
  batch?: BatchClaim<U>
  /**
   * Starts what is recorded as ours and does not run here: at start (ours from before a restart
   * on the same DATA_DIR) and once a lost lease is renewed again.
   */
  resume(): Promise<void>
  /**
   * Brings what runs here in line with what is recorded as ours (every `reconcileEvery` lease
   * ticks).
   */
  reconcile(): Promise<void>
  /**
   * The lease was lost: another instance may take the work over, so every unit stops now,
   * persisting nothing more.
   */
  drop(): void
  /** Gives back every claim of this instance (graceful stop, once its work has stopped). */
  releaseAll(): Promise<void>
}

export interface Claims {
  /** Claims free units in batches and takes them, until a batch comes back short. */
  claimFree(o?: { all?: boolean }): Promise<void>
  /**
   * Takes units already claimed for this instance (resuming); one that cannot be taken is released.
   */
  take<U>(units: readonly U[]): Promise<void>
  /** Whether new work may start here: started, not stopping, and the lease held. */
  active(): boolean
  /** Follows the lease, takes it, resumes what is ours, then claims what nobody runs. */
  start(): Promise<void>
  /** Stops following the lease and claiming, runs `stopWork`, then gives every claim back. */
  stop(stopWork: () => Promise<void> | void): Promise<void>
}

/**
 * The one way work is shared across instances (transactions' actors, webhook deliveries,
 * followed networks). Every instance holds one lease (./lease.ts); a unit of work is claimed
 * by one instance at a time, for as long as that lease lives, so two instances never work on
 * the same unit at once. On each lease tick the work is reconciled every `reconcileEvery`
 * ticks, then free units are claimed (or `tick` runs, for work that claims in its own pass);
 * a lost lease drops every unit at once; a lease renewed after a loss resumes what is still
 * recorded as ours. On a database only this instance uses (`singleInstance`, PGlite), the
 * first claim takes every unit, whatever its recorded claimer.
 */
export function createClaims<U>(deps: {
  lease: InstanceLease
  clock: Clock
  logger: Logger
  /** What the work is, in log lines. */
  what: string
  work: SharedWork<U>
  /** Units per claim statement. */
  batchSize?: number
  reconcileEvery: number
  /** Each lease tick, after any reconcile (default: claim free units). */
  tick?: () => Promise<void>
  singleInstance: boolean
}): Claims {
  const batchSize = deps.batchSize ?? 500
  let started = false
  let stopped = false
  let ticks = 0
  let unlease: (() => void) | null = null
  const active = () => started && !stopped && deps.lease.held()

  async function take(units: readonly U[]) {
    const batch = deps.work.batch
    if (!batch) return
    for (const u of units) {
      if (!active()) return
      try {
        await batch.take(u)
      } catch (e) {
        // One unit that cannot be taken must not keep the rest from running: it is left for another
        // try.
        deps.logger.error(`${deps.what} could not be started; released`, {
          ...batch.describe(u),
          error: String(e),
        })
        await batch.releaseOne(u).catch(() => {})
      }
    }
  }

  async function claimFree(o: { all?: boolean } = {}) {
    const batch = deps.work.batch
    if (!batch) return
    for (;;) {
      if (!active()) return
      const claimed = await batch.claim({
        all: o.all ?? false,
        limit: batchSize,
        now: new Date(deps.clock.now()),
      })
      await take(claimed)
      if (claimed.length < batchSize) return
    }
  }

  return {
    claimFree,
    take: take as Claims['take'],
    active,
    async start() {
      unlease = deps.lease.listen({
        tick: async () => {
          if (ticks++ % deps.reconcileEvery === 0) await deps.work.reconcile()
          await (deps.tick ?? claimFree)()
        },
        lost: () => deps.work.drop(),
        regained: () => deps.work.resume(),
      })
      await deps.lease.start()
      started = true
      await deps.work.resume()
      await claimFree({ all: deps.singleInstance })
    },
    async stop(stopWork) {
      stopped = true
      unlease?.()
      await stopWork()
      await deps.work.releaseAll().catch(() => {})
    },
  }
}
