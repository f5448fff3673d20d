import type { Clock } from '../lib/clock.ts'

const noop = () => {}

/** Cancels a scheduled call. */
export type Cancel = () => void

export interface Scheduler {
  /** Calls `fn` once `clock.now() >= at`; at once (next tick) when `at` has passed. */
  at(at: number, fn: () => void): Cancel
  /** Runs every due call now (tests move a manual clock and call this). */
  runDue(): void
  readonly size: number
  stop(): void
}

interface Entry {
  at: number
  seq: number
  fn: () => void
  cancelled: boolean
}

/**
 * Absolute-time timers for many actors with one host timer: a binary heap of deadlines and a single
 * setTimeout for the earliest, so a million waiting transactions cost a heap entry each, not a
 * runtime timer each. Deadlines come from the database (docs/decisions/0013-absolute-deadlines.md),
 * never durations.
 */
export function createScheduler(clock: Clock, opts: { maxDelayMs?: number } = {}): Scheduler {
  let heap: Entry[] = []
  let seq = 0
  let live = 0
  /**
   * Cancelled entries still in the heap (they leave it when they reach the top, or by compaction).
   */
  let dead = 0
  let timer: ReturnType<typeof setTimeout> | null = null
  let armedFor = Infinity
  // Re-check at least this often, so a clock that jumps (or a long delay) is never missed.
  const maxDelay = opts.maxDelayMs ?? 60_000

  const before = (a: Entry, b: Entry) => a.at < b.at || (a.at === b.at && a.seq < b.seq)
  function push(e: Entry) {
    heap.push(e)
    let i = heap.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!before(heap[i], heap[parent])) break
      ;[heap[i], heap[parent]] = [heap[parent], heap[i]]
      i = parent
    }
  }
  function siftDown(start: number) {
    let i = start
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < heap.length && before(heap[l], heap[m])) m = l
      if (r < heap.length && before(heap[r], heap[m])) m = r
      if (m === i) break
      ;[heap[i], heap[m]] = [heap[m], heap[i]]
      i = m
    }
  }
  function pop(): Entry | undefined {
    const top = heap[0]
    const last = heap.pop()
    if (heap.length && last) {
      heap[0] = last
      siftDown(0)
    }
    return top
  }

  /**
   * Drops cancelled entries when they outnumber the live ones, so a cancelled timer does not wait
   * in the heap until its deadline.
   */
  function compact() {
    heap = heap.filter((e) => !e.cancelled)
    dead = 0
    for (let i = (heap.length >> 1) - 1; i >= 0; i--) siftDown(i)
  }

  function arm() {
    while (heap.length && heap[0].cancelled) {
      pop()
      dead--
    }
    if (!heap.length) {
      if (timer) clearTimeout(timer)
      timer = null
      armedFor = Infinity
      return
    }
    const next = heap[0].at
    if (timer && armedFor <= next) return
    if (timer) clearTimeout(timer)
    armedFor = next
    timer = setTimeout(
      () => {
        timer = null
        armedFor = Infinity
        runDue()
      },
      Math.min(maxDelay, Math.max(0, next - clock.now())),
    )
    ;(timer as { unref?: () => void }).unref?.()
  }

  function runDue() {
    const now = clock.now()
    while (heap.length && (heap[0].cancelled || heap[0].at <= now)) {
      const e = pop()!
      if (e.cancelled) {
        dead--
        continue
      }
      e.cancelled = true
      live--
      try {
        e.fn()
      } catch {
        // A failing callback must not stop the others; callers handle their own errors.
      }
    }
    arm()
  }

  return {
    at(at, fn) {
      const e: Entry = { at, seq: seq++, fn, cancelled: false }
      push(e)
      live++
      arm()
      return () => {
        if (!e.cancelled) {
          e.cancelled = true
          // Whatever the callback holds (an actor) is free to go at once.
          e.fn = noop
          live--
          if (++dead > 1024 && dead > live) compact()
        }
      }
    },
    runDue,
    get size() {
      return live
    },
    stop() {
      if (timer) clearTimeout(timer)
      timer = null
      heap.length = 0
      live = 0
      dead = 0
    },
  }
}
