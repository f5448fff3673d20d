import {
  createActor,
  fromPromise,
  transition,
  type Actor,
  type InspectionEvent,
  type SnapshotFrom,
} from 'xstate'
import {
  DELIVERY_MACHINE_VERSION,
  deliveryStatus,
  webhookDeliveryMachine,
  type AttemptInput,
  type AttemptOutput,
  type DeliveryContext,
  type DeliveryInput,
  type DeliveryState,
} from '../../machines/webhook-delivery.machine.ts'
import { deadlineTimer } from '../actors/deadline-timer.ts'
import { restoreActor } from '../actors/restore-actor.ts'
import type { Scheduler } from '../actors/scheduler.ts'
import type { ChangeFeed } from '../db/change-feed.ts'
import { createWorkLoop } from '../instances/work-loop.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { Metrics } from '../metrics/metrics.ts'
import type {
  AttemptRecord,
  DeliveryRepo,
  DeliveryStep,
  RunnableDelivery,
} from './delivery.repo.ts'
import type { EndpointHealth } from './endpoint-health.ts'
import type { EndpointService, SendingInfo } from './endpoint.service.ts'
import { standardTimestamp, webhookBody, webhookHeaders } from './payload.ts'
import { createSendQueue, DEFAULT_SEND_LIMITS, type SendQueueOptions } from './send-queue.ts'
import { postWebhook, retryAfterMs, type SendOutcome } from './sender.ts'
import {
  checkDeliveryTarget,
  systemResolver,
  type AddressRules,
  type Resolver,
} from './url-guard.ts'
import { signStandardWebhook, signWebhookBody } from './verify-webhook/index.mjs'
import { commerceBody, commerceHeaders } from './commerce-format.ts'

type DeliveryActor = Actor<typeof webhookDeliveryMachine>
type DeliverySnapshot = SnapshotFrom<typeof webhookDeliveryMachine>

export interface RunnerDeps {
  repo: DeliveryRepo
  endpoints: Pick<EndpointService, 'forSending'>
  /** Judges each attempt's outcome for the endpoint's health (disables dead endpoints). */
  health: Pick<EndpointHealth, 'attempted'>
  metrics: Pick<Metrics, 'webhookAttempt' | 'webhookFirstAttemptLag'>
  changes: ChangeFeed
  clock: Clock
  logger: Logger
  scheduler: Scheduler
  instanceId: string
  scheduleMs: readonly number[]
  /**
   * docs/decisions/0021-webhook-endpoints-and-private-addresses.md: where test endpoints may send
   * (WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS).
   */
  addressRules: AddressRules
  resolver?: Resolver
  sendLimits?: SendQueueOptions
  timeoutMs?: number
  /** XState's inspection, for every delivery actor (tests, diagnostics). */
  inspect?: (event: InspectionEvent) => void
  /**
   * The Commerce event a delivery to a Commerce-format endpoint carries
   * (docs/decisions/0065-coinbase-commerce-drop-in.md); null when it has none. Absent: such
   * deliveries fail.
   */
  commerceEvent?: (d: RunnableDelivery) => Promise<Record<string, unknown> | null>
}

interface Running {
  actor: DeliveryActor
  delivery: RunnableDelivery
  /** The attempt the last `sendAttempt` made, persisted with the step it led to. */
  attempt: AttemptRecord | null
  /**
   * The context of the last step handed to persistence: a snapshot with the same context is not a
   * step.
   */
  persistedContext: DeliveryContext
  /** The commit of the last step. */
  committed: Promise<unknown>
  /**
   * The state of a step committed before the actor hears its event: the next snapshot must be it,
   * and is not persisted again.
   */
  ahead: DeliveryState | null
}

/** What asking a delivery to act now came to. */
export type RedeliverAnswer = 'accepted' | 'busy' | 'not_running'

/**
 * The actor's input for a delivery without a snapshot of this machine: new, or recorded by machine
 * version 1 as `{ state, context }`.
 */
