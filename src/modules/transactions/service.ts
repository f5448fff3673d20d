import { createHash } from 'node:crypto'
import type { Mode } from '../../keys/api-key.ts'
import type { Clock } from '../../lib/clock.ts'
import { newTransactionId, newTransactionNumber } from '../../lib/ids.ts'
import { centsToDecimal, decimalToNumber, usdToCents } from '../../lib/money.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { CreateTransactionInput, Status, TransactionView } from './model.ts'
import type { TransactionRepo, TransactionRow } from './transaction.repo.ts'

const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000
const DEFAULT_EXPIRY_MINUTES = 60

/** Who is asking: a project in one mode (R9: a key sees only its own mode). */
export interface Caller {
  projectId: string
  mode: Mode
}

/** A serialised response, so an idempotent replay returns the very same bytes (R6). */
export interface StoredResponse {
  status: number
  body: string
}

export function createTransactionService(deps: { repo: TransactionRepo; clock: Clock; baseUrl: string }) {
  const scopeOf = (c: Caller) => ({ projectId: c.projectId, testingMode: c.mode === 'test' })
  const view = (row: TransactionRow) => toView(row, deps.baseUrl)

  async function insertNew(repo: TransactionRepo, caller: Caller, input: CreateTransactionInput, now: Date) {
    const minutes = input.expires_in_minutes ?? DEFAULT_EXPIRY_MINUTES
    const row = await repo.insert({
      id: newTransactionId(),
      projectId: caller.projectId,
      testingMode: caller.mode === 'test',
      transactionNumber: newTransactionNumber(),
      status: 'created' satisfies Status,
      amountUsd: centsToDecimal(usdToCents(input.amount)),
      currency: 'USD',
      orderId: input.order_id ?? null,
      orderDescription: input.order_description ?? null,
      customerEmail: input.customer_email ?? null,
      customerName: input.customer_name ?? null,
      metadata: input.metadata ?? null,
      successUrl: input.success_url ?? null,
      cancelUrl: input.cancel_url ?? null,
      expiresAt: new Date(now.getTime() + minutes * 60_000),
      createdAt: now,
      updatedAt: now,
    })
    const transaction = view(row)
    return { status: 200, body: JSON.stringify({ success: true, transaction, payment_url: transaction.payment_url }) }
  }

  return {
    /**
     * R5-R7. With an idempotency key, claiming the key, inserting the transaction and recording
     * the response commit together: two identical concurrent calls create one transaction.
     */
    async create(caller: Caller, input: CreateTransactionInput, opts: { idempotencyKey?: string } = {}): Promise<Outcome<StoredResponse>> {
      const now = new Date(deps.clock.now())
      const key = opts.idempotencyKey
      if (key === undefined) return ok(await insertNew(deps.repo, caller, input, now))
      if (key.length === 0 || key.length > 255) {
        return deny('invalid_request', 'Idempotency-Key must be 1 to 255 characters', [{ path: 'Idempotency-Key', message: 'must be 1 to 255 characters' }])
      }
      const requestHash = createHash('sha256').update(canonicalJson(input)).digest('hex')
      return deps.repo.atomically(async (repo) => {
        const prior = await repo.claimIdempotencyKey({ projectId: caller.projectId, mode: caller.mode, key, requestHash, now, expiredBefore: new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS) })
        if (prior) {
          if (prior.requestHash !== requestHash) return deny('conflict', 'This Idempotency-Key was already used with a different request body')
          return ok({ status: prior.statusCode, body: prior.response })
        }
        const response = await insertNew(repo, caller, input, now)
        await repo.recordIdempotentResponse({ projectId: caller.projectId, mode: caller.mode, key, statusCode: response.status, response: response.body })
        return ok(response)
      })
    },

    async get(caller: Caller, id: string): Promise<Outcome<TransactionView>> {
      const row = await deps.repo.find(scopeOf(caller), id)
      // Another project's or mode's transaction is indistinguishable from none (R9).
      return row ? ok(view(row)) : deny('not_found', `No transaction ${id}`)
    },

    async list(caller: Caller, projectId: string, filter: { status?: Status; limit: number; offset: number }) {
      if (projectId !== caller.projectId) return deny('forbidden', 'This API key does not belong to that project')
      const { rows, total } = await deps.repo.page(scopeOf(caller), filter)
      return ok({
        transactions: rows.map(view),
        pagination: { limit: filter.limit, offset: filter.offset, total, has_more: filter.offset + rows.length < total },
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
    currency: 'USD',
    payment_url: `${baseUrl}/pay/${r.id}`,
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
    block_number: r.blockNumber,
    confirmations: r.confirmations,
    required_confirmations: r.requiredConfirmations,
    confirmed_at: iso(r.confirmedAt),
    completed_at: iso(r.completedAt),
  }
}

/** JSON with object keys sorted, so `{a,b}` and `{b,a}` are the same request. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(',')}}`
  }
  return JSON.stringify(v) ?? 'null'
}
