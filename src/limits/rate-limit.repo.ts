import { getTableColumns, inArray, lt, sql } from 'drizzle-orm'
import type { PgColumn } from 'drizzle-orm/pg-core'
import type { Database } from '../db/client.ts'
import { bare, param, prepare } from '../db/prepared.ts'
import { rateLimits, transactions, type TransactionRow } from '../db/schema.ts'
import type { RateLimits } from '../projects/project.service.ts'
import { windowStart, type WindowName } from './windows.ts'

/** A subject's stored windows (epoch ms starts): what the embedded limiter keeps in memory. */
export interface StoredWindows {
  subject: string
  minuteStart: number
  minuteUsed: number
  hourStart: number
  hourUsed: number
  dayStart: number
  dayUsed: number
}

export interface TakeResult {
  granted: number
  /** Usage of each window before this grant. */
  used: RateLimits
  /** The transactions read with the grant (`take`'s `read`) that exist, in any project. */
  read?: TransactionRow[]
}

/*
 * One statement, one row lock: insert the subject's row or update it, where a window whose start
 * moved on counts from zero. A start older than the stored one (an instance whose clock lags)
 * counts in the stored window rather than resetting it. k, the units granted, is min(n, what each
 * window has left), never below 0; SET expressions all see the old row, so k is computed from it in
 * each. The row keeps k as last_grant, so RETURNING the new usage also tells the usage before.
 */
const WINDOW_COLUMNS = {
  minute: { start: rateLimits.minuteStart, used: rateLimits.minuteUsed },
  hour: { start: rateLimits.hourStart, used: rateLimits.hourUsed },
  day: { start: rateLimits.dayStart, used: rateLimits.dayUsed },
} satisfies Record<WindowName, { start: PgColumn; used: PgColumn }>
// Parameters: subject, the window starts, the limits and n, the units wanted. The integers are
// cast: in LEAST and GREATEST alone PostgreSQL could not tell their type.
const N = param('n', 'int')
const LIMIT = {
  minute: param('minuteLimit', 'int'),
  hour: param('hourLimit', 'int'),
  day: param('dayLimit', 'int'),
}
/** A window's usage in the stored row, or 0 once the window moved on. */
const OLD = (w: WindowName) =>
  sql`(CASE WHEN excluded.${bare(WINDOW_COLUMNS[w].start)} > ${WINDOW_COLUMNS[w].start} THEN 0 ELSE ${WINDOW_COLUMNS[w].used} END)`
const K = sql`GREATEST(0, LEAST(${N}, ${LIMIT.minute} - ${OLD('minute')}, ${LIMIT.hour} - ${OLD('hour')}, ${LIMIT.day} - ${OLD('day')}))`
const FIRST_K = sql`GREATEST(0, LEAST(${N}, ${LIMIT.minute}, ${LIMIT.hour}, ${LIMIT.day}))`
const LATER_START = (w: WindowName) =>
  sql`GREATEST(${WINDOW_COLUMNS[w].start}, excluded.${bare(WINDOW_COLUMNS[w].start)})`

/** The transaction columns a grant that reads carries, each as `t_<key>`. */
const TX_COLUMNS = Object.entries(getTableColumns(transactions))

/**
 * docs/decisions/0023-rate-limits-exact.md counters in the database: the only truth every instance
 * shares.
 */
