import { createHash } from 'node:crypto'
import type { TransactionRegistry } from '../../actors/transaction-registry.ts'
import type { Clock } from '../../lib/clock.ts'
import { newTransactionId, newTransactionNumber } from '../../lib/ids.ts'
import { centsToDecimal, decimalToNumber } from '../../lib/money.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import {
  currencyOf,
  MAX_USD_CENTS,
  type CreateTransactionInput,
  type Status,
  type TransactionView,
} from './model.ts'
import type { RecordedRate } from '../../../machines/transaction.machine.ts'
import { type RateBook, USD_ONLY } from '../../chain/fx-rates.ts'
import { valueAtCreation } from '../../chain/pricing.ts'
import { amountToMinor, decimalAmountNumber, minorToDecimal } from '../../lib/currency.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import { ownRow, type TransactionRepo, type TransactionRow } from './transaction.repo.ts'
import type { CommerceFacts } from '../../db/schema.ts'

const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000
const DEFAULT_EXPIRY_MINUTES = 60
/** TX-XXXX-XXXX has 30^8 values: a collision is rare, two in a row rarer still. */
const NUMBER_ATTEMPTS = 5

/**
 * Who is asking: a project in one mode (docs/decisions/0009-keys-see-their-own-mode.md: a key sees
 * only its own mode).
 */
export type Caller = ProjectMode

/**
 * A serialised response, so an idempotent replay returns the very same bytes
 * (docs/decisions/0006-idempotent-create.md).
 */
export interface StoredResponse {
  status: number
  body: string
  /**
   * True when an Idempotency-Key replayed an earlier response (the `Idempotent-Replayed` header).
   */
  replayed?: true
}

/**
 * What the service needs of the lifecycle: create a transaction with its actor, and apply events to
 * it.
 */
export type Lifecycle = Pick<TransactionRegistry, 'create' | 'apply'>

/** What a new transaction is priced at: its currency and amount, and its USD value now. */
export interface Priced {
  currency: string
  /** Decimal string with the currency's places. */
  amountInCurrency: string
  /** Decimal string, two places. */
  amountUsd: string
  /** The currency's USD rate used; null for USD. */
  usdRate: RecordedRate | null
}

/** What a charge made through the Commerce API adds to a transaction. */
export interface ChargeExtras {
  /** A `no_price` charge: any amount pays it. */
  anyAmount: boolean
  commerce: CommerceFacts
}

/** The row a new transaction starts as: every column, so response and event need no read-back. */
export function newTransactionRow(
  caller: Caller,
  input: Omit<CreateTransactionInput, 'amount' | 'currency'>,
  priced: Priced,
  now: Date,
  extras: ChargeExtras | null = null,
): TransactionRow {
  return {
    id: newTransactionId(),
    projectId: caller.projectId,
    testingMode: caller.mode === 'test',
    transactionNumber: newTransactionNumber(),
    status: 'created' satisfies Status,
    amountUsd: priced.amountUsd,
    currency: priced.currency,
    amountInCurrency: priced.amountInCurrency,
    usdRate: priced.usdRate,
    quoteRates: null,
    orderId: input.order_id ?? null,
    orderDescription: input.order_description ?? null,
    customerEmail: input.customer_email ?? null,
    customerName: input.customer_name ?? null,
    customerIpAddress: null,
    metadata: input.metadata ?? null,
    successUrl: input.success_url ?? null,
    cancelUrl: input.cancel_url ?? null,
    tokenSymbol: null,
    tokenAmount: null,
    blockchainNetwork: null,
    depositAddress: null,
    amountReceived: null,
    transactionHash: null,
    blockNumber: null,
    confirmations: null,
    requiredConfirmations: null,
    finality: null,
    nativeBaseline: null,
    nativeBaselineNetwork: null,
    transactionHashNames: null,
    confirmedAt: null,
    completedAt: null,
    expiresAt: new Date(
      now.getTime() + (input.expires_in_minutes ?? DEFAULT_EXPIRY_MINUTES) * 60_000,
    ),
    createdAt: now,
    updatedAt: now,
    version: 0,
    anyAmount: extras?.anyAmount ?? false,
    commerce: extras?.commerce ?? null,
  }
}

