/**
 * The follower's loop and its pace: a tick every `pollIntervalMs` (ten times less often while
 * heads are pushed over a WebSocket, in case a push is lost), a wake-up from a pushed head ending
 * the wait at once, back-off after failed ticks (doubling, capped, never shorter than a provider's
 * Retry-After), and a throttle for a provider plan of so many calls a second.
 */
import type { Clock } from '../../lib/clock.ts'
import { errorSummary, type Logger } from '../../lib/logger.ts'
import { isRateLimit, retryAfterMs } from '../../metrics/metrics.ts'

/**
 * While heads are pushed, the follower still polls, this many times less often, in case a push is
 * lost.
 */
export const PUSHED_POLL_FACTOR = 10

/** Resolves after `ms` or as soon as `signal` aborts (never rejects). */
export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>

export interface Loop {
  /** Begins the loop (no-op when running). */
  start(): void
  /** Ends the loop, aborting its signal; resolves once no tick is running. */
  stop(): Promise<void>
  running(): boolean
  /** The signal the loop's calls run under; aborted by `stop()`. */
  signal(): AbortSignal
  /** A fresh signal after a stop, for a tick run outside the loop. */
  renew(): void
  /** The wait before the next tick ends now, unless ticks are failing (then the back-off holds). */
  wake(): void
  /** Failed ticks in a row, and the last one's error. */
  failures(): number
  lastError(): string | null
}

export function createLoop(o: {
  network: string
  tick: () => Promise<void>
  /** Told of every failed tick, before the back-off. */
  onFailure?: (error: unknown) => void
  pollIntervalMs: number
  backoff: Backoff
  /** Whether heads are being pushed now. */
  pushed?: () => boolean
  clock: Clock
  sleep: Sleep
  logger?: Logger
}): Loop {
  let controller = new AbortController()
  let running: Promise<void> | null = null
  let failures = 0
  let lastError: string | null = null
  /** The wait between ticks, ended early by `wake()`; a wake during a tick skips the next wait. */
  let napping: AbortController | null = null
  let woken = false

  async function nap(ms: number, signal: AbortSignal) {
    const nap = new AbortController()
    napping = nap
    const end = () => nap.abort()
    signal.addEventListener('abort', end)
    await o.sleep(ms, nap.signal)
    signal.removeEventListener('abort', end)
    napping = null
  }

  async function loop(): Promise<void> {
    failures = 0
    let retryInMs = 0
    const signal = controller.signal
    while (!signal.aborted) {
      const started = o.clock.now()
      try {
        await o.tick()
        failures = 0
        lastError = null
      } catch (error) {
        if (signal.aborted) break
        failures++
        lastError = errorSummary(error)
        o.onFailure?.(error)
        // A wake that came during the failing tick does not cut the back-off short.
        woken = false
        retryInMs = backoffDelay(failures, o.backoff, error)
        o.logger?.warn('chain follower tick failed', {
          network: o.network,
          failures,
          retryInMs,
          rateLimited: isRateLimit(error),
          error: errorSummary(error),
        })
      }
      if (signal.aborted) break
      const interval = o.pushed?.() ? o.pollIntervalMs * PUSHED_POLL_FACTOR : o.pollIntervalMs
      const delay = failures > 0 ? retryInMs : Math.max(0, interval - (o.clock.now() - started))
      if (!woken) await nap(delay, signal)
      woken = false
    }
  }

  const renew = () => {
    if (controller.signal.aborted) controller = new AbortController()
  }

  return {
    start() {
      if (running) return
      renew()
      running = loop().finally(() => {
        running = null
      })
    },
    async stop() {
      controller.abort(new Error('block follower stopped'))
      await running
    },
    running: () => running !== null,
    signal: () => controller.signal,
    renew,
    wake() {
      if (!running || failures > 0) return
      woken = true
      napping?.abort()
    },
    failures: () => failures,
    lastError: () => lastError,
  }
}

export interface Backoff {
  baseMs: number
  maxMs: number
}

/**
 * The wait after the `failures`-th failed tick in a row: baseMs * 2^(failures-1), capped; at least
 * a provider's Retry-After.
 */
export function backoffDelay(failures: number, backoff: Backoff, error: unknown): number {
  return Math.max(
    Math.min(backoff.baseMs * 2 ** (failures - 1), backoff.maxMs),
    retryAfterMs(error) ?? 0,
  )
}

export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done)
  })
}

/**
 * Spaces calls to `perSecond`, letting a second's worth through at once (so a burst still shares a
 * batch).
 */
export function createThrottle(perSecond: number, clock: Clock, sleep: Sleep) {
  let tokens = perSecond
  let at = clock.now()
  return async (signal: AbortSignal) => {
    for (;;) {
      const now = clock.now()
      tokens = Math.min(perSecond, tokens + ((now - at) / 1000) * perSecond)
      at = now
      if (tokens >= 1) {
        tokens -= 1
        return
      }
      await sleep(Math.ceil(((1 - tokens) / perSecond) * 1000), signal)
      if (signal.aborted) throw signal.reason ?? new Error('stopped')
    }
  }
}
