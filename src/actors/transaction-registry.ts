import { createActor, fromCallback, type Actor } from 'xstate'
import { MACHINE_VERSION, transactionMachine, type TxContext, type TxEvent, type TxInput, type TxStatus } from '../../machines/transaction.machine.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { TransactionRow } from '../modules/transactions/transaction.repo.ts'
import type { LifecycleRepo, StoredActor } from './lifecycle.repo.ts'
import { EVENT_OF_STATUS, projectRow, webhookData } from './projection.ts'
import type { Scheduler } from './scheduler.ts'

type TxActor = Actor<typeof transactionMachine>

/** An actor restored from a persisted snapshot (its input is inside the snapshot). */
const fromStored = (machine: typeof transactionMachine, snapshot: unknown): TxActor =>
  createActor(machine, { snapshot } as unknown as Parameters<typeof createActor<typeof transactionMachine>>[1])

export interface RegistryDeps {
  database: Database
  repo: LifecycleRepo
  clock: Clock
  logger: Logger
  scheduler: Scheduler
  /** This process; leases name it. */
  instanceId: string
  /** How long a lease lasts without renewal: another instance takes over within this. */
  leaseMs: number
  /** PGlite: one instance only, so at start-up every actor is ours whatever its lease says. */
  singleInstance: boolean
}

const CHANNEL = 'actor_changed'
const CLAIM_BATCH = 1000

/**
 * One live XState actor per active transaction owned by this instance (issue 3).
 *
 * Every event, from the API, the pay page, the chain or the actor's own expiry timer, goes
 * through `apply()`: the next state is computed from the stored snapshot by a scratch actor of
 * the same machine (whose timer does nothing), committed with the row, snapshot, timeline
 * entry and outbox event in one database transaction guarded by the row's version, and only
 * then is the event sent to the live actor. So the database never lags the actor, a refused
 * event changes nothing, and a stale instance (split brain) cannot apply a transition twice:
 * its commit finds another version, it reloads, and the event is judged again.
 *
 * Any instance can apply an event; when the actor lives elsewhere, its owner is told through
 * NOTIFY and reloads. Leases (renewed every third of `leaseMs`) decide who runs each actor
 * and therefore its timer; actors of a dead instance are claimed when its leases end.
 */
