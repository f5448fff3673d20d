import { describe, expect, test } from 'bun:test'
import { manualClock } from '../../src/lib/clock.ts'
import type { RateLimitRepo } from '../../src/limits/rate-limit.repo.ts'
import { createRateLimiter } from '../../src/limits/rate-limiter.ts'
import type { RateLimits } from '../../src/projects/project.service.ts'

/** An in-memory stand-in for rate_limit_take(): same contract, and it records each round trip. */
function memoryRepo() {
  const used = new Map<string, RateLimits>()
  const calls: number[] = []
  let release: (() => void) | null = null
  const repo: RateLimitRepo = {
    async take(subject, limits, n) {
      calls.push(n)
      if (calls.length === 1) await new Promise<void>((r) => (release = r)) // hold the first round trip
      const u = used.get(subject) ?? { minute: 0, hour: 0, day: 0 }
      const granted = Math.max(0, Math.min(n, limits.minute - u.minute, limits.hour - u.hour, limits.day - u.day))
      used.set(subject, { minute: u.minute + granted, hour: u.hour + granted, day: u.day + granted })
      return { granted, used: u }
    },
    prune: async () => {},
  }
  return { repo, calls, release: () => release?.() }
}

describe('createRateLimiter()', () => {
  const limits = { minute: 5, hour: 100, day: 1000 }

  test('requests arriving during a round trip share the next one (group commit)', async () => {
    const m = memoryRepo()
    const limiter = createRateLimiter({ repo: m.repo, clock: manualClock(Date.parse('2030-01-01T00:00:10Z')) })
    const first = limiter.check('s', limits)
    const rest = Array.from({ length: 7 }, () => limiter.check('s', limits))
    m.release()
    const decisions = await Promise.all([first, ...rest])
    expect(m.calls).toEqual([1, 7])
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false, false])
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
    const limiter = createRateLimiter({ repo: m.repo, clock: manualClock(Date.parse('2030-01-01T23:00:00Z')) })
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
    const repo: RateLimitRepo = {
      take: async (_s, _l, n) => {
        if (fail) throw new Error('db down')
        return { granted: n, used: { minute: 0, hour: 0, day: 0 } }
      },
      prune: async () => {},
    }
    const limiter = createRateLimiter({ repo, clock: manualClock() })
    await expect(limiter.check('s', limits)).rejects.toThrow('db down')
    fail = false
    expect((await limiter.check('s', limits)).allowed).toBe(true)
  })
})
