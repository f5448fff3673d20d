/**
 * Every transaction of a project and mode, each followed by its refunds, as a CSV or JSON lines
 * download read from the database a page at a time while it is sent
 * (docs/decisions/0064-priced-in-the-merchants-currency.md, docs/integrating/export.md): a year of
 * history never sits in memory, and a client that goes away stops the reading.
 */
import type { RecordedRate } from '../../../machines/transaction.machine.ts'
import type { Clock } from '../../lib/clock.ts'
import {
  decimalToMinor,
  isKnownCurrency,
  minorToDecimal,
  unitsInCurrency,
} from '../../lib/currency.ts'
import { centsToDecimal, usdToCents } from '../../lib/money.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import { createdRange } from '../stats/service.ts'
import {
  CSV_HEADER,
  csvRecord,
  EXPORT_MEDIA_TYPES,
  jsonRecord,
  type ExportFormat,
  type ExportRecord,
} from './export-model.ts'
import type {
  ExportCursor,
  ExportFilter,
  ExportRefundRow,
  ExportRepo,
  ExportTransactionRow,
} from './export.repo.ts'
import { STATUSES } from './model.ts'

/** Transactions read per page: each page is one statement, and all the memory an export holds. */
export const EXPORT_PAGE_ROWS = 500

/** What a caller asks for; every field is checked here, whichever door it came through. */
export interface ExportQuery {
  format?: string
  status?: string
  currency?: string
  start_date?: string
  end_date?: string
  /** The merchant's order ids starting with it (the dashboard's list filter). */
  orderIdPrefix?: string
}

/** A download ready to send: its body reads the next page only when the last one was taken. */
export interface ExportDownload {
  contentType: string
  filename: string
  body: ReadableStream<Uint8Array>
}

const iso = (d: Date | null) => (d ? d.toISOString() : null)

/** A numeric column of the currency with the currency's places ("19.990" EUR -> "19.99"). */
function inCurrency(value: string, currency: string): string {
  return isKnownCurrency(currency)
    ? minorToDecimal(decimalToMinor(value, currency), currency)
    : value
}

/** A rate's value, source, `feed@network`, round and time, as the export's columns hold them. */
function rateColumns(r: RecordedRate | null | undefined) {
  if (!r) return [null, null, null, null, null] as const
  const feed = r.feed ? (r.network ? `${r.feed}@${r.network}` : r.feed) : null
  return [r.usd, r.source, feed, r.roundId, r.updatedAt] as const
}

function transactionRecord(t: ExportTransactionRow): ExportRecord {
  const [usdRate, usdRateSource, usdRateFeed, usdRateRound, usdRateAt] = rateColumns(t.usdRate)
  const q = t.quoteRates
  const [tokenUsd, tokenUsdSource, tokenUsdFeed, tokenUsdRound, tokenUsdAt] = rateColumns(
    q?.tokenUsd,
  )
  const [fx, fxSource, fxFeed, fxRound, fxAt] = rateColumns(q?.currencyUsd)
  return {
    record_type: 'transaction',
    transaction_id: t.id,
    transaction_number: t.transactionNumber,
    refund_id: null,
    status: t.status,
    testing_mode: String(t.testingMode),
    created_at: iso(t.createdAt),
    completed_at: iso(t.completedAt),
    order_id: t.orderId,
    currency: t.currency,
    amount_in_currency: inCurrency(t.amountInCurrency, t.currency),
    amount_usd: centsToDecimal(usdToCents(t.amountUsd)),
    usd_rate: usdRate,
    usd_rate_source: usdRateSource,
    usd_rate_feed: usdRateFeed,
    usd_rate_round_id: usdRateRound,
    usd_rate_updated_at: usdRateAt,
    token_symbol: t.tokenSymbol,
    token_amount: t.tokenAmount,
    blockchain_network: t.blockchainNetwork,
    transaction_hash: t.transactionHash,
    block_number: t.blockNumber === null ? null : String(t.blockNumber),
    quote_method: q?.method ?? null,
    quoted_at: q?.quotedAt ?? null,
    token_usd_price: tokenUsd,
    token_usd_source: tokenUsdSource,
    token_usd_feed: tokenUsdFeed,
    token_usd_round_id: tokenUsdRound,
    token_usd_updated_at: tokenUsdAt,
    currency_usd_rate: fx,
    currency_usd_source: fxSource,
    currency_usd_feed: fxFeed,
    currency_usd_round_id: fxRound,
    currency_usd_updated_at: fxAt,
  }
}

/**
 * A refund's value in its transaction's currency, pro rata to the locked quote and rounded down
 * (docs/decisions/0064-priced-in-the-merchants-currency.md); null when the refund is in another
 * token or network than the quote (money that arrived in another asset has no price here).
 */
function refundInCurrency(r: ExportRefundRow, t: ExportTransactionRow): string | null {
  if (r.tokenSymbol !== t.tokenSymbol || r.network !== t.blockchainNetwork) return null
  if (!isKnownCurrency(t.currency)) return null
  const minor = unitsInCurrency(BigInt(r.amount), {
    tokenAmount: t.tokenAmount,
    amountMinor: decimalToMinor(t.amountInCurrency, t.currency),
  })
  return minor === null ? null : minorToDecimal(minor, t.currency)
}

