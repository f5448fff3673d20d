import type { TxEvent } from '../../machines/transaction.machine.ts'

/**
 * The events that walk a transaction from `created` to each status, as chain and pay page will send
 * them.
 */
/** A payment's transaction hash: 32 bytes, as on a real chain. */
export const TX_HASH = `0x${'fe'.repeat(32)}`
export const quote = {
  tokenSymbol: 'USDC',
  network: 'devnet',
  tokenAmount: '25000000',
  depositAddress: '0x00000000000000000000000000000000000000aa',
  requiredConfirmations: 3,
}
export const PATH_TO: Record<
  'prepared' | 'pending' | 'processing' | 'confirming' | 'completed',
  TxEvent[]
> = {
  prepared: [{ type: 'token.selected', quote }],
  pending: [{ type: 'token.selected', quote }, { type: 'customer.confirmed' }],
  processing: [
    { type: 'token.selected', quote },
    { type: 'customer.confirmed' },
    { type: 'payment.detected', txHash: TX_HASH, amount: '25000000' },
  ],
  confirming: [
    { type: 'token.selected', quote },
    { type: 'customer.confirmed' },
    { type: 'payment.detected', txHash: TX_HASH, amount: '25000000' },
    { type: 'payment.included', txHash: TX_HASH, blockNumber: 1234 },
  ],
  completed: [
    { type: 'token.selected', quote },
    { type: 'customer.confirmed' },
    { type: 'payment.detected', txHash: TX_HASH, amount: '25000000' },
    { type: 'payment.included', txHash: TX_HASH, blockNumber: 1234 },
    { type: 'confirmations.updated', confirmations: 3, at: Date.parse('2030-01-01T00:00:00Z') },
  ],
}
