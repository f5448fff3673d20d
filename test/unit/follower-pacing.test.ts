import { describe, expect, test } from 'bun:test'
import { backoffDelay, createLoop, PUSHED_POLL_FACTOR } from '../../src/chain/follower/pacing.ts'
import { manualClock } from '../../src/lib/clock.ts'

/**
 * The loop on a virtual clock: each tick takes `tickMs`, follows `script` (ok or the error to
 * throw), and the loop stops itself once the script is done. Sleeps move the clock; nothing
 * waits. `seen`: failures and last error as each wait began.
 */
function run(script: ('ok' | Error)[], o: { tickMs?: number; pushed?: boolean } = {}) {
  const clock = manualClock(0)
  const slept: number[] = []
  const seen: [number, string | null][] = []
  let ticks = 0
  const ended = new Promise<void>((resolve) => {
    const loop = createLoop({
      network: 'test',
      tick: async () => {
        const step = script[ticks++]!
        clock.advance(o.tickMs ?? 0)
        if (step instanceof Error) throw step
      },
      pollIntervalMs: 1000,
      backoff: { baseMs: 100, maxMs: 500 },
      pushed: () => o.pushed ?? false,
      clock,
      sleep: async (ms) => {
        slept.push(ms)
        seen.push([loop.failures(), loop.lastError()])
        clock.advance(ms)
        if (ticks >= script.length) void loop.stop().then(resolve)
      },
    })
    loop.start()
  })
  return { slept, seen, done: () => ended }
}

const down = new Error('fetch failed: ECONNREFUSED')

describe('createLoop(): the follower’s pace', () => {
  test('in step, a tick starts every poll interval, less the time the tick took', async () => {
    const r = run(['ok', 'ok', 'ok'], { tickMs: 300 })
    await r.done()
    expect(r.slept).toEqual([700, 700, 700])
  })

  test('while heads are pushed, polling slows to a safety net', async () => {
    const r = run(['ok', 'ok'], { pushed: true })
    await r.done()
    expect(r.slept).toEqual([1000 * PUSHED_POLL_FACTOR, 1000 * PUSHED_POLL_FACTOR])
  })

  test('failed ticks back off, doubling up to the cap; a good tick returns to the poll interval', async () => {
    const r = run([down, down, down, down, down, 'ok', down])
    await r.done()
    expect(r.slept).toEqual([100, 200, 400, 500, 500, 1000, 100])
    expect(r.seen.map(([failures]) => failures)).toEqual([1, 2, 3, 4, 5, 0, 1])
  })

  test('failures in a row and the last error are told while failing, cleared by a good tick', async () => {
    const r = run([down, down, 'ok'])
    await r.done()
    expect(r.seen).toEqual([
      [1, expect.stringContaining('ECONNREFUSED')],
      [2, expect.stringContaining('ECONNREFUSED')],
      [0, null],
    ])
  })

  test('wake() ends the wait at once; during failures it does not cut the back-off short', async () => {
    const clock = manualClock(0)
    let ticks = 0
    let fail = false
    const waits: number[] = []
    let ended: (() => void) | null = null
    const loop = createLoop({
      network: 'test',
      tick: async () => {
        ticks++
        if (fail) throw down
      },
      pollIntervalMs: 1000,
      backoff: { baseMs: 100, maxMs: 500 },
      clock,
      // Waits until woken or stopped: only wake() or stop() moves the loop on.
      sleep: (ms, signal) =>
        new Promise<void>((resolve) => {
          waits.push(ms)
          ended = resolve
          signal.addEventListener('abort', () => resolve())
        }),
    })
    const settle = () => new Promise((r) => setTimeout(r, 0))
    loop.start()
    await settle()
    expect(ticks).toBe(1)
    loop.wake()
    await settle()
    expect(ticks).toBe(2)
    fail = true
    loop.wake()
    await settle()
    expect([ticks, loop.failures()]).toEqual([3, 1])
    loop.wake()
    await settle()
    expect(ticks).toBe(3) // still backing off: the wake changed nothing
    ;(ended as (() => void) | null)?.()
    await settle()
    expect(ticks).toBe(4)
    await loop.stop()
    expect(waits).toEqual([1000, 1000, 100, 200])
  })
})

describe('backoffDelay()', () => {
  const backoff = { baseMs: 250, maxMs: 30_000 }
  test('doubles from the base with each failure in a row, up to the cap', () => {
    expect([1, 2, 3, 8, 20].map((n) => backoffDelay(n, backoff, down))).toEqual([
      250, 500, 1000, 30_000, 30_000,
    ])
  })

  test('a provider that said how long to wait (429 Retry-After) is given at least that', () => {
    const limited = Object.assign(new Error('429 Too Many Requests'), {
      headers: new Headers({ 'retry-after': '7' }),
    })
    expect(backoffDelay(1, backoff, limited)).toBe(7000)
    expect(backoffDelay(10, backoff, limited)).toBe(30_000)
  })
})
