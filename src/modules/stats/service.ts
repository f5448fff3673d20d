import type { Aggregate, Range, Rollups } from '../transactions/rollups.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import { centsToDecimal, decimalToNumber, usdToCents } from '../../lib/money.ts'
import { decimalToMinor, minorToDecimal } from '../../lib/currency.ts'
import { deny, ok, type FieldProblem, type Outcome } from '../../lib/outcome.ts'
import { STATUSES, type Status } from '../transactions/model.ts'

const DATE = String.raw`\d{4}-\d{2}-\d{2}`
const TIME = String.raw`T([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,9})?)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)`
/** `start_date` and `end_date` as the OpenAPI document states them: a date or a full timestamp. */
export const DATE_BOUND_PATTERN = `^${DATE}(${TIME})?$`
const DATE_ONLY = new RegExp(`^${DATE}$`)
const DATE_TIME = new RegExp(`^${DATE}${TIME}$`)
const MAX_BOUND = Date.parse('9999-12-31T23:59:59.999Z')
const MIN_BOUND = Date.parse('0001-01-01T00:00:00.000Z')

/**
 * docs/decisions/0010-stats.md: `YYYY-MM-DD` or a full ISO timestamp; a date-only end covers its
 * whole UTC day.
 */
export function parseBound(raw: string, edge: 'start' | 'end'): Date | null {
  const dateOnly = DATE_ONLY.test(raw)
  if (!dateOnly && !DATE_TIME.test(raw)) return null
  // Reject calendar dates that Date would silently roll over, such as 2026-02-30.
  const [y, m, day] = raw.slice(0, 10).split('-').map(Number)
  if (y < 1 || new Date(Date.UTC(y, m - 1, day)).getUTCDate() !== day || m < 1 || m > 12)
    return null
  const d = new Date(dateOnly ? `${raw}T00:00:00Z` : raw)
  if (Number.isNaN(d.getTime())) return null
  const bound = dateOnly && edge === 'end' ? new Date(d.getTime() + 86_400_000) : d
  // 9999-12-31 is a common "no upper limit"; PostgreSQL cannot take year 10000 as written by JS.
  return new Date(Math.min(MAX_BOUND, Math.max(MIN_BOUND, bound.getTime())))
}

type StatsQuery = { start_date?: string; end_date?: string; testing_mode?: boolean }

/** One UTC day of the daily series (the dashboard's chart). */
export interface DailyStats {
  date: string
  total_transactions: number
  completed_transactions: number
  total_volume_usd: number
  conversion_rate: number
}

const rate = (completed: number, total: number) =>
  total === 0 ? 0 : Math.round((completed * 10_000) / total) / 100

/**
 * docs/decisions/0010-stats.md: the `created_at` range of `start_date` and `end_date`, or why it
 * is refused (the same parsing and messages wherever a query takes them).
 */
export function createdRange(q: { start_date?: string; end_date?: string }): Outcome<Range> {
  const problems: FieldProblem[] = []
  const start = q.start_date === undefined ? null : parseBound(q.start_date, 'start')
  const end = q.end_date === undefined ? null : parseBound(q.end_date, 'end')
  if (q.start_date !== undefined && !start)
    problems.push({ path: 'start_date', message: 'must be YYYY-MM-DD or an ISO 8601 timestamp' })
  if (q.end_date !== undefined && !end)
    problems.push({ path: 'end_date', message: 'must be YYYY-MM-DD or an ISO 8601 timestamp' })
  // A date-only end is exclusive at the next midnight, so an equal bound is already after it.
  const endDateOnly = q.end_date !== undefined && DATE_ONLY.test(q.end_date)
  if (start && end && (endDateOnly ? start >= end : start > end))
    problems.push({ path: 'start_date', message: 'must not be after end_date' })
  if (problems.length)
    return deny(
      'invalid_request',
      problems.map((p) => `${p.path} ${p.message}`).join('; '),
      problems,
    )
  // A date-only end is exclusive at the next midnight; a timestamp end is inclusive.
  return ok({ start, end, endInclusive: !(endDateOnly && end?.getTime() !== MAX_BOUND) })
}