function inputOf(d: RunnableDelivery, scheduleMs: readonly number[]): DeliveryInput {
  const old =
    d.machineVersion === 1
      ? (d.snapshot as { context?: Partial<DeliveryContext> } | null)?.context
      : undefined
  return {
    deliveryId: d.id,
    eventAt: d.eventAt,
    firstAttemptAt: d.nextAttemptAt ?? d.eventAt,
    scheduleMs: old?.scheduleMs ?? scheduleMs,
    maxAgeMs: old?.maxAgeMs,
    resumed: old
      ? {
          attempts: old.attempts ?? 0,
          automaticAttempts: old.automaticAttempts ?? 0,
          trigger: old.trigger ?? 'scheduled',
        }
      : undefined,
  }
}

/** Whether a stored delivery has a snapshot this machine restores. */
const restorable = (d: Pick<RunnableDelivery, 'snapshot' | 'machineVersion'>) =>
  d.snapshot !== null && d.machineVersion === DELIVERY_MACHINE_VERSION

/**
 * The actor of a stored delivery, constructed and not started: from its snapshot, or started afresh
 * from its row.
 */
export function deliveryActor<M extends typeof webhookDeliveryMachine>(
  machine: M,
  d: RunnableDelivery,
  scheduleMs: readonly number[],
  inspect?: (event: InspectionEvent) => void,
): Actor<M> {
  return restorable(d)
    ? restoreActor(machine, d.snapshot, inspect)
    : (createActor(machine as typeof webhookDeliveryMachine, {
        input: inputOf(d, scheduleMs),
        inspect,
      }) as unknown as Actor<M>)
}

/** What the delivery log shows of a delivery in this snapshot. */
export function deliveryProjection(
  snapshot: DeliverySnapshot,
): Pick<DeliveryStep, 'status' | 'attempts' | 'nextAttemptAt' | 'failedBecause'> {
  const c = snapshot.context
  return {
    status: deliveryStatus(snapshot.value as DeliveryState, c),
    attempts: c.attempts,
    nextAttemptAt: c.nextAttemptAt,
    failedBecause: c.failedBecause,
  }
}

/**
 * Runs webhook deliveries as actors (docs/decisions/0032-webhook-delivery-actors.md): each delivery
 * in flight or waiting for a retry is a running `webhook-delivery.machine.ts` actor on the instance
 * that claimed it. Its `backoffTimer` waits for the absolute time of the next attempt
 * (docs/decisions/0019-retry-schedule.md) on the shared scheduler; its `sendAttempt` queues the
 * signed POST behind the per-endpoint limits (send-queue.ts) and makes it, unless the actor was
 * stopped meanwhile. After each step (an attempt's outcome, a redelivery, the 7-day rule) the
 * snapshot, its projection and the attempt row are committed, in batches (group commit), where this
 * instance still holds the claim; a finished delivery's actor stops and its claim is given back.
 */
