import type { TxContext, TxStatus } from '../../machines/transaction.machine.ts'
import type { NewTransactionRow } from '../db/schema.ts'
import { INTERNAL_TRANSFER } from '../chain/transfer-scan.ts'

/** The columns of a transaction row that the machine decides. */
export type MachineColumns = Required<
  Pick<
    NewTransactionRow,
    | 'status'
    | 'tokenSymbol'
    | 'tokenAmount'
    | 'blockchainNetwork'
    | 'depositAddress'
    | 'requiredConfirmations'
    | 'finality'
    | 'quoteRates'
    | 'amountReceived'
    | 'transactionHash'
    | 'transactionHashNames'
    | 'blockNumber'
    | 'confirmations'
    | 'confirmedAt'
    | 'completedAt'
    | 'updatedAt'
  >
>

/** The transaction row's view of the machine: status and every field the machine decides. */
export function projectRow(status: TxStatus, c: TxContext, now: Date): MachineColumns {
  const transactionHash = c.txHash ?? c.payments[0]?.txHash ?? null
  // Native coin by an internal call the node could not trace is recorded under its block's hash.
  const namesBlock =
    transactionHash !== null &&
    c.payments.some((p) => p.txHash === transactionHash && p.logIndex === INTERNAL_TRANSFER)
  return {
    status,
    tokenSymbol: c.quote?.tokenSymbol ?? null,
    tokenAmount: c.quote?.tokenAmount ?? null,
    blockchainNetwork: c.quote?.network ?? null,
    depositAddress: c.quote?.depositAddress ?? null,
    // A network that waits for its safe or finalized block counts nothing to a requirement.
    requiredConfirmations: c.quote && !c.quote.finality ? c.quote.requiredConfirmations : null,
    finality: c.quote ? (c.quote.finality ?? 'confirmations') : null,
    quoteRates: c.quote?.rates ?? null,
    amountReceived: c.quote ? c.received : null,
    transactionHash,
    transactionHashNames: transactionHash === null ? null : namesBlock ? 'block' : 'transaction',
    blockNumber: c.blockNumber,
    confirmations: c.confirmations,
    confirmedAt: c.confirmedAt === null ? null : new Date(c.confirmedAt),
    completedAt: status === 'completed' ? now : null,
    updatedAt: now,
  }
}
