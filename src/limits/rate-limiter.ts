import type { TransactionRow } from '../db/schema.ts'
import type { LimitedSurface, Metrics } from '../metrics/metrics.ts'
import { createWorkLoop } from '../instances/work-loop.ts'
import type { Clock } from '../lib/clock.ts'
import type { RateLimits } from '../projects/project.service.ts'
import type { RateLimitRepo, StoredWindows } from './rate-limit.repo.ts'
import { WINDOWS, windowEnd, windowStart, type WindowName } from './windows.ts'

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
  /**
   * The transaction asked to be read with the grant (`check`'s `read`), when the grant's
   * statement read it and the request was admitted: the row (in any project; the caller checks
   * the scope), or null for none. Absent when the limiter read nothing (the caller reads it).
   */
  read?: { id: string; row: TransactionRow | null }
}

/** Counts requests per subject against its limits (docs/decisions/0023-rate-limits-exact.md). */
export interface RateLimiter {
  /**
   * Counts one request for `subject` and says whether it may proceed. `read`, the id (a UUID) of
   * the transaction the request will read, lets the shared limiter read it in the grant's own
   * statement, so the request needs no second round trip.
   */
  check(subject: string, limits: RateLimits, read?: string): Promise<Decision>
  /**
   * Writes what is counted but not stored yet (the embedded limiter; the shared one stores as it
   * counts).
   */
  flush(): Promise<void>
}

interface Waiter {
  limits: RateLimits
  read: string | undefined
  resolve(d: Decision): void
  reject(e: unknown): void
}

/**
 * docs/decisions/0023-rate-limits-exact.md, exact across instances: the database counter is the
 * only truth and every admitted request is counted there before it is admitted. To keep that from
 * costing a round trip per request, requests for one subject that arrive while a round trip is in
 * flight wait and are granted together by the next one (group commit). Under load a batch holds
 * every request that queued during one round trip; idle, a request costs one round trip. A
 * request that only reads one transaction (GET /api/transactions/{id}) hands its id along, and
 * the batch's statement reads those transactions as it grants: such a request costs no round
 * trip of its own.
 *
 * Leased quota blocks were the alternative: cheaper, but an instance holding unused units
 * makes another instance refuse requests while the window still has room, and the
 * Remaining headers could not be exact. This design never over-admits, never refuses early.
 */
/**
 * Which surface a subject's limit guards, from its prefix (`project:`/`ip:` the API, `pay:`,
 * `sign-in:`).
 */
const surfaceOf = (subject: string): LimitedSurface =>
  subject.startsWith('pay:') ? 'pay' : subject.startsWith('sign-in:') ? 'sign_in' : 'api'

export function createRateLimiter(deps: {
  repo: Pick<RateLimitRepo, 'take'>
  clock: Clock
  metrics?: Pick<Metrics, 'rateLimited'>
}): RateLimiter {
  const queues = new Map<string, { waiting: Waiter[]; busy: boolean }>()

  async function flush(subject: string) {
    const q = queues.get(subject)!
    const batch = q.waiting
    q.waiting = []
    q.busy = true
    const limits = batch[batch.length - 1].limits
    const now = deps.clock.now()
    const ids = [...new Set(batch.flatMap((w) => (w.read ? [w.read] : [])))]
    try {
      const { granted, used, read } = await deps.repo.take(subject, limits, batch.length, now, ids)
      const found = new Map(read?.map((row) => [row.id, row]))
      batch.forEach((w, i) => {
        const decision = decide(limits, used, granted, i, now)
        if (!decision.allowed) deps.metrics?.rateLimited(surfaceOf(subject))
        else if (w.read && read) decision.read = { id: w.read, row: found.get(w.read) ?? null }
        w.resolve(decision)
      })
    } catch (e) {
      for (const w of batch) w.reject(e)
    } finally {
      q.busy = false
      if (q.waiting.length) void flush(subject)
      else queues.delete(subject)
    }
  }

  return {
    check(subject: string, limits: RateLimits, read?: string): Promise<Decision> {
      return new Promise((resolve, reject) => {
        let q = queues.get(subject)
        if (!q) queues.set(subject, (q = { waiting: [], busy: false }))
        q.waiting.push({ limits, read, resolve, reject })
        if (!q.busy && q.waiting.length === 1) void flush(subject)
      })
    },
    flush: async () => {},
  }
}

/** How soon counts reach the database after they changed (the embedded limiter's write-behind). */
export const EMBEDDED_FLUSH_MS = 50
/**
 * Subjects kept in memory; beyond it, the least recently seen stored ones are dropped (and read
 * back if seen again).
 */
