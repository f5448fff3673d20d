import { and, assign, fromPromise, not, setup } from 'xstate'
import { inertDeadlineTimer, type TimerFired } from './deadline-timer.ts'

/**
 * One webhook delivery: one event to one endpoint (docs/decisions/0032-webhook-delivery-actors.md,
 * docs/decisions/0018-webhook-request.md, docs/decisions/0019-retry-schedule.md,
 * docs/decisions/0020-manual-retry-completed-only.md). Pure: no I/O and no clock; time arrives in
 * events (`at`, epoch ms). Whoever runs it (src/webhooks/) provides the two children and persists
 * the snapshot after every step.
 *
 *   scheduled --timer fires--> attempting --succeeded--> succeeded
 *                                         --failed--> scheduled (next offset, or the receiver's Retry-After within the schedule's bounds) | failed
 *   scheduled --timer fires, event older than maxAgeMs--> failed (the 7-day rule, no request)
 *   attempting --endpoint disabled, no request made--> scheduled (again in pauseMs; nothing counted)
 *   succeeded | failed --redeliver.requested--> scheduled, due now, manual (a failure ends in failed)
 *   scheduled --redeliver.requested--> scheduled, due now
 *
 * `scheduled` invokes `backoffTimer` with the absolute time of the next attempt
 * (machines/deadline-timer.ts), so a restored delivery waits for its original time and an
 * overdue one is attempted at once. `attempting` invokes `sendAttempt`, a promise that makes
 * one HTTP request and answers whether it succeeded; it never rejects for an HTTP failure.
 */

/** Stored with every persisted snapshot; bump it when a stored snapshot would no longer fit. */
export const DELIVERY_MACHINE_VERSION = 2

/**
 * docs/decisions/0019-retry-schedule.md variant B: retries 1 min, 5 min, 30 min, 2 h and 8 h after
 * the previous failure.
 */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [
  60_000, 300_000, 1_800_000, 7_200_000, 28_800_000,
]
/**
 * Events older than this are never retried automatically (docs/integrating/webhooks.md#retries).
 */
export const MAX_EVENT_AGE_MS = 7 * 24 * 3_600_000

export type AttemptTrigger = 'scheduled' | 'manual'
export type DeliveryStatus = 'pending' | 'retrying' | 'success' | 'failed'
export type FailedBecause = 'exhausted' | 'too_old' | 'manual_attempt_failed'

export interface DeliveryContext {
  /** Tells the provided `sendAttempt` which delivery it sends. */
  deliveryId: string
  /** Delays between automatic attempts; `length + 1` automatic attempts in all. */
  scheduleMs: number[]
  maxAgeMs: number
  /** When the event happened: the 7-day rule counts from here. */
  eventAt: number
  /** Every attempt made, automatic and manual (the dashboard's retry count is this minus one). */
  attempts: number
  /** Automatic attempts made; the schedule is indexed by this. */
  automaticAttempts: number
  /**
   * Absolute time of the next attempt (the one in flight while attempting); null when none is due.
   */
  nextAttemptAt: number | null
  /** What started the attempt in flight (or the last one). */
  trigger: AttemptTrigger
  /** Why the delivery stopped failing over: exhausted, too old, or a failed manual attempt. */
  failedBecause: FailedBecause | null
}

export interface DeliveryInput {
  deliveryId: string
  eventAt: number
  /** First attempt's time: now for a fresh event. */
  firstAttemptAt: number
  scheduleMs?: readonly number[]
  maxAgeMs?: number
  /** A delivery resumed from a record made without this machine: the attempts it already had. */
  resumed?: Pick<DeliveryContext, 'attempts' | 'automaticAttempts' | 'trigger'>
}

/** What `sendAttempt` is given: which attempt of which delivery, and when it was due. */
export interface AttemptInput {
  deliveryId: string
  number: number
  trigger: AttemptTrigger
  scheduledFor: number | null
}

/** What `sendAttempt` answers: whether the endpoint acknowledged, and when the attempt ended. */
export interface AttemptOutput {
  ok: boolean
  at: number
  /**
   * No request was made because the endpoint is disabled: nothing counts, the delivery waits for
   * it.
   */
  paused?: boolean
  /** The receiver asked for this wait (`Retry-After` on a 429 or 503), in ms. */
  retryAfterMs?: number
}

/** How often a delivery to a disabled endpoint looks again whether it was enabled. */
export const PAUSED_RECHECK_MS = 60_000

/** Events from outside the actor. */
export type DeliveryEvent = { type: 'redeliver.requested'; at: number }

type Ended = { type: string; output?: AttemptOutput }

const tooOld = (c: DeliveryContext, at: number) => at - c.eventAt > c.maxAgeMs
/** When the attempt in flight ended; a `sendAttempt` that threw ends at its due time. */
const endedAt = (c: DeliveryContext, e: Ended) => e.output?.at ?? c.nextAttemptAt ?? c.eventAt
/**
 * The wait before the next automatic attempt: the schedule's, or the receiver's `Retry-After`
 * kept within the schedule's bounds (its shortest and longest delays).
 */
export function retryDelayMs(
  c: Pick<DeliveryContext, 'scheduleMs' | 'automaticAttempts'>,
  retryAfterMs: number | undefined,
): number {
  const scheduled = c.scheduleMs[c.automaticAttempts]
  if (retryAfterMs === undefined || !Number.isFinite(retryAfterMs)) return scheduled
  return Math.min(Math.max(retryAfterMs, Math.min(...c.scheduleMs)), Math.max(...c.scheduleMs))
}
const counted = (c: DeliveryContext) => ({
  attempts: c.attempts + 1,
  automaticAttempts: c.automaticAttempts + (c.trigger === 'scheduled' ? 1 : 0),
})

