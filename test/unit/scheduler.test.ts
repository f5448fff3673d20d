import { describe, expect, test } from 'bun:test'
import { createScheduler } from '../../src/actors/scheduler.ts'
import { manualClock } from '../../src/lib/clock.ts'

describe('createScheduler()', () => {
  test('runs calls in deadline order once the clock reaches them, never before', () => {
    const clock = manualClock(1000)
    const s = createScheduler(clock)
    const ran: string[] = []
    s.at(3000, () => ran.push('c'))
    s.at(2000, () => ran.push('b'))
    s.at(2000, () => ran.push('b2'))
    s.runDue()
    expect(ran).toEqual([])
    clock.set(2000)
    s.runDue()
    expect(ran).toEqual(['b', 'b2'])
    clock.set(5000)
    s.runDue()
    expect(ran).toEqual(['b', 'b2', 'c'])
    expect(s.size).toBe(0)
    s.stop()
  })

  test('a deadline in the past runs at the next check; a cancelled one never runs', () => {
    const clock = manualClock(10_000)
    const s = createScheduler(clock)
    const ran: string[] = []
    s.at(1, () => ran.push('overdue'))
    const cancel = s.at(1, () => ran.push('cancelled'))
    cancel()
    expect(s.size).toBe(1)
    s.runDue()
    expect(ran).toEqual(['overdue'])
    s.stop()
  })

  test('with the system clock it fires by itself', async () => {
    const s = createScheduler({ now: () => Date.now() })
    const fired = new Promise<number>((resolve) => s.at(Date.now() + 20, () => resolve(Date.now())))
    expect(await fired).toBeGreaterThan(0)
    s.stop()
  })

  test('a hundred thousand deadlines keep their order', () => {
    const clock = manualClock(0)
    const s = createScheduler(clock)
    const out: number[] = []
    const deadlines = Array.from({ length: 100_000 }, () => Math.floor(Math.random() * 1e9))
    for (const d of deadlines) s.at(d, () => out.push(d))
    clock.set(1e9)
    s.runDue()
    expect(out).toEqual([...deadlines].sort((a, b) => a - b))
    s.stop()
  })

  test('after many cancellations (the heap is compacted) the remaining deadlines still fire, in order, once', () => {
    const clock = manualClock(0)
    const s = createScheduler(clock)
    const out: number[] = []
    const cancels = Array.from({ length: 5_000 }, (_, i) => s.at(10_000 + i, () => out.push(i)))
    // Cancel all but every tenth: far more dead entries than live ones, so the heap is compacted.
    cancels.forEach((cancel, i) => i % 10 !== 0 && cancel())
    expect(s.size).toBe(500)
    clock.set(20_000)
    s.runDue()
    expect(out).toEqual(Array.from({ length: 500 }, (_, k) => k * 10))
    expect(s.size).toBe(0)
    s.stop()
  })
})
