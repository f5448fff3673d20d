import { describe, expect, test } from 'bun:test'
import { createScheduler } from '../../src/actors/scheduler.ts'
import { createWorkLoop } from '../../src/instances/work-loop.ts'
import { manualClock } from '../../src/lib/clock.ts'

/** A run that waits until the test lets it finish, recording what it was asked to do. */
function heldRuns<T>() {
  const seen: T[] = []
  const releases: (() => void)[] = []
  let inFlight = 0
  let most = 0
  const run = async (what: T) => {
    seen.push(what)
    inFlight++
    most = Math.max(most, inFlight)
    await new Promise<void>((r) => releases.push(r))
    inFlight--
  }
  const releaseNext = async () => {
    for (let i = 0; i < 100 && releases.length === 0; i++) await Promise.resolve()
    releases.shift()?.()
  }
  return { run, seen, releaseNext, most: () => most }
}

describe('createWorkLoop()', () => {
  test('asked again while running, it runs once more after, with the requests merged; never two runs at once', async () => {
    const h = heldRuns<number>()
    const loop = createWorkLoop<number>({ run: h.run, merge: (a, b) => a + b })
    const first = loop.request(1)
    const second = loop.request(2)
    const third = loop.request(3)
    expect(h.seen).toEqual([1])
    await h.releaseNext()
    await first
    expect(h.seen).toEqual([1, 5])
    await h.releaseNext()
    await Promise.all([second, third])
    expect(h.seen).toEqual([1, 5])
    expect(h.most()).toBe(1)
  })

  test('a run that throws rejects the requests it served; the loop goes on with the next', async () => {
    let calls = 0
    const loop = createWorkLoop<void>({
      run: async () => {
        if (calls++ === 0) throw new Error('database away')
      },
    })
    await expect(loop.request()).rejects.toThrow('database away')
    await loop.request()
    expect(calls).toBe(2)
  })

  test('gather window: the first request runs at once, requests within the window after a run began share one run when it ends (virtual clock)', async () => {
    const clock = manualClock(1_000)
    const scheduler = createScheduler(clock)
    const seen: string[][] = []
    let batch: string[] = []
    const loop = createWorkLoop<void>({
      run: async () => {
        seen.push(batch)
        batch = []
      },
      gatherMs: 10,
      clock,
      timers: scheduler,
    })
    batch.push('a')
    await loop.request()
    expect(seen).toEqual([['a']])
    batch.push('b')
    const b = loop.request()
    batch.push('c')
    const c = loop.request()
    clock.advance(9)
    scheduler.runDue()
    await Promise.resolve()
    expect(seen).toEqual([['a']])
    clock.advance(1)
    scheduler.runDue()
    await Promise.all([b, c])
    expect(seen).toEqual([['a'], ['b', 'c']])
    // Idle for longer than the window: at once again.
    clock.advance(50)
    batch.push('d')
    await loop.request()
    expect(seen).toEqual([['a'], ['b', 'c'], ['d']])
    scheduler.stop()
  })

  test('trailing (write-behind): even an idle loop waits the window; flush() runs at once', async () => {
    const clock = manualClock(1_000)
    const scheduler = createScheduler(clock)
    let runs = 0
    const loop = createWorkLoop<void>({
      run: async () => void runs++,
      gatherMs: 50,
      trailing: true,
      clock,
      timers: scheduler,
    })
    const served = loop.request()
    void loop.request()
    await Promise.resolve()
    expect(runs).toBe(0)
    clock.advance(50)
    scheduler.runDue()
    await served
    expect(runs).toBe(1)
    void loop.request()
    await loop.flush()
    expect(runs).toBe(2)
    scheduler.stop()
  })

  test('a failed run is asked for again after retryMs', async () => {
    const clock = manualClock(1_000)
    const scheduler = createScheduler(clock)
    let calls = 0
    const loop = createWorkLoop<void>({
      run: async () => {
        if (calls++ === 0) throw new Error('database away')
      },
      retryMs: 50,
      clock,
      timers: scheduler,
    })
    await loop.request().catch(() => {})
    expect(calls).toBe(1)
    clock.advance(50)
    scheduler.runDue()
    await loop.idle()
    expect(calls).toBe(2)
    scheduler.stop()
  })

  test('stop() waits for the run in progress and runs nothing more', async () => {
    const h = heldRuns<void>()
    const loop = createWorkLoop<void>({ run: h.run })
    void loop.request()
    const waiting = loop.request()
    const stopped = loop.stop()
    await h.releaseNext()
    await stopped
    await waiting
    await loop.request()
    expect(h.seen.length).toBe(1)
  })
})