export function createTransactionRegistry(deps: RegistryDeps) {
  const live = new Map<string, { actor: TxActor; version: number }>()
  const queues = new Map<string, Promise<unknown>>()
  let leaseTimer: ReturnType<typeof setInterval> | null = null
  let unlisten: (() => Promise<void>) | null = null
  let stopped = false

  const runtime = transactionMachine.provide({
    actors: {
      expiryTimer: fromCallback<TxEvent, { transactionId: string; at: number }>(({ input }) =>
        deps.scheduler.at(input.at, () => {
          apply(input.transactionId, { type: 'expiry.reached', at: deps.clock.now() }).then(
            (r) => {
              if (!r.ok && r.code !== 'conflict') deps.logger.warn('expiry not applied', { transactionId: input.transactionId, reason: r.message })
            },
            (e) => deps.logger.error('expiry failed', { transactionId: input.transactionId, error: String(e) }),
          )
        }),
      ),
    },
  })

  /** Runs `fn` after every earlier call for the same transaction has finished. */
  function serialize<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const run = (queues.get(id) ?? Promise.resolve()).then(fn, fn)
    const tail = run.then(() => {}, () => {})
    queues.set(id, tail)
    void tail.then(() => {
      if (queues.get(id) === tail) queues.delete(id)
    })
    return run
  }

  function adopt(id: string, snapshot: unknown, version: number) {
    live.get(id)?.actor.stop()
    const actor = fromStored(runtime, snapshot)
    actor.start()
    if (actor.getSnapshot().status === 'done') {
      actor.stop()
      live.delete(id)
      return
    }
    live.set(id, { actor, version })
  }

  function drop(id: string) {
    live.get(id)?.actor.stop()
    live.delete(id)
  }

  /** Replaces the live actor with what the database holds (after a conflict or a NOTIFY). */
  async function reload(id: string) {
    const stored = await deps.repo.load(id)
    if (!stored || stored.owner !== deps.instanceId) return drop(id)
    if (live.has(id) || stored.owner === deps.instanceId) adopt(id, stored.snapshot, stored.version)
  }

  function restore(stored: StoredActor) {
    if (stored.machineVersion !== MACHINE_VERSION) {
      deps.logger.error('stored actor from another machine version; left for a migration', { transactionId: stored.transactionId, machineVersion: stored.machineVersion })
      return
    }
    adopt(stored.transactionId, stored.snapshot, stored.version)
  }

  /** Applies `event` to a transaction; a refusal is a `conflict` denial and changes nothing. */
  function apply(id: string, event: TxEvent): Promise<Outcome<TransactionRow>> {
    return serialize(id, async () => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const current = live.get(id)
        const stored = current ? { snapshot: current.actor.getPersistedSnapshot(), version: current.version } : await deps.repo.load(id)
        if (!stored) return deny('conflict', 'This transaction is already in a final status')
        const scratch = fromStored(transactionMachine, stored.snapshot).start()
        const before = scratch.getSnapshot()
        if (!before.can(event)) {
          scratch.stop()
          return deny('conflict', `A transaction in status ${String(before.value)} does not accept ${event.type}`)
        }
        scratch.send(event)
        const after = scratch.getSnapshot()
        const snapshot = scratch.getPersistedSnapshot()
        scratch.stop()
        const from = before.value as TxStatus
        const to = after.value as TxStatus
        const now = new Date(deps.clock.now())
        const row = await deps.repo.commitTransition({
          transactionId: id,
          expectedVersion: stored.version,
          patch: projectRow(to, after.context, now),
          snapshot: after.status === 'done' ? null : snapshot,
          machineVersion: MACHINE_VERSION,
          entry: { fromStatus: from, toStatus: to, cause: event.type, details: detailsOf(event, before.context, after.context), at: now },
          outbox: (r) => (from !== to && EVENT_OF_STATUS[to] ? { eventType: EVENT_OF_STATUS[to]!, data: webhookData(r, after.context.failureReason) } : null),
        })
        if (!row) {
          // Someone else moved it on: judge the event again against what they committed.
          if (current) await reload(id)
          continue
        }
        if (current && live.get(id) === current) {
          if (after.status === 'done') drop(id)
          else {
            current.actor.send(event)
            current.version = row.version
          }
        } else {
          await deps.database.notify(CHANNEL, id)
        }
        return ok(row)
      }
      return deny('conflict', 'The transaction kept changing concurrently; try again')
    })
  }

  async function leaseTick(all: boolean) {
    const now = deps.clock.now()
    const until = new Date(now + deps.leaseMs)
    const held = await deps.repo.renew(deps.instanceId, until)
    for (const id of [...live.keys()]) if (!held.has(id)) void serialize(id, async () => drop(id))
    for (;;) {
      const claimed = await deps.repo.claim(deps.instanceId, until, new Date(now), CLAIM_BATCH, all)
      for (const s of claimed) await serialize(s.transactionId, async () => restore(s))
      if (claimed.length < CLAIM_BATCH) break
    }
  }

  return {
    apply,

    /** The persisted initial snapshot of a new transaction (status `created`). */
    initialSnapshot(input: TxInput): unknown {
      const a = createActor(transactionMachine, { input }).start()
      const s = a.getPersistedSnapshot()
      a.stop()
      return s
    },

    /** Who runs a new transaction's actor: this instance, for one lease. */
    lease() {
      return { owner: deps.instanceId, leaseUntil: new Date(deps.clock.now() + deps.leaseMs) }
    },

    /** Starts the actor of a transaction this instance just created and committed. */
    adopt(id: string, snapshot: unknown, version: number) {
      void serialize(id, async () => adopt(id, snapshot, version))
    },

    /** Restores every actor this instance may run, then keeps its leases and takes over dead instances' actors. */
    async start() {
      unlisten = await deps.database.listen(CHANNEL, (id) => void serialize(id, () => reload(id)))
      await leaseTick(deps.singleInstance)
      leaseTimer = setInterval(() => {
        if (!stopped) leaseTick(false).catch((e) => deps.logger.warn('lease renewal failed', { error: String(e) }))
      }, Math.max(100, Math.floor(deps.leaseMs / 3)))
      ;(leaseTimer as { unref?: () => void }).unref?.()
    },

    /** Stops every actor and hands their leases back, so another instance continues at once. */
    async stop() {
      stopped = true
      if (leaseTimer) clearInterval(leaseTimer)
      await Promise.all([...queues.values()])
      for (const id of [...live.keys()]) drop(id)
      await unlisten?.()
      await deps.repo.release(deps.instanceId).catch(() => {})
    },

    /** Number of live actors in this instance. */
    get size() {
      return live.size
    },

    /** The live status of a transaction this instance runs (tests, diagnostics). */
    statusOf(id: string): TxStatus | null {
      return (live.get(id)?.actor.getSnapshot().value as TxStatus | undefined) ?? null
    },
  }
}

export type TransactionRegistry = ReturnType<typeof createTransactionRegistry>

/** What the timeline records about an event: its payload, and what it did to the amounts. */
function detailsOf(event: TxEvent, before: TxContext, after: TxContext): Record<string, unknown> {
  const { type: _, ...payload } = event as TxEvent & Record<string, unknown>
  const details: Record<string, unknown> = { ...payload }
  if (before.received !== after.received) details.received = after.received
  const expected = after.quote ? BigInt(after.quote.tokenAmount) : null
  if (event.type === 'payment.detected' && expected !== null && BigInt(after.received) > expected) {
    details.overpaid_by = (BigInt(after.received) - expected).toString()
  }
  if (after.failureReason && !before.failureReason) details.reason = after.failureReason
  return details
}