const EMBEDDED_MAX_SUBJECTS = 100_000

/**
 * docs/decisions/0023-rate-limits-exact.md on the embedded database (PGlite), where one process
 * owns the database by construction: counts live in memory and decide at once, exactly as the
 * shared limiter's statement would (the same windows, the same refusals, the same Remaining
 * values). The database stays the durable record: a subject's windows are read from it the first
 * time the process sees the subject, and every change is written back within EMBEDDED_FLUSH_MS, all
 * changed subjects in one statement, and at the graceful stop. A restart therefore keeps each
 * window's counts; a crash can forget at most the last EMBEDDED_FLUSH_MS of them.
 */
export function createEmbeddedRateLimiter(deps: {
  repo: Pick<RateLimitRepo, 'load' | 'store'>
  clock: Clock
  metrics?: Pick<Metrics, 'rateLimited'>
  onError?: (e: unknown) => void
}): RateLimiter {
  const known = new Map<string, StoredWindows>()
  const loading = new Map<string, Promise<StoredWindows>>()
  const dirty = new Set<string>()

  async function windowsOf(subject: string): Promise<StoredWindows> {
    const hit = known.get(subject)
    if (hit) {
      // Most recently seen last, so eviction drops the longest unseen.
      known.delete(subject)
      known.set(subject, hit)
      return hit
    }
    let pending = loading.get(subject)
    if (!pending) {
      pending = deps.repo
        .load([subject])
        .then(([row]) => {
          const w = row ?? {
            subject,
            minuteStart: 0,
            minuteUsed: 0,
            hourStart: 0,
            hourUsed: 0,
            dayStart: 0,
            dayUsed: 0,
          }
          known.set(subject, w)
          evict()
          return w
        })
        .finally(() => loading.delete(subject))
      loading.set(subject, pending)
    }
    return pending
  }

  function evict() {
    if (known.size <= EMBEDDED_MAX_SUBJECTS) return
    for (const subject of known.keys()) {
      if (known.size <= EMBEDDED_MAX_SUBJECTS * 0.9) break
      if (!dirty.has(subject)) known.delete(subject)
    }
  }

  /**
   * Writes every changed subject in one statement; a failed write marks them again and is retried.
   */
  async function write() {
    const batch = [...dirty]
      .map((s) => known.get(s)!)
      .filter(Boolean)
      .map((w) => ({ ...w }))
    dirty.clear()
    if (batch.length === 0) return
    try {
      await deps.repo.store(batch)
    } catch (e) {
      // Not lost: marked again, so the retry (or the next write) carries it.
      for (const w of batch) if (known.has(w.subject)) dirty.add(w.subject)
      deps.onError?.(e)
      throw e
    }
  }

  // Write-behind on the shared work loop: a change is written within EMBEDDED_FLUSH_MS, every
  // change of that window in the same statement, one write at a time.
  const writes = createWorkLoop({
    run: write,
    gatherMs: EMBEDDED_FLUSH_MS,
    trailing: true,
    retryMs: EMBEDDED_FLUSH_MS,
  })

  return {
    async check(subject, limits) {
      const w = await windowsOf(subject)
      const now = deps.clock.now()
      // As the shared statement does: a window whose start moved on counts from zero; an older
      // start counts in the stored window.
      const used = {} as RateLimits
      for (const name of WINDOWS) {
        const start = windowStart(name, now)
        const key = `${name}Start` as const
        if (start > w[key]) {
          w[key] = start
          w[`${name}Used`] = 0
        }
        used[name] = w[`${name}Used`]
      }
      const granted = Math.max(
        0,
        Math.min(1, limits.minute - used.minute, limits.hour - used.hour, limits.day - used.day),
      )
      if (granted > 0) {
        for (const name of WINDOWS) w[`${name}Used`] += granted
        dirty.add(subject)
        void writes.request()
      }
      const decision = decide(limits, used, granted, 0, now)
      if (!decision.allowed) deps.metrics?.rateLimited(surfaceOf(subject))
      return decision
    },

    async flush() {
      if (dirty.size > 0) void writes.request()
      await writes.flush()
    },
  }
}

/** The decision for the i-th request of a batch in which `granted` were admitted. */
function decide(
  limits: RateLimits,
  used: RateLimits,
  granted: number,
  i: number,
  now: number,
): Decision {
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
  return {
    allowed,
    windows,
    retryAfter: allowed ? null : Math.max(1, Math.ceil((retryAt - now) / 1000)),
  }
}
