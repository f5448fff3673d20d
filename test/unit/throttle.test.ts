import { describe, expect, test } from 'bun:test'
import { createThrottle } from '../../src/chain/follower/pacing.ts'
import { manualClock } from '../../src/lib/clock.ts'

/**
 * The follower's maxRequestsPerSecond on a virtual clock: its sleeps move the clock, nothing waits.
 */
function throttled(perSecond: number) {
  const clock = manualClock(0)
  const slept: number[] = []
  const take = createThrottle(perSecond, clock, async (ms) => {
    slept.push(ms)
    clock.advance(ms)
  })
  const signal = new AbortController().signal
  return { clock, slept, take: () => take(signal) }
}

describe('createThrottle(): a provider plan of N calls a second', () => {
  test("a second's worth goes at once (one batch), then calls are spaced 1/N s apart", async () => {
    const t = throttled(10)
    for (let i = 0; i < 10; i++) await t.take()
    expect(t.slept).toEqual([])
    for (let i = 0; i < 5; i++) await t.take()
    expect(t.slept).toEqual([100, 100, 100, 100, 100])
    expect(t.clock.now()).toBe(500)
  })

  test("over any long run no more than N calls a second: 100 calls at 20/s take 4 s after the first second's burst", async () => {
    const t = throttled(20)
    for (let i = 0; i < 100; i++) await t.take()
    expect(t.clock.now()).toBe(4000)
  })

  test("an idle spell refills the allowance, up to one second's worth", async () => {
    const t = throttled(10)
    for (let i = 0; i < 10; i++) await t.take()
    t.clock.advance(60_000)
    for (let i = 0; i < 10; i++) await t.take()
    expect(t.slept).toEqual([])
    await t.take()
    expect(t.slept).toEqual([100])
  })

  test("a stop while waiting ends the wait with the stop's reason", async () => {
    const clock = manualClock(0)
    const stop = new AbortController()
    const take = createThrottle(1, clock, async () =>
      stop.abort(new Error('block follower stopped')),
    )
    await take(stop.signal)
    await expect(take(stop.signal)).rejects.toThrow('block follower stopped')
  })
})
