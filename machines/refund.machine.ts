import { assign, setup } from 'xstate'

/**
 * A refund's lifecycle (issue 13): the single source of truth for its status. Pure: no I/O and
 * no clock; the service judges each event with XState's `transition()` on the stored snapshot
 * and commits the result with the refund row (src/refunds/refund.service.ts). A refund has no
 * timer, so it needs no running actor between events.
 *
 *   pending --the merchant's treasury tool records the payment it is about to send--> submitted
 *   submitted --the payment is in a block and pays the refund--> confirming
 *   confirming --the network's confirmations (or its safe/finalized block)--> completed
 *   confirming --its block left the canonical chain--> submitted (watched again; never completes on it)
 *   submitted --its nonce went to another transaction, so it can never be mined--> pending (pay again)
 *   submitted/confirming --mined but reverted--> failed (reverted)
 *   pending --the tool finds it cannot be paid (the transfer would revert)--> failed (unpayable)
 *   pending --the merchant cancels--> cancelled
 */

/** Stored with every snapshot; bump it when a stored snapshot would no longer fit. */
export const REFUND_MACHINE_VERSION = 1

export const REFUND_STATUSES = ['pending', 'submitted', 'confirming', 'completed', 'failed', 'cancelled'] as const
export type RefundStatus = (typeof REFUND_STATUSES)[number]
export const FINAL_REFUND_STATUSES: readonly RefundStatus[] = ['completed', 'failed', 'cancelled']

export type RefundFailure = 'reverted' | 'unpayable'

/** The on-chain transaction paying the refund, as the treasury tool recorded it before sending it. */
export interface Submission {
  txHash: string
  /** Who sends it: the gas account (lowercase). */
  from: string
  nonce: number
}

export interface RefundContext {
  refundId: string
  /** Confirmations that complete it, on a network that counts them. */
  requiredConfirmations: number
  /** The network waits for its safe or finalized block instead (absent: it counts). */
  finality?: 'safe' | 'finalized'
  submission: Submission | null
  blockNumber: number | null
  blockHash: string | null
  confirmations: number | null
  failureReason: RefundFailure | null
  /** What the tool or the chain said when it failed. */
  failureDetail: string | null
}

export interface RefundInput {
  refundId: string
  requiredConfirmations: number
  finality?: 'safe' | 'finalized'
}

export type RefundEvent =
  | { type: 'submission.recorded'; submission: Submission }
  | { type: 'submission.included'; txHash: string; blockNumber: number; blockHash: string }
  | { type: 'submission.reorged'; txHash: string }
  | { type: 'submission.dropped'; txHash: string }
  | { type: 'submission.reverted'; txHash: string; blockNumber: number; blockHash: string }
  /** `final`: on a network that waits for its safe or finalized block, whether it has reached the payment's. */
  | { type: 'confirmations.updated'; confirmations: number; final?: boolean }
  | { type: 'payment.refused'; detail: string }
  | { type: 'cancel.requested' }

const watched = (c: RefundContext, e: { txHash: string }) => c.submission !== null && c.submission.txHash === e.txHash

export const refundMachine = setup({
  types: {
    context: {} as RefundContext,
    events: {} as RefundEvent,
    input: {} as RefundInput,
  },
  guards: {
    isWatched: ({ context, event }) => 'txHash' in event && watched(context, event),
    // Re-included in another block after a reorg: the confirmations count from there.
    isOtherBlock: ({ context, event }) => event.type === 'submission.included' && watched(context, event) && event.blockHash !== context.blockHash,
    enough: ({ context, event }) =>
      event.type === 'confirmations.updated' &&
      (event.final === undefined ? event.confirmations >= context.requiredConfirmations : event.final && event.confirmations >= 1),
    isNewCount: ({ context, event }) => event.type === 'confirmations.updated' && event.confirmations >= 0 && event.confirmations !== context.confirmations,
  },
  actions: {
    recordSubmission: assign(({ event }) => (event.type === 'submission.recorded' ? { submission: event.submission } : {})),
    recordBlock: assign(({ event }) =>
      event.type === 'submission.included' || event.type === 'submission.reverted' ? { blockNumber: event.blockNumber, blockHash: event.blockHash, confirmations: null } : {}),
    forgetBlock: assign({ blockNumber: null, blockHash: null, confirmations: null }),
    forgetSubmission: assign({ submission: null, blockNumber: null, blockHash: null, confirmations: null }),
    recordConfirmations: assign(({ event }) => (event.type === 'confirmations.updated' ? { confirmations: event.confirmations } : {})),
    failReverted: assign({ failureReason: 'reverted' as RefundFailure, failureDetail: 'the payment\'s transaction was mined but reverted' }),
    failUnpayable: assign(({ event }) => (event.type === 'payment.refused' ? { failureReason: 'unpayable' as RefundFailure, failureDetail: event.detail } : {})),
  },
}).createMachine({
  id: 'refund',
  context: ({ input }) => ({
    refundId: input.refundId,
    requiredConfirmations: input.requiredConfirmations,
    ...(input.finality ? { finality: input.finality } : {}),
    submission: null,
    blockNumber: null,
    blockHash: null,
    confirmations: null,
    failureReason: null,
    failureDetail: null,
  }),
  initial: 'pending',
  states: {
    pending: {
      on: {
        'submission.recorded': { target: 'submitted', actions: 'recordSubmission' },
        'payment.refused': { target: 'failed', actions: 'failUnpayable' },
        'cancel.requested': { target: 'cancelled' },
      },
    },
    submitted: {
      on: {
        'submission.included': { guard: 'isWatched', target: 'confirming', actions: 'recordBlock' },
        'submission.reverted': { guard: 'isWatched', target: 'failed', actions: ['recordBlock', 'failReverted'] },
        'submission.dropped': { guard: 'isWatched', target: 'pending', actions: 'forgetSubmission' },
      },
    },
    confirming: {
      on: {
        'submission.reorged': { guard: 'isWatched', target: 'submitted', actions: 'forgetBlock' },
        'submission.included': { guard: 'isOtherBlock', actions: 'recordBlock' },
        'submission.reverted': { guard: 'isWatched', target: 'failed', actions: ['recordBlock', 'failReverted'] },
        'confirmations.updated': [
          { guard: 'enough', target: 'completed', actions: 'recordConfirmations' },
          { guard: 'isNewCount', actions: 'recordConfirmations' },
        ],
      },
    },
    completed: { type: 'final' },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
})
