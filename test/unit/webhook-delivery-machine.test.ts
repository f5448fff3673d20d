import { describe, expect, test } from 'bun:test'
import { createActor, fromPromise, transition, type Actor } from 'xstate'
import {
  DEFAULT_RETRY_SCHEDULE_MS,
  deliveryStatus,
  MAX_EVENT_AGE_MS,
  PAUSED_RECHECK_MS,
  retryDelayMs,
  webhookDeliveryMachine,
  type AttemptInput,
  type AttemptOutput,
  type DeliveryInput,
  type DeliveryState,
} from '../../machines/webhook-delivery.machine.ts'
import { deadlineTimer } from '../../src/actors/deadline-timer.ts'
import { restoreActor } from '../../src/actors/restore-actor.ts'
import { createScheduler } from '../../src/actors/scheduler.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { retryAfterMs } from '../../src/webhooks/sender.ts'

const T0 = Date.UTC(2026, 10, 21, 12)
const MIN = 60_000

/**
 * A running delivery actor on a virtual clock: the real backoff timer over a manual clock and
 * scheduler, and a `sendAttempt` that records each attempt and answers from `answers` (true:
 * the endpoint acknowledged; 'throw': the sender failed unexpectedly).
 */
function running(
  answers: (boolean | 'throw' | 'paused')[] | (() => boolean | 'paused'),
  input: Partial<DeliveryInput> = {},
  from?: { snapshot: unknown; now: number },
) {
  const clock = manualClock(from?.now ?? T0)
  const scheduler = createScheduler(clock)
  const made: (AttemptInput & { at: number })[] = []
  const machine = webhookDeliveryMachine.provide({
    actors: {
      backoffTimer: deadlineTimer(scheduler, clock),
      sendAttempt: fromPromise<AttemptOutput, AttemptInput>(async ({ input }) => {
        made.push({ ...input, at: clock.now() })
        const answer = typeof answers === 'function' ? answers() : (answers.shift() ?? false)
        if (answer === 'throw') throw new Error('sender broke')
        if (answer === 'paused') return { ok: false, at: clock.now(), paused: true }
        return { ok: answer, at: clock.now() }
      }),
    },
  })
  const actor: Actor<typeof machine> = from
    ? restoreActor(machine, from.snapshot)
    : createActor(machine, {
        input: { deliveryId: 'dlv_1', eventAt: T0, firstAttemptAt: T0, ...input },
      })
  actor.start()
  /** Moves the virtual clock to `t`, fires what is due and lets the attempts it starts finish. */
  const at = async (t: number) => {
    clock.set(t)
    scheduler.runDue()
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r))
  }
  const state = () => actor.getSnapshot().value as DeliveryState
  const context = () => actor.getSnapshot().context
  const status = () => deliveryStatus(state(), context())
  return {
    actor,
    made,
    at,
    state,
    context,
    status,
    scheduler,
    stop: () => (actor.stop(), scheduler.stop()),
  }
}

