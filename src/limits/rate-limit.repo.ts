import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import type { RateLimits } from '../projects/project.service.ts'
import { windowStart } from './windows.ts'

export interface TakeResult {
  granted: number
  /** Usage of each window before this grant. */
  used: RateLimits
}

/** One round trip: up to `n` units from all three windows, atomically (drizzle/0001_rate_limit_take.sql). */
export function createRateLimitRepo(database: Database) {
  return {
    async take(subject: string, limits: RateLimits, n: number, now: number): Promise<TakeResult> {
      const iso = (name: 'minute' | 'hour' | 'day') => new Date(windowStart(name, now)).toISOString()
      const [row] = await database.rows<{ granted: number; used_minute: number; used_hour: number; used_day: number }>(sql`
        select * from rate_limit_take(${subject}, ${iso('minute')}, ${iso('hour')}, ${iso('day')},
          ${limits.minute}::int, ${limits.hour}::int, ${limits.day}::int, ${n}::int)`)
      return { granted: Number(row.granted), used: { minute: Number(row.used_minute), hour: Number(row.used_hour), day: Number(row.used_day) } }
    },

    /** Drops windows that ended more than a day ago. */
    async prune(now: number): Promise<void> {
      await database.rows(sql`delete from rate_limit_counters where window_start < ${new Date(now - 2 * 86_400_000).toISOString()}`)
    },
  }
}

export type RateLimitRepo = ReturnType<typeof createRateLimitRepo>
