import { and, asc, count, eq, inArray, isNull, sql, type SQL } from 'drizzle-orm'
import type { RefundStatus } from '../../../machines/refund.machine.ts'
import { decodeCursor } from '../../chain/follower/cursor.ts'
import type { Database } from '../../db/client.ts'
import {
  chainCursors,
  chainTransfers,
  depositAddresses,
  idempotencyKeys,
  outbox,
  refunds,
  transactionEvents,
  transactions,
  type RefundRow,
  type TransactionRow,
} from '../../db/schema.ts'
import type { Outcome } from '../../lib/outcome.ts'
import type { ProjectMode } from '../../projects/mode.ts'

export type { RefundRow } from '../../db/schema.ts'
export type NewRefundRow = typeof refunds.$inferInsert

/**
 * What decides whether a refund may be made: what arrived at the transaction's deposit address and
 * what was refunded.
 */
export interface RefundFacts {
  transaction: TransactionRow
  /**
   * Transfers seen to the deposit address that count as money received (payments, late payments,
   * other assets), not taken back by a reorg.
   */
  arrivals: Arrival[]
  /** Refunds made before, whatever their status. */
  refunds: { network: string; tokenSymbol: string; amount: bigint; status: RefundStatus }[]
  /**
   * The height each network's follower has processed (from its cursor); absent for a network never
   * followed.
   */
  heights: Map<string, bigint>
}

/** A transfer that arrived at a transaction's deposit address (lowercase hex). */
export interface Arrival {
  network: string
  tokenSymbol: string
  amount: bigint
  blockNumber: number
  blockHash: string
  /**
   * The block's hash for native coin that arrived by an internal call and whose transaction is not
   * known.
   */
  txHash: string
  /** -1 a native transfer, -2 native coin by an internal call. */
  logIndex: number
  fromAddress: string
}

const arrivalColumns = {
  network: chainTransfers.network,
  tokenSymbol: chainTransfers.tokenSymbol,
  amount: chainTransfers.amount,
  blockNumber: chainTransfers.blockNumber,
  blockHash: chainTransfers.blockHash,
  txHash: chainTransfers.txHash,
  logIndex: chainTransfers.logIndex,
  fromAddress: chainTransfers.fromAddress,
}
const countsAsReceived = and(
  isNull(chainTransfers.reorgedAt),
  inArray(chainTransfers.kind, ['payment', 'wrong_asset', 'late']),
)

/**
 * A line on the refund's transaction's timeline: something that happened to it without moving its
 * status.
 */
export interface RefundNote {
  cause: string
  details: Record<string, unknown>
}

/** A webhook event for the outbox, about the refund's transaction. */
export interface RefundEventOut {
  eventType: string
  data: Record<string, unknown>
}

const r = refunds
const inScope = (s: ProjectMode, ...more: (SQL | undefined)[]) =>
  and(eq(r.projectId, s.projectId), eq(r.mode, s.mode), ...more)
const newestFirst = [sql`${r.createdAt} DESC NULLS LAST`, sql`${r.id} DESC NULLS LAST`]

/**
 * Persistence of refunds: every write that changes one also writes its timeline note and webhook
 * event, atomically.
 */
