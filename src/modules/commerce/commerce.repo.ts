import {
  and,
  asc,
  count,
  desc,
  eq,
  gt,
  inArray,
  isNotNull,
  isNull,
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
 * The keyset condition and order of a cursor page over (created_at, id): after the cursor row in
 * `order`, or before it (read backwards, then turned around).
 */
function keyset(
  cols: { createdAt: typeof tx.createdAt; id: SQL | typeof tx.id },
  c: Cursor,
  anchor: { createdAt: Date; id: string } | null,
): { where: SQL | undefined; orderBy: SQL[]; reversed: boolean } {
  const reversed = c.endingBefore !== undefined && c.startingAfter === undefined
  // The direction rows are read in: the list's order, or its opposite for `ending_before`.
  const descending = (c.order === 'desc') !== reversed
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

/** Reads and writes of the Commerce API; charges are the project's transactions. */
export function createCommerceRepo(database: Database) {
  const db = database.db

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
    async findCharge(scope: ProjectMode, idOrCode: string): Promise<TransactionRow | null> {
      const by = UUID_RE.test(idOrCode)
        ? eq(tx.id, idOrCode)
        : eq(tx.transactionNumber, idOrCode.toUpperCase())
      const [r] = await db
        .select()
        .from(tx)
        .where(and(inMode(scope), by))
      return r ?? null
    },

    /**
     * Transactions by id, of this project and mode (null scope: whoever's, as a delivery's event
     * names them).
     */
    async chargesByIds(
      scope: ProjectMode | null,
      ids: string[],
    ): Promise<Map<string, TransactionRow>> {
      if (ids.length === 0) return new Map()
      const rows = await db
        .select()
        .from(tx)
        .where(and(scope ? inMode(scope) : undefined, inArray(tx.id, [...new Set(ids)])))
      return new Map(rows.map((r) => [r.id, r]))
    },

    /** Each charge's timeline, oldest first. */
    async timelines(ids: string[]): Promise<Map<string, NativeStep[]>> {
      const out = new Map<string, NativeStep[]>(ids.map((id) => [id, []]))
      if (ids.length === 0) return out
      const e = transactionEvents
      const rows = await db
        .select()
        .from(e)
        .where(inArray(e.transactionId, ids))
        .orderBy(asc(e.transactionId), asc(e.id))
      for (const r of rows) out.get(r.transactionId)?.push(r)
      return out
    },

    /** The transfers to each charge's deposit address still on the canonical chain, in order. */
    async transfers(ids: string[]): Promise<Map<string, RecordedTransfer[]>> {
      const out = new Map<string, RecordedTransfer[]>(ids.map((id) => [id, []]))
      if (ids.length === 0) return out
      const c = chainTransfers
      const rows = await db
        .select({
          transactionId: c.transactionId,
          network: c.network,
          txHash: c.txHash,
          blockNumber: c.blockNumber,
          blockHash: c.blockHash,
          tokenSymbol: c.tokenSymbol,
          amount: c.amount,
          kind: c.kind,
          seenAt: c.seenAt,
        })
        .from(c)
        .where(and(inArray(c.transactionId, ids), isNull(c.reorgedAt)))
        .orderBy(asc(c.blockNumber), asc(c.id))
      for (const r of rows) out.get(r.transactionId)?.push(r)
      return out
    },

    /** A page of charges; `unknown` when a cursor names no charge of the caller's. */
    async charges(scope: ProjectMode, c: Cursor): Promise<CursorPage<TransactionRow> | 'unknown'> {
      const anchor = await chargeAnchor(scope, c.startingAfter ?? c.endingBefore)
      if (anchor === 'unknown') return 'unknown'
      const k = keyset({ createdAt: tx.createdAt, id: tx.id }, c, anchor)
      const [rows, [{ total }]] = await Promise.all([
        db
          .select()
          .from(tx)
          .where(and(inMode(scope), k.where))
          .orderBy(...k.orderBy)
          .limit(c.limit + 1),
        db.select({ total: count() }).from(tx).where(inMode(scope)),
      ])
      return asPage(rows, c.limit, k.reversed, total)
    },

    /**
     * Records that the merchant resolved a charge: a timeline entry and its outbox event, only if
     * its last resolution is still `prior` (null: none), so two resolutions of the same state
     * record one (false for the other).
     */
    async resolve(id: string, at: Date, prior: string | null): Promise<boolean> {
      const r = await db.execute(sql`WITH r AS (
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
      const rows = (Array.isArray(r) ? r : (r as { rows: unknown[] }).rows) as {
        resolved: number
      }[]
      return Number(rows[0]?.resolved) === 1
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

    /** An event by its id, whoever's (a delivery names it). */
    async eventById(eventId: string, types: string[]): Promise<EventRow | null> {
      const [r] = await db
        .select(EVENT_COLUMNS)
        .from(outbox)
        .where(and(eq(outbox.eventId, eventId), inArray(outbox.eventType, types)))
      return r ? { ...r, eventId: r.eventId! } : null
    },

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

    /** An event of this project and mode, by its id. */
    async findEvent(
      scope: ProjectMode,
      eventId: string,
      types: string[],
    ): Promise<EventRow | null> {
      const [r] = await db
        .select(EVENT_COLUMNS)
        .from(outbox)
        .where(
          and(
            eq(outbox.eventId, eventId),
            eq(outbox.projectId, scope.projectId),
            eq(outbox.testingMode, scope.mode === 'test'),
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
      const reversed = c.endingBefore !== undefined && c.startingAfter === undefined
      const descending = (c.order === 'desc') !== reversed
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
