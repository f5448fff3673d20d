import { describe, expect, test } from 'bun:test'
import { manualClock } from '../../src/lib/clock.ts'
import type { RateLimitRepo, StoredWindows } from '../../src/limits/rate-limit.repo.ts'
import {
  createEmbeddedRateLimiter,
  createRateLimiter,
  EMBEDDED_FLUSH_MS,
} from '../../src/limits/rate-limiter.ts'
import type { RateLimits } from '../../src/projects/project.service.ts'

/** An in-memory stand-in for rate_limit_take(): same contract, and it records each round trip. */
function memoryRepo() {
  const used = new Map<string, RateLimits>()
  const calls: number[] = []
  let release: (() => void) | null = null
  const repo: Pick<RateLimitRepo, 'take'> = {
    async take(subject, limits, n) {
      calls.push(n)
      if (calls.length === 1) await new Promise<void>((r) => (release = r)) // hold the first round trip
      const u = used.get(subject) ?? { minute: 0, hour: 0, day: 0 }
      const granted = Math.max(
        0,
        Math.min(n, limits.minute - u.minute, limits.hour - u.hour, limits.day - u.day),
      )
      used.set(subject, {
        minute: u.minute + granted,
        hour: u.hour + granted,
        day: u.day + granted,
      })
      return { granted, used: u }
    },
  }
  return { repo, calls, release: () => release?.() }
}

describe('createRateLimiter()', () => {
  const limits = { minute: 5, hour: 100, day: 1000 }

  test('requests arriving during a round trip share the next one (group commit)', async () => {
    const m = memoryRepo()
    const limiter = createRateLimiter({
      repo: m.repo,
      clock: manualClock(Date.parse('2030-01-01T00:00:10Z')),
    })
    const first = limiter.check('s', limits)
    const rest = Array.from({ length: 7 }, () => limiter.check('s', limits))
    m.release()
    const decisions = await Promise.all([first, ...rest])
    expect(m.calls).toEqual([1, 7])
    expect(decisions.map((d) => d.allowed)).toEqual([
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
    ])
    expect(decisions.map((d) => d.windows.minute.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0])
    expect(decisions.map((d) => d.windows.hour.remaining)).toEqual([99, 98, 97, 96, 95, 95, 95, 95])
    expect(decisions[5].retryAfter).toBe(50)
    expect(decisions[0].retryAfter).toBeNull()
  })

  test('subjects are batched separately', async () => {
    const m = memoryRepo()
    const limiter = createRateLimiter({ repo: m.repo, clock: manualClock() })
    const a = limiter.check('a', limits)
    const b = limiter.check('b', limits)
    m.release()
    await Promise.all([a, b])
    expect(m.calls).toEqual([1, 1])
  })

  test('Retry-After points at the latest exhausted window', async () => {
    const m = memoryRepo()
    const limiter = createRateLimiter({
      repo: m.repo,
      clock: manualClock(Date.parse('2030-01-01T23:00:00Z')),
    })
    const p = limiter.check('s', { minute: 10, hour: 10, day: 1 })
    m.release()
    await p
    const refused = await limiter.check('s', { minute: 10, hour: 10, day: 1 })
    expect(refused.allowed).toBe(false)
    expect(refused.retryAfter).toBe(3600)
    expect(new Date(refused.windows.day.reset).toISOString()).toBe('2030-01-02T00:00:00.000Z')
  })

  test('a failing round trip rejects its whole batch and the next batch still runs', async () => {
    let fail = true
    const repo: Pick<RateLimitRepo, 'take'> = {
      take: async (_s, _l, n) => {
        if (fail) throw new Error('db down')
        return { granted: n, used: { minute: 0, hour: 0, day: 0 } }
      },
    }
    const limiter = createRateLimiter({ repo, clock: manualClock() })
    await expect(limiter.check('s', limits)).rejects.toThrow('db down')
    fail = false
    expect((await limiter.check('s', limits)).allowed).toBe(true)
  })
})

/** The stored rows of the embedded limiter, and every store() call it made. */
function storedRepo(initial: StoredWindows[] = []) {
  const rows = new Map(initial.map((w) => [w.subject, { ...w }]))
  const stores: string[][] = []
  const loads: string[][] = []
  let failing = false
  const repo: Pick<RateLimitRepo, 'load' | 'store'> = {
    async load(subjects) {
      loads.push(subjects)
      return subjects.flatMap((s) => (rows.has(s) ? [{ ...rows.get(s)! }] : []))
    },
    async store(ws) {
      if (failing) throw new Error('disk full')
      stores.push(ws.map((w) => w.subject))
      for (const w of ws) rows.set(w.subject, { ...w })
    },
  }
  return { repo, rows, stores, loads, fail: (f: boolean) => (failing = f) }
}