export function createTransactionService(deps: {
  repo: TransactionRepo
  lifecycle: Lifecycle
  clock: Clock
  baseUrl: string
  /** The fiat currencies offered and their USD rates (fx-rates.ts); absent: USD only. */
  rates?: Pick<RateBook, 'offered' | 'current' | 'read'>
}) {
  const rates = deps.rates ?? USD_ONLY
  const view = (row: TransactionRow) => toView(row, deps.baseUrl)

  /**
   * docs/decisions/0064-priced-in-the-merchants-currency.md: the currency must be one the caller's
   * mode offers; the amount's USD value at the current rate must be at most 1,000,000.
   */
  async function price(caller: Caller, input: CreateTransactionInput): Promise<Outcome<Priced>> {
    const offered = offeredCurrency(caller, currencyOf(input))
    if (!offered.ok) return offered
    const currency = offered.value
    // The rules checked the places; a currency they could not judge is not offered.
    const minor = amountToMinor(input.amount, currency)!
    const value = await valueAtCreation(rates, caller.mode, currency, minor)
    if (!value.ok) return value
    if (value.value.usdCents > MAX_USD_CENTS)
      return deny(
        'invalid_request',
        `amount must be worth at most 1,000,000 USD; ${minorToDecimal(minor, currency)} ${currency} is ${centsToDecimal(value.value.usdCents)} USD now`,
        [{ path: 'amount', message: 'must be worth at most 1,000,000 USD' }],
      )
    return ok({
      currency,
      amountInCurrency: minorToDecimal(minor, currency),
      amountUsd: centsToDecimal(value.value.usdCents),
      usdRate: value.value.usdRate,
    })
  }

  /**
   * The first response to `key` within the window, or 409 for another body; null when the key has
   * no record yet (docs/decisions/0006-idempotent-create.md).
   */
  async function replay(
    caller: Caller,
    key: string,
    requestHash: string,
    now: Date,
  ): Promise<Outcome<StoredResponse> | null> {
    const prior = await deps.repo.idempotencyRecord({
      projectId: caller.projectId,
      mode: caller.mode,
      key,
    })
    if (!prior || prior.createdAt.getTime() < now.getTime() - IDEMPOTENCY_WINDOW_MS) return null
    if (prior.requestHash !== requestHash)
      return deny('conflict', 'This Idempotency-Key was already used with a different request body')
    return ok({ status: prior.statusCode, body: prior.response, replayed: true })
  }

  /** A currency the caller's mode offers, or the refusal naming those it does. */
  function offeredCurrency(caller: Caller, currency: string): Outcome<string> {
    const offered = rates.offered(caller.mode)
    return offered.includes(currency)
      ? ok(currency)
      : deny(
          'invalid_request',
          `currency ${currency} is not offered; this service prices ${caller.mode} transactions in ${offered.join(', ')}`,
          [{ path: 'currency', message: `must be one of ${offered.join(', ')}` }],
        )
  }

  return {
    /**
     * A charge of the Commerce API (docs/decisions/0065-coinbase-commerce-drop-in.md): a
     * transaction like any other, with the charge's own facts; with `anyAmount` (a `no_price`
     * charge) it has no amount (0), only the currency payments are valued in. No Idempotency-Key:
     * Commerce had none.
     */
    async createCharge(
      caller: Caller,
      input: CreateTransactionInput,
      extras: ChargeExtras,
    ): Promise<Outcome<TransactionRow>> {
      const now = new Date(deps.clock.now())
      let priced: Outcome<Priced>
      if (extras.anyAmount) {
        const currency = offeredCurrency(caller, currencyOf(input))
        priced = currency.ok
          ? ok({
              currency: currency.value,
              amountInCurrency: minorToDecimal(0n, currency.value),
              amountUsd: '0.00',
              usdRate: null,
            })
          : currency
      } else priced = await price(caller, input)
      if (!priced.ok) return priced
      for (let attempt = 0; attempt < NUMBER_ATTEMPTS; attempt++) {
        const row = newTransactionRow(caller, input, priced.value, now, extras)
        const outcome = await deps.lifecycle.create({
          row,
          timelineDetails: creationDetails(row),
        })
        if (outcome === 'number_taken') continue
        return ok(row)
      }
      throw new Error(`no free transaction number after ${NUMBER_ATTEMPTS} attempts`)
    },

    /**
     * docs/decisions/0005-create-request-bounds.md, docs/decisions/0006-idempotent-create.md,
     * docs/decisions/0007-full-transaction-object.md. The transaction, its actor, timeline entry
     * and outbox event, and the idempotency record with the response are committed by one
     * statement: two identical concurrent calls create one transaction, and the second replays the
     * first's response.
     */
    async create(
      caller: Caller,
      input: CreateTransactionInput,
      opts: { idempotencyKey?: string } = {},
    ): Promise<Outcome<StoredResponse>> {
      const now = new Date(deps.clock.now())
      const key = opts.idempotencyKey
      if (key !== undefined && (key.length === 0 || key.length > 255)) {
        return deny('invalid_request', 'Idempotency-Key must be 1 to 255 characters', [
          { path: 'Idempotency-Key', message: 'must be 1 to 255 characters' },
        ])
      }
      // The currency's case is not part of the request: "eur" and "EUR" are the same body.
      const body = input.currency == null ? input : { ...input, currency: currencyOf(input) }
      const requestHash =
        key === undefined ? '' : createHash('sha256').update(canonicalJson(body)).digest('hex')
      const priced = await price(caller, input)
      if (!priced.ok) {
        // A retry of a create that succeeded still gets its first response, whatever the rate
        // does now.
        const prior = key === undefined ? null : await replay(caller, key, requestHash, now)
        return prior ?? priced
      }
      for (let attempt = 0; attempt < NUMBER_ATTEMPTS; attempt++) {
        const row = newTransactionRow(caller, input, priced.value, now)
        const transaction = view(row)
        const response: StoredResponse = {
          status: 200,
          body: JSON.stringify({
            success: true,
            transaction,
            payment_url: transaction.payment_url,
          }),
        }
        const outcome = await deps.lifecycle.create({
          row,
          timelineDetails: creationDetails(row),
          idempotency:
            key === undefined
              ? undefined
              : {
                  mode: caller.mode,
                  key,
                  requestHash,
                  statusCode: response.status,
                  response: response.body,
                  expiredBefore: new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS),
                },
        })
        if (outcome === 'number_taken') continue
        if (outcome === 'key_taken') break
        return ok(response)
      }
      if (key === undefined)
        throw new Error(`no free transaction number after ${NUMBER_ATTEMPTS} attempts`)
      // The key is taken (and not expired): replay its first response, or refuse another body.
      return (
        (await replay(caller, key, requestHash, now)) ??
        deny('conflict', 'This Idempotency-Key is being used by a concurrent request; retry')
      )
    },

    /**
     * `read`: the row as already read with the request's rate-limit grant (any project's, or
     * null for none), so it is not read again; its scope is checked all the same.
     */
    async get(
      caller: Caller,
      id: string,
      read?: TransactionRow | null,
    ): Promise<Outcome<TransactionView>> {
      const row = read === undefined ? await deps.repo.find(caller, id) : ownRow(caller, read)
      // Another project's or mode's transaction is indistinguishable from none
      // (docs/decisions/0009-keys-see-their-own-mode.md).
      return row ? ok(view(row)) : deny('not_found', `No transaction ${id}`)
    },

    /**
     * docs/decisions/0011-cancel.md: the merchant cancels; only `created`, `prepared` and `pending`
     * can be (409 otherwise).
     */
    async cancel(caller: Caller, id: string): Promise<Outcome<TransactionView>> {
      const found = await deps.repo.find(caller, id)
      if (!found) return deny('not_found', `No transaction ${id}`)
      const applied = await deps.lifecycle.apply(id, { type: 'cancel.requested', by: 'merchant' })
      if (!applied.ok)
        return applied.code === 'conflict'
          ? deny(
              'conflict',
              `A transaction in status ${(await deps.repo.find(caller, id))?.status ?? found.status} cannot be cancelled`,
            )
          : applied
      return ok(view(applied.value))
    },

    /** Every recorded transition of a transaction, oldest first. */
    async timeline(caller: Caller, id: string) {
      const found = await deps.repo.find(caller, id)
      if (!found) return deny('not_found', `No transaction ${id}`)
      const entries = await deps.repo.timeline(id)
      return ok(
        entries.map((e) => ({
          from_status: e.fromStatus,
          to_status: e.toStatus,
          cause: e.cause,
          details: e.details,
          at: e.at.toISOString(),
        })),
      )
    },

    async list(
      caller: Caller,
      projectId: string,
      filter: {
        status?: Status
        currency?: string
        orderIdPrefix?: string
        limit: number
        offset: number
      },
    ) {
      if (projectId !== caller.projectId)
        return deny('forbidden', 'This API key does not belong to that project')
      const { rows, total } = await deps.repo.page(caller, filter)
      return ok({
        transactions: rows.map(view),
        pagination: {
          limit: filter.limit,
          offset: filter.offset,
          total,
          has_more: filter.offset + rows.length < total,
        },
      })
    },
  }
}