export function createRefundRepo(database: Database) {
  const { db } = database
  type Tx = Parameters<Parameters<typeof db.transaction>[0]>[0]

  async function facts(q: Tx | typeof db, transaction: TransactionRow): Promise<RefundFacts> {
    const [arrived, made, cursors] = await Promise.all([
      q
        .select(arrivalColumns)
        .from(chainTransfers)
        .where(and(eq(chainTransfers.transactionId, transaction.id), countsAsReceived))
        .orderBy(asc(chainTransfers.blockNumber), asc(chainTransfers.logIndex)),
      q
        .select({
          network: r.network,
          tokenSymbol: r.tokenSymbol,
          amount: r.amount,
          status: r.status,
        })
        .from(r)
        .where(eq(r.transactionId, transaction.id)),
      q.select({ network: chainCursors.network, cursor: chainCursors.cursor }).from(chainCursors),
    ])
    const heights = new Map<string, bigint>()
    for (const c of cursors) {
      const height = (JSON.parse(c.cursor) as { height?: unknown }).height
      if (typeof height === 'string' && /^\d+$/.test(height)) heights.set(c.network, BigInt(height))
    }
    return {
      transaction,
      arrivals: arrived.map((a) => ({ ...a, amount: BigInt(a.amount) })),
      refunds: made.map((m) => ({ ...m, amount: BigInt(m.amount) })),
      heights,
    }
  }

  const noteValues = (transaction: TransactionRow, note: RefundNote, at: Date) => ({
    transactionId: transaction.id,
    fromStatus: transaction.status,
    toStatus: transaction.status,
    cause: note.cause,
    details: note.details,
    at,
  })
  const outboxValues = (transaction: TransactionRow, event: RefundEventOut, at: Date) => ({
    transactionId: transaction.id,
    projectId: transaction.projectId,
    testingMode: transaction.testingMode,
    eventType: event.eventType,
    data: event.data,
    createdAt: at,
    // Not a status change of the transaction: x-service-sequence 0.
    sequence: 0,
  })

  return {
    /** The facts of a transaction, read now (for showing what is refundable). */
    facts: (transaction: TransactionRow) => facts(db, transaction),

    /**
     * Creates a refund if `decide` allows it on the facts read under a lock of the transaction's
     * row, so two refunds made at once cannot both take the same money. With an idempotency
     * record, it is written in the same database transaction.
     */
    async create(
      transactionId: string,
      decide: (facts: RefundFacts) => Outcome<{
        row: NewRefundRow
        note: RefundNote
        idempotency?: typeof idempotencyKeys.$inferInsert
      }>,
    ): Promise<Outcome<RefundRow>> {
      return db.transaction(async (tx) => {
        const [locked] = await tx
          .select()
          .from(transactions)
          .where(eq(transactions.id, transactionId))
          .for('update')
        if (!locked) throw new Error(`transaction ${transactionId} vanished`)
        const decided = decide(await facts(tx, locked))
        if (!decided.ok) return decided
        const [row] = await tx.insert(r).values(decided.value.row).returning()
        await tx
          .insert(transactionEvents)
          .values(noteValues(locked, decided.value.note, row!.createdAt))
        if (decided.value.idempotency)
          await tx.insert(idempotencyKeys).values(decided.value.idempotency)
        return { ok: true as const, value: row! }
      })
    },

    /**
     * Commits one judged change of a refund, only if it is still at `expectedVersion`, with its
     * timeline note and webhook event. Returns the row as written, or null when another writer
     * got there first.
     */
    async commit(c: {
      id: string
      expectedVersion: number
      patch: Partial<NewRefundRow>
      note: RefundNote | null
      event: (row: RefundRow, transaction: TransactionRow) => RefundEventOut | null
    }): Promise<RefundRow | null> {
      return db.transaction(async (tx) => {
        const [row] = await tx
          .update(r)
          .set({ ...c.patch, version: c.expectedVersion + 1 })
          .where(and(eq(r.id, c.id), eq(r.version, c.expectedVersion)))
          .returning()
        if (!row) return null
        const [transaction] = await tx
          .select()
          .from(transactions)
          .where(eq(transactions.id, row.transactionId))
        if (c.note)
          await tx.insert(transactionEvents).values(noteValues(transaction!, c.note, row.updatedAt))
        const event = c.event(row, transaction!)
        if (event) await tx.insert(outbox).values(outboxValues(transaction!, event, row.updatedAt))
        return row
      })
    },

    async find(id: string): Promise<RefundRow | null> {
      const [row] = await db.select().from(r).where(eq(r.id, id))
      return row ?? null
    },

    /**
     * What arrived at the deposit addresses of these transactions, oldest first (see RefundFacts).
     */
    async arrivals(
      transactionIds: readonly string[],
    ): Promise<(Arrival & { transactionId: string })[]> {
      if (transactionIds.length === 0) return []
      const rows = await db
        .select({ ...arrivalColumns, transactionId: chainTransfers.transactionId })
        .from(chainTransfers)
        .where(
          and(
            inArray(chainTransfers.transactionId, [...new Set(transactionIds)]),
            countsAsReceived,
          ),
        )
        .orderBy(asc(chainTransfers.blockNumber), asc(chainTransfers.logIndex))
      return rows.map((a) => ({ ...a, amount: BigInt(a.amount), transactionId: a.transactionId! }))
    },

    /** What refunds of these transactions are stated in their currency from (views.ts). */
    pricing: (transactionIds: readonly string[]) =>
      transactionIds.length === 0
        ? Promise.resolve([])
        : db
            .select({
              id: transactions.id,
              currency: transactions.currency,
              amountInCurrency: transactions.amountInCurrency,
              tokenAmount: transactions.tokenAmount,
              tokenSymbol: transactions.tokenSymbol,
              blockchainNetwork: transactions.blockchainNetwork,
            })
            .from(transactions)
            .where(inArray(transactions.id, [...new Set(transactionIds)])),

    /** A transaction's refunds, oldest first. */
    ofTransaction: (transactionId: string): Promise<RefundRow[]> =>
      db
        .select()
        .from(r)
        .where(eq(r.transactionId, transactionId))
        .orderBy(asc(r.createdAt), asc(r.id)),

    /** Newest first. */
    async page(
      scope: ProjectMode,
      filter: {
        status?: RefundStatus
        network?: string
        depositAddress?: string
        limit: number
        offset: number
      },
    ): Promise<{ rows: RefundRow[]; total: number }> {
      const where = inScope(
        scope,
        filter.status ? eq(r.status, filter.status) : undefined,
        filter.network ? eq(r.network, filter.network) : undefined,
        filter.depositAddress
          ? eq(r.depositAddress, filter.depositAddress.toLowerCase())
          : undefined,
      )
      const [rows, [{ total }]] = await Promise.all([
        db
          .select()
          .from(r)
          .where(where)
          .orderBy(...newestFirst)
          .limit(filter.limit)
          .offset(filter.offset),
        db.select({ total: count() }).from(r).where(where),
      ])
      return { rows, total: Number(total) }
    },

    /** A network's refunds whose payment is sent and not settled yet. */
    inFlight: (network: string): Promise<RefundRow[]> =>
      db
        .select()
        .from(r)
        .where(and(eq(r.network, network), inArray(r.status, ['submitted', 'confirming'])))
        .orderBy(asc(r.id)),

    /**
     * Whether the transaction was paid to a deposit address of its own (false: to the project's
     * x402 address, docs/decisions/0063-x402.md).
     */
    async hasDepositAddress(transactionId: string): Promise<boolean> {
      const [row] = await db
        .select({ address: depositAddresses.address })
        .from(depositAddresses)
        .where(eq(depositAddresses.transactionId, transactionId))
      return !!row
    },

    /** The transaction a refund is for (any mode: the caller has checked the refund's own). */
    async transaction(id: string): Promise<TransactionRow | null> {
      const [row] = await db.select().from(transactions).where(eq(transactions.id, id))
      return row ?? null
    },

    /**
     * The height a network's follower has processed (its cursor); null before it followed, or when
     * its cursor does not read.
     */
    async followedHeight(network: string): Promise<bigint | null> {
      const [c] = await db
        .select({ cursor: chainCursors.cursor })
        .from(chainCursors)
        .where(eq(chainCursors.network, network))
      try {
        return c ? decodeCursor(c.cursor).height : null
      } catch {
        return null
      }
    },

    async idempotencyRecord(k: ProjectMode & { key: string }) {
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
  }
}

export type RefundRepo = ReturnType<typeof createRefundRepo>
