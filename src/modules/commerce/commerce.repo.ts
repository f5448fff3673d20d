import {
  and,
  asc,
  count,
  desc,
  eq,
  gt,
  inArray,
  isNotNull,
  lt,
  or,
  sql,
  type SQL,
} from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import {
  chainTransfers,
  commerceCheckouts,
  outbox,
  RESOLVED_EVENT,
  transactionEvents,
  transactions,
  type TransactionRow,
} from '../../db/schema.ts'
import { UUID_RE } from '../../lib/ids.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import type { Rollups } from '../transactions/rollups.ts'
import type { NativeStep, RecordedTransfer } from './charge.ts'

export type CheckoutRow = typeof commerceCheckouts.$inferSelect
export type EventRow = {
  eventId: string
  eventType: string
  transactionId: string
  createdAt: Date
  sequence: number
}

/** A page of a list in Commerce's cursor terms. */
export interface Cursor {
  limit: number
  order: 'asc' | 'desc'
  /** The id after which (in `order`) the page starts. */
  startingAfter?: string
  /** The id before which (in `order`) the page ends. */
  endingBefore?: string
}

/** One more row than the limit says whether there is more beyond the page. */
export interface CursorPage<T> {
  rows: T[]
  /** Rows beyond the page's far end (in the direction read). */
  more: boolean
  total: number
}

const tx = transactions
const EVENT_COLUMNS = {
  eventId: outbox.eventId,
  eventType: outbox.eventType,
  transactionId: outbox.transactionId,
  createdAt: outbox.createdAt,
  sequence: outbox.sequence,
}
const inMode = (s: ProjectMode) =>
  and(eq(tx.projectId, s.projectId), eq(tx.testingMode, s.mode === 'test'))

/**
 * How a cursor page is read: backwards from `ending_before` (then turned around), else forwards
 * from `starting_after`; the direction rows are read in is the list's order, or its opposite.
 */
function direction(c: Cursor): { reversed: boolean; descending: boolean } {
  const reversed = c.endingBefore !== undefined && c.startingAfter === undefined
  return { reversed, descending: (c.order === 'desc') !== reversed }
}

/**
 * The keyset condition and order of a cursor page over (created_at, id): after the cursor row in
 * `order`, or before it (read backwards, then turned around).
 */
function keyset(
  cols: { createdAt: typeof tx.createdAt; id: SQL | typeof tx.id },
  c: Cursor,
  anchor: { createdAt: Date; id: string } | null,
): { where: SQL | undefined; orderBy: SQL[]; reversed: boolean } {
  const { reversed, descending } = direction(c)
  const where = anchor
    ? descending
      ? or(
          lt(cols.createdAt, anchor.createdAt),
          and(eq(cols.createdAt, anchor.createdAt), lt(cols.id as SQL, anchor.id)),
        )
      : or(
          gt(cols.createdAt, anchor.createdAt),
          and(eq(cols.createdAt, anchor.createdAt), gt(cols.id as SQL, anchor.id)),
        )
    : undefined
  const dir = descending ? desc : asc
  return { where, orderBy: [dir(cols.createdAt), dir(cols.id as SQL)], reversed }
}

const asPage = <T>(rows: T[], limit: number, reversed: boolean, total: number): CursorPage<T> => {
  const more = rows.length > limit
  const page = rows.slice(0, limit)
  return { rows: reversed ? page.reverse() : page, more, total }
}

/** A transaction with what its charge shows beyond the row: its timeline and transfers. */
export interface ChargeRecord {
  row: TransactionRow
  /** Oldest first. */
  timeline: NativeStep[]
  /** To its deposit address, still on the canonical chain, in chain order. */
  transfers: RecordedTransfer[]
}

/**
 * A charge's columns: the row, and its timeline and transfers as JSON arrays of the same
 * statement, so a charge (or a page of them) is one read. The subqueries name the outer row as
 * `transactions.id`: drizzle writes a one-table select's columns unqualified.
 */
