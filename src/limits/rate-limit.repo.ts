import type { Database } from '../db/client.ts'
import type { RateLimits } from '../projects/project.service.ts'
import { windowStart } from './windows.ts'

export interface TakeResult {
  granted: number
  /** Usage of each window before this grant. */
  used: RateLimits
}

/*
 * One statement, one row lock: insert the subject's row or update it, where a window whose
 * start moved on counts from zero. A start older than the stored one (an instance whose clock
 * lags) counts in the stored window rather than resetting it. k, the units granted, is min(n, what each window has left),
 * never below 0; SET expressions all see the old row, so k is computed from it in each. The
 * row keeps k as last_grant, so RETURNING the new usage also tells the usage before.
 */
// Parameters: $1 subject, $2-$4 window starts, $5-$7 limits, $8 units wanted; cast once here.
const [N, LM, LH, LD] = ['$8::int', '$5::int', '$6::int', '$7::int']
const OLD = (w: string) => `(CASE WHEN excluded.${w}_start > r.${w}_start THEN 0 ELSE r.${w}_used END)`
const K = `GREATEST(0, LEAST(${N}, ${LM} - ${OLD('minute')}, ${LH} - ${OLD('hour')}, ${LD} - ${OLD('day')}))`
const FIRST_K = `GREATEST(0, LEAST(${N}, ${LM}, ${LH}, ${LD}))`
const TAKE = `
INSERT INTO rate_limits AS r (subject, minute_start, minute_used, hour_start, hour_used, day_start, day_used, last_grant)
VALUES ($1, $2::timestamptz, ${FIRST_K}, $3::timestamptz, ${FIRST_K}, $4::timestamptz, ${FIRST_K}, ${FIRST_K})
ON CONFLICT (subject) DO UPDATE SET
  minute_start = GREATEST(r.minute_start, excluded.minute_start), minute_used = ${OLD('minute')} + ${K},
  hour_start = GREATEST(r.hour_start, excluded.hour_start), hour_used = ${OLD('hour')} + ${K},
  day_start = GREATEST(r.day_start, excluded.day_start), day_used = ${OLD('day')} + ${K},
  last_grant = ${K}
RETURNING last_grant, minute_used, hour_used, day_used`

/** R23 counters in the database: the only truth every instance shares. */
export function createRateLimitRepo(database: Database) {
  return {
    /** Takes up to `n` units from all three windows of `subject` at once, in one round trip. */
    async take(subject: string, limits: RateLimits, n: number, now: number): Promise<TakeResult> {
      const iso = (name: 'minute' | 'hour' | 'day') => new Date(windowStart(name, now)).toISOString()
      const [row] = await database.query<{ last_grant: number; minute_used: number; hour_used: number; day_used: number }>(TAKE, [
        subject, iso('minute'), iso('hour'), iso('day'), limits.minute, limits.hour, limits.day, n,
      ])
      const k = Number(row.last_grant)
      return { granted: k, used: { minute: Number(row.minute_used) - k, hour: Number(row.hour_used) - k, day: Number(row.day_used) - k } }
    },

    /** Forgets subjects not seen for two days (mostly client IPs without a valid key). */
    async prune(now: number): Promise<void> {
      await database.query('DELETE FROM rate_limits WHERE day_start < $1', [new Date(now - 2 * 86_400_000).toISOString()])
    },
  }
}

export type RateLimitRepo = ReturnType<typeof createRateLimitRepo>
