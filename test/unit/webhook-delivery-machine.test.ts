import { describe, expect, test } from 'bun:test'
import {
  DEFAULT_RETRY_SCHEDULE_MS, deliveryStatus, MAX_EVENT_AGE_MS, startDelivery, stepDelivery, type StoredDelivery,
} from '../../machines/webhook-delivery.machine.ts'

const T0 = Date.UTC(2026, 10, 21, 12)
const step = (d: StoredDelivery, type: 'attempt.due' | 'attempt.succeeded' | 'attempt.failed' | 'redeliver.requested', at: number) => {
  const next = stepDelivery(d, { type, at })
  if (!next) throw new Error(`${d.state} refused ${type}`)
  return next
}
const status = (d: StoredDelivery) => deliveryStatus(d.state, d.context)
/** Runs the attempt due now and fails it. */
const failDue = (d: StoredDelivery) => step(step(d, 'attempt.due', d.context.nextAttemptAt!), 'attempt.failed', d.context.nextAttemptAt!)

describe('webhook delivery machine', () => {
  test('a fresh delivery is pending and due at once', () => {
    const d = startDelivery({ eventAt: T0, firstAttemptAt: T0 })
    expect(d.state).toBe('scheduled')
    expect(status(d)).toBe('pending')
    expect(d.context.nextAttemptAt).toBe(T0)
  })

  test('a successful first attempt ends in success with one attempt and no next attempt', () => {
    const d = step(step(startDelivery({ eventAt: T0, firstAttemptAt: T0 }), 'attempt.due', T0), 'attempt.succeeded', T0 + 40)
    expect(status(d)).toBe('success')
    expect(d.context.attempts).toBe(1)
    expect(d.context.nextAttemptAt).toBeNull()
  })

  test('R19: a receiver always failing gets exactly 6 attempts at +1m, +5m, +30m, +2h, +8h after each failure', () => {
    let d = startDelivery({ eventAt: T0, firstAttemptAt: T0 })
    const attemptTimes: number[] = []
    while (d.state === 'scheduled') {
      attemptTimes.push(d.context.nextAttemptAt!)
      d = failDue(d)
      if (d.state === 'scheduled') expect(status(d)).toBe('retrying')
    }
    expect(attemptTimes.length).toBe(6)
    expect(attemptTimes.slice(1).map((t, i) => t - attemptTimes[i])).toEqual([...DEFAULT_RETRY_SCHEDULE_MS])
    expect(status(d)).toBe('failed')
    expect(d.context.failedBecause).toBe('exhausted')
    expect(d.context.attempts).toBe(6)
    expect(d.context.nextAttemptAt).toBeNull()
    expect(stepDelivery(d, { type: 'attempt.due', at: T0 + 86_400_000 })).toBeNull()
  })

  test('failing twice then succeeding ends in success after 3 attempts', () => {
    let d = startDelivery({ eventAt: T0, firstAttemptAt: T0 })
    d = failDue(failDue(d))
    d = step(step(d, 'attempt.due', d.context.nextAttemptAt!), 'attempt.succeeded', d.context.nextAttemptAt!)
    expect(status(d)).toBe('success')
    expect(d.context.attempts).toBe(3)
  })

  test('the schedule comes from input (WEBHOOK_RETRY_SCHEDULE)', () => {
    let d = startDelivery({ eventAt: T0, firstAttemptAt: T0, scheduleMs: [1000, 2000] })
    d = failDue(d)
    expect(d.context.nextAttemptAt).toBe(T0 + 1000)
    d = failDue(d)
    expect(d.context.nextAttemptAt).toBe(T0 + 3000)
    d = failDue(d)
    expect(status(d)).toBe('failed')
    expect(d.context.attempts).toBe(3)
  })

  test('7-day rule: an attempt falling due more than 7 days after the event fails without being made', () => {
    let d = startDelivery({ eventAt: T0, firstAttemptAt: T0 })
    d = failDue(d)
    // The service was down for over a week: the retry is due but the event is too old.
    d = step(d, 'attempt.due', T0 + MAX_EVENT_AGE_MS + 1)
    expect(status(d)).toBe('failed')
    expect(d.context.failedBecause).toBe('too_old')
    expect(d.context.attempts).toBe(1)
  })

  test('7-day rule: no retry is scheduled past the 7-day window', () => {
    let d = startDelivery({ eventAt: T0, firstAttemptAt: T0, scheduleMs: [MAX_EVENT_AGE_MS + 1] })
    d = failDue(d)
    expect(status(d)).toBe('failed')
    expect(d.context.failedBecause).toBe('too_old')
  })

  test('manual redelivery after exhaustion is due at once, may be older than 7 days, and schedules nothing more on failure', () => {
    let d = startDelivery({ eventAt: T0, firstAttemptAt: T0, scheduleMs: [] })
    d = failDue(d)
    expect(status(d)).toBe('failed')
    const at = T0 + 10 * MAX_EVENT_AGE_MS
    d = step(d, 'redeliver.requested', at)
    expect(d.state).toBe('scheduled')
    expect(status(d)).toBe('retrying')
    expect(d.context).toMatchObject({ trigger: 'manual', nextAttemptAt: at })
    d = step(d, 'attempt.due', at)
    expect(d.state).toBe('attempting')
    const failed = step(d, 'attempt.failed', at)
    expect(status(failed)).toBe('failed')
    expect(failed.context.attempts).toBe(2)
    expect(failed.context.failedBecause).toBe('manual_attempt_failed')
    expect(failed.context.nextAttemptAt).toBeNull()
    const ok = step(d, 'attempt.succeeded', at)
    expect(status(ok)).toBe('success')
  })

  test('a delivered event can be delivered again by hand', () => {
    let d = step(step(startDelivery({ eventAt: T0, firstAttemptAt: T0 }), 'attempt.due', T0), 'attempt.succeeded', T0)
    d = step(d, 'redeliver.requested', T0 + 1000)
    expect(d.context).toMatchObject({ trigger: 'manual', nextAttemptAt: T0 + 1000 })
    d = step(step(d, 'attempt.due', T0 + 1000), 'attempt.succeeded', T0 + 1000)
    expect(status(d)).toBe('success')
    expect(d.context.attempts).toBe(2)
  })

  test('redelivery while retrying moves the next attempt to now', () => {
    let d = failDue(startDelivery({ eventAt: T0, firstAttemptAt: T0 }))
    d = step(d, 'redeliver.requested', T0 + 5)
    expect(status(d)).toBe('retrying')
    expect(d.context.nextAttemptAt).toBe(T0 + 5)
  })

  test('a snapshot survives a JSON round trip (it is stored in the database)', () => {
    const d = failDue(startDelivery({ eventAt: T0, firstAttemptAt: T0 }))
    const restored = JSON.parse(JSON.stringify(d)) as StoredDelivery
    const next = failDue(restored)
    expect(next.context.nextAttemptAt).toBe(T0 + DEFAULT_RETRY_SCHEDULE_MS[0] + DEFAULT_RETRY_SCHEDULE_MS[1])
  })

  test('events a state does not take are refused', () => {
    const d = startDelivery({ eventAt: T0, firstAttemptAt: T0 })
    expect(stepDelivery(d, { type: 'attempt.succeeded', at: T0 })).toBeNull()
    expect(stepDelivery(d, { type: 'attempt.failed', at: T0 })).toBeNull()
  })
})
