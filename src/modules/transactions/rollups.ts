import type { Database } from '../../db/client.ts'
import { createWorkLoop } from '../../instances/work-loop.ts'
import type { Clock } from '../../lib/clock.ts'
import { errorSummary, type Logger } from '../../lib/logger.ts'
import { type Aggregate, createRollupsRepo, type Range, type ReadPlan } from './rollups.repo.ts'

export type { Aggregate, Range } from './rollups.repo.ts'

/**
 * Stats from settled days (docs/decisions/0066-stats-from-settled-days.md). A UTC day of a
 * project's mode is settled once every transaction created that day is in a final status: a final
 * status never changes and neither does an amount, so the day's counts and sums are rolled up once
 * and never change. Stats add the rolled-up days a range covers whole to a direct aggregate of the
 * rest (the range's partial days at its edges, and the recent days not rolled up yet: the last
 * SETTLE_LAG_DAYS and any day with an open transaction, a week at most). Nothing is written on the
 * payment path, nor on a reader's: the first stats call after days settle asks for them to be
 * rolled up in the background, in bounded chunks, and reads them directly until they are; at
 * start, every project's settled days are asked for.
 */

const DAY_MS = 86_400_000
/**
 * Days before today (UTC) never rolled up, whatever their statuses: a row may still be created
 * with a time just before midnight by an instance whose clock lags.
 */
export const SETTLE_LAG_DAYS = 2
/** An instance looks for newly settled days of a project's mode at most this often. */
const SETTLE_EVERY_MS = 60_000
/**
 * About how many transactions one roll-up statement aggregates: a history that predates its
 * rollups (an upgrade) is rolled up in statements of bounded length, not one of every row.
 */
const CHUNK_ROWS = 50_000
const OPEN = ['created', 'prepared', 'pending', 'processing', 'confirming']

const dayOf = (ms: number) => new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10)
const startOf = (day: string) => Date.parse(`${day}T00:00:00Z`)
/** The calendar a day of the rollups may fall in: what a `date` column and a bound can be. */
const FIRST_DAY_MS = startOf('0001-01-01')
const LAST_DAY_MS = startOf('9999-12-31')

/**
 * The rolled-up days (`YYYY-MM-DD`) a range reads from the rollups: its whole days (from the first
 * midnight at or after its start to the last day ending at or before its end) through `through`,
 * the last day rolled up; `first` null for a range open at its start. Null when there are none.
 * Every day named is a calendar day of years 1-9999 (a bound at the calendar's edge has no whole
 * day past it), so the statement's dates are ones PostgreSQL takes.
 */
export function rolledDays(
  range: Range,
  through: string | null,
): { first: string | null; last: string } | null {
  if (through === null) return null
  const endExclusive =
    range.end === null ? null : range.end.getTime() + (range.endInclusive ? 1 : 0)
  const firstMs =
    range.start === null
      ? null
      : Math.max(FIRST_DAY_MS, Math.floor((range.start.getTime() + DAY_MS - 1) / DAY_MS) * DAY_MS)
  const lastWholeMs = endExclusive === null ? null : endExclusive - DAY_MS
  if (
    (firstMs !== null && firstMs > LAST_DAY_MS) ||
    (lastWholeMs !== null && lastWholeMs < FIRST_DAY_MS)
  )
    return null
  const first = firstMs === null ? null : dayOf(firstMs)
  const lastWhole = lastWholeMs === null ? null : dayOf(Math.min(lastWholeMs, LAST_DAY_MS))
  const last = lastWhole === null || through < lastWhole ? through : lastWhole
  return first !== null && first > last ? null : { first, last }
}

/** Every transaction, whenever created. */
const ALL_TIME: Range = { start: null, end: null, endInclusive: false }

