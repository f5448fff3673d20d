import { createClaims, type Claims } from '../instances/claims.ts'
import type { InstanceLease } from '../instances/lease.ts'
import { createWorkLoop } from '../instances/work-loop.ts'
import type { Scheduler } from '../actors/scheduler.ts'
import { CHANNELS, WEBHOOK_WORK_DELIVERIES } from '../db/channels.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { DeliveryRepo, RunnableDelivery } from './delivery.repo.ts'
import type { DeliveryRunner } from './delivery-runner.ts'

export interface DispatcherDeps {
  database: Pick<Database, 'listen' | 'notify'>
  repo: DeliveryRepo
  runner: DeliveryRunner
  lease: InstanceLease
  clock: Clock
  logger: Logger
  scheduler: Scheduler
  /**
   * PGlite: one instance only, so at start-up every unfinished delivery is ours whatever its claim
   * says.
   */
  singleInstance: boolean
  /** How often an idle dispatcher looks for work a notification may not have announced. */
  pollMs?: number
  /**
   * Notices of new outbox events start a pass at most this often (the first at once, later ones
   * gathered until this long after the last pass began): on the embedded database, where every
   * statement runs in the server's own thread, one fan-out then serves many creates.
   */
  eventsGatherMs?: number
}

const BATCH = 500
/** Lease ticks between looks for deliveries recorded as ours that do not run here. */
const ADOPT_EVERY = 10

/**
 * Finds the webhook work this instance runs (docs/decisions/0032-webhook-delivery-actors.md):
 * outbox events become deliveries (fan-out) claimed by the instance that fans them out, which runs
 * their actors at once; unfinished deliveries nobody runs (made by the CLI, or left by an instance
 * whose lease ended) are claimed with FOR UPDATE SKIP LOCKED by whichever instance looks first. A
 * claim lasts as long as the instance's lease, so a delivery waiting in a local queue cannot be
 * claimed and sent by another instance meanwhile. Wakes when this process commits outbox events, on
 * NOTIFY, on each lease renewal and every `pollMs`.
 */
export function createWebhookDispatcher(deps: DispatcherDeps) {
  const me = deps.lease.instanceId
  let stopped = true
  const unlisten: (() => Promise<void>)[] = []

  /**
   * Starts what is recorded as ours but does not run here: after a restart on the same DATA_DIR,
   * after the lease was regained, or when a step that could not be committed stopped an actor.
   */
  async function adoptStranded() {
    const stranded = (await deps.repo.ownedIds(me)).filter((id) => !deps.runner.has(id))
    await claims.take(await deps.repo.owned(me, stranded))
  }

  const claims: Claims = createClaims<RunnableDelivery>({
    lease: deps.lease,
    clock: deps.clock,
    logger: deps.logger,
    what: 'webhook delivery',
    batchSize: BATCH,
    reconcileEvery: ADOPT_EVERY,
    singleInstance: deps.singleInstance,
    // Claims run in the dispatch pass, one pass at a time.
    tick: () => wake(),
    work: {
      batch: {
        claim: ({ all, limit, now }) =>
          all
            ? deps.repo.claimAll({ owner: me, limit })
            : deps.repo.claimFree({ owner: me, now, limit }),
        take: (d) => deps.runner.run(d),
        releaseOne: (d) => deps.repo.releaseOne(d.id, me),
        describe: (d) => ({ deliveryId: d.id }),
      },
      resume: adoptStranded,
      reconcile: adoptStranded,
      drop: () => deps.runner.stopAll(),
      releaseAll: () => deps.repo.release(me),
    },
  })

  /**
   * What a pass does: fan out new outbox events only (a notice of new events: the deliveries
   * fan-out makes are claimed by it, so there is nothing else to claim), or also claim
   * deliveries nobody runs, or (a database only this instance uses) every one not ours.
   */
  type Pass = 'events' | 'all' | 'everything'
  const RANK: Record<Pass, number> = { events: 0, all: 1, everything: 2 }

  async function pass(what: Pass) {
    try {
      for (;;) {
        const r = await deps.repo.fanOut({
          limit: BATCH,
          now: new Date(deps.clock.now()),
          owner: me,
        })
        await claims.take(r.deliveries)
        if (r.events < BATCH) break
      }
      if (what !== 'events') await claims.claimFree({ all: what === 'everything' })
    } catch (e) {
      deps.logger.warn('webhook dispatch pass failed; retrying', { error: String(e) })
    }
  }

  /**
   * One pass at a time; every wake-up during a pass is served by one next pass. Notices of new
   * events are gathered for `eventsGatherMs` after the last pass began (the first at once), so
   * on the embedded database one fan-out serves many creates.
   */
  const passes = createWorkLoop<Pass>({
    run: pass,
    merge: (a, b) => (RANK[a] >= RANK[b] ? a : b),
    gatherMs: deps.eventsGatherMs ?? 0,
  })

  /**
   * Runs a pass now, or right after the one in progress; resolves once the pass serving it ends.
   */
  function wake(what: 'events' | 'all' = 'all'): Promise<void> {
    if (stopped || !deps.lease.held()) return passes.idle()
    return passes.request(what)
  }

  return {
    async start() {
      stopped = false
      unlisten.push(
        await deps.database.listen(
          CHANNELS.webhookWork,
          (payload) => void wake(payload === WEBHOOK_WORK_DELIVERIES ? 'all' : 'events'),
          () => void wake(),
        ),
      )
      unlisten.push(
        await deps.database.listen(
          CHANNELS.deliveryRequest,
          (id) => void deps.runner.redeliver(id).catch(() => {}),
        ),
      )
      await claims.start()
      // Claimed above; the first pass fans out what was written while no instance ran.
      await passes.request('events')
      passes.every(deps.pollMs ?? 1000, 'all')
    },

    wake,

    /**
     * This process committed outbox events: a running dispatcher fans them out itself (no
     * notice inside the writing transaction; migration 0011); a process without one (the CLI),
     * or an instance without its lease, tells the others after the commit.
     */
    eventsWritten(): void {
      if (!stopped && deps.lease.held()) {
        void wake('events')
        return
      }
      deps.database.notify(CHANNELS.webhookWork, '').catch((e) =>
        deps.logger.warn("webhook work not announced; the dispatchers' poll will find it", {
          error: String(e),
        }),
      )
    },

    /**
     * Tests: one pass, then every attempt due now (on the scheduler's clock) made and committed.
     */
    async runOnce() {
      await wake()
      deps.scheduler.runDue()
      await deps.runner.settled()
    },

    /**
     * Stops claiming; attempts in flight finish (at most the send time-out); the rest are handed
     * back for another instance.
     */
    async stop() {
      if (stopped) return
      stopped = true
      await claims.stop(async () => {
        for (const u of unlisten.splice(0)) await u()
        await passes.stop()
        await deps.runner.stop()
      })
    },
  }
}

export type WebhookDispatcher = ReturnType<typeof createWebhookDispatcher>