export function createRateLimitRepo(database: Database) {
  const { db } = database
  // Every API request is counted here: prepared once, each value sent once.
  const GRANT = sql`
    INSERT INTO ${rateLimits} (${bare(rateLimits.subject)}, ${bare(rateLimits.minuteStart)}, ${bare(rateLimits.minuteUsed)}, ${bare(rateLimits.hourStart)},
      ${bare(rateLimits.hourUsed)}, ${bare(rateLimits.dayStart)}, ${bare(rateLimits.dayUsed)}, ${bare(rateLimits.lastGrant)})
    VALUES (${param('subject')}, ${param('minuteStart', 'timestamptz')}, ${FIRST_K}, ${param('hourStart', 'timestamptz')}, ${FIRST_K},
      ${param('dayStart', 'timestamptz')}, ${FIRST_K}, ${FIRST_K})
    ON CONFLICT (${bare(rateLimits.subject)}) DO UPDATE SET
      ${bare(rateLimits.minuteStart)} = ${LATER_START('minute')}, ${bare(rateLimits.minuteUsed)} = ${OLD('minute')} + ${K},
      ${bare(rateLimits.hourStart)} = ${LATER_START('hour')}, ${bare(rateLimits.hourUsed)} = ${OLD('hour')} + ${K},
      ${bare(rateLimits.dayStart)} = ${LATER_START('day')}, ${bare(rateLimits.dayUsed)} = ${OLD('day')} + ${K},
      ${bare(rateLimits.lastGrant)} = ${K}
    RETURNING ${rateLimits.lastGrant} AS "lastGrant", ${rateLimits.minuteUsed} AS "minuteUsed", ${rateLimits.hourUsed} AS "hourUsed", ${rateLimits.dayUsed} AS "dayUsed"`
  type Granted = { lastGrant: number; minuteUsed: number; hourUsed: number; dayUsed: number }
  const take = prepare<Granted, Record<string, string | number>>(database, GRANT)
  // The grant of requests that read one transaction each (GET /api/transactions/{id}) with their
  // reads: one statement, one round trip, for the whole batch. The grant's row comes back once
  // per transaction found (by primary key alone, in any project: the caller checks the scope),
  // or once with NULL columns when none is.
  const takeAndRead = prepare<Granted & Record<string, unknown>, Record<string, string | number>>(
    database,
    sql`WITH granted AS (${GRANT})
    SELECT granted.*, ${sql.join(
      TX_COLUMNS.map(([key, column]) => sql`t.${bare(column)} AS ${sql.identifier(`t_${key}`)}`),
      sql`, `,
    )}
    FROM granted LEFT JOIN ${transactions} t ON t.${bare(transactions.id)} = ANY(${param('ids', 'uuid[]')})`,
  )

  return {
    /**
     * Takes up to `n` units from all three windows of `subject` at once, in one round trip; with
     * `read`, the same statement reads those transactions (ids already known to be UUIDs).
     */
    async take(
      subject: string,
      limits: RateLimits,
      n: number,
      now: number,
      read: string[] = [],
    ): Promise<TakeResult> {
      const start = (name: WindowName) => new Date(windowStart(name, now)).toISOString()
      const params = {
        subject,
        minuteStart: start('minute'),
        hourStart: start('hour'),
        dayStart: start('day'),
        minuteLimit: limits.minute,
        hourLimit: limits.hour,
        dayLimit: limits.day,
        n,
      }
      const rows =
        read.length === 0
          ? await take.execute(params)
          : await takeAndRead.execute({ ...params, ids: `{${read.join(',')}}` })
      const row = rows[0]!
      const k = Number(row.lastGrant)
      return {
        granted: k,
        used: {
          minute: Number(row.minuteUsed) - k,
          hour: Number(row.hourUsed) - k,
          day: Number(row.dayUsed) - k,
        },
        ...(read.length === 0
          ? {}
          : {
              read: rows
                .filter((r) => (r as Record<string, unknown>).t_id != null)
                .map(transactionOf),
            }),
      }
    },

    /** The stored windows of these subjects (those never counted are absent). */
    async load(subjects: string[]): Promise<StoredWindows[]> {
      const rows = await db.select().from(rateLimits).where(inArray(rateLimits.subject, subjects))
      return rows.map((r) => ({
        subject: r.subject,
        minuteStart: r.minuteStart.getTime(),
        minuteUsed: r.minuteUsed,
        hourStart: r.hourStart.getTime(),
        hourUsed: r.hourUsed,
        dayStart: r.dayStart.getTime(),
        dayUsed: r.dayUsed,
      }))
    },

    /**
     * Writes these subjects' windows as they are, in one statement (the embedded limiter's
     * write-behind).
     */
    async store(windows: StoredWindows[]): Promise<void> {
      if (windows.length === 0) return
      const values = windows.map((w) => ({
        subject: w.subject,
        minuteStart: new Date(w.minuteStart),
        minuteUsed: w.minuteUsed,
        hourStart: new Date(w.hourStart),
        hourUsed: w.hourUsed,
        dayStart: new Date(w.dayStart),
        dayUsed: w.dayUsed,
        lastGrant: 0,
      }))
      const excluded = (c: PgColumn) => sql`excluded.${bare(c)}`
      await db
        .insert(rateLimits)
        .values(values)
        .onConflictDoUpdate({
          target: rateLimits.subject,
          set: {
            minuteStart: excluded(rateLimits.minuteStart),
            minuteUsed: excluded(rateLimits.minuteUsed),
            hourStart: excluded(rateLimits.hourStart),
            hourUsed: excluded(rateLimits.hourUsed),
            dayStart: excluded(rateLimits.dayStart),
            dayUsed: excluded(rateLimits.dayUsed),
          },
        })
    },

    /** Forgets subjects not seen for two days (mostly client IPs without a valid key). */
    async prune(now: number): Promise<void> {
      await db.delete(rateLimits).where(lt(rateLimits.dayStart, new Date(now - 2 * 86_400_000)))
    },
  }
}

/** A transaction from its `t_<key>` columns, each decoded as drizzle decodes it in a select. */
function transactionOf(raw: Record<string, unknown>): TransactionRow {
  const row: Record<string, unknown> = {}
  for (const [key, column] of TX_COLUMNS) {
    const v = raw[`t_${key}`]
    row[key] = v === null || v === undefined ? null : column.mapFromDriverValue(v)
  }
  return row as TransactionRow
}

export type RateLimitRepo = ReturnType<typeof createRateLimitRepo>