export function createRollups(deps: {
  database: Pick<Database, 'db' | 'rows'>
  clock: Clock
  logger?: Logger
  /** About how many transactions one roll-up statement aggregates (default CHUNK_ROWS). */
  chunkRows?: number
}) {
  const repo = createRollupsRepo(deps.database)
  const tried = new Map<string, number>()
  const chunkRows = deps.chunkRows ?? CHUNK_ROWS
  let stopped = false

  /**
   * Rolls up the next days of a project's mode that settled since its mark: as many whole days
   * as hold about `chunkRows` transactions (one day at least), in one statement that moves the
   * mark only from the value read (another instance doing the same writes nothing). Returns the
   * new mark, or null when nothing was left to roll up or another instance moved the mark first.
   */
  async function rollNext(projectId: string, testingMode: boolean): Promise<string | null> {
    const now = deps.clock.now()
    const prior = await repo.mark(projectId, testingMode)
    const firstOpen = await repo.firstCreatedIn(projectId, testingMode, OPEN)
    const lastAllowed = startOf(dayOf(now)) - (SETTLE_LAG_DAYS + 1) * DAY_MS
    const beforeOpen = firstOpen ? startOf(dayOf(firstOpen.getTime())) - DAY_MS : Infinity
    const settled = dayOf(Math.min(lastAllowed, beforeOpen))
    if (prior !== null && settled <= prior) return null
    const from = prior === null ? null : new Date(startOf(prior) + DAY_MS)
    // The chunk: the whole days before the one holding its (chunkRows + 1)th row; that day itself
    // when it is the chunk's first (a day is never split).
    const beyond = await repo.createdAtOffset(projectId, testingMode, from, chunkRows)
    let through = settled
    if (beyond) {
      const day = dayOf(beyond.getTime())
      const before = dayOf(startOf(day) - DAY_MS)
      const end = prior !== null && before <= prior ? day : before
      if (end < through) through = end
    }
    const until = new Date(startOf(through) + DAY_MS)
    const moved = await repo.rollUp({ projectId, testingMode, prior, through, from, until })
    return moved ? through : null
  }

  /**
   * Rolls up every day of a project's mode that settled since its mark, chunk by chunk; returns
   * the marks it moved to, one per chunk. Stops early (between chunks) once the rollups stop.
   */
  async function catchUp(projectId: string, testingMode: boolean): Promise<string[]> {
    const marks: string[] = []
    for (let mark: string | null; !stopped && (mark = await rollNext(projectId, testingMode)); )
      marks.push(mark)
    return marks
  }

  /** The roll-ups asked for, run one project's mode at a time in the background. */
  const background = createWorkLoop<Set<string>>({
    merge: (a, b) => new Set([...a, ...b]),
    async run(keys) {
      for (const key of keys) {
        const [projectId, mode] = key.split(' ') as [string, string]
        try {
          await catchUp(projectId, mode === 'test')
        } catch (e) {
          // Looked for again by the next stats call after SETTLE_EVERY_MS.
          deps.logger?.warn('rolling up settled days failed; stats read those days directly', {
            projectId,
            mode,
            error: errorSummary(e),
          })
        }
      }
    },
  })

  /**
   * Asks for the days of a project's mode that settled since its mark to be rolled up in the
   * background, when this instance has not looked in the last SETTLE_EVERY_MS. Never waits:
   * until they are, the reader reads those days directly.
   */
  function settle(projectId: string, testingMode: boolean): void {
    const now = deps.clock.now()
    const key = `${projectId} ${testingMode ? 'test' : 'live'}`
    if (now - (tried.get(key) ?? Number.NEGATIVE_INFINITY) < SETTLE_EVERY_MS) return
    tried.set(key, now)
    void background.request(new Set([key]))
  }

  /**
   * Where the rows of a project's mode created in `range` (in a status and currency, when given)
   * are read, once its settled days are rolled up: the days the range covers whole up to the mark
   * from the rollups, the rest (what comes before the first whole day, and what comes after the
   * last rolled-up one) from the transactions themselves.
   */
  async function plan(
    projectId: string,
    testingMode: boolean,
    range: Range,
    filter: { status?: string; currency?: string },
  ): Promise<ReadPlan> {
    settle(projectId, testingMode)
    const days = rolledDays(range, await repo.mark(projectId, testingMode))
    if (days === null)
      return { projectId, testingMode, filter, direct: { range, outside: null }, rolled: null }
    const endExclusive =
      range.end === null ? null : range.end.getTime() + (range.endInclusive ? 1 : 0)
    const firstStart = days.first === null ? null : new Date(startOf(days.first))
    const lastEnd = new Date(startOf(days.last) + DAY_MS)
    const before =
      range.start !== null && firstStart !== null && range.start < firstStart ? firstStart : null
    const from = endExclusive === null || endExclusive > lastEnd.getTime() ? lastEnd : null
    return {
      projectId,
      testingMode,
      filter,
      direct: before === null && from === null ? null : { range, outside: { before, from } },
      rolled: days,
    }
  }

  /**
   * The rows of a project in `modes` created in `range`, added up per status and currency (and UTC
   * day with `byDay`): rolled-up days the range covers whole from their rollups, the rest from the
   * transactions themselves.
   */
  async function aggregate(
    projectId: string,
    modes: boolean[],
    range: Range,
    byDay: boolean,
  ): Promise<Aggregate[]> {
    const parts = await Promise.all(
      modes.map(async (testingMode) =>
        repo.aggregate(await plan(projectId, testingMode, range, {}), byDay),
      ),
    )
    return parts.flat()
  }

  /**
   * How many transactions of a project's mode (in a status, a currency, when given) were created
   * each UTC day, newest day first: settled days from their rollups, the rest counted directly.
   */
  async function dayCounts(
    projectId: string,
    testingMode: boolean,
    filter: { status?: string; currency?: string },
  ): Promise<{ day: string; n: number }[]> {
    return (await repo.dayCounts(await plan(projectId, testingMode, ALL_TIME, filter)))
      .filter((x) => x.n > 0)
      .sort((a, b) => (a.day < b.day ? 1 : a.day > b.day ? -1 : 0))
  }

  return {
    aggregate,
    dayCounts,
    catchUp,
    /**
     * Asks for every project's settled days to be rolled up in the background (at start: a
     * history that predates its rollups is rolled up before anyone asks for stats).
     */
    async settleAll(): Promise<void> {
      for (const id of await repo.projectIds())
        for (const testingMode of [true, false]) settle(id, testingMode)
    },
    /** Resolves once no roll-up is running or asked for. */
    idle: () => background.idle(),
    /** Stops between chunks; a chunk in progress completes. */
    async stop() {
      stopped = true
      await background.stop()
    },
  }
}

/**
 * Where a page `offset` rows into a newest-first list starts, from its day counts: before the end
 * of the day holding that row, `skip` rows into it. Exact, as the list orders by creation time
 * and a day's rows are all its own.
 */
export function pageStart(
  days: { day: string; n: number }[],
  offset: number,
): { before: Date; skip: number } | null {
  let newer = 0
  for (const d of days) {
    if (newer + d.n > offset)
      return { before: new Date(startOf(d.day) + DAY_MS), skip: offset - newer }
    newer += d.n
  }
  return null
}

export type Rollups = ReturnType<typeof createRollups>
