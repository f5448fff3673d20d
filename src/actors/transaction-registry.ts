import { createActor, type Actor } from 'xstate'
import { FINAL_STATUSES, MACHINE_VERSION, transactionMachine, type TxContext, type TxEvent, type TxInput, type TxStatus } from '../../machines/transaction.machine.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { TransactionRow } from '../modules/transactions/transaction.repo.ts'
import type { LifecycleRepo, StoredActor } from './lifecycle.repo.ts'
import { EVENT_OF_STATUS, projectRow, webhookData } from './projection.ts'
import type { Scheduler } from './scheduler.ts'

type TxActor = Actor<typeof transactionMachine>

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
const CLAIM_BATCH = 5000
/** After a failed expiry (database unreachable), the next try. */
const EXPIRY_RETRY_MS = 5_000
/** Lease ticks between checks that every resident actor is still this instance's. */
const RECONCILE_EVERY = 10

/** An actor restored from a persisted snapshot (its input is inside the snapshot). */
const fromStored = (snapshot: unknown): TxActor =>
  createActor(transactionMachine, { snapshot } as unknown as Parameters<typeof createActor<typeof transactionMachine>>[1])

/** A persisted snapshot, in the parts the registry reads. */
interface Persisted {
  value: TxStatus
  children?: Record<string, { src?: string; snapshot?: { input?: { at?: number } } }>
}

/** The deadline the machine's invoked `expiryTimer` child waits for, if the state has one. */
function deadlineOf(snapshot: Persisted): number | null {
  for (const child of Object.values(snapshot.children ?? {})) {
    if (child.src === 'expiryTimer' && typeof child.snapshot?.input?.at === 'number') return child.snapshot.input.at
  }
  return null
}

/**
 * What this instance keeps of each transaction it runs: the persisted snapshot as compact
 * JSON, its version, and the timer the machine asked for. The XState actor itself is
 * materialized from the snapshot for each event and dropped after (bench/RESULTS.md: a running
 * actor costs ~5 KiB of heap, a resident one well under 1 KiB).
 */
interface Resident {
  snapshot: string
  version: number
  status: TxStatus
  cancelTimer: (() => void) | null
}

/**
 * One actor per active transaction (issue 3), run by exactly one instance.
 *
 * Every event, from the API, the pay page, the chain or the actor's own expiry timer, goes
 * through `apply()`: the actor is materialized from its stored snapshot, refuses or takes the
 * event, and the result is committed with the row, snapshot, timeline entry and outbox event by
 * one statement guarded by the row's version; only then does the resident copy
 * move. So the database never lags, a refused event changes nothing, and a stale instance
 * (split brain) cannot apply a transition twice: its commit finds another version, it reloads,
 * and the event is judged again.
 *
 * Timers: the machine invokes `expiryTimer` with the absolute deadline in the states that have
 * one; the registry reads that child from the snapshot and arms the shared scheduler, so a
 * restored actor waits for its original deadline and an overdue one fires at once (R13).
 *
 * Any instance can apply an event; when the actor is resident elsewhere, its owner is told
 * through NOTIFY and reloads. Each instance renews one lease (its row in `instances`) every
 * third of `leaseMs`; the actors of an instance whose lease ended are claimed by the others.
 */