export type TransactionService = ReturnType<typeof createTransactionService>

const iso = (d: Date | null) => (d ? d.toISOString() : null)

export function toView(r: TransactionRow, baseUrl: string): TransactionView {
  return {
    id: r.id,
    transaction_number: r.transactionNumber,
    status: r.status as Status,
    amount_usd: decimalToNumber(r.amountUsd),
    currency: r.currency,
    amount_in_currency: decimalAmountNumber(r.amountInCurrency, r.currency),
    usd_rate: r.usdRate ? rateView(r.usdRate) : null,
    quote_rates: r.quoteRates
      ? {
          quoted_at: r.quoteRates.quotedAt,
          method: r.quoteRates.method,
          token_usd: r.quoteRates.tokenUsd && rateView(r.quoteRates.tokenUsd),
          currency_usd: r.quoteRates.currencyUsd && rateView(r.quoteRates.currencyUsd),
        }
      : null,
    payment_url: `${baseUrl}/pay/${r.id}`,
    x402_url: `${baseUrl}/pay/${r.id}/x402`,
    testing_mode: r.testingMode,
    created_at: r.createdAt.toISOString(),
    expires_at: r.expiresAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
    order_id: r.orderId,
    order_description: r.orderDescription,
    customer_email: r.customerEmail,
    customer_name: r.customerName,
    metadata: r.metadata ?? null,
    success_url: r.successUrl,
    cancel_url: r.cancelUrl,
    token_symbol: r.tokenSymbol,
    token_amount: r.tokenAmount,
    blockchain_network: r.blockchainNetwork,
    deposit_address: r.depositAddress,
    amount_received: r.amountReceived,
    transaction_hash: r.transactionHash,
    transaction_hash_names: r.transactionHashNames ?? null,
    block_number: r.blockNumber,
    confirmations: r.confirmations,
    required_confirmations: r.requiredConfirmations,
    finality: r.finality,
    confirmed_at: iso(r.confirmedAt),
    completed_at: iso(r.completedAt),
  }
}

/** What the timeline's creation entry records: the price, its USD value and rate, the deadline. */
function creationDetails(row: TransactionRow): Record<string, unknown> {
  return {
    amount_in_currency: row.amountInCurrency,
    currency: row.currency,
    amount_usd: row.amountUsd,
    ...(row.usdRate ? { usd_rate: rateView(row.usdRate) } : {}),
    ...(row.anyAmount ? { any_amount: true } : {}),
    expires_at: row.expiresAt.toISOString(),
  }
}

/** A recorded rate as the API shows it. */
export function rateView(r: RecordedRate) {
  return {
    usd: r.usd,
    source: r.source,
    network: r.network,
    feed: r.feed,
    round_id: r.roundId,
    updated_at: r.updatedAt,
  }
}

/** JSON with object keys sorted, so `{a,b}` and `{b,a}` are the same request. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`
  }
  return JSON.stringify(v) ?? 'null'
}
