import { and, asc, eq, gte, inArray, lt, lte, sql } from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import { refunds, transactions } from '../../db/schema.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import { listFilter } from './transaction.repo.ts'

/** Which transactions an export covers, besides its project and mode. */
export interface ExportFilter {
  status?: string
  currency?: string
  /** The merchant's order ids starting with it (the dashboard's list filter). */
  orderIdPrefix?: string
  /** `created_at` from (inclusive). */
  start: Date | null
  /** `created_at` up to, inclusive or not. */
  end: Date | null
  endInclusive: boolean
}

/**
 * Where the last page ended: its last row's `created_at` to the microsecond, as the database
 * writes it (a JS Date keeps milliseconds only, and a cursor short of the row would read that row
 * again), and its id.
 */
export interface ExportCursor {
  at: string
  id: string
}

/** What the export reads of a transaction: only the columns it writes, and the cursor. */
const TRANSACTION_COLUMNS = {
  id: transactions.id,
  transactionNumber: transactions.transactionNumber,
  status: transactions.status,
  testingMode: transactions.testingMode,
  createdAt: transactions.createdAt,
  completedAt: transactions.completedAt,
  orderId: transactions.orderId,
  currency: transactions.currency,
  amountInCurrency: transactions.amountInCurrency,
  amountUsd: transactions.amountUsd,
  usdRate: transactions.usdRate,
  quoteRates: transactions.quoteRates,
  tokenSymbol: transactions.tokenSymbol,
  tokenAmount: transactions.tokenAmount,
  blockchainNetwork: transactions.blockchainNetwork,
  transactionHash: transactions.transactionHash,
  blockNumber: transactions.blockNumber,
  cursorAt: sql<string>`to_char(${transactions.createdAt} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`,
}

const REFUND_COLUMNS = {
  id: refunds.id,
  transactionId: refunds.transactionId,
  status: refunds.status,
  mode: refunds.mode,
  network: refunds.network,
  tokenSymbol: refunds.tokenSymbol,
  amount: refunds.amount,
  txHash: refunds.txHash,
  blockNumber: refunds.blockNumber,
  createdAt: refunds.createdAt,
  completedAt: refunds.completedAt,
}

export type ExportTransactionRow = Awaited<ReturnType<ExportRepo['transactionsAfter']>>[number]
export type ExportRefundRow = Awaited<ReturnType<ExportRepo['refundsOf']>>[number]

/** Reads for the export, a bounded page at a time; no business rules here. */
export function createExportRepo(database: Database) {
  const db = database.db
  return {
    /**
     * Up to `limit` transactions after `after`, oldest first (`created_at`, then `id`). Spelled as
     * the list's index runs backwards (it is DESC NULLS LAST, so ASC NULLS FIRST), with the cursor
     * as one row comparison: each page is a range scan of the index from where the last ended,
     * however deep into the history it is.
     */
    async transactionsAfter(
      scope: ProjectMode,
      filter: ExportFilter,
      after: ExportCursor | null,
      limit: number,
    ) {
      const { start, end } = filter
      return db
        .select(TRANSACTION_COLUMNS)
        .from(transactions)
        .where(
          and(
            eq(transactions.projectId, scope.projectId),
            eq(transactions.testingMode, scope.mode === 'test'),
            ...listFilter(filter),
            start ? gte(transactions.createdAt, start) : undefined,
            end
              ? filter.endInclusive
                ? lte(transactions.createdAt, end)
                : lt(transactions.createdAt, end)
              : undefined,
            after
              ? sql`(${transactions.createdAt}, ${transactions.id}) > (${after.at}::timestamptz, ${after.id}::uuid)`
              : undefined,
          ),
        )
        .orderBy(
          sql`${transactions.createdAt} ASC NULLS FIRST`,
          sql`${transactions.id} ASC NULLS FIRST`,
        )
        .limit(limit)
    },

    /** The refunds of these transactions (of this project and mode), each's oldest first. */
    async refundsOf(scope: ProjectMode, transactionIds: string[]) {
      if (transactionIds.length === 0) return []
      return db
        .select(REFUND_COLUMNS)
        .from(refunds)
        .where(
          and(
            inArray(refunds.transactionId, transactionIds),
            eq(refunds.projectId, scope.projectId),
            eq(refunds.mode, scope.mode),
          ),
        )
        .orderBy(asc(refunds.transactionId), asc(refunds.createdAt), asc(refunds.id))
    },
  }
}

export type ExportRepo = ReturnType<typeof createExportRepo>
