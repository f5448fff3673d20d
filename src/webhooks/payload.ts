import type { TxStatus } from '../../machines/transaction.machine.ts'
import type { TransactionRow } from '../db/schema.ts'
import { decimalAmountNumber } from '../lib/currency.ts'

/**
 * Status changes that merchants hear about (docs/integrating/webhooks.md#events;
 * docs/decisions/0012-transaction-lifecycle.md adds transaction.cancelled).
 */
const EVENT_OF_STATUS: Partial<Record<TxStatus, string>> = {
  created: 'transaction.created',
  processing: 'transaction.payment_received',
  confirming: 'transaction.confirming',
  completed: 'transaction.completed',
  failed: 'transaction.failed',
  expired: 'transaction.expired',
  cancelled: 'transaction.cancelled',
}

/**
 * The webhook event a committed transition announces, if any: entering a status merchants hear
 * about, or (docs/decisions/0015-confirmations-and-reorgs.md) a payment taken back by a reorg after
 * `transaction.payment_received` was sent, announced as `transaction.payment_reversed` with the
 * status the transaction returned to.
 */
export function webhookEventOf(cause: string, from: TxStatus, to: TxStatus): string | null {
  if (cause === 'payment.reorged' && (from === 'processing' || from === 'confirming'))
    return 'transaction.payment_reversed'
  return from !== to ? (EVENT_OF_STATUS[to] ?? null) : null
}

/**
 * The webhook payload's `data` (docs/integrating/webhooks.md#the-request): every nullable key
 * present.
 */
export function webhookData(r: TransactionRow, failureReason: string | null = null) {
  return {
    transaction_id: r.id,
    transaction_number: r.transactionNumber,
    status: r.status,
    amount_in_currency: decimalAmountNumber(r.amountInCurrency, r.currency),
    currency: r.currency,
    created_at: r.createdAt.toISOString(),
    testing_mode: r.testingMode,
    token_symbol: r.tokenSymbol,
    token_amount: r.tokenAmount,
    blockchain_network: r.blockchainNetwork,
    transaction_hash: r.transactionHash,
    block_number: r.blockNumber,
    customer_ip_address: r.customerIpAddress,
    order_id: r.orderId,
    metadata: r.metadata ?? null,
    confirmed_at: r.confirmedAt ? r.confirmedAt.toISOString() : null,
    ...(failureReason ? { failure_reason: failureReason } : {}),
  }
}

/**
 * The webhook body (docs/integrating/webhooks.md#the-request): root `event`, `timestamp` (ISO 8601
 * with milliseconds, the time of sending) and `data`; never a `transaction` key. A test event sent
 * from the dashboard or CLI also carries `"test": true` at the root, so no receiver can take it for
 * a real payment.
 */
export function webhookBody(
  event: string,
  data: Record<string, unknown>,
  sentAt: Date,
  test = false,
): string {
  return JSON.stringify(
    test
      ? { event, timestamp: sentAt.toISOString(), data, test: true }
      : { event, timestamp: sentAt.toISOString(), data },
  )
}

/**
 * The headers of one attempt: docs/decisions/0018-webhook-request.md's `x-service-*` (the signature
 * over the body alone), the per-transaction `x-service-sequence`
 * (docs/decisions/0050-per-transaction-sequence.md: it grows with each status change, and a manual
 * retry repeats the number of the change it re-sends), and the Standard Webhooks trio (`webhook-id`
 * is the event id, the same on every retry; `webhook-timestamp` in seconds).
 */
export function webhookHeaders(opts: {
  signature: string
  standardSignature: string
  eventId: string
  sentAt: Date
  attempt: number
  test: boolean
  sequence: number
}): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'crypto-pay-webhooks/1',
    'x-service-signature': opts.signature,
    'x-service-event-id': opts.eventId,
    'x-service-timestamp': opts.sentAt.toISOString(),
    'x-service-attempt': String(opts.attempt),
    'x-service-sequence': String(opts.sequence),
    ...(opts.test ? { 'x-service-test': 'true' } : {}),
    'webhook-id': opts.eventId,
    'webhook-timestamp': String(standardTimestamp(opts.sentAt)),
    'webhook-signature': opts.standardSignature,
  }
}

/** `webhook-timestamp`: whole seconds since the epoch. */
export const standardTimestamp = (sentAt: Date) => Math.floor(sentAt.getTime() / 1000)

/**
 * The refund in a `refund.completed` or `refund.failed` event's `data.refund`
 * (docs/decisions/0038-refunds.md).
 */
export interface RefundEventFields {
  id: string
  status: string
  amount: string
  token_symbol: string
  blockchain_network: string
  address: string
  reason: string | null
  paid_from: string | null
  transaction_hash: string | null
  block_number: number | null
  failure_reason: string | null
  failure_detail: string | null
  created_at: string
  completed_at: string | null
}

/**
 * A refund event's `data`: the refunded transaction as every event carries it (so a handler that
 * reads `data.transaction_id` and `data.status` works for these too; `status` is the
 * transaction's), and the refund under `refund`.
 */
export function refundWebhookData(transaction: TransactionRow, refund: RefundEventFields) {
  return { ...webhookData(transaction), refund }
}
