import type { InstanceLease } from '../actors/instance-lease.ts'
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
  /** PGlite: one instance only, so at start-up every unfinished delivery is ours whatever its claim says. */
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
 * Finds the webhook work this instance runs (issue 5, issue 17): outbox events become
 * deliveries (fan-out) claimed by the instance that fans them out, which runs their actors at
 * once; unfinished deliveries nobody runs (made by the CLI, or left by an instance whose lease
 * ended) are claimed with FOR UPDATE SKIP LOCKED by whichever instance looks first. A claim
 * lasts as long as the instance's lease, so a delivery waiting in a local queue cannot be
 * claimed and sent by another instance meanwhile. Wakes when this process commits outbox
 * events, on NOTIFY, on each lease renewal and every `pollMs`.
 */
export function createWebhookDispatcher(deps: DispatcherDeps) {
  const pollMs = deps.pollMs ?? 1000
  const gatherMs = deps.eventsGatherMs ?? 0
  let lastPassAt = -Infinity
  let gathering: ReturnType<typeof setTimeout> | null = null
  const me = deps.lease.instanceId
  let stopped = true
  let running: Promise<void> | null = null
  /** What the pass after the running one must do: nothing, fan out new events only, or also claim. */
  let again: 'none' | 'events' | 'all' = 'none'
  let timer: ReturnType<typeof setInterval> | null = null
  const unlisten: (() => Promise<void>)[] = []
  let unlease: (() => void) | null = null

  /** Runs the actors of deliveries claimed for this instance; one that cannot start gives its claim back. */
  const start = (ds: RunnableDelivery[]) => {
    for (const d of ds) {
      if (stopped || !deps.lease.held()) return
      try {
        deps.runner.run(d)
      } catch (e) {
        deps.logger.error('webhook delivery could not be started; released', {
          deliveryId: d.id,
          error: String(e),
        })
        void deps.repo.releaseOne(d.id, me).catch(() => {})
      }
    }
  }

  /**
   * Starts what is recorded as ours but does not run here: after a restart on the same DATA_DIR,
   * after the lease was regained, or when a step that could not be committed stopped an actor.
   */
  async function adoptStranded() {
    const stranded = (await deps.repo.ownedIds(me)).filter((id) => !deps.runner.has(id))
    start(await deps.repo.owned(me, stranded))
  }

  /** Fans out new outbox events; unless `eventsOnly`, then claims deliveries nobody runs (with `all`, every one not ours). */
  async function pass(o: { all?: boolean; eventsOnly?: boolean } = {}) {
    const all = o.all ?? false
    const now = () => new Date(deps.clock.now())
    for (;;) {
      const r = await deps.repo.fanOut({ limit: BATCH, now: now(), owner: me })
      start(r.deliveries)
      if (r.events < BATCH) break
    }
    // Deliveries made by fan-out are claimed by it: a notice of new events alone has nothing else to claim.
    if (o.eventsOnly) return
    for (;;) {
      const claimed = all
        ? await deps.repo.claimAll({ owner: me, limit: BATCH })
        : await deps.repo.claimFree({ owner: me, now: now(), limit: BATCH })
      start(claimed)
      if (claimed.length < BATCH) break
    }
  }

  /**
   * Runs a pass now, or right after the one in progress: every wake-up during a pass is served
   * by one next pass. `events`: only new outbox events were announced (one notice per created
   * transaction or transition), so the pass only fans out.
   */
  function wake(what: 'events' | 'all' = 'all'): Promise<void> {
    if (stopped || !deps.lease.held()) return running ?? Promise.resolve()
    if (running) {
      if (again !== 'all') again = what
      return running
    }
    running = (async () => {
      let next: 'none' | 'events' | 'all' = what
      do {
        again = 'none'
        lastPassAt = performance.now()
        try {
          await pass({ eventsOnly: next === 'events' })
        } catch (e) {
          deps.logger.warn('webhook dispatch pass failed; retrying', { error: String(e) })
        }
        next = again
      } while (next !== 'none' && !stopped)
    })().finally(() => (running = null))
    return running
  }

  /** A notice of new outbox events: a pass now, or gathered with the next ones (eventsGatherMs). */
  function eventsAnnounced() {
    const wait = lastPassAt + gatherMs - performance.now()
    if (wait <= 0 || running) return void wake('events')
    gathering ??= setTimeout(() => {
      gathering = null
      void wake('events')
    }, wait)
  }

  return {
    async start() {
      stopped = false
      unlisten.push(
        await deps.database.listen(
          CHANNELS.webhookWork,
          (payload) => (payload === WEBHOOK_WORK_DELIVERIES ? void wake() : eventsAnnounced()),
          () => void wake(),
        ),
      )
      unlisten.push(
        await deps.database.listen(
          CHANNELS.deliveryRequest,
          (id) => void deps.runner.redeliver(id).catch(() => {}),
        ),
      )
      let ticks = 0
      unlease = deps.lease.listen({
        tick: async () => {
          if (ticks++ % ADOPT_EVERY === 0) await adoptStranded()
          await wake()
        },
        lost: () => deps.runner.stopAll(),
        regained: adoptStranded,
      })
      await deps.lease.start()
      // Ours from before a restart on the same DATA_DIR (src/server/instance-id.ts), then the rest nobody runs.
      await adoptStranded()
      running = pass({ all: deps.singleInstance }).finally(() => (running = null))
      await running
      timer = setInterval(() => void wake(), pollMs)
      ;(timer as { unref?: () => void }).unref?.()
    },

    wake,

    /**
     * This process committed outbox events: a running dispatcher fans them out itself (no
     * notice inside the writing transaction; migration 0011); a process without one (the CLI),
     * or an instance without its lease, tells the others after the commit.
     */
    eventsWritten(): void {
      if (!stopped && deps.lease.held()) {
        eventsAnnounced()
        return
      }
      deps.database.notify(CHANNELS.webhookWork, '').catch((e) =>
        deps.logger.warn("webhook work not announced; the dispatchers' poll will find it", {
          error: String(e),
        }),
      )
    },

    /** Tests: one pass, then every attempt due now (on the scheduler's clock) made and committed. */
    async runOnce() {
      await wake()
      deps.scheduler.runDue()
      await deps.runner.settled()
    },

    /** Stops claiming; attempts in flight finish (at most the send time-out); the rest are handed back for another instance. */
    async stop() {
      if (stopped) return
      stopped = true
      if (timer) clearInterval(timer)
      if (gathering) clearTimeout(gathering)
      unlease?.()
      for (const u of unlisten.splice(0)) await u()
      await running
      await deps.runner.stop()
      await deps.repo.release(me).catch(() => {})
    },
  }
}

export type WebhookDispatcher = ReturnType<typeof createWebhookDispatcher>
