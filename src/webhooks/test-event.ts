import { randomUUID } from 'node:crypto'
import type { WebhookEventType } from '../db/schema.ts'
import { endpointDisabledData } from './endpoint-notice.ts'

type RefundEventType = Extract<WebhookEventType, `refund.${string}`>
type TransactionEventType = Exclude<WebhookEventType, 'webhook_endpoint.disabled' | RefundEventType>

/**
 * The `data` of a test event (sent from the dashboard or CLI): a made-up test-mode transaction at
 * the stage the event type stands for, with the null/non-null pattern of
 * docs/integrating/webhooks.md#events, so a receiver can be tried on each event type before any
 * real payment. The body also says `"test": true`.
 */
export function testEventData(eventType: WebhookEventType, now: Date): Record<string, unknown> {
  if (eventType === 'webhook_endpoint.disabled') {
    const failingSince = new Date(now.getTime() - 5 * 86_400_000)
    return endpointDisabledData({
      id: 'ep_test_0000',
      mode: 'test',
      url: 'https://example.com/webhooks',
      disabledReason: 'failing',
      disabledAt: now,
      failingSince,
    })
  }
  if (eventType === 'refund.completed' || eventType === 'refund.failed')
    return refundTestData(eventType, now)
  return transactionTestData(eventType, now)
}

/** A refund of a completed test transaction, paid (and confirmed) or failed. */
function refundTestData(eventType: RefundEventType, now: Date): Record<string, unknown> {
  const completed = eventType === 'refund.completed'
  return {
    ...transactionTestData('transaction.completed', new Date(now.getTime() - 60 * 60_000)),
    refund: {
      id: 'rf_TEST00000000000000000',
      status: completed ? 'completed' : 'failed',
      amount: '25000000',
      token_symbol: 'USDC',
      blockchain_network: 'devnet',
      address: '0x52908400098527886E0F7030069857D2E4169EE7',
      reason: 'test refund',
      paid_from: completed ? '0x8ba1f109551bD432803012645Ac136ddd64DBA72' : null,
      transaction_hash: completed ? `0x${'cd'.repeat(32)}` : null,
      block_number: completed ? 1300 : null,
      failure_reason: completed ? null : 'unpayable',
      failure_detail: completed ? null : 'the token refused the transfer',
      created_at: new Date(now.getTime() - 10 * 60_000).toISOString(),
      completed_at: completed ? now.toISOString() : null,
    },
  }
}

function transactionTestData(eventType: TransactionEventType, now: Date): Record<string, unknown> {
  const stage = STAGE[eventType]
  const selected = stage >= 2
  // A reversed payment's transaction is back to awaiting payment: its payment is gone
  // (docs/decisions/0015-confirmations-and-reorgs.md).
  const detected =
    stage >= 2 &&
    !['transaction.expired', 'transaction.cancelled', 'transaction.payment_reversed'].includes(
      eventType,
    )
  const inBlock = stage >= 3 && detected
  const completed = eventType === 'transaction.completed'
  return {
    transaction_id: randomUUID(),
    transaction_number: 'TX-TEST-0000',
    status: STATUS[eventType],
    amount_in_currency: 25,
    currency: 'USD',
    created_at: new Date(now.getTime() - 15 * 60_000).toISOString(),
    testing_mode: true,
    token_symbol: selected ? 'USDC' : null,
    token_amount: selected ? '25000000' : null,
    blockchain_network: selected ? 'devnet' : null,
    transaction_hash: detected ? `0x${'ab'.repeat(32)}` : null,
    block_number: inBlock ? 1234 : null,
    customer_ip_address: null,
    order_id: 'test-order-1',
    metadata: { test_event: true },
    confirmed_at: completed ? now.toISOString() : null,
    ...(eventType === 'transaction.failed' ? { failure_reason: 'underpaid' } : {}),
  }
}

const STAGE: Record<TransactionEventType, number> = {
  'transaction.created': 1,
  'transaction.payment_received': 2,
  'transaction.confirming': 3,
  'transaction.completed': 4,
  'transaction.failed': 3,
  'transaction.expired': 1,
  'transaction.cancelled': 1,
  'transaction.payment_reversed': 2,
}

const STATUS: Record<TransactionEventType, string> = {
  'transaction.created': 'created',
  'transaction.payment_received': 'processing',
  'transaction.confirming': 'confirming',
  'transaction.completed': 'completed',
  'transaction.failed': 'failed',
  'transaction.expired': 'expired',
  'transaction.cancelled': 'cancelled',
  'transaction.payment_reversed': 'pending',
}