describe('webhook delivery actor on a virtual clock', () => {
  test('a fresh delivery is pending, attempted at its first time, and a success ends it', async () => {
    const d = running([true])
    expect(d.status()).toBe('pending')
    expect(d.made).toEqual([])
    await d.at(T0)
    expect(d.made.map((a) => [a.number, a.trigger, a.scheduledFor, a.at])).toEqual([
      [1, 'scheduled', T0, T0],
    ])
    expect(d.status()).toBe('success')
    expect(d.context()).toMatchObject({ attempts: 1, nextAttemptAt: null, failedBecause: null })
    expect(d.scheduler.size).toBe(0)
    d.stop()
  })

  test('docs/decisions/0019-retry-schedule.md: a receiver always failing gets exactly 6 attempts at +1m, +5m, +30m, +2h, +8h after each failure, none a millisecond early', async () => {
    const d = running(() => false)
    await d.at(T0)
    let last = T0
    for (const offset of DEFAULT_RETRY_SCHEDULE_MS) {
      expect(d.status()).toBe('retrying')
      expect(d.context().nextAttemptAt).toBe(last + offset)
      await d.at(last + offset - 1)
      expect(d.made.at(-1)!.at).toBe(last)
      last += offset
      await d.at(last)
      expect(d.made.at(-1)!.at).toBe(last)
    }
    expect(d.made.map((a) => a.number)).toEqual([1, 2, 3, 4, 5, 6])
    expect(d.made.slice(1).map((a, i) => a.at - d.made[i].at)).toEqual([
      ...DEFAULT_RETRY_SCHEDULE_MS,
    ])
    expect(d.status()).toBe('failed')
    expect(d.context()).toMatchObject({
      failedBecause: 'exhausted',
      attempts: 6,
      nextAttemptAt: null,
    })
    await d.at(last + 30 * 86_400_000)
    expect(d.made).toHaveLength(6)
    d.stop()
  })

  test('failing twice then succeeding ends in success after 3 attempts', async () => {
    const d = running([false, false, true])
    await d.at(T0)
    await d.at(T0 + MIN)
    await d.at(T0 + 6 * MIN)
    expect(d.status()).toBe('success')
    expect(d.context().attempts).toBe(3)
    d.stop()
  })

  test('the schedule comes from input (WEBHOOK_RETRY_SCHEDULE)', async () => {
    const d = running(() => false, { scheduleMs: [1000, 2000] })
    await d.at(T0)
    expect(d.context().nextAttemptAt).toBe(T0 + 1000)
    await d.at(T0 + 1000)
    expect(d.context().nextAttemptAt).toBe(T0 + 3000)
    await d.at(T0 + 3000)
    expect(d.status()).toBe('failed')
    expect(d.made.map((a) => a.at)).toEqual([T0, T0 + 1000, T0 + 3000])
    d.stop()
  })

  test('7-day rule: a retry falling due more than 7 days after the event fails without a request', async () => {
    const d = running(() => false)
    await d.at(T0)
    // The service was down for over a week: the retry is due but the event is too old.
    await d.at(T0 + MAX_EVENT_AGE_MS + 1)
    expect(d.status()).toBe('failed')
    expect(d.context()).toMatchObject({ failedBecause: 'too_old', attempts: 1 })
    expect(d.made).toHaveLength(1)
    d.stop()
  })

  test('7-day rule: no retry is scheduled past the 7-day window', async () => {
    const d = running(() => false, { scheduleMs: [MAX_EVENT_AGE_MS + 1] })
    await d.at(T0)
    expect(d.status()).toBe('failed')
    expect(d.context().failedBecause).toBe('too_old')
    d.stop()
  })

  test('manual redelivery after exhaustion is attempted at once at any age, and a failure schedules nothing more', async () => {
    const d = running([false, false], { scheduleMs: [] })
    await d.at(T0)
    expect(d.status()).toBe('failed')
    const later = T0 + 10 * MAX_EVENT_AGE_MS
    d.actor.send({ type: 'redeliver.requested', at: later })
    expect(d.state()).toBe('scheduled')
    expect(d.status()).toBe('retrying')
    expect(d.context()).toMatchObject({ trigger: 'manual', nextAttemptAt: later })
    await d.at(later)
    expect(d.made.map((a) => [a.number, a.trigger, a.at])).toEqual([
      [1, 'scheduled', T0],
      [2, 'manual', later],
    ])
    expect(d.context()).toMatchObject({
      attempts: 2,
      failedBecause: 'manual_attempt_failed',
      nextAttemptAt: null,
    })
    await d.at(later + MAX_EVENT_AGE_MS)
    expect(d.made).toHaveLength(2)
    d.stop()
  })

  test('a delivered event can be delivered again by hand', async () => {
    const d = running([true, true])
    await d.at(T0)
    d.actor.send({ type: 'redeliver.requested', at: T0 + 1000 })
    await d.at(T0 + 1000)
    expect(d.status()).toBe('success')
    expect(d.context().attempts).toBe(2)
    expect(d.made.map((a) => a.trigger)).toEqual(['scheduled', 'manual'])
    d.stop()
  })

  test('redelivery while retrying brings the next attempt forward to now', async () => {
    const d = running([false, true])
    await d.at(T0)
    d.actor.send({ type: 'redeliver.requested', at: T0 + 5 })
    expect(d.context().nextAttemptAt).toBe(T0 + 5)
    await d.at(T0 + 5)
    expect(d.made.map((a) => a.at)).toEqual([T0, T0 + 5])
    expect(d.status()).toBe('success')
    d.stop()
  })

  test('a sender that throws counts as one failed attempt, retried on schedule', async () => {
    const d = running(['throw', true])
    await d.at(T0)
    expect(d.status()).toBe('retrying')
    expect(d.context()).toMatchObject({ attempts: 1, nextAttemptAt: T0 + MIN })
    await d.at(T0 + MIN)
    expect(d.status()).toBe('success')
    d.stop()
  })

  test('an endpoint found disabled uses up no attempt: the delivery looks again every minute, and the schedule goes on once it is enabled', async () => {
    const d = running([false, 'paused', 'paused', false, true])
    await d.at(T0)
    expect(d.context()).toMatchObject({
      attempts: 1,
      automaticAttempts: 1,
      nextAttemptAt: T0 + MIN,
    })
    await d.at(T0 + MIN)
    // Disabled: nothing counted, looked at again a minute later.
    expect(d.status()).toBe('retrying')
    expect(d.context()).toMatchObject({
      attempts: 1,
      automaticAttempts: 1,
      nextAttemptAt: T0 + MIN + PAUSED_RECHECK_MS,
    })
    await d.at(T0 + MIN + PAUSED_RECHECK_MS)
    expect(d.context()).toMatchObject({
      attempts: 1,
      nextAttemptAt: T0 + MIN + 2 * PAUSED_RECHECK_MS,
    })
    // Enabled again: the second attempt, then the third 5 minutes after it (the schedule resumes
    // where it was).
    await d.at(T0 + MIN + 2 * PAUSED_RECHECK_MS)
    expect(d.context()).toMatchObject({
      attempts: 2,
      automaticAttempts: 2,
      nextAttemptAt: T0 + MIN + 2 * PAUSED_RECHECK_MS + 5 * MIN,
    })
    await d.at(T0 + MIN + 2 * PAUSED_RECHECK_MS + 5 * MIN)
    expect(d.status()).toBe('success')
    expect(d.made.map((a) => a.number)).toEqual([1, 2, 2, 2, 3])
    d.stop()
  })

  test('restored from its persisted snapshot mid-backoff, it makes exactly the remaining attempts at their original times', async () => {
    const first = running(() => false)
    await first.at(T0)
    await first.at(T0 + MIN)
    const persisted = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot()))
    first.stop()
    // The process died; a new one restores the snapshot 3 minutes later (before the +5 min retry).
    const second = running(() => false, {}, { snapshot: persisted, now: T0 + 4 * MIN })
    await second.at(T0 + 4 * MIN)
    expect(second.made).toEqual([])
    await second.at(T0 + 6 * MIN - 1)
    expect(second.made).toEqual([])
    let due = T0 + 6 * MIN
    for (const offset of DEFAULT_RETRY_SCHEDULE_MS.slice(2)) {
      await second.at(due)
      due += offset
    }
    await second.at(due)
    expect(second.made.map((a) => [a.number, a.at])).toEqual([
      [3, T0 + 6 * MIN],
      [4, T0 + 36 * MIN],
      [5, T0 + 156 * MIN],
      [6, T0 + 636 * MIN],
    ])
    expect(second.context()).toMatchObject({ attempts: 6, failedBecause: 'exhausted' })
    second.stop()
  })

  test('restored after its next attempt fell due, it makes that attempt at once', async () => {
    const first = running(() => false)
    await first.at(T0)
    const persisted = JSON.parse(JSON.stringify(first.actor.getPersistedSnapshot()))
    first.stop()
    const second = running([true], {}, { snapshot: persisted, now: T0 + 3 * MIN })
    await second.at(T0 + 3 * MIN)
    expect(second.made.map((a) => [a.number, a.scheduledFor, a.at])).toEqual([
      [2, T0 + MIN, T0 + 3 * MIN],
    ])
    expect(second.status()).toBe('success')
    second.stop()
  })

  test('a redelivery while an attempt is in flight is refused', () => {
    const d = running(() => true)
    const snapshot = webhookDeliveryMachine.resolveState({
      value: 'attempting',
      context: d.context(),
    })
    expect(snapshot.can({ type: 'redeliver.requested', at: T0 })).toBe(false)
    d.stop()
  })
})