export function createDeliveryRunner(deps: RunnerDeps) {
  const resolver = deps.resolver ?? systemResolver
  const queue = createSendQueue(deps.sendLimits ?? DEFAULT_SEND_LIMITS)
  const running = new Map<string, Running>()
  const endpointCache = new Map<string, Promise<SendingInfo | null>>()
  const unsubscribe = deps.changes.subscribe((c) => {
    if (c.kind === 'all') endpointCache.clear()
    else if (c.kind === 'endpoint') endpointCache.delete(c.id)
  })
  const machine = webhookDeliveryMachine.provide({
    actors: {
      backoffTimer: deadlineTimer(deps.scheduler, deps.clock),
      // The outcome reaches the actor only once the step it leads to is committed (commitAhead).
      sendAttempt: fromPromise<AttemptOutput, AttemptInput>(({ input, signal, self }) => {
        const judged = send(input, signal).then((output) =>
          outcomeCommitted(input.deliveryId, self.id, output),
        )
        // Settling and stopping wait for the attempt in flight until its step is committed.
        const entry = running.get(input.deliveryId)
        if (entry) entry.committed = judged
        // Not recorded: the actor was stopped and never hears of it.
        return judged.then((output) => output ?? new Promise<never>(() => {}))
      }),
    },
  })

  function endpoint(id: string): Promise<SendingInfo | null> {
    let p = endpointCache.get(id)
    if (!p) {
      p = deps.endpoints.forSending(id)
      p.catch(() => endpointCache.delete(id))
      endpointCache.set(id, p)
    }
    return p
  }

  /**
   * The one HTTP request of an attempt, or the reason none was made; null when the endpoint is
   * disabled (no attempt at all). Never throws.
   */
  async function request(
    d: RunnableDelivery,
    number: number,
    sentAt: Date,
  ): Promise<{ body: string; outcome: SendOutcome; info: SendingInfo | null } | null> {
    const info = await endpoint(d.endpointId)
    const commerce = info?.format === 'commerce'
    // Rendered only for a delivery that will be sent (a disabled endpoint gets no attempt).
    const event = commerce && info.enabled ? ((await deps.commerceEvent?.(d)) ?? null) : null
    const body = commerce
      ? commerceBody({
          deliveryId: d.id,
          scheduledFor: sentAt,
          attempt: number,
          event: event ?? {},
        })
      : webhookBody(d.eventType, d.data, sentAt, d.test)
    const refused = (error: string) => ({
      body,
      info,
      outcome: {
        ok: false,
        statusCode: null,
        responseBody: null,
        error,
        durationMs: 0,
        retryAfter: null,
      },
    })
    if (!info) return refused('endpoint deleted')
    if (!info.enabled) return null
    if (commerce && !event) return refused('no Commerce event for this delivery')
    const target = await checkDeliveryTarget(info.url, info.mode, deps.addressRules, resolver)
    if (!target.ok) return refused(`refused: url ${target.reason}`)
    const headers = commerce
      ? commerceHeaders(body, info.secret)
      : webhookHeaders({
          signature: signWebhookBody(body, info.secret),
          standardSignature: signStandardWebhook(
            d.eventId,
            standardTimestamp(sentAt),
            body,
            info.secret,
          ),
          eventId: d.eventId,
          sentAt,
          attempt: number,
          test: d.test,
          sequence: d.sequence,
        })
    const outcome = await postWebhook(info.url, body, headers, deps.timeoutMs)
    // docs/decisions/0021-webhook-endpoints-and-private-addresses.md: what a private address
    // answers is never kept (nor shown), only its status and timing.
    return {
      body,
      info,
      outcome: target.privateAddress ? { ...outcome, responseBody: null } : outcome,
    }
  }

  /**
   * The provided `sendAttempt`: waits for a send slot, then makes the attempt unless the actor
   * stopped meanwhile.
   */
  function send(input: AttemptInput, signal: AbortSignal): Promise<AttemptOutput> {
    // Registered by run() before the actor starts, so every attempt finds its delivery.
    const entry = running.get(input.deliveryId)!
    return new Promise((resolve) => {
      queue.push(entry.delivery.endpointId, entry.delivery.id, async () => {
        if (signal.aborted) return null
        try {
          const startedAt = new Date(deps.clock.now())
          const made = await request(entry.delivery, input.number, startedAt)
          if (made === null) {
            resolve({ ok: false, at: deps.clock.now(), paused: true })
            return null
          }
          const { body, outcome, info } = made
          entry.attempt = {
            number: input.number,
            trigger: input.trigger,
            scheduledFor: input.scheduledFor === null ? null : new Date(input.scheduledFor),
            startedAt,
            durationMs: outcome.durationMs,
            statusCode: outcome.statusCode,
            requestBody: body,
            responseBody: outcome.responseBody,
            error: outcome.error,
          }
          deps.metrics.webhookAttempt(outcome.ok)
          if (input.number === 1)
            deps.metrics.webhookFirstAttemptLag(
              (startedAt.getTime() - entry.delivery.eventAt) / 1000,
            )
          if (info) await deps.health.attempted(entry.delivery.endpointId, info, outcome)
          const at = deps.clock.now()
          const wait = retryAfterMs(outcome.retryAfter, at)
          resolve({ ok: outcome.ok, at, ...(wait === null ? {} : { retryAfterMs: wait }) })
          return outcome.ok
        } catch (e) {
          // Resolving the endpoint failed (database away): the machine counts a failed attempt,
          // nothing was sent.
          deps.logger.warn('webhook attempt could not be made', {
            deliveryId: entry.delivery.id,
            error: String(e),
          })
          resolve({ ok: false, at: deps.clock.now() })
          return false
        }
      })
    })
  }

  // Group commit on the shared work loop: steps arriving while a commit runs go together in the
  // next one, one step per delivery per batch (a second step of one delivery waits for the next).
  let pending: {
    step: DeliveryStep
    done: (recorded: boolean) => void
    fail: (e: unknown) => void
  }[] = []
  const commits = createWorkLoop({ run: commitBatch })
  function persist(step: DeliveryStep): Promise<boolean> {
    return new Promise((done, fail) => {
      pending.push({ step, done, fail })
      void commits.request()
    })
  }
  async function commitBatch() {
    const seen = new Set<string>()
    const batch: typeof pending = []
    const later: typeof pending = []
    for (const p of pending) {
      ;(seen.has(p.step.id) ? later : batch).push(p)
      seen.add(p.step.id)
    }
    pending = later
    if (later.length > 0) void commits.request()
    if (batch.length === 0) return
    try {
      const recorded = await deps.repo.commitSteps(
        deps.instanceId,
        batch.map((b) => b.step),
      )
      for (const b of batch) b.done(recorded.has(b.step.id))
    } catch (e) {
      for (const b of batch) b.fail(e)
    }
  }

  /**
   * Hands a step to the group commit; a step this instance could not record stops the actor (the
   * delivery runs again from its last recorded step, wherever it is claimed).
   */
  function persistStep(id: string, entry: Running, step: DeliveryStep): Promise<boolean> {
    const committed = persist(step).then(
      (recorded) => {
        if (!recorded)
          deps.logger.warn('webhook delivery step not recorded: this instance no longer holds it', {
            deliveryId: id,
          })
        if (!recorded) stop(id, entry)
        return recorded
      },
      (e) => {
        // The database is away: the step is lost, the actor stops, and the delivery runs again from
        // its last persisted step once claimed.
        deps.logger.warn('webhook delivery step not committed; it is retried from the last one', {
          deliveryId: id,
          error: String(e),
        })
        stop(id, entry)
        return false
      },
    )
    entry.committed = committed
    return committed
  }

  /**
   * The way every hosted machine moves (as the transaction registry does): `event` is judged by
   * the machine on the actor's snapshot with XState's pure `transition()`, the step it leads to
   * is committed with its snapshot (and the attempt it reports), and only then may the actor
   * hear it. A step that is not recorded (the claim went to another instance, the database is
   * away) never reaches the actor, so it can never go on to another attempt the database does
   * not know of: a crash or a lost claim between the two loses nothing and doubles nothing.
   */
  async function commitAhead(
    id: string,
    entry: Running,
    event: Parameters<typeof machine.transition>[1],
  ): Promise<DeliveryState | null> {
    const [after] = transition(machine, entry.actor.getSnapshot(), event)
    const state = after.value as DeliveryState
    const step: DeliveryStep = {
      id,
      ...deliveryProjection(after),
      snapshot: machine.getPersistedSnapshot(after),
      finished: state === 'succeeded' || state === 'failed',
      attempt: entry.attempt,
    }
    entry.attempt = null
    const recorded = await persistStep(id, entry, step)
    return recorded && running.get(id) === entry ? state : null
  }

  /**
   * An attempt's outcome, for the actor once the step it leads to is committed; null when it was
   * not.
   */
  async function outcomeCommitted(
    id: string,
    childId: string,
    output: AttemptOutput,
  ): Promise<AttemptOutput | null> {
    const entry = running.get(id)
    // The event XState sends the parent when this promise resolves: judged before it is.
    const done = { type: `xstate.done.actor.${childId}`, output, actorId: childId }
    const state = entry ? await commitAhead(id, entry, done as never) : null
    // Stopped meanwhile, or the step not recorded (the actor was stopped).
    if (state === null) return null
    entry!.ahead = state
    return output
  }

  /**
   * After a move: a step committed ahead is checked (a deterministic machine cannot disagree; if
   * it does, the database is the truth and the actor stops, to be resumed from it); any other
   * step (the 7-day rule, judged when the actor's own timer fires, with no request made) is
   * persisted now. A finished delivery, or one whose claim was lost, stops.
   */
  function onSnapshot(id: string, entry: Running, snapshot: DeliverySnapshot) {
    if (running.get(id) !== entry) return
    const state = snapshot.value as DeliveryState
    const finished = state === 'succeeded' || state === 'failed'
    if (entry.ahead !== null) {
      const expected = entry.ahead
      entry.ahead = null
      entry.persistedContext = snapshot.context
      if (state !== expected) {
        deps.logger.error('delivery actor and committed step disagree; stopped', {
          deliveryId: id,
          actor: state,
          committed: expected,
        })
        stop(id, entry)
      } else if (finished) stop(id, entry)
      return
    }
    if (state === 'attempting' || snapshot.context === entry.persistedContext) return
    entry.persistedContext = snapshot.context
    const step: DeliveryStep = {
      id,
      ...deliveryProjection(snapshot),
      snapshot: entry.actor.getPersistedSnapshot(),
      finished,
      attempt: entry.attempt,
    }
    entry.attempt = null
    void persistStep(id, entry, step).then((recorded) => recorded && finished && stop(id, entry))
  }

  function stop(id: string, entry?: Running) {
    const r = running.get(id)
    if (!r || (entry && r !== entry)) return
    r.actor.stop()
    running.delete(id)
  }

  return {
    /**
     * Starts the actor of a delivery this instance claimed (a second call for one already running
     * does nothing).
     */
    run(d: RunnableDelivery) {
      if (running.has(d.id)) return
      const actor = deliveryActor(machine, d, deps.scheduleMs, deps.inspect)
      const entry: Running = {
        actor,
        delivery: d,
        attempt: null,
        persistedContext: actor.getSnapshot().context,
        committed: Promise.resolve(),
        ahead: null,
      }
      running.set(d.id, entry)
      actor.subscribe((s) => onSnapshot(d.id, entry, s))
      actor.start()
    },

    /**
     * A manual redelivery of a delivery whose actor runs here: accepted once its step is committed.
     */
    async redeliver(id: string): Promise<RedeliverAnswer> {
      const entry = running.get(id)
      if (!entry) return 'not_running'
      const event = { type: 'redeliver.requested' as const, at: deps.clock.now() }
      const before = entry.actor.getSnapshot()
      if (!before.can(event)) return 'busy'
      const state = await commitAhead(id, entry, event)
      if (state === null) return 'not_running'
      // Its own timer moved it meanwhile (an attempt began): that attempt's step follows the
      // committed one.
      if (entry.actor.getSnapshot() !== before) return 'accepted'
      entry.ahead = state
      entry.actor.send(event)
      return 'accepted'
    },

    /** Every delivery actor running here. */
    runningIds: (): string[] => [...running.keys()],

    has: (id: string) => running.has(id),

    /** Number of delivery actors running here (unfinished deliveries this instance sends). */
    get size() {
      return running.size
    },

    /** Number of attempts waiting for a send slot. */
    get queued() {
      return queue.queued
    },

    /** Resolves when no attempt is queued or in flight and every step so far is committed. */
    async settled() {
      for (;;) {
        await queue.idle()
        await commits.idle()
        await Promise.all([...running.values()].map((r) => r.committed))
        if (queue.queued === 0 && !commits.busy && pending.length === 0) return
      }
    },

    /** Stops every actor now, persisting nothing more (the lease was lost). */
    stopAll() {
      queue.clear()
      for (const id of [...running.keys()]) stop(id)
    },

    /**
     * Shutdown: queued attempts are dropped, those in flight finish (at most the send time-out) and
     * are committed, then every actor stops.
     */
    async stop() {
      for (const id of queue.clear()) stop(id)
      await queue.idle()
      await commits.idle()
      await Promise.all([...running.values()].map((r) => r.committed))
      for (const id of [...running.keys()]) stop(id)
      unsubscribe()
    },
  }
}

export type DeliveryRunner = ReturnType<typeof createDeliveryRunner>
