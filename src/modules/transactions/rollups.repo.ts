import { and, eq, gte, inArray, lt, lte, min, or, sql, type SQL } from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import {
  projects,
  transactionRollupMarks,
  transactionRollups,
  transactions,
} from '../../db/schema.ts'

const t = transactions
const r = transactionRollups
const m = transactionRollupMarks

/** The `created_at` range a query's `start_date` and `end_date` select; null bounds are open. */
export interface Range {
  start: Date | null
  end: Date | null
  /** Whether `end` itself is in the range (a timestamp end) or only what is before it (a date). */
  endInclusive: boolean
}

/** Which rows of a project's mode a read adds up, and where each part is read. */
export interface ReadPlan {
  projectId: string
  testingMode: boolean
  filter: { status?: string; currency?: string }
  /**
   * The transactions read directly: those created in `range` and, when `outside` is given, only
   * those before `outside.before` or at or after `outside.from` (the edges the rollups do not
   * cover); null when the rollups cover the whole range.
   */
  direct: { range: Range; outside: { before: Date | null; from: Date | null } | null } | null
  /** The rolled-up days read (`YYYY-MM-DD`, `first` null for every day through `last`). */
  rolled: { first: string | null; last: string } | null
}

/** What a selection's rows add up to, per status and currency (and per day when asked). */
export interface Aggregate {
  day: string | null
  status: string
  currency: string
  n: number
  /** Decimal strings (null: no rows). */
  amountUsd: string | null
  amountInCurrency: string | null
}

const txDay = sql<string>`to_char(${t.createdAt} AT TIME ZONE 'UTC', 'YYYY-MM-DD')`
const rollupDay = sql<string>`to_char(${r.day}, 'YYYY-MM-DD')`

/**
 * The condition of a plan's direct part. The edges are plain ranges of creation time:
 * PostgreSQL estimates such ranges from its histogram; "in range and not in the rolled-up days"
 * it overestimated thirty times at 10,000,000 transactions, and JIT-compiled the statement
 * (76 ms) for rows it never read.
 */
function directWhere(plan: ReadPlan): SQL | undefined {
  const d = plan.direct
  if (d === null) return sql`false`
  const { range } = d
  const inRange = and(
    eq(t.projectId, plan.projectId),
    eq(t.testingMode, plan.testingMode),
    plan.filter.status ? eq(t.status, plan.filter.status) : undefined,
    plan.filter.currency ? eq(t.currency, plan.filter.currency) : undefined,
    range.start ? gte(t.createdAt, range.start) : undefined,
    range.end
      ? range.endInclusive
        ? lte(t.createdAt, range.end)
        : lt(t.createdAt, range.end)
      : undefined,
  )
  if (d.outside === null) return inRange
  const head = d.outside.before === null ? undefined : lt(t.createdAt, d.outside.before)
  const tail = d.outside.from === null ? undefined : gte(t.createdAt, d.outside.from)
  return head && tail ? and(inRange, or(head, tail)) : and(inRange, head ?? tail)
}

function rolledWhere(plan: ReadPlan): SQL | undefined {
  const days = plan.rolled!
  return and(
    eq(r.projectId, plan.projectId),
    eq(r.testingMode, plan.testingMode),
    plan.filter.status ? eq(r.status, plan.filter.status) : undefined,
    plan.filter.currency ? eq(r.currency, plan.filter.currency) : undefined,
    days.first === null ? undefined : gte(r.day, days.first),
    lte(r.day, days.last),
  )
}

/**
 * The rollups of settled days (docs/decisions/0066-stats-from-settled-days.md): each project's
 * mode's mark (the last day rolled up), the days' counts and sums, and the reads that add them
 * to the transactions not rolled up; the rules are in rollups.ts.
 */
