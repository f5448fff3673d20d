import type { Clock } from '../lib/clock.ts'

/** Cancels a timer. */
type Cancel = () => void

/**
 * Where a loop's waits are armed: real timers by default; tests pass the scheduler of a manual
 * clock.
 */
export interface LoopTimers {
  /** Calls `fn` once the loop's clock reaches `at`. */
  at(at: number, fn: () => void): Cancel
}

export interface WorkLoop<T> {
  /**
   * Asks for a run serving `what`: at once when idle (after the gather window, if one is set),
   * or once more right after the run in progress. Requests made before a run starts are merged
   * into it. Resolves (or rejects) with the run that served it.
   */
  request(what: T): Promise<void>
  /**
   * Also asks for a run serving `what` every `everyMs` (a poll for work no notice announced); until
   * stop().
   */
  every(everyMs: number, what: T): void
  /**
   * Runs what is asked for at once, skipping the gather window, and resolves once no run is left.
   */
  flush(): Promise<void>
  /** Resolves once no run is in progress or asked for. */
  idle(): Promise<void>
  /** Whether a run is in progress. */
  readonly busy: boolean
  /** Takes no more requests (they resolve at once) and waits for the run in progress. */
  stop(): Promise<void>
}

interface Deferred {
  promise: Promise<void>
  resolve(): void
  reject(e: unknown): void
}

function deferred(): Deferred {
  let resolve!: () => void
  let reject!: (e: unknown) => void
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  // A request nobody awaits must not turn a failed run into an unhandled rejection.
  promise.catch(() => {})
  return { promise, resolve, reject }
}

/** The monotonic clock of this process: gather windows do not move with an injected wall clock. */
const monotonic: Clock = { now: () => performance.now() }

const realTimers = (clock: Clock): LoopTimers => ({
  at(at, fn) {
    const timer = setTimeout(fn, Math.max(0, at - clock.now()))
    ;(timer as { unref?: () => void }).unref?.()
    return () => clearTimeout(timer)
  },
})

/**
 * The one wake / re-run / batch loop of the service: work that many callers may ask for at
 * once (a dispatch pass, a claim pass, a batch of writes) runs one at a time, and every request
 * made while a run is in progress is served by one more run right after it, so nothing asked
 * for is missed and no two runs ever overlap. With `gatherMs`, runs begin at least that long
 * apart when the loop was idle (the first at once): requests arriving in the window share one
 * run, which is how one statement or pass serves many callers on a busy embedded database.
 * `merge` combines what two requests ask for (the default keeps the later one).
 */
export function createWorkLoop<T = void>(o: {
  run: (what: T) => Promise<void>
  merge?: (a: T, b: T) => T
  gatherMs?: number
  /**
   * Write-behind: a run asked for while idle always waits the whole gather window first, so a
   * burst of requests costs one run even when the loop was idle; requests made during a run wait
   * until a window after that run began (flush() runs at once).
   */
  trailing?: boolean
  /** A run that throws is asked for again (with the same `what`) after this long. */
  retryMs?: number
  /** Measures the gather window (default: the process's monotonic clock). */
  clock?: Clock
  timers?: LoopTimers
}): WorkLoop<T> {
  const clock = o.clock ?? monotonic
  const timers = o.timers ?? realTimers(clock)
  const gatherMs = o.gatherMs ?? 0
  const merge = o.merge ?? ((_a: T, b: T) => b)
  let asked: { what: T; done: Deferred } | null = null
  /** Whether a run is in progress (or about to start): set and cleared synchronously. */
  let active = false
  let running: Promise<void> = Promise.resolve()
  let waiting: Cancel | null = null
  let lastStart = Number.NEGATIVE_INFINITY
  let stopped = false
  let flushing = false
  const polls: ReturnType<typeof setInterval>[] = []
  const retries = new Set<Cancel>()

  function begin() {
    waiting?.()
    waiting = null
    if (active || !asked) return
    active = true
    running = (async () => {
      while (asked && !stopped) {
        // Write-behind: what was asked during a run waits its own window (unless flushed), so a
        // busy loop writes once a window, not back to back.
        if (o.trailing && !flushing && clock.now() < lastStart + gatherMs) break
        const { what, done } = asked
        asked = null
        lastStart = clock.now()
        try {
          await o.run(what)
          done.resolve()
        } catch (e) {
          done.reject(e)
          if (o.retryMs !== undefined && !stopped) {
            const retry = timers.at(clock.now() + o.retryMs, () => {
              retries.delete(retry)
              void request(what)
            })
            retries.add(retry)
          }
        }
      }
      // Cleared in the same step that found nothing more asked: a request made once this
      // resolves must start a run of its own, not wait for this one.
      active = false
      if (stopped) {
        // Stopped with a request still waiting: it is not run, and must not be awaited forever.
        asked?.done.resolve()
        asked = null
      } else if (asked && !waiting) waiting = timers.at(lastStart + gatherMs, begin)
    })()
  }

  function request(what: T): Promise<void> {
    if (stopped) return Promise.resolve()
    if (asked) asked.what = merge(asked.what, what)
    else asked = { what, done: deferred() }
    const served = asked.done.promise
    if (active || waiting) return served
    const at = o.trailing ? clock.now() + gatherMs : lastStart + gatherMs
    if (at <= clock.now()) begin()
    else waiting = timers.at(at, begin)
    return served
  }

  return {
    request,
    every(everyMs, what) {
      const timer = setInterval(() => void request(what), everyMs)
      ;(timer as { unref?: () => void }).unref?.()
      polls.push(timer)
    },
    async flush() {
      flushing = true
      try {
        begin()
        while (active) await running
      } finally {
        flushing = false
      }
    },
    async idle() {
      while (active || asked) await (active ? running : asked?.done.promise.catch(() => {}))
    },
    get busy() {
      return active
    },
    async stop() {
      stopped = true
      for (const p of polls.splice(0)) clearInterval(p)
      for (const r of retries) r()
      retries.clear()
      waiting?.()
      waiting = null
      asked?.done.resolve()
      asked = null
      await running
    },
  }
}