describe("retryDelayMs(): a receiver's Retry-After within the schedule's bounds", () => {
  const c = { scheduleMs: [...DEFAULT_RETRY_SCHEDULE_MS], automaticAttempts: 0 }
  test('without Retry-After the schedule decides', () => {
    expect(retryDelayMs(c, undefined)).toBe(MIN)
    expect(retryDelayMs({ ...c, automaticAttempts: 2 }, undefined)).toBe(30 * MIN)
  })
  test('a longer or shorter wait is taken, kept between the shortest (1 min) and the longest (8 h) delay', () => {
    expect(retryDelayMs(c, 10 * MIN)).toBe(10 * MIN)
    expect(retryDelayMs({ ...c, automaticAttempts: 3 }, 10 * MIN)).toBe(10 * MIN)
    expect(retryDelayMs(c, 1000)).toBe(MIN)
    expect(retryDelayMs(c, 0)).toBe(MIN)
    expect(retryDelayMs(c, 3 * 86_400_000)).toBe(8 * 60 * MIN)
  })
})

describe('retryAfterMs(): RFC 9110 Retry-After', () => {
  test('delay-seconds and HTTP dates, read against the given now; anything else is no wait', () => {
    expect(retryAfterMs('120', T0)).toBe(120_000)
    expect(retryAfterMs(' 0 ', T0)).toBe(0)
    expect(retryAfterMs(new Date(T0 + 90_000).toUTCString(), T0)).toBe(90_000)
    expect(retryAfterMs(new Date(T0 - 90_000).toUTCString(), T0)).toBe(0)
    expect(retryAfterMs(null, T0)).toBeNull()
    expect(retryAfterMs('soon', T0)).toBeNull()
    expect(retryAfterMs('-5', T0)).toBeNull()
  })
})

describe('a failed attempt that brought a Retry-After', () => {
  test("schedules the retry at the receiver's time, bounded", () => {
    const snapshot = webhookDeliveryMachine.resolveState({
      value: 'attempting',
      context: {
        deliveryId: 'dlv_1',
        scheduleMs: [...DEFAULT_RETRY_SCHEDULE_MS],
        maxAgeMs: MAX_EVENT_AGE_MS,
        eventAt: T0,
        attempts: 0,
        automaticAttempts: 0,
        nextAttemptAt: T0,
        trigger: 'scheduled',
        failedBecause: null,
      },
    })
    const [after] = transition(webhookDeliveryMachine, snapshot, {
      type: 'xstate.done.actor.0.webhookDelivery.attempting',
      output: { ok: false, at: T0, retryAfterMs: 600_000 },
    } as never)
    expect(after.value).toBe('scheduled')
    expect(after.context.nextAttemptAt).toBe(T0 + 600_000)
  })
})
