import type { Metrics } from '../metrics/metrics.ts'
import {
  createActor,
  transition,
  type Actor,
  type InspectionEvent,
  type SnapshotFrom,
} from 'xstate'
import type { TimerFired } from '../../machines/deadline-timer.ts'
import {
  MACHINE_VERSION,
  transactionMachine,
  type TxContext,
  type TxEvent,
  type TxStatus,
} from '../../machines/transaction.machine.ts'
import { CHANNELS } from '../db/channels.ts'
import type { Database } from '../db/client.ts'
import type { TransactionRow } from '../db/schema.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import { webhookData, webhookEventOf } from '../webhooks/payload.ts'
import { deadlineTimer } from './deadline-timer.ts'
import { createClaims, type Claims } from '../instances/claims.ts'
import type { InstanceLease } from '../instances/lease.ts'
import type { LifecycleRepo, NewTransaction, StoredActor } from './lifecycle.repo.ts'
import { projectRow } from './projection.ts'
import { restoreActor } from './restore-actor.ts'
import { keyedTurns } from '../lib/keyed-turns.ts'
import type { Scheduler } from './scheduler.ts'

type TxActor = Actor<typeof transactionMachine>
type TxSnapshot = SnapshotFrom<typeof transactionMachine>

export interface RegistryDeps {
  database: Pick<Database, 'listen' | 'notify'>
  repo: LifecycleRepo
  lease: InstanceLease
  clock: Clock
  logger: Logger
  scheduler: Scheduler
  /** PGlite: one instance only, so at start-up every actor is ours whatever its owner says. */
  singleInstance: boolean
  /** XState's inspection, for every actor this registry runs (tests, diagnostics). */
  inspect?: (event: InspectionEvent) => void
  /** Counts every status entered by a transition or creation committed here. */
  metrics?: Pick<Metrics, 'transactionEntered'>
}

/**
 * What a transaction needs to be created: its row and what the first timeline entry and the
 * idempotency record say.
 */
export type CreateRequest = Omit<
  NewTransaction,
  'snapshot' | 'machineVersion' | 'owner' | 'eventData'
>

/**
 * A committed change of a transaction, heard by this instance: its own commits and, by NOTIFY,
 * every other instance's. `resync`: the listening connection came back from a loss, so changes
 * may have been missed; whatever depends on them should look again.
 */
export type TransactionChange =
  | {
      id: string
      version: number
      /** Committed by this process (not heard of by NOTIFY). */
      here: boolean
      /**
       * The commit wrote an outbox event (webhook work to fan out); told only for commits made
       * here.
       */
      outbox: boolean
    }
  | { resync: true }

/**
 * Sent on every commit (several instances) or to the owner when another instance committed a
 * transition of its actor.
 */
interface ActorChange {
  id: string
  version: number
  event?: TxEvent
}

const CLAIM_BATCH = 5000
/** Lease ticks between checks that every running actor is still this instance's, at its version. */
const RECONCILE_EVERY = 10
/**
 * NOTIFY payloads must stay under 8000 bytes; larger changes are sent without the event (the owner
 * reloads).
 */
const MAX_NOTIFY_BYTES = 7000

/**
 * One running XState actor per active transaction this instance owns
 * (docs/decisions/0027-transaction-actors.md).
 *
 * Every event, from the API, the pay page, the chain or the actor's own timer, goes through
 * `apply()`. The event is judged by the machine against the actor's snapshot with XState's pure
 * `transition()`; a refused event changes nothing. An accepted one is committed first (row,
 * snapshot, timeline entry and outbox event, one statement guarded by the row's version), and
 * only then sent to the running actor, so a subscriber never sees a state the database does not
 * hold, and a stale copy (split brain) cannot apply a transition twice: its commit finds another
 * version, it reloads, and the event is judged again. At a final status the actor stops.
 *
 * Timers: the machine invokes its `expiryTimer` child with the absolute deadline from its
 * context; provided here over the shared scheduler and the injected clock. When it fires, the
 * machine's `requestExpiry` action (provided here too) has the registry apply `expiry.reached`
 * like any event. A restored actor restarts its child, so it waits for the original deadline,
 * or fires at once (docs/decisions/0013-absolute-deadlines.md).
 *
 * Several instances: each active transaction's actor runs on the one instance recorded as its
 * owner, while that instance's lease lives (src/instances/lease.ts). An event reaching
 * another instance is judged on the stored snapshot and committed the same way; the owner is
 * told through NOTIFY and sends the same event to its actor (or reloads it when it missed one).
 * Actors of an instance whose lease ended are claimed by the others.
 */
