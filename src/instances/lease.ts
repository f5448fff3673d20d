import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { InstanceRepo } from './instance.repo.ts'

/** What the owners of actors (transactions, webhook deliveries) do as the lease goes. */
export interface LeaseListener {
  /** After each renewal: take over the work of instances whose lease ended. */
  tick?(): Promise<void>
  /**
   * The lease could not be renewed in time: another instance may take over, so stop every actor
   * now.
   */
  lost?(): void
  /** Renewed again after a loss: resume what is still recorded as ours. */
  regained?(): Promise<void>
}

export interface InstanceLease {
  readonly instanceId: string
  /** Whether this instance may run actors now: its lease was renewed and has not run out. */
  held(): boolean
  listen(listener: LeaseListener): () => void
  /** Takes the lease (once; later calls wait for the first). */
  start(): Promise<void>
  /**
   * Gives the lease up: other instances may take over at once. Call after the actors are stopped.
   */
  stop(): Promise<void>
}

/** Instances whose lease ended more than this long ago are forgotten. */
const FORGET_AFTER_MS = 86_400_000
const PRUNE_EVERY_TICKS = 100

/**
 * One lease per instance (a row in `instances`), renewed every sixth of `leaseMs`: it covers
 * every transaction and delivery actor the instance runs, so holding 100,000 actors costs one
 * row update. Other instances take an instance's work over once its lease has ended, so this
 * instance stops its own actors a third of a lease before that moment when it has not renewed
 * (its database is away, or a renewal hangs): two instances never run the same actor at once,
 * as long as clocks agree to within that margin and the event loop is never blocked for longer.
 * Renewing twice as often as that margin lets one renewal be late (a slow statement, a timer
 * fired late on a busy machine) by up to half a lease before the actors are stopped.
 */
export function createInstanceLease(deps: {
  repo: InstanceRepo
  clock: Clock
  logger: Logger
  instanceId: string
  leaseMs: number
  /**
   * The database is this process's alone (the embedded PGlite: its DATA_DIR is locked), so no other
   * instance can ever take over: a late renewal (a long pause, a starved CPU) stops nothing, since
   * stopping actors then protects nothing and would only send again what was in flight.
   */
  exclusive?: boolean
}): InstanceLease {
  const listeners = new Set<LeaseListener>()
  const every = Math.max(100, Math.floor(deps.leaseMs / 6))
  // How long before its end the lease counts as lost when it has not been renewed.
  const margin = Math.max(every, Math.floor(deps.leaseMs / 3))
  // When the last renewal that succeeded was sent, on the process's own monotonic clock: the
  // lease it wrote ends `leaseMs` after that, whatever the injected clock says (tests move it).
  let renewedAt = 0
  let lost = false
  let timer: ReturnType<typeof setInterval> | null = null
  let started: Promise<void> | null = null
  let renewing: Promise<void> | null = null
  let working: Promise<void> | null = null
  let ticks = 0

  /**
   * Stops every actor when the lease may run out before it is renewed: a renewal failed or hangs.
   */
  function checkExpiry() {
    if (deps.exclusive || lost || performance.now() - renewedAt < deps.leaseMs - margin) return
    lost = true
    deps.logger.error('instance lease lost: actors stopped until it is renewed', {
      instanceId: deps.instanceId,
    })
    for (const l of listeners) l.lost?.()
  }

  /** Runs listener work (taking over, resuming) without holding up the next renewal. */
  function work(run: (l: LeaseListener) => Promise<void> | undefined, what: string) {
    if (working) return
    working = Promise.all(
      [...listeners].map((l) => run(l)?.catch((e) => deps.logger.warn(what, { error: String(e) }))),
    )
      .then(() => {})
      .finally(() => (working = null))
  }

  async function renew() {
    const sentAt = deps.clock.now()
    const sentAtReal = performance.now()
    try {
      await deps.repo.renew(deps.instanceId, new Date(sentAt + deps.leaseMs), new Date(sentAt))
    } catch (e) {
      deps.logger.warn('instance lease not renewed', {
        instanceId: deps.instanceId,
        error: String(e),
      })
      checkExpiry()
      return
    }
    renewedAt = sentAtReal
    if (ticks++ % PRUNE_EVERY_TICKS === 0)
      await deps.repo.prune(new Date(sentAt - FORGET_AFTER_MS)).catch(() => {})
    // A renewal that took long may have written a lease already running out: resume only after a
    // prompt one.
    if (lost && performance.now() - sentAtReal > margin) return
    if (lost) {
      lost = false
      deps.logger.info('instance lease renewed again: resuming actors', {
        instanceId: deps.instanceId,
      })
      working = null
      work((l) => l.regained?.(), 'resuming after a lease loss failed')
    } else {
      work((l) => l.tick?.(), 'taking over work failed')
    }
  }

  return {
    instanceId: deps.instanceId,
    held: () => started !== null && !lost,
    listen(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    start() {
      started ??= (async () => {
        const now = deps.clock.now()
        const sentAtReal = performance.now()
        await deps.repo.renew(deps.instanceId, new Date(now + deps.leaseMs), new Date(now))
        renewedAt = sentAtReal
        timer = setInterval(() => {
          // Also while a renewal hangs (a dead connection, a pool busy): the lease runs out all the
          // same.
          checkExpiry()
          if (!renewing) renewing = renew().finally(() => (renewing = null))
        }, every)
        ;(timer as { unref?: () => void }).unref?.()
      })()
      return started
    },
    async stop() {
      if (timer) clearInterval(timer)
      timer = null
      await renewing
      await working
      if (started) await deps.repo.remove(deps.instanceId).catch(() => {})
    },
  }
}
