import { and, asc, count, eq, like, lt, sql, type SQL } from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import {
  idempotencyKeys,
  transactionEvents,
  transactions,
  type TransactionRow,
} from '../../db/schema.ts'
import { UUID_RE } from '../../lib/ids.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import { pageStart, type Rollups } from './rollups.ts'

export type { TransactionRow } from '../../db/schema.ts'

const inScope = (s: ProjectMode, ...more: (SQL | undefined)[]) =>
  and(
    eq(transactions.projectId, s.projectId),
    eq(transactions.testingMode, s.mode === 'test'),
    ...more,
  )

/**
 * The list's filters as conditions (the export takes the same ones): a status, a currency, and
 * order ids starting with a prefix (LIKE's wildcards in it taken literally).
 */
export const listFilter = (f: { status?: string; currency?: string; orderIdPrefix?: string }) => [
  f.status ? eq(transactions.status, f.status) : undefined,
  f.currency ? eq(transactions.currency, f.currency) : undefined,
  f.orderIdPrefix
    ? like(transactions.orderId, `${f.orderIdPrefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`)
    : undefined,
]

export interface TransactionRepo {
  /**
   * A transaction of this project and mode; null for another's, as for none
   * (docs/decisions/0009-keys-see-their-own-mode.md).
   */
  find(scope: ProjectMode, id: string): Promise<TransactionRow | null>
  /**
   * Whether a transaction exists and is in test mode (the operator's hand-driving of test
   * transactions); null when there is none.
   */
  testingModeOf(id: string): Promise<boolean | null>
  /**
   * Newest first; `currency` keeps those priced in it; `orderIdPrefix` finds the merchant's order
   * ids starting with it.
   */
  page(
    scope: ProjectMode,
    filter: {
      status?: string
      currency?: string
      orderIdPrefix?: string
      limit: number
      offset: number
    },
  ): Promise<{ rows: TransactionRow[]; total: number }>
  /** Every recorded transition, oldest first. */
  timeline(id: string): Promise<(typeof transactionEvents.$inferSelect)[]>
  idempotencyRecord(
    k: ProjectMode & { key: string },
  ): Promise<typeof idempotencyKeys.$inferSelect | null>
  pruneIdempotencyKeys(before: Date): Promise<void>
}

const ph = (name: string) => sql.placeholder(name)

/**
 * The row when it is the scope's project and mode, else null: another project's or mode's
 * transaction is indistinguishable from none (docs/decisions/0009-keys-see-their-own-mode.md).
 */
export function ownRow(scope: ProjectMode, row: TransactionRow | null): TransactionRow | null {
  return row && row.projectId === scope.projectId && row.testingMode === (scope.mode === 'test')
    ? row
    : null
}

/** From this offset on, a page starts at its day (its rollup counts) rather than skipping rows. */
const DEEP_OFFSET = 500

/** Persistence of transactions and their idempotency records; no business rules here. */
export function createTransactionRepo(database: Database, rollups: Rollups): TransactionRepo {
  const db = database.db
  // The hot read runs as a prepared statement: built once, and on PostgreSQL parsed and planned
  // once per connection (drizzle's unprepared queries cost several times more; bench/RESULTS.md).
  // It reads by primary key alone and the scope is checked here: with the project and mode in the
  // WHERE, a plan made while the table was nearly empty walked the project's list index instead,
  // reading every row of the project (13 ms a GET at 10,000 rows; bench/RESULTS.md,
  // docs/decisions/0053-speed-measured-against-a-floor.md).
  const findOne = db
    .select()
    .from(transactions)
    .where(eq(transactions.id, ph('id')))
    .prepare('transaction_find')

  return {
    async find(scope, id) {
      // Not a UUID: no such transaction (the column would refuse the comparison).
      if (!UUID_RE.test(id)) return null
      const [row] = await findOne.execute({ id })
      return ownRow(scope, row ?? null)
    },

    async testingModeOf(id) {
      if (!UUID_RE.test(id)) return null
      const [row] = await db
        .select({ testingMode: transactions.testingMode })
        .from(transactions)
        .where(eq(transactions.id, id))
      return row?.testingMode ?? null
    },

    async timeline(id) {
      return db
        .select()
        .from(transactionEvents)
        .where(eq(transactionEvents.transactionId, id))
        .orderBy(asc(transactionEvents.id))
    },

    /** Newest first, ties broken by id (docs/decisions/0008-list-order-and-paging.md). */
    async page(scope, filter) {
      // docs/decisions/0066-stats-from-settled-days.md: the total from the days' counts (settled
      // days from their rollups), and a deep page started at its day instead of skipping every
      // newer row. An order-id prefix is not in the rollups: counted and skipped row by row.
      if (!filter.orderIdPrefix) {
        const days = await rollups.dayCounts(scope.projectId, scope.mode === 'test', filter)
        const total = days.reduce((n, d) => n + d.n, 0)
        const start = filter.offset >= DEEP_OFFSET ? pageStart(days, filter.offset) : null
        if (filter.offset >= total) return { rows: [], total }
        const rows = await db
          .select()
          .from(transactions)
          .where(
            inScope(
              scope,
              ...listFilter(filter),
              start ? lt(transactions.createdAt, start.before) : undefined,
            ),
          )
          .orderBy(
            sql`${transactions.createdAt} DESC NULLS LAST`,
            sql`${transactions.id} DESC NULLS LAST`,
          )
          .limit(filter.limit)
          .offset(start ? start.skip : filter.offset)
        return { rows, total }
      }
      const where = inScope(scope, ...listFilter(filter))
      const [rows, [{ total }]] = await Promise.all([
        // Spelled as the indexes are (drizzle makes them DESC NULLS LAST): a plain DESC means NULLS
        // FIRST to the planner, which then sorts every row of the project instead of reading the
        // index.
        db
          .select()
          .from(transactions)
          .where(where)
          .orderBy(
            sql`${transactions.createdAt} DESC NULLS LAST`,
            sql`${transactions.id} DESC NULLS LAST`,
          )
          .limit(filter.limit)
          .offset(filter.offset),
        db.select({ total: count() }).from(transactions).where(where),
      ])
      return { rows, total: Number(total) }
    },

    async idempotencyRecord(k) {
      const [row] = await db
        .select()
        .from(idempotencyKeys)
        .where(
          and(
            eq(idempotencyKeys.projectId, k.projectId),
            eq(idempotencyKeys.mode, k.mode),
            eq(idempotencyKeys.key, k.key),
          ),
        )
      return row ?? null
    },

    async pruneIdempotencyKeys(before: Date) {
      await db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, before))
    },
  }
}