export function createRollupsRepo(database: Pick<Database, 'db' | 'rows'>) {
  const { db } = database
  const mine = (projectId: string, testingMode: boolean) =>
    and(eq(t.projectId, projectId), eq(t.testingMode, testingMode))
  return {
    /** The last day rolled up of a project's mode; null for none. */
    async mark(projectId: string, testingMode: boolean): Promise<string | null> {
      const [row] = await db
        .select({ through: m.throughDay })
        .from(m)
        .where(and(eq(m.projectId, projectId), eq(m.testingMode, testingMode)))
      return row?.through ?? null
    },

    /** When the oldest transaction of a project's mode in one of `statuses` was created. */
    async firstCreatedIn(
      projectId: string,
      testingMode: boolean,
      statuses: readonly string[],
    ): Promise<Date | null> {
      const [open] = await db
        .select({ first: min(t.createdAt) })
        .from(t)
        .where(and(mine(projectId, testingMode), inArray(t.status, [...statuses])))
      return open?.first ?? null
    },

    /**
     * When the transaction `offset` rows into a project's mode's history (oldest first, from
     * `from`) was created; null when there are not that many.
     */
    async createdAtOffset(
      projectId: string,
      testingMode: boolean,
      from: Date | null,
      offset: number,
    ): Promise<Date | null> {
      const [beyond] = await db
        .select({ at: t.createdAt })
        .from(t)
        .where(
          and(mine(projectId, testingMode), from === null ? undefined : gte(t.createdAt, from)),
        )
        // NULLS FIRST: the list's index (created_at DESC NULLS LAST) read backwards, not a sort.
        .orderBy(sql`${t.createdAt} asc nulls first`)
        .offset(offset)
        .limit(1)
      return beyond?.at ?? null
    },

    /**
     * Rolls up the days of a project's mode created from `from` to before `until` and moves its
     * mark from `prior` to `through`, in one statement that moves the mark only from the value
     * read (another instance doing the same writes nothing); whether it did.
     */
    async rollUp(o: {
      projectId: string
      testingMode: boolean
      prior: string | null
      through: string
      from: Date | null
      until: Date
    }): Promise<boolean> {
      const [moved] = await database.rows<{ moved: boolean }>(sql`WITH moved AS (
  INSERT INTO ${m} (project_id, testing_mode, through_day) VALUES (${o.projectId}, ${o.testingMode}, ${o.through}::date)
  ON CONFLICT (project_id, testing_mode) DO UPDATE SET through_day = excluded.through_day
    WHERE ${m}.through_day = ${o.prior}::date
  RETURNING 1
), added AS (
INSERT INTO ${r} (project_id, testing_mode, day, status, currency, n, amount_usd, amount_in_currency)
SELECT project_id, testing_mode, (created_at AT TIME ZONE 'UTC')::date, status, currency, count(*), sum(amount_usd), sum(amount_in_currency)
FROM ${t}
WHERE project_id = ${o.projectId} AND testing_mode = ${o.testingMode}
  AND ${o.from === null ? sql`true` : sql`created_at >= ${o.from.toISOString()}::timestamptz`}
  AND created_at < ${o.until.toISOString()}::timestamptz
  AND EXISTS (SELECT 1 FROM moved)
GROUP BY 1, 2, 3, 4, 5
RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM moved) AS moved`)
      return moved?.moved ?? false
    },

    /** What a plan's rows add up to per status and currency (and UTC day with `byDay`). */
    async aggregate(plan: ReadPlan, byDay: boolean): Promise<Aggregate[]> {
      const direct = db
        .select({
          day: byDay ? txDay : sql<null>`null`,
          status: t.status,
          currency: t.currency,
          n: sql<string>`count(*)`,
          amountUsd: sql<string | null>`sum(${t.amountUsd})`,
          amountInCurrency: sql<string | null>`sum(${t.amountInCurrency})`,
        })
        .from(t)
        .where(directWhere(plan))
        .groupBy(...(byDay ? [txDay] : []), t.status, t.currency)
      const rolled =
        plan.rolled === null
          ? Promise.resolve([])
          : db
              .select({
                day: byDay ? rollupDay : sql<null>`null`,
                status: r.status,
                currency: r.currency,
                n: sql<string>`sum(${r.n})`,
                amountUsd: sql<string | null>`sum(${r.amountUsd})`,
                amountInCurrency: sql<string | null>`sum(${r.amountInCurrency})`,
              })
              .from(r)
              .where(rolledWhere(plan))
              .groupBy(...(byDay ? [r.day] : []), r.status, r.currency)
      const [a, b] = await Promise.all([direct, rolled])
      return [...a, ...b].map((x) => ({ ...x, n: Number(x.n) }))
    },

    /** How many of a plan's rows were created each UTC day (its two parts read different days). */
    async dayCounts(plan: ReadPlan): Promise<{ day: string; n: number }[]> {
      const [direct, rolled] = await Promise.all([
        db
          .select({ day: txDay, n: sql<string>`count(*)` })
          .from(t)
          .where(directWhere(plan))
          .groupBy(txDay),
        plan.rolled === null
          ? Promise.resolve([])
          : db
              .select({ day: rollupDay, n: sql<string>`sum(${r.n})` })
              .from(r)
              .where(rolledWhere(plan))
              .groupBy(r.day),
      ])
      return [...direct, ...rolled].map((x) => ({ day: x.day, n: Number(x.n) }))
    },

    async projectIds(): Promise<string[]> {
      return (await db.select({ id: projects.id }).from(projects)).map((p) => p.id)
    },
  }
}

export type RollupsRepo = ReturnType<typeof createRollupsRepo>