/**
 * docs/decisions/0009-keys-see-their-own-mode.md and docs/decisions/0010-stats.md: which modes and
 * `created_at` range a caller's stats cover, or why the range is refused.
 */
function selection(
  caller: ProjectMode,
  q: StatsQuery,
): Outcome<{ modes: boolean[]; range: Range }> {
  const range = createdRange(q)
  if (!range.ok) return range
  // docs/decisions/0009-keys-see-their-own-mode.md: a live key counts live transactions, plus test
  // ones on request; a test key only test ones.
  const modes = caller.mode === 'test' ? [true] : q.testing_mode ? [false, true] : [false]
  return ok({ modes, range: range.value })
}

/** The stats object from aggregated rows (per status and currency, any days). */
function summarize(rows: Aggregate[]) {
  const byStatus = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<Status, number>
  let total = 0
  let volumeCents = 0n
  const byCurrency = new Map<string, bigint>()
  for (const r of rows) {
    byStatus[r.status as Status] += r.n
    total += r.n
    if (r.status !== 'completed') continue
    if (r.amountUsd) volumeCents += usdToCents(r.amountUsd)
    if (r.amountInCurrency)
      byCurrency.set(
        r.currency,
        (byCurrency.get(r.currency) ?? 0n) + decimalToMinor(r.amountInCurrency, r.currency),
      )
  }
  const completed = byStatus.completed
  return {
    total_transactions: total,
    total_volume_usd: decimalToNumber(centsToDecimal(volumeCents)),
    volume_by_currency: Object.fromEntries(
      [...byCurrency.keys()].sort().map((c) => [c, Number(minorToDecimal(byCurrency.get(c)!, c))]),
    ),
    completed_transactions: completed,
    conversion_rate: rate(completed, total),
    by_status: byStatus,
  }
}

/** The daily series from rows aggregated per day: oldest first, days without rows left out. */
function perDay(rows: Aggregate[]): DailyStats[] {
  const days = new Map<string, { total: number; completed: number; cents: bigint }>()
  for (const r of rows) {
    const d = days.get(r.day!) ?? { total: 0, completed: 0, cents: 0n }
    d.total += r.n
    if (r.status === 'completed') {
      d.completed += r.n
      if (r.amountUsd) d.cents += usdToCents(r.amountUsd)
    }
    days.set(r.day!, d)
  }
  return [...days.keys()].sort().map((date) => {
    const d = days.get(date)!
    return {
      date,
      total_transactions: d.total,
      completed_transactions: d.completed,
      total_volume_usd: decimalToNumber(centsToDecimal(d.cents)),
      conversion_rate: rate(d.completed, d.total),
    }
  })
}

/**
 * docs/decisions/0010-stats.md over rollups of settled days and the rest read directly
 * (docs/decisions/0066-stats-from-settled-days.md).
 */
export function createStatsService(deps: { rollups: Rollups }) {
  const { rollups } = deps
  const rowsOf = async (caller: ProjectMode, q: StatsQuery, byDay: boolean) => {
    const where = selection(caller, q)
    if (!where.ok) return where
    return ok(
      await rollups.aggregate(caller.projectId, where.value.modes, where.value.range, byDay),
    )
  }
  return {
    async stats(caller: ProjectMode, q: StatsQuery): Promise<Outcome<unknown>> {
      const rows = await rowsOf(caller, q, false)
      return rows.ok ? ok(summarize(rows.value)) : rows
    },

    /**
     * The same selection as `stats`, per UTC day of creation, oldest first; days without
     * transactions are left out.
     */
    async daily(caller: ProjectMode, q: StatsQuery): Promise<Outcome<DailyStats[]>> {
      const rows = await rowsOf(caller, q, true)
      return rows.ok ? ok(perDay(rows.value)) : rows
    },

    /** Both, from one read (the dashboard's overview and chart). */
    async overview(
      caller: ProjectMode,
      q: StatsQuery,
    ): Promise<Outcome<{ stats: ReturnType<typeof summarize>; daily: DailyStats[] }>> {
      const rows = await rowsOf(caller, q, true)
      return rows.ok ? ok({ stats: summarize(rows.value), daily: perDay(rows.value) }) : rows
    },
  }
}

export type StatsService = ReturnType<typeof createStatsService>
