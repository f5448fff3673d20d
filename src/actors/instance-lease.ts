import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { InstanceRepo } from './instance.repo.ts'

/** What the owners of actors (transactions, webhook deliveries) do as the lease goes. */
export interface LeaseListener {
  /** After each renewal: take over the work of instances whose lease ended. */
  tick?(): Promise<void>
  /** The lease could not be renewed in time: another instance may take over, so stop every actor now. */
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
  /** Gives the lease up: other instances may take over at once. Call after the actors are stopped. */
  stop(): Promise<void>
}

/** Instances whose lease ended more than this long ago are forgotten. */
const FORGET_AFTER_MS = 86_400_000
const PRUNE_EVERY_TICKS = 100

/**
 * One lease per instance (a row in `instances`), renewed every third of `leaseMs`: it covers
 * every transaction and delivery actor the instance runs, so holding 100,000 actors costs one
 * row update. Other instances take an instance's work over once its lease has ended, so this
 * instance stops its own actors a third of a lease before that moment when it cannot renew
 * (its database is away): two instances never run the same actor at once, as long as clocks
 * agree to within that margin and the event loop is never blocked for longer than it.
 */
export function createInstanceLease(deps: { repo: InstanceRepo; clock: Clock; logger: Logger; instanceId: string; leaseMs: number }): InstanceLease {
  const listeners = new Set<LeaseListener>()
  const every = Math.max(100, Math.floor(deps.leaseMs / 3))
  let validUntil = 0
  let lost = false
  let timer: ReturnType<typeof setInterval> | null = null
  let started: Promise<void> | null = null
  let renewing: Promise<void> | null = null
  let working: Promise<void> | null = null
  let ticks = 0

  async function renew() {
    const sentAt = deps.clock.now()
    try {
      await deps.repo.renew(deps.instanceId, new Date(sentAt + deps.leaseMs), new Date(sentAt))
    } catch (e) {
      deps.logger.warn('instance lease not renewed', { instanceId: deps.instanceId, error: String(e) })
      if (!lost && deps.clock.now() >= validUntil - every) {
        lost = true
        deps.logger.error('instance lease lost: actors stopped until it is renewed', { instanceId: deps.instanceId })
        for (const l of listeners) l.lost?.()
      }
      return
    }
    validUntil = sentAt + deps.leaseMs
    if (lost) {
      lost = false
      deps.logger.info('instance lease renewed again: resuming actors', { instanceId: deps.instanceId })
      for (const l of listeners) await l.regained?.().catch((e) => deps.logger.warn('resuming after a lease loss failed', { error: String(e) }))
    }
    if (ticks++ % PRUNE_EVERY_TICKS === 0) await deps.repo.prune(new Date(sentAt - FORGET_AFTER_MS)).catch(() => {})
    // Taking over other instances' work does not hold up the next renewal.
    if (!working) {
      working = Promise.all([...listeners].map((l) => l.tick?.().catch((e) => deps.logger.warn('taking over work failed', { error: String(e) }))))
        .then(() => {})
        .finally(() => (working = null))
    }
  }

  return {
    instanceId: deps.instanceId,
    // Lost only when renewing failed until the lease ran out; a clock moved by hand (tests) does not fence.
    held: () => started !== null && !lost,
    listen(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    start() {
      started ??= (async () => {
        const now = deps.clock.now()
        await deps.repo.renew(deps.instanceId, new Date(now + deps.leaseMs), new Date(now))
        validUntil = now + deps.leaseMs
        timer = setInterval(() => {
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
