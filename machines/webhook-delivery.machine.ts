import { and, assign, initialTransition, not, setup, transition } from 'xstate'

/**
 * One webhook delivery: one event to one endpoint (issue 5, rulings R18-R20). Pure: no I/O
 * and no clock; time arrives in events (`at`, epoch ms). The dispatcher keeps the snapshot in
 * the database with `nextAttemptAt` as an absolute deadline, so after a restart, or on another
 * instance, a due attempt runs once and none is lost.
 *
 *   scheduled --attempt.due--> attempting --attempt.succeeded--> succeeded
 *                                         --attempt.failed--> scheduled (next offset) | failed
 *   scheduled --attempt.due, event older than maxAgeMs--> failed (the 7-day rule)
 *   succeeded | failed --redeliver.requested--> scheduled, due now, manual (a failure ends in failed)
 *   scheduled --redeliver.requested--> scheduled, due now
 *
 * A manual redelivery is only a new deadline, so whoever asks for it (dashboard, CLI, another
 * instance) writes the snapshot and any dispatcher makes the attempt.
 */

/** Stored with every persisted snapshot; bump it when a stored snapshot would no longer fit. */
export const DELIVERY_MACHINE_VERSION = 1

/** R19 variant B: retries 1 min, 5 min, 30 min, 2 h and 8 h after the previous failure. */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [60_000, 300_000, 1_800_000, 7_200_000, 28_800_000]
/** Events older than this are never retried automatically (spec, Events). */
export const MAX_EVENT_AGE_MS = 7 * 24 * 3_600_000

export type AttemptTrigger = 'scheduled' | 'manual'
export type DeliveryStatus = 'pending' | 'retrying' | 'success' | 'failed'

export interface DeliveryContext {
  /** Delays between automatic attempts; `length + 1` automatic attempts in all. */
  scheduleMs: number[]
  maxAgeMs: number
  /** When the event happened: the 7-day rule counts from here. */
  eventAt: number
  /** Every attempt made, automatic and manual (the dashboard's retry count is this minus one). */
  attempts: number
  /** Automatic attempts made; the schedule is indexed by this. */
  automaticAttempts: number
  /** Absolute deadline of the next automatic attempt; null when none is due. */
  nextAttemptAt: number | null
  /** What started the attempt in flight (or the last one). */
  trigger: AttemptTrigger
  /** Why the delivery stopped failing over: exhausted, too old, or a failed manual attempt. */
  failedBecause: 'exhausted' | 'too_old' | 'manual_attempt_failed' | null
}

export interface DeliveryInput {
  eventAt: number
  /** First attempt's time: now for a fresh event. */
  firstAttemptAt: number
  scheduleMs?: readonly number[]
  maxAgeMs?: number
}

export type DeliveryEvent =
  | { type: 'attempt.due'; at: number }
  | { type: 'attempt.succeeded'; at: number }
  | { type: 'attempt.failed'; at: number }
  | { type: 'redeliver.requested'; at: number }

const tooOld = (c: DeliveryContext, at: number) => at - c.eventAt > c.maxAgeMs
const nextOffset = (c: DeliveryContext) => c.scheduleMs[c.automaticAttempts - 1]

export const webhookDeliveryMachine = setup({
  types: {
    context: {} as DeliveryContext,
    input: {} as DeliveryInput,
    events: {} as DeliveryEvent,
  },
  actions: {
    scheduleManual: assign({ trigger: 'manual' as const, nextAttemptAt: ({ event }) => (event as { at: number }).at, failedBecause: null }),
  },
  guards: {
    tooOld: ({ context, event }) => tooOld(context, (event as { at: number }).at),
    manual: ({ context }) => context.trigger === 'manual',
    /** Another automatic attempt exists and would still fall inside the 7-day window. */
    canRetry: ({ context, event }) => {
      const after = context.automaticAttempts + 1
      if (after > context.scheduleMs.length) return false
      const at = (event as { at: number }).at + context.scheduleMs[after - 1]
      return !tooOld(context, at)
    },
  },
}).createMachine({
  id: 'webhookDelivery',
  context: ({ input }) => ({
    scheduleMs: [...(input.scheduleMs ?? DEFAULT_RETRY_SCHEDULE_MS)],
    maxAgeMs: input.maxAgeMs ?? MAX_EVENT_AGE_MS,
    eventAt: input.eventAt,
    attempts: 0,
    automaticAttempts: 0,
    nextAttemptAt: input.firstAttemptAt,
    trigger: 'scheduled',
    failedBecause: null,
  }),
  initial: 'scheduled',
  states: {
    scheduled: {
      on: {
        'attempt.due': [
          // Manual attempts stay possible at any age (spec: "a manual retry remains possible").
          { guard: and([not('manual'), 'tooOld']), target: 'failed', actions: assign({ nextAttemptAt: null, failedBecause: 'too_old' }) },
          { target: 'attempting' },
        ],
        'redeliver.requested': { target: 'scheduled', actions: assign({ nextAttemptAt: ({ event }) => event.at }) },
      },
    },
    attempting: {
      entry: assign({ nextAttemptAt: null }),
      on: {
        'attempt.succeeded': {
          target: 'succeeded',
          actions: assign(({ context }) => ({
            attempts: context.attempts + 1,
            automaticAttempts: context.automaticAttempts + (context.trigger === 'scheduled' ? 1 : 0),
            failedBecause: null,
          })),
        },
        'attempt.failed': [
          {
            guard: 'manual',
            target: 'failed',
            actions: assign(({ context }) => ({ attempts: context.attempts + 1, failedBecause: 'manual_attempt_failed' as const })),
          },
          {
            guard: 'canRetry',
            target: 'scheduled',
            actions: [
              assign(({ context }) => ({ attempts: context.attempts + 1, automaticAttempts: context.automaticAttempts + 1 })),
              assign({ nextAttemptAt: ({ context, event }) => event.at + nextOffset(context) }),
            ],
          },
          {
            target: 'failed',
            actions: assign(({ context, event }) => ({
              attempts: context.attempts + 1,
              automaticAttempts: context.automaticAttempts + 1,
              failedBecause: context.automaticAttempts + 1 > context.scheduleMs.length ? 'exhausted' as const : 'too_old' as const,
            })),
          },
        ],
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

/** What the database keeps of a delivery's actor. */
export interface StoredDelivery {
  state: DeliveryState
  context: DeliveryContext
}

/** A new delivery, due at `input.firstAttemptAt`. */
export function startDelivery(input: DeliveryInput): StoredDelivery {
  const [snapshot] = initialTransition(webhookDeliveryMachine, input)
  return { state: snapshot.value as DeliveryState, context: snapshot.context }
}

/** The delivery after `event`, or null when its current state does not take the event. */
export function stepDelivery(stored: StoredDelivery, event: DeliveryEvent): StoredDelivery | null {
  const snapshot = webhookDeliveryMachine.resolveState({ value: stored.state, context: stored.context })
  if (!snapshot.can(event)) return null
  const [next] = transition(webhookDeliveryMachine, snapshot, event)
  return { state: next.value as DeliveryState, context: next.context }
}