const RECORD = {
  row: tx,
  timeline: sql<unknown>`(SELECT coalesce(json_agg(json_build_object('fromStatus', e.from_status, 'toStatus', e.to_status, 'cause', e.cause, 'details', e.details, 'at', e.at) ORDER BY e.id), '[]'::json) FROM ${transactionEvents} e WHERE e.transaction_id = transactions.id)`,
  transfers: sql<unknown>`(SELECT coalesce(json_agg(json_build_object('network', c.network, 'txHash', c.tx_hash, 'blockNumber', c.block_number, 'blockHash', c.block_hash, 'tokenSymbol', c.token_symbol, 'amount', c.amount::text, 'kind', c.kind, 'seenAt', c.seen_at) ORDER BY c.block_number, c.id), '[]'::json) FROM ${chainTransfers} c WHERE c.transaction_id = transactions.id AND c.reorged_at IS NULL)`,
}

/** JSON arrives parsed from one driver and as text from another. */
const parsedJson = <T>(v: unknown): T => (typeof v === 'string' ? JSON.parse(v) : v) as T

function record(r: { row: TransactionRow; timeline: unknown; transfers: unknown }): ChargeRecord {
  return {
    row: r.row,
    timeline: parsedJson<(Omit<NativeStep, 'at'> & { at: string })[]>(r.timeline).map((e) => ({
      ...e,
      at: new Date(e.at),
    })),
    transfers: parsedJson<(Omit<RecordedTransfer, 'seenAt'> & { seenAt: string })[]>(
      r.transfers,
    ).map((t) => ({ ...t, blockNumber: Number(t.blockNumber), seenAt: new Date(t.seenAt) })),
  }
}

