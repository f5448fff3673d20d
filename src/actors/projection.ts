import type { TxContext, TxStatus } from '../../machines/transaction.machine.ts'
import type { NewTransactionRow, TransactionRow } from '../modules/transactions/transaction.repo.ts'

/** The columns of a transaction row that the machine decides. */
export type MachineColumns = Required<
  Pick<NewTransactionRow, 'status' | 'tokenSymbol' | 'tokenAmount' | 'blockchainNetwork' | 'depositAddress' | 'requiredConfirmations' | 'amountReceived' | 'transactionHash' | 'blockNumber' | 'confirmations' | 'confirmedAt' | 'completedAt' | 'updatedAt'>
>

/** The transaction row's view of the machine: status and every field the machine decides. */
export function projectRow(status: TxStatus, c: TxContext, now: Date): MachineColumns {
  return {
    status,
    tokenSymbol: c.quote?.tokenSymbol ?? null,
    tokenAmount: c.quote?.tokenAmount ?? null,
    blockchainNetwork: c.quote?.network ?? null,
    depositAddress: c.quote?.depositAddress ?? null,
    requiredConfirmations: c.quote?.requiredConfirmations ?? null,
    amountReceived: c.quote ? c.received : null,
    transactionHash: c.txHash ?? c.payments[0]?.txHash ?? null,
    blockNumber: c.blockNumber,
    confirmations: c.confirmations,
    confirmedAt: c.confirmedAt === null ? null : new Date(c.confirmedAt),
    completedAt: status === 'completed' ? now : null,
    updatedAt: now,
  }
}

/** Status changes that merchants hear about (spec "Events"; R12 adds transaction.cancelled). */
export const EVENT_OF_STATUS: Partial<Record<TxStatus, string>> = {
  created: 'transaction.created',
  processing: 'transaction.payment_received',
  confirming: 'transaction.confirming',
  completed: 'transaction.completed',
  failed: 'transaction.failed',
  expired: 'transaction.expired',
  cancelled: 'transaction.cancelled',
}

/** The webhook payload's `data` (spec "Webhook payload"): every nullable key present. */
export function webhookData(r: TransactionRow, failureReason: string | null = null) {
  return {
    transaction_id: r.id,
    transaction_number: r.transactionNumber,
    status: r.status,
    amount_in_currency: Number(r.amountUsd),
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