function refundRecord(r: ExportRefundRow, t: ExportTransactionRow): ExportRecord {
  return {
    record_type: 'refund',
    transaction_id: t.id,
    transaction_number: t.transactionNumber,
    refund_id: r.id,
    status: r.status,
    testing_mode: String(r.mode === 'test'),
    created_at: iso(r.createdAt),
    completed_at: iso(r.completedAt),
    order_id: t.orderId,
    currency: t.currency,
    amount_in_currency: refundInCurrency(r, t),
    amount_usd: null,
    usd_rate: null,
    usd_rate_source: null,
    usd_rate_feed: null,
    usd_rate_round_id: null,
    usd_rate_updated_at: null,
    token_symbol: r.tokenSymbol,
    token_amount: r.amount,
    blockchain_network: r.network,
    transaction_hash: r.txHash,
    block_number: r.blockNumber === null ? null : String(r.blockNumber),
    quote_method: null,
    quoted_at: null,
    token_usd_price: null,
    token_usd_source: null,
    token_usd_feed: null,
    token_usd_round_id: null,
    token_usd_updated_at: null,
    currency_usd_rate: null,
    currency_usd_source: null,
    currency_usd_feed: null,
    currency_usd_round_id: null,
    currency_usd_updated_at: null,
  }
}

/** A page's records: each transaction, then its refunds (which come ordered by transaction). */
function pageRecords(txs: ExportTransactionRow[], refunds: ExportRefundRow[]): ExportRecord[] {
  const byTransaction = new Map<string, ExportRefundRow[]>()
  for (const r of refunds) {
    const list = byTransaction.get(r.transactionId)
    if (list) list.push(r)
    else byTransaction.set(r.transactionId, [r])
  }
  return txs.flatMap((t) => [
    transactionRecord(t),
    ...(byTransaction.get(t.id) ?? []).map((r) => refundRecord(r, t)),
  ])
}

/** The query checked and turned into a filter, or why it is refused (400). */
function filterOf(q: ExportQuery): Outcome<{ format: ExportFormat; filter: ExportFilter }> {
  const format = q.format ?? 'csv'
  if (format !== 'csv' && format !== 'jsonl')
    return deny('invalid_request', 'format must be one of: csv, jsonl', [
      { path: 'format', message: 'must be one of: csv, jsonl' },
    ])
  if (q.status !== undefined && !(STATUSES as readonly string[]).includes(q.status))
    return deny('invalid_request', `status must be one of: ${STATUSES.join(', ')}`, [
      { path: 'status', message: `must be one of: ${STATUSES.join(', ')}` },
    ])
  if (q.currency !== undefined && !/^[A-Za-z]{3}$/.test(q.currency))
    return deny('invalid_request', 'currency must be a three-letter ISO 4217 code', [
      { path: 'currency', message: 'must be a three-letter ISO 4217 code' },
    ])
  const range = createdRange(q)
  if (!range.ok) return range
  return ok({
    format,
    filter: {
      status: q.status,
      currency: q.currency?.toUpperCase(),
      orderIdPrefix: q.orderIdPrefix,
      ...range.value,
    },
  })
}

export function createTransactionExport(deps: {
  repo: ExportRepo
  clock: Clock
  pageRows?: number
}) {
  const pageRows = deps.pageRows ?? EXPORT_PAGE_ROWS

  const service = {
    /**
     * The export's records a page at a time, oldest transaction first (`created_at`, then `id`),
     * each with its refunds right after it. Stops when `signal` is aborted, or when the caller
     * stops asking (`return()`).
     */
    async *pages(
      caller: ProjectMode,
      filter: ExportFilter,
      signal?: AbortSignal,
    ): AsyncGenerator<ExportRecord[], void, undefined> {
      let after: ExportCursor | null = null
      while (!signal?.aborted) {
        const txs = await deps.repo.transactionsAfter(caller, filter, after, pageRows)
        if (txs.length === 0) return
        const refunds = await deps.repo.refundsOf(
          caller,
          txs.map((t) => t.id),
        )
        yield pageRecords(txs, refunds)
        if (txs.length < pageRows) return
        const last = txs[txs.length - 1]!
        after = { at: last.cursorAt, id: last.id }
      }
    },

    /**
     * The download of the caller's project and mode, or why the query is refused. The first page
     * is read before this returns, so a database that cannot answer is an error response rather
     * than a cut-off file; every later page is read when the client has taken the one before
     * (the stream's back-pressure), and none after it has gone.
     */
    async open(
      caller: ProjectMode,
      q: ExportQuery,
      signal?: AbortSignal,
    ): Promise<Outcome<ExportDownload>> {
      const checked = filterOf(q)
      if (!checked.ok) return checked
      const { format, filter } = checked.value
      // Called through the object, so what reads the pages can be observed (the tests count them).
      const pages = service.pages(caller, filter, signal)
      const encoder = new TextEncoder()
      const encode = (records: ExportRecord[]) =>
        encoder.encode(records.map(format === 'csv' ? csvRecord : jsonRecord).join(''))
      const first = await pages.next()
      let head: Uint8Array | null = encoder.encode(format === 'csv' ? CSV_HEADER : '')
      if (!first.done) head = concat(head, encode(first.value))
      const body = new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            if (head) {
              if (head.byteLength) controller.enqueue(head)
              const finished = first.done
              head = null
              if (finished) controller.close()
              return
            }
            const next = await pages.next()
            if (next.done) controller.close()
            else controller.enqueue(encode(next.value))
          },
          async cancel() {
            await pages.return()
          },
        },
        { highWaterMark: 0 },
      )
      const date = new Date(deps.clock.now()).toISOString().slice(0, 10)
      return ok({
        contentType: EXPORT_MEDIA_TYPES[format],
        filename: `transactions-${caller.mode}-${date}.${format}`,
        body,
      })
    },
  }
  return service
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength)
  out.set(a, 0)
  out.set(b, a.byteLength)
  return out
}

export type TransactionExport = ReturnType<typeof createTransactionExport>