/** Reads and writes of the Commerce API; charges are the project's transactions. */
export function createCommerceRepo(database: Database, rollups: Pick<Rollups, 'dayCounts'>) {
  const db = database.db

  // The hot reads as prepared statements: built once, planned once per connection.
  const byId = db
    .select(RECORD)
    .from(tx)
    .where(eq(tx.id, sql.placeholder('id')))
    .prepare('commerce_charge_by_id')
  const byNumber = db
    .select(RECORD)
    .from(tx)
    .where(eq(tx.transactionNumber, sql.placeholder('number')))
    .prepare('commerce_charge_by_number')

  async function chargeAnchor(scope: ProjectMode, id: string | undefined) {
    if (id === undefined) return null
    if (!UUID_RE.test(id)) return 'unknown' as const
    const [r] = await db
      .select({ createdAt: tx.createdAt, id: tx.id })
      .from(tx)
      .where(and(inMode(scope), eq(tx.id, id)))
    return r ?? ('unknown' as const)
  }

  return {
    /** A charge of this project and mode by its id or its code; null for another's, as for none. */
    async findCharge(scope: ProjectMode, idOrCode: string): Promise<ChargeRecord | null> {
      const [r] = UUID_RE.test(idOrCode)
        ? await byId.execute({ id: idOrCode })
        : await byNumber.execute({ number: idOrCode.toUpperCase() })
      // The scope is checked here, as the native read does (src/modules/transactions/transaction.repo.ts):
      // read by the unique key alone, the plan never walks the project's rows.
      return r &&
        r.row.projectId === scope.projectId &&
        r.row.testingMode === (scope.mode === 'test')
        ? record(r)
        : null
    },

    /**
     * Transactions by id, of this project and mode (null scope: whoever's, as a delivery's event
     * names them).
     */
    async chargesByIds(
      scope: ProjectMode | null,
      ids: string[],
    ): Promise<Map<string, ChargeRecord>> {
      if (ids.length === 0) return new Map()
      const rows = await db
        .select(RECORD)
        .from(tx)
        .where(and(scope ? inMode(scope) : undefined, inArray(tx.id, [...new Set(ids)])))
      return new Map(rows.map((r) => [r.row.id, record(r)]))
    },

    /** A page of charges; `unknown` when a cursor names no charge of the caller's. */
    async charges(scope: ProjectMode, c: Cursor): Promise<CursorPage<ChargeRecord> | 'unknown'> {
      const anchor = await chargeAnchor(scope, c.startingAfter ?? c.endingBefore)
      if (anchor === 'unknown') return 'unknown'
      const k = keyset({ createdAt: tx.createdAt, id: tx.id }, c, anchor)
      const [rows, [{ total }]] = await Promise.all([
        db
          .select(RECORD)
          .from(tx)
          .where(and(inMode(scope), k.where))
          .orderBy(...k.orderBy)
          .limit(c.limit + 1),
        // The days' counts: settled days from their rollups
        // (docs/decisions/0066-stats-from-settled-days.md), not a count of every row.
        rollups
          .dayCounts(scope.projectId, scope.mode === 'test', {})
          .then((days) => [{ total: days.reduce((n, d) => n + d.n, 0) }]),
      ])
      return asPage(rows.map(record), c.limit, k.reversed, total)
    },

    /**
     * Records that the merchant resolved a charge: a timeline entry and its outbox event, only if
     * its last resolution is still `prior` (null: none), so two resolutions of the same state
     * record one (false for the other).
     */
    async resolve(id: string, at: Date, prior: string | null): Promise<boolean> {
      const [r] = await database.rows<{ resolved: number }>(sql`WITH r AS (
  UPDATE ${tx} SET commerce = coalesce(commerce, '{}'::jsonb) || jsonb_build_object('resolvedAt', ${at.toISOString()}::text)
  WHERE ${tx.id} = ${id}::uuid AND coalesce(commerce->>'resolvedAt', '') = ${prior ?? ''}
  RETURNING id, status, project_id, testing_mode, version
), n AS (
  INSERT INTO ${transactionEvents} (transaction_id, from_status, to_status, cause, details, at)
  SELECT id, status, status, 'charge.resolved', '{}'::jsonb, ${at.toISOString()}::timestamptz FROM r
), o AS (
  INSERT INTO ${outbox} (transaction_id, project_id, testing_mode, event_type, data, created_at, sequence)
  SELECT id, project_id, testing_mode, ${RESOLVED_EVENT}, jsonb_build_object('transaction_id', id), ${at.toISOString()}::timestamptz, version FROM r
)
SELECT count(*)::int AS resolved FROM r`)
      return Number(r?.resolved) === 1
    },

    // --- Checkouts ---

    async insertCheckout(row: CheckoutRow): Promise<CheckoutRow> {
      const [r] = await db.insert(commerceCheckouts).values(row).returning()
      return r!
    },

    async findCheckout(scope: ProjectMode | null, id: string): Promise<CheckoutRow | null> {
      if (!UUID_RE.test(id)) return null
      const k = commerceCheckouts
      const [r] = await db
        .select()
        .from(k)
        .where(
          and(
            eq(k.id, id),
            scope ? and(eq(k.projectId, scope.projectId), eq(k.mode, scope.mode)) : undefined,
          ),
        )
      return r ?? null
    },

    async updateCheckout(
      scope: ProjectMode,
      id: string,
      patch: Partial<
        Pick<CheckoutRow, 'name' | 'description' | 'pricingType' | 'amount' | 'currency'>
      > & {
        updatedAt: Date
      },
    ): Promise<CheckoutRow | null> {
      if (!UUID_RE.test(id)) return null
      const k = commerceCheckouts
      const [r] = await db
        .update(k)
        .set(patch)
        .where(and(eq(k.id, id), eq(k.projectId, scope.projectId), eq(k.mode, scope.mode)))
        .returning()
      return r ?? null
    },

    async deleteCheckout(scope: ProjectMode, id: string): Promise<boolean> {
      if (!UUID_RE.test(id)) return false
      const k = commerceCheckouts
      const r = await db
        .delete(k)
        .where(and(eq(k.id, id), eq(k.projectId, scope.projectId), eq(k.mode, scope.mode)))
        .returning({ id: k.id })
      return r.length === 1
    },

    async checkouts(scope: ProjectMode, c: Cursor): Promise<CursorPage<CheckoutRow> | 'unknown'> {
      const k = commerceCheckouts
      const mine = and(eq(k.projectId, scope.projectId), eq(k.mode, scope.mode))
      const id = c.startingAfter ?? c.endingBefore
      let anchor: { createdAt: Date; id: string } | null = null
      if (id !== undefined) {
        const found = UUID_RE.test(id)
          ? (
              await db
                .select({ createdAt: k.createdAt, id: k.id })
                .from(k)
                .where(and(mine, eq(k.id, id)))
            )[0]
          : undefined
        if (!found) return 'unknown'
        anchor = found
      }
      const ks = keyset({ createdAt: k.createdAt as never, id: k.id as never }, c, anchor)
      const [rows, [{ total }]] = await Promise.all([
        db
          .select()
          .from(k)
          .where(and(mine, ks.where))
          .orderBy(...ks.orderBy)
          .limit(c.limit + 1),
        db.select({ total: count() }).from(k).where(mine),
      ])
      return asPage(rows, c.limit, ks.reversed, total)
    },

    // --- Events ---

    /** The first event of a type about a transaction (a manual re-send repeats it). */
    async firstEventOf(transactionId: string, eventType: string): Promise<EventRow | null> {
      if (!UUID_RE.test(transactionId)) return null
      const [r] = await db
        .select(EVENT_COLUMNS)
        .from(outbox)
        .where(
          and(
            eq(outbox.transactionId, transactionId),
            eq(outbox.eventType, eventType),
            isNotNull(outbox.eventId),
          ),
        )
        .orderBy(asc(outbox.id))
        .limit(1)
      return r ? { ...r, eventId: r.eventId! } : null
    },

    /** An event by its id, of this project and mode (null scope: whoever's, as a delivery names it). */
    async findEvent(
      scope: ProjectMode | null,
      eventId: string,
      types: string[],
    ): Promise<EventRow | null> {
      const [r] = await db
        .select(EVENT_COLUMNS)
        .from(outbox)
        .where(
          and(
            eq(outbox.eventId, eventId),
            scope ? eq(outbox.projectId, scope.projectId) : undefined,
            scope ? eq(outbox.testingMode, scope.mode === 'test') : undefined,
            inArray(outbox.eventType, types),
          ),
        )
      return r ? { ...r, eventId: r.eventId! } : null
    },

    /**
     * A page of events (those already given their id by the dispatcher, which does so within
     * moments of their commit), ordered by when they were written.
     */
    async events(
      scope: ProjectMode,
      c: Cursor,
      types: string[],
    ): Promise<CursorPage<EventRow> | 'unknown'> {
      const mine = and(
        eq(outbox.projectId, scope.projectId),
        eq(outbox.testingMode, scope.mode === 'test'),
        isNotNull(outbox.eventId),
        inArray(outbox.eventType, types),
      )
      const id = c.startingAfter ?? c.endingBefore
      let anchor: number | null = null
      if (id !== undefined) {
        const [found] = await db
          .select({ id: outbox.id })
          .from(outbox)
          .where(and(mine, eq(outbox.eventId, id)))
        if (!found) return 'unknown'
        anchor = found.id
      }
      const { reversed, descending } = direction(c)
      const [rows, [{ total }]] = await Promise.all([
        db
          .select(EVENT_COLUMNS)
          .from(outbox)
          .where(
            and(
              mine,
              anchor === null
                ? undefined
                : descending
                  ? lt(outbox.id, anchor)
                  : gt(outbox.id, anchor),
            ),
          )
          .orderBy(descending ? desc(outbox.id) : asc(outbox.id))
          .limit(c.limit + 1),
        db.select({ total: count() }).from(outbox).where(mine),
      ])
      return asPage(
        rows.map((r) => ({ ...r, eventId: r.eventId! })),
        c.limit,
        reversed,
        total,
      )
    },
  }
}

export type CommerceRepo = ReturnType<typeof createCommerceRepo>