/**
 * Where a failed attempt leads: a manual one ends the delivery, an automatic one retries while it
 * may.
 */
const afterFailure = [
  { guard: 'manual', target: 'failed', actions: 'recordManualFailure' },
  { guard: 'canRetry', target: 'scheduled', actions: 'scheduleRetry' },
  { target: 'failed', actions: 'recordLastFailure' },
] as const

export const webhookDeliveryMachine = setup({
  types: {
    context: {} as DeliveryContext,
    input: {} as DeliveryInput,
    events: {} as DeliveryEvent | TimerFired,
  },
  actors: {
    backoffTimer: inertDeadlineTimer,
    /** Never settles here: the runtime provides the real request. */
    sendAttempt: fromPromise<AttemptOutput, AttemptInput>(() => new Promise(() => {})),
  },
  actions: {
    waitWhilePaused: assign({
      nextAttemptAt: ({ context, event }) => endedAt(context, event as Ended) + PAUSED_RECHECK_MS,
    }),
    scheduleManual: assign({
      trigger: 'manual' as const,
      nextAttemptAt: ({ event }) => (event as DeliveryEvent).at,
      failedBecause: null,
    }),
    recordSuccess: assign(({ context }) => ({
      ...counted(context),
      nextAttemptAt: null,
      failedBecause: null,
    })),
    recordManualFailure: assign(({ context }) => ({
      ...counted(context),
      nextAttemptAt: null,
      failedBecause: 'manual_attempt_failed' as const,
    })),
    scheduleRetry: assign(({ context, event }) => ({
      ...counted(context),
      nextAttemptAt:
        endedAt(context, event as Ended) +
        retryDelayMs(context, (event as Ended).output?.retryAfterMs),
    })),
    recordLastFailure: assign(({ context }) => ({
      ...counted(context),
      nextAttemptAt: null,
      failedBecause:
        context.automaticAttempts + 1 > context.scheduleMs.length
          ? ('exhausted' as const)
          : ('too_old' as const),
    })),
  },
  guards: {
    manual: ({ context }) => context.trigger === 'manual',
    tooOld: ({ context, event }) => tooOld(context, (event as TimerFired).at),
    succeeded: ({ event }) => (event as Ended).output?.ok === true,
    paused: ({ event }) => (event as Ended).output?.paused === true,
    /** Another automatic attempt exists and would still fall inside the 7-day window. */
    canRetry: ({ context, event }) => {
      const after = context.automaticAttempts + 1
      return (
        after <= context.scheduleMs.length &&
        !tooOld(
          context,
          endedAt(context, event as Ended) +
            retryDelayMs(context, (event as Ended).output?.retryAfterMs),
        )
      )
    },
  },
}).createMachine({
  id: 'webhookDelivery',
  context: ({ input }) => ({
    deliveryId: input.deliveryId,
    scheduleMs: [...(input.scheduleMs ?? DEFAULT_RETRY_SCHEDULE_MS)],
    maxAgeMs: input.maxAgeMs ?? MAX_EVENT_AGE_MS,
    eventAt: input.eventAt,
    attempts: input.resumed?.attempts ?? 0,
    automaticAttempts: input.resumed?.automaticAttempts ?? 0,
    nextAttemptAt: input.firstAttemptAt,
    trigger: input.resumed?.trigger ?? 'scheduled',
    failedBecause: null,
  }),
  initial: 'scheduled',
  states: {
    scheduled: {
      invoke: {
        src: 'backoffTimer',
        input: ({ context }) => ({ at: context.nextAttemptAt ?? context.eventAt }),
      },
      on: {
        'timer.fired': [
          // Manual attempts stay possible at any age (spec: "a manual retry remains possible").
          {
            guard: and([not('manual'), 'tooOld']),
            target: 'failed',
            actions: assign({ nextAttemptAt: null, failedBecause: 'too_old' }),
          },
          { target: 'attempting' },
        ],
        // Re-entered, so the timer is armed again for the new time.
        'redeliver.requested': {
          target: 'scheduled',
          reenter: true,
          actions: assign({ nextAttemptAt: ({ event }) => event.at }),
        },
      },
    },
    attempting: {
      invoke: {
        src: 'sendAttempt',
        input: ({ context }) => ({
          deliveryId: context.deliveryId,
          number: context.attempts + 1,
          trigger: context.trigger,
          scheduledFor: context.nextAttemptAt,
        }),
        onDone: [
          { guard: 'succeeded', target: 'succeeded', actions: 'recordSuccess' },
          // A disabled endpoint uses up no attempts: the delivery waits for it to be enabled (still
          // subject to the 7-day rule).
          { guard: 'paused', target: 'scheduled', actions: 'waitWhilePaused' },
          ...afterFailure,
        ],
        // `sendAttempt` answers failures as values; if it throws anyway, that counts as a failed
        // attempt.
        onError: afterFailure,
      },
    },
    succeeded: {
      on: { 'redeliver.requested': { target: 'scheduled', actions: 'scheduleManual' } },
    },
    failed: {
      on: { 'redeliver.requested': { target: 'scheduled', actions: 'scheduleManual' } },
    },
  },
})

export type DeliveryState = 'scheduled' | 'attempting' | 'succeeded' | 'failed'

/** The delivery-log status the dashboard filters by (spec: success, failed, retrying). */
export function deliveryStatus(state: DeliveryState, c: DeliveryContext): DeliveryStatus {
  if (state === 'succeeded') return 'success'
  if (state === 'failed') return 'failed'
  return c.attempts === 0 ? 'pending' : 'retrying'
}
