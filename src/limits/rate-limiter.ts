import type { LimitedSurface, Metrics } from '../metrics/metrics.ts'
import type { Clock } from '../lib/clock.ts'
import type { RateLimits } from '../projects/project.service.ts'
import type { RateLimitRepo } from './rate-limit.repo.ts'
import { WINDOWS, windowEnd, type WindowName } from './windows.ts'

export interface WindowState {
  limit: number
  remaining: number
  /** End of the window, epoch ms. */
  reset: number
}

export interface Decision {
  allowed: boolean
  windows: Record<WindowName, WindowState>
  /** Seconds until the exhausted windows have all reset (only when refused). */
  retryAfter: number | null
}

interface Waiter {
  limits: RateLimits
  resolve(d: Decision): void
  reject(e: unknown): void
}

/**
 * R23, exact across instances: the database counter is the only truth and every admitted
 * request is counted there before it is admitted. To keep that from costing a round trip per
 * request, requests for one subject that arrive while a round trip is in flight wait and are
 * granted together by the next one (group commit). Under load a batch holds every request
 * that queued during one round trip; idle, a request costs one round trip.
 *
 * Leased quota blocks were the alternative: cheaper, but an instance holding unused units
 * makes another instance refuse requests while the window still has room, and the
 * Remaining headers could not be exact. This design never over-admits, never refuses early.
 */
/** Which surface a subject's limit guards, from its prefix (`project:`/`ip:` the API, `pay:`, `sign-in:`). */
const surfaceOf = (subject: string): LimitedSurface => (subject.startsWith('pay:') ? 'pay' : subject.startsWith('sign-in:') ? 'sign_in' : 'api')

export function createRateLimiter(deps: { repo: RateLimitRepo; clock: Clock; metrics?: Pick<Metrics, 'rateLimited'> }) {
  const queues = new Map<string, { waiting: Waiter[]; busy: boolean }>()

  async function flush(subject: string) {
    const q = queues.get(subject)!
    const batch = q.waiting
    q.waiting = []
    q.busy = true
    const limits = batch[batch.length - 1].limits
    const now = deps.clock.now()
    try {
      const { granted, used } = await deps.repo.take(subject, limits, batch.length, now)
      batch.forEach((w, i) => {
        const decision = decide(limits, used, granted, i, now)
        if (!decision.allowed) deps.metrics?.rateLimited(surfaceOf(subject))
        w.resolve(decision)
      })
    } catch (e) {
      batch.forEach((w) => w.reject(e))
    } finally {
      q.busy = false
      if (q.waiting.length) void flush(subject)
      else queues.delete(subject)
    }
  }

  return {
    /** Counts one request for `subject` and says whether it may proceed. */
    check(subject: string, limits: RateLimits): Promise<Decision> {
      return new Promise((resolve, reject) => {
        let q = queues.get(subject)
        if (!q) queues.set(subject, (q = { waiting: [], busy: false }))
        q.waiting.push({ limits, resolve, reject })
        if (!q.busy && q.waiting.length === 1) void flush(subject)
      })
    },
  }
}

/** The decision for the i-th request of a batch in which `granted` were admitted. */
function decide(limits: RateLimits, used: RateLimits, granted: number, i: number, now: number): Decision {
  const allowed = i < granted
  const after = allowed ? i + 1 : granted
  const windows = {} as Record<WindowName, WindowState>
  let retryAt = 0
  for (const w of WINDOWS) {
    const remaining = Math.max(0, limits[w] - used[w] - after)
    const reset = windowEnd(w, now)
    windows[w] = { limit: limits[w], remaining, reset }
    if (!allowed && limits[w] - used[w] - granted <= 0) retryAt = Math.max(retryAt, reset)
  }
  return { allowed, windows, retryAfter: allowed ? null : Math.max(1, Math.ceil((retryAt - now) / 1000)) }
}

export type RateLimiter = ReturnType<typeof createRateLimiter>