export function createTransactionRegistry(deps: RegistryDeps) {
  const machine = transactionMachine.provide({
    actors: { expiryTimer: deadlineTimer(deps.scheduler, deps.clock) },
    // The machine's answer to its timer, provided here rather than listened for per actor (a
    // listener each would cost ~0.6 KiB per running actor; bench/RESULTS.md).
    actions: {
      requestExpiry: ({ context, event }) =>
        expire(context.transactionId, (event as TimerFired).at),
    },
  })
  const running = new Map<string, { actor: TxActor; version: number }>()
  const me = deps.lease.instanceId
  let unlisten: (() => Promise<void>) | null = null
  let stopped = false
  const changeListeners = new Set<(change: TransactionChange) => void>()
  const announce = (change: TransactionChange) => {
    for (const fn of changeListeners) fn(change)
  }

  /** Runs `fn` after every earlier call for the same transaction has finished. */
  const serialize = keyedTurns()

  /** The deadline of a running actor passed: its expiry is applied like any event. */
  function expire(id: string, at: number) {
    apply(id, { type: 'expiry.reached', at }).then(
      // A conflict means the expiry no longer applies (paid, cancelled); anything else: the timer
      // fires again.
      (r) =>
        !r.ok && r.code !== 'conflict'
          ? deps.logger.warn('expiry not applied; retrying', {
              transactionId: id,
              reason: r.message,
            })
          : undefined,
      (e) =>
        deps.logger.warn('expiry not applied; retrying', { transactionId: id, error: String(e) }),
    )
  }

  /** Starts the actor of a transaction this instance owns. */
  function run(id: string, actor: TxActor, version: number) {
    actor.start()
    running.set(id, { actor, version })
  }

  function stopRunning(id: string) {
    running.get(id)?.actor.stop()
    running.delete(id)
  }

  /**
   * A running actor from a stored snapshot; a snapshot of another machine version is refused loudly
   * and left alone.
   */
  function restore(stored: StoredActor) {
    if (stopped || !deps.lease.held()) return
    if (stored.machineVersion !== MACHINE_VERSION) {
      // Left free for an instance that can run it (claims only take this version's actors);
      // start-up lists such actors as errors.
      deps.logger.warn(
        'stored actor from another machine version; released for an instance that can run it',
        { transactionId: stored.transactionId, machineVersion: stored.machineVersion },
      )
      void deps.repo.releaseOne(stored.transactionId, me).catch(() => {})
      return
    }
    stopRunning(stored.transactionId)
    run(stored.transactionId, restoreActor(machine, stored.snapshot, deps.inspect), stored.version)
  }

  /**
   * Brings the running actor to what the database holds (after a conflict, or a change it missed).
   */
  async function reload(id: string) {
    const stored = await deps.repo.load(id)
    if (!stored || stored.owner !== me || stopped) return stopRunning(id)
    if (running.get(id)?.version !== stored.version) restore(stored)
  }

  /**
   * Commits `after` as the transition from `before` caused by `event`; null when the version moved
   * on.
   */
  function commit(
    id: string,
    version: number,
    before: TxSnapshot,
    after: TxSnapshot,
    event: TxEvent,
    current?: TransactionRow,
  ) {
    const from = before.value as TxStatus
    const to = after.value as TxStatus
    const now = new Date(deps.clock.now())
    return deps.repo.commitTransition({
      transactionId: id,
      expectedVersion: version,
      patch: projectRow(to, after.context, now),
      snapshot: after.status === 'done' ? null : machine.getPersistedSnapshot(after),
      machineVersion: MACHINE_VERSION,
      current,
      entry: {
        fromStatus: from,
        toStatus: to,
        cause: event.type,
        details: detailsOf(event, before.context, after.context),
        at: now,
      },
      outbox: (row) => {
        const eventType = webhookEventOf(event.type, from, to)
        return eventType ? { eventType, data: webhookData(row, after.context.failureReason) } : null
      },
    })
  }

  /** Moves this instance's running actor on by an event already committed. */
  function advance(
    id: string,
    entry: { actor: TxActor; version: number },
    event: TxEvent,
    version: number,
    expected: TxStatus | null,
  ) {
    // Stopped meanwhile (the lease was lost): the database holds the change, whoever runs the actor
    // next starts from it.
    if (running.get(id) !== entry) return
    entry.actor.send(event)
    entry.version = version
    const now = entry.actor.getSnapshot()
    if (expected !== null && now.value !== expected) {
      // Cannot happen with a deterministic machine; if it does, the database is the truth.
      deps.logger.error('actor and committed transition disagree; reloading', {
        transactionId: id,
        actor: String(now.value),
        committed: expected,
      })
      void serialize(id, () => reload(id)).catch((e) =>
        deps.logger.warn('reload failed', { transactionId: id, error: String(e) }),
      )
    } else if (now.status !== 'active') {
      running.delete(id)
    }
  }

  /** Applies `event` to a transaction; a refusal is a `conflict` denial and changes nothing. */
  function apply(id: string, event: TxEvent): Promise<Outcome<TransactionRow>> {
    return serialize(id, async () => {
      for (let attempt = 0; attempt < 3; attempt++) {
        const mine = running.get(id)
        let before: TxSnapshot
        let version: number
        let owner: string | null = me
        let current: TransactionRow | undefined
        if (mine) {
          before = mine.actor.getSnapshot()
          version = mine.version
        } else {
          const stored = await deps.repo.load(id)
          if (!stored) return deny('conflict', 'This transaction is already in a final status')
          if (stored.machineVersion !== MACHINE_VERSION) {
            deps.logger.error('event refused: stored actor from another machine version', {
              transactionId: id,
              machineVersion: stored.machineVersion,
              event: event.type,
            })
            return deny(
              'unavailable',
              'This transaction cannot be changed by this version of the service',
            )
          }
          // Judged on the stored snapshot; the actor is constructed, never started.
          before = restoreActor(machine, stored.snapshot).getSnapshot()
          version = stored.version
          owner = stored.owner
          current = stored.row
        }
        let judged: { can: boolean; after?: TxSnapshot }
        try {
          judged = before.can(event)
            ? { can: true, after: transition(machine, before, event)[0] }
            : { can: false }
        } catch (e) {
          // A guard or action threw (a bug, or an event no validation caught): nothing is
          // committed, the actor stays as it was.
          deps.logger.error('event refused: the machine failed while taking it', {
            transactionId: id,
            event: event.type,
            error: String(e),
          })
          return deny('unavailable', 'This event could not be applied; nothing was changed')
        }
        if (!judged.can) {
          // Our running copy may not know yet of a transition another instance just committed
          // (its NOTIFY is on the way): refuse only what the database's own version refuses.
          if (mine && (await deps.repo.load(id))?.version !== mine.version) {
            await reload(id)
            continue
          }
          return deny(
            'conflict',
            `A transaction in status ${String(before.value)} does not accept ${event.type}`,
          )
        }
        const after = judged.after!
        const row = await commit(id, version, before, after, event, current)
        if (!row) {
          // Someone else moved it on: judge the event again against what they committed.
          if (mine) await reload(id)
          continue
        }
        if (after.value !== before.value) deps.metrics?.transactionEntered(String(after.value))
        if (mine) advance(id, mine, event, row.version, after.value as TxStatus)
        else if (owner !== null) await notifyOthers({ id, version: row.version, event })
        // Other instances hear every commit, so their pay-page streams of this transaction move on
        // too.
        if ((mine || owner === null) && !deps.singleInstance)
          void notifyOthers({ id, version: row.version }).catch((e) =>
            deps.logger.warn('change not announced to other instances', {
              transactionId: id,
              error: String(e),
            }),
          )
        announce({
          id,
          version: row.version,
          here: true,
          outbox:
            webhookEventOf(event.type, before.value as TxStatus, after.value as TxStatus) !== null,
        })
        return ok(row)
      }
      return deny('conflict', 'The transaction kept changing concurrently; try again')
    })
  }

  async function notifyOthers(change: ActorChange) {
    const payload = JSON.stringify(change)
    await deps.database.notify(
      CHANNELS.transactionActor,
      Buffer.byteLength(payload) <= MAX_NOTIFY_BYTES
        ? payload
        : JSON.stringify({ id: change.id, version: change.version }),
    )
  }

  /** Another instance committed a transition of one of our actors. */
  function changed(payload: string) {
    let change: ActorChange
    try {
      change = JSON.parse(payload) as ActorChange
    } catch {
      return
    }
    announce({ id: change.id, version: change.version, here: false, outbox: false })
    void serialize(change.id, async () => {
      const mine = running.get(change.id)
      if (!mine || mine.version >= change.version) return
      if (
        change.event &&
        mine.version === change.version - 1 &&
        mine.actor.getSnapshot().can(change.event)
      )
        advance(change.id, mine, change.event, change.version, null)
      else await reload(change.id)
    }).catch((e) =>
      deps.logger.warn('reload after NOTIFY failed', {
        transactionId: change.id,
        error: String(e),
      }),
    )
  }

  /**
   * Drops actors taken over by another instance, reloads any that moved on without us hearing of
   * it, and starts any recorded as ours that does not run (its start failed, or it was stopped).
   */
  async function reconcile() {
    // Only actors running before the query can be judged by it: one started meanwhile is ours even
    // though the query did not see it.
    const before = new Map([...running.entries()].map(([id, r]) => [id, r.version] as const))
    const owned = await deps.repo.owned(me)
    const settle = (id: string) =>
      void serialize(id, () => reload(id)).catch((e) =>
        deps.logger.warn('reload failed', { transactionId: id, error: String(e) }),
      )
    for (const [id, version] of before) if (owned.get(id) !== version) settle(id)
    for (const id of owned.keys())
      if (!before.has(id) && !running.has(id) && !serialize.busy(id)) settle(id)
  }

  const claims: Claims = createClaims<StoredActor>({
    lease: deps.lease,
    clock: deps.clock,
    logger: deps.logger,
    what: 'transaction actor',
    batchSize: CLAIM_BATCH,
    reconcileEvery: RECONCILE_EVERY,
    singleInstance: deps.singleInstance,
    work: {
      batch: {
        claim: ({ all, limit, now }) =>
          all ? deps.repo.claimAll(me, limit) : deps.repo.claimFree(me, now, limit),
        take: async (s) => {
          try {
            if (serialize.busy(s.transactionId)) await serialize(s.transactionId, () => restore(s))
            else restore(s)
          } catch (e) {
            running.delete(s.transactionId)
            throw e
          }
        },
        releaseOne: (s) => deps.repo.releaseOne(s.transactionId, me),
        describe: (s) => ({ transactionId: s.transactionId }),
      },
      // Ours from before a restart on the same DATA_DIR (src/server/instance-id.ts), or from before
      // the lease was lost.
      resume: async (): Promise<void> => claims.take(await deps.repo.ownedActors(me)),
      reconcile,
      drop: () => {
        for (const id of [...running.keys()]) stopRunning(id)
      },
      releaseAll: () => deps.repo.release(me),
    },
  })

  return {
    apply,

    /**
     * Creates a transaction: its actor's first snapshot is committed with the row, timeline
     * entry, outbox event and idempotency record (one statement), then the actor starts here.
     */
    async create(request: CreateRequest): Promise<'created' | 'key_taken' | 'number_taken'> {
      const { row } = request
      // Constructed, not started: nothing of it runs unless the transaction is committed.
      const actor = createActor(machine, {
        input: { transactionId: row.id, expiresAt: row.expiresAt.getTime() },
        inspect: deps.inspect,
      })
      const owner = deps.lease.held() && !stopped ? me : null
      const outcome = await deps.repo.insertCreated({
        ...request,
        snapshot: actor.getPersistedSnapshot(),
        machineVersion: MACHINE_VERSION,
        owner,
        eventData: webhookData(row),
      })
      if (outcome === 'created') {
        deps.metrics?.transactionEntered('created')
        announce({ id: row.id, version: row.version, here: true, outbox: true })
      }
      if (outcome === 'created' && owner !== null) {
        // Should it fail to start, the reconcile on a later lease tick starts it from the database.
        void serialize(row.id, () => (stopped ? undefined : run(row.id, actor, row.version))).catch(
          (e) =>
            deps.logger.error('new actor did not start', {
              transactionId: row.id,
              error: String(e),
            }),
        )
      }
      return outcome
    },

    /**
     * Records on the timeline what happened to a transaction in a final status without moving it
     * (docs/decisions/0015-confirmations-and-reorgs.md: a reorg that took back the payment of a
     * completed transaction); the operator acts.
     */
    async noteAfterFinal(
      id: string,
      cause: string,
      details: Record<string, unknown>,
      eventType: string | null = null,
    ): Promise<void> {
      const version = await serialize(id, () =>
        deps.repo.appendNote(id, cause, details, new Date(deps.clock.now()), eventType),
      )
      // The note leaves the version as it was: streams already at it read nothing again.
      if (eventType !== null) announce({ id, version, here: true, outbox: true })
    },

    /**
     * Takes the lease, restores every actor this instance may run, then keeps taking over dead
     * instances' actors.
     */
    async start() {
      unlisten = await deps.database.listen(CHANNELS.transactionActor, changed, () => {
        announce({ resync: true })
        void reconcile().catch(() => {})
      })
      await claims.start()
      // Actors no instance of this version will run: said loudly, one by one (their events are
      // refused the same way).
      for (const o of await deps.repo.otherVersions(100)) {
        deps.logger.error('stored actor from another machine version; not run', {
          transactionId: o.transactionId,
          machineVersion: o.machineVersion,
        })
      }
    },

    /** Stops every actor and hands them back, so another instance continues at once. */
    async stop() {
      stopped = true
      await claims.stop(async () => {
        await serialize.idle()
        for (const id of [...running.keys()]) stopRunning(id)
        await unlisten?.()
      })
    },

    /** Number of actors this instance runs. */
    get size() {
      return running.size
    },

    /**
     * Every committed change this instance hears of (see TransactionChange); returns the
     * unsubscribe.
     */
    onChange(fn: (change: TransactionChange) => void): () => void {
      changeListeners.add(fn)
      return () => changeListeners.delete(fn)
    },

    /** The ids of the transactions whose actors run here. */
    runningIds: (): string[] => [...running.keys()],

    /** The status of a transaction whose actor runs here, or null. */
    statusOf(id: string): TxStatus | null {
      return (running.get(id)?.actor.getSnapshot().value as TxStatus | undefined) ?? null
    },

    /**
     * The running actor of a transaction, to subscribe to or `waitFor` (null when it runs
     * elsewhere or is final). Events go through `apply()`, never `send()`: only committed
     * transitions may reach it.
     */
    actorOf(id: string): TxActor | null {
      return running.get(id)?.actor ?? null
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