describe('createEmbeddedRateLimiter()', () => {
  const limits = { minute: 5, hour: 100, day: 1000 }
  const at = Date.parse('2030-01-01T00:00:10Z')

  test('decides from memory as the shared statement does: counts, refusals, Remaining and Retry-After', async () => {
    const m = storedRepo()
    const limiter = createEmbeddedRateLimiter({ repo: m.repo, clock: manualClock(at) })
    const decisions = []
    for (let i = 0; i < 8; i++) decisions.push(await limiter.check('s', limits))
    expect(decisions.map((d) => d.allowed)).toEqual([
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
    ])
    expect(decisions.map((d) => d.windows.minute.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0])
    expect(decisions.map((d) => d.windows.hour.remaining)).toEqual([99, 98, 97, 96, 95, 95, 95, 95])
    expect(decisions[5].retryAfter).toBe(50)
    expect(decisions[0].retryAfter).toBeNull()
    expect(m.loads).toEqual([['s']])
  })

  test('a new minute counts from zero while the hour keeps counting', async () => {
    const clock = manualClock(at)
    const limiter = createEmbeddedRateLimiter({ repo: storedRepo().repo, clock })
    for (let i = 0; i < 2; i++) await limiter.check('s', { minute: 2, hour: 3, day: 10 })
    expect((await limiter.check('s', { minute: 2, hour: 3, day: 10 })).allowed).toBe(false)
    clock.advance(60_000)
    const next = await limiter.check('s', { minute: 2, hour: 3, day: 10 })
    expect([next.allowed, next.windows.minute.remaining, next.windows.hour.remaining]).toEqual([
      true,
      1,
      0,
    ])
    const over = await limiter.check('s', { minute: 2, hour: 3, day: 10 })
    // 00:01:10 now; the hour window ends at 01:00:00.
    expect([over.allowed, over.retryAfter]).toEqual([false, 3530])
  })

  test('changes are written behind, every changed subject in one statement; refused requests write nothing', async () => {
    const m = storedRepo()
    const limiter = createEmbeddedRateLimiter({ repo: m.repo, clock: manualClock(at) })
    for (let i = 0; i < 3; i++) await limiter.check('a', limits)
    await limiter.check('b', limits)
    expect(m.stores).toEqual([])
    await limiter.flush()
    expect(m.stores).toEqual([['a', 'b']])
    expect([
      m.rows.get('a')!.minuteUsed,
      m.rows.get('a')!.dayUsed,
      m.rows.get('b')!.hourUsed,
    ]).toEqual([3, 3, 1])
    await limiter.flush()
    expect(m.stores).toEqual([['a', 'b']])
    const full = createEmbeddedRateLimiter({ repo: m.repo, clock: manualClock(at) })
    for (let i = 0; i < 3; i++) await full.check('c', { minute: 0, hour: 1, day: 1 })
    await full.flush()
    expect(m.stores.length).toBe(1)
  })

  test('the write-behind runs by itself within EMBEDDED_FLUSH_MS', async () => {
    const m = storedRepo()
    const limiter = createEmbeddedRateLimiter({ repo: m.repo, clock: manualClock(at) })
    await limiter.check('a', limits)
    const until = Date.now() + 50 * EMBEDDED_FLUSH_MS
    while (m.stores.length === 0 && Date.now() < until) await Bun.sleep(1)
    expect(m.stores).toEqual([['a']])
  })

  test('a new process continues from the stored counts (a restart keeps each window)', async () => {
    const m = storedRepo()
    const first = createEmbeddedRateLimiter({ repo: m.repo, clock: manualClock(at) })
    for (let i = 0; i < 3; i++) await first.check('s', limits)
    await first.flush()
    const second = createEmbeddedRateLimiter({ repo: m.repo, clock: manualClock(at + 5_000) })
    const d = await second.check('s', limits)
    expect([d.windows.minute.remaining, d.windows.hour.remaining, d.windows.day.remaining]).toEqual(
      [1, 96, 996],
    )
    expect((await second.check('s', limits)).allowed).toBe(true)
    expect((await second.check('s', limits)).allowed).toBe(false)
  })

  test('a failed write is carried by the next one', async () => {
    const m = storedRepo()
    const errors: unknown[] = []
    const limiter = createEmbeddedRateLimiter({
      repo: m.repo,
      clock: manualClock(at),
      onError: (e) => errors.push(e),
    })
    await limiter.check('a', limits)
    m.fail(true)
    await limiter.flush()
    expect(errors.length).toBe(1)
    m.fail(false)
    await limiter.check('b', limits)
    await limiter.flush()
    expect(m.stores.flat().sort()).toEqual(['a', 'b'])
  })

  test('first requests of a subject arriving together read it once', async () => {
    const m = storedRepo([
      {
        subject: 's',
        minuteStart: at - 10_000,
        minuteUsed: 4,
        hourStart: at - 10_000,
        hourUsed: 4,
        dayStart: at - 10_000,
        dayUsed: 4,
      },
    ])
    const limiter = createEmbeddedRateLimiter({ repo: m.repo, clock: manualClock(at) })
    const ds = await Promise.all([limiter.check('s', limits), limiter.check('s', limits)])
    expect(m.loads).toEqual([['s']])
    expect(ds.map((d) => d.allowed)).toEqual([true, false])
  })
})