export function createTransactionRegistry(deps: RegistryDeps) {
  const resident = new Map<string, Resident>()
  const queues = new Map<string, Promise<unknown>>()
  let leaseTimer: ReturnType<typeof setInterval> | null = null
  let unlisten: (() => Promise<void>) | null = null
  let stopped = false

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

  /** The deadline passed: apply the expiry; if the database failed, try again shortly. */
  function fireExpiry(id: string) {
    const retry = (why: string) => {
      deps.logger.warn('expiry not applied; retrying', { transactionId: id, reason: why })
      const r = resident.get(id)
      if (r && !stopped) r.cancelTimer = deps.scheduler.at(deps.clock.now() + EXPIRY_RETRY_MS, () => fireExpiry(id))
    }
    apply(id, { type: 'expiry.reached', at: deps.clock.now() }).then(
      // A conflict means the event no longer applies (paid, cancelled, moved on): nothing to do.
      (r) => (!r.ok && r.code !== 'conflict' ? retry(r.message) : undefined),
      (e) => retry(String(e)),
    )
  }

  /** Keeps (or replaces) the resident copy of an active transaction and arms its timer. */
  function keep(id: string, stored: Persisted | string, version: number) {
    drop(id)
    const text = typeof stored === 'string' ? stored : JSON.stringify(stored)
    const snapshot = typeof stored === 'string' ? (JSON.parse(stored) as Persisted) : stored
    if (FINAL_STATUSES.includes(snapshot.value)) return
    const at = deadlineOf(snapshot)
    resident.set(id, { snapshot: text, version, status: snapshot.value, cancelTimer: at === null ? null : deps.scheduler.at(at, () => fireExpiry(id)) })
  }

  function drop(id: string) {
    resident.get(id)?.cancelTimer?.()
    resident.delete(id)
  }

  /** Replaces the resident copy with what the database holds (after a conflict or a NOTIFY). */
  async function reload(id: string) {
    const stored = await deps.repo.load(id)
    if (!stored || stored.owner !== deps.instanceId) return drop(id)
    keep(id, stored.snapshot as Persisted, stored.version)
  }

  function restore(stored: StoredActor) {
    if (stored.machineVersion !== MACHINE_VERSION) {
      deps.logger.error('stored actor from another machine version; left for a migration', { transactionId: stored.transactionId, machineVersion: stored.machineVersion })
      return
    }
    keep(stored.transactionId, stored.snapshot as Persisted | string, stored.version)
  }

  /** Applies `event` to a transaction; a refusal is a `conflict` denial and changes nothing. */
  function apply(id: string, event: TxEvent): Promise<Outcome<TransactionRow>> {
    return serialize(id, async () => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const mine = resident.get(id)
        const stored = mine ? { snapshot: JSON.parse(mine.snapshot), version: mine.version } : await deps.repo.load(id)
        if (!stored) return deny('conflict', 'This transaction is already in a final status')
        const actor = fromStored(stored.snapshot).start()
        const before = actor.getSnapshot()
        if (!before.can(event)) {
          actor.stop()
          return deny('conflict', `A transaction in status ${String(before.value)} does not accept ${event.type}`)
        }
        actor.send(event)
        const after = actor.getSnapshot()
        const snapshot = actor.getPersistedSnapshot() as unknown as Persisted
        actor.stop()
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
          if (mine) await reload(id)
          continue
        }
        if (mine) keep(id, snapshot, row.version)
        else await deps.database.notify(CHANNEL, id)
        return ok(row)
      }
      return deny('conflict', 'The transaction kept changing concurrently; try again')
    })
  }

  let ticks = 0
  let ticking: Promise<void> | null = null
  async function leaseTick(all: boolean) {
    const now = deps.clock.now()
    await deps.repo.renew(deps.instanceId, new Date(now + deps.leaseMs), new Date(now))
    // Now and then (and whenever this instance may have been away), drop actors another
    // instance took over; versions already stop a stale copy from applying anything.
    if (ticks++ % RECONCILE_EVERY === 0) {
      // Only actors resident before the query can be judged by it: one created meanwhile is
      // ours even though the query did not see it.
      const before = [...resident.keys()]
      const owned = await deps.repo.owned(deps.instanceId)
      for (const id of before) if (!owned.has(id)) void serialize(id, async () => drop(id))
      await deps.repo.pruneInstances(new Date(now - 86_400_000))
    }
    for (;;) {
      const claimed = await deps.repo.claim(deps.instanceId, new Date(now), CLAIM_BATCH, all)
      for (const s of claimed) {
        if (queues.has(s.transactionId)) await serialize(s.transactionId, async () => restore(s))
        else restore(s)
      }
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

    /** Who runs a new transaction's actor: this instance. */
    lease() {
      return { owner: deps.instanceId }
    },

    /** Takes on the actor of a transaction this instance just created and committed. */
    adopt(id: string, snapshot: unknown, version: number) {
      void serialize(id, async () => keep(id, snapshot as Persisted, version))
    },

    /** Restores every actor this instance may run, then keeps its leases and takes over dead instances' actors. */
    async start() {
      unlisten = await deps.database.listen(CHANNEL, (id) => {
        serialize(id, () => reload(id)).catch((e) => deps.logger.warn('reload after NOTIFY failed', { transactionId: id, error: String(e) }))
      })
      await leaseTick(deps.singleInstance)
      leaseTimer = setInterval(() => {
        if (stopped || ticking) return
        ticking = leaseTick(false)
          .catch((e) => deps.logger.warn('lease renewal failed', { error: String(e) }))
          .finally(() => (ticking = null))
      }, Math.max(100, Math.floor(deps.leaseMs / 3)))
      ;(leaseTimer as { unref?: () => void }).unref?.()
    },

    /** Stops every actor and hands their leases back, so another instance continues at once. */
    async stop() {
      stopped = true
      if (leaseTimer) clearInterval(leaseTimer)
      // A renewal or claim still running could otherwise undo the release below.
      await ticking
      await Promise.all([...queues.values()])
      for (const id of [...resident.keys()]) drop(id)
      await unlisten?.()
      await deps.repo.release(deps.instanceId).catch(() => {})
    },

    /** Number of actors this instance runs. */
    get size() {
      return resident.size
    },

    /** The status of a transaction this instance runs (tests, diagnostics). */
    statusOf(id: string): TxStatus | null {
      return resident.get(id)?.status ?? null
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
