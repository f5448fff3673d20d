import { assign, setup } from 'xstate'

/**
 * A refund's lifecycle (docs/decisions/0038-refunds.md): the single source of truth for its status.
 * Pure: no I/O and no clock; the service judges each event with XState's `transition()` on the
 * stored snapshot and commits the result with the refund row (src/modules/refunds/service.ts). A
 * refund has no timer, so it needs no running actor between events.
 *
 *   pending --the treasury tool records the payment it is about to send--> submitted
 *   submitted --a transaction in a block pays the refund--> confirming
 *   confirming --the network's confirmations (or its safe/finalized block)--> completed
 *   confirming --its block left the canonical chain--> submitted (watched again; never completes on it)
 *   pending --the tool finds it cannot be paid (the transfer would revert)--> failed (unpayable)
 *   pending --the merchant cancels--> cancelled
 *
 * A payment takes one of three routes, and what sends a refund back to pending or to failed
 * depends on it, so that no refund is ever paid twice:
 *  - `deposit`: DepositAccount's `pay` at the deposit address, signed by its key for this refund's
 *    id until a deadline. The contract pays an id once, whoever sends the signature, so the
 *    transaction that pays may be another than the one recorded (someone sent the signature
 *    first): it is taken as the payment. Only when nothing paid the id on-chain and the signature
 *    has expired, so nothing ever can, does the refund go back to pending (`submission.expired`).
 *  - `gas`: a plain transfer from the gas account, or `direct`: a plain transfer by the deposit
 *    address itself (a chain without EIP-7702, its fee topped up). Only its own transaction can
 *    pay it: mined and reverted (with the network's confirmations) it fails; its nonce taken by
 *    another transaction (at a confirmed depth), it can never be mined, and the refund goes back
 *    to pending.
 * A recorded payment that can no longer be mined is abandoned on request (`submission.abandoned`,
 * back to pending): the service lets that through only once the chain shows it (a deposit-route
 * signature expired unpaid, or an own transaction's nonce taken by another).
 */

/** Stored with every snapshot; bump it when a stored snapshot would no longer fit. */
export const REFUND_MACHINE_VERSION = 1

export const REFUND_STATUSES = [
  'pending',
  'submitted',
  'confirming',
  'completed',
  'failed',
  'cancelled',
] as const
export type RefundStatus = (typeof REFUND_STATUSES)[number]
export const FINAL_REFUND_STATUSES: readonly RefundStatus[] = ['completed', 'failed', 'cancelled']

export type RefundFailure = 'reverted' | 'unpayable'
export type PaymentRoute = 'deposit' | 'gas' | 'direct'

/**
 * The on-chain transaction paying the refund: the one the treasury tool recorded, or (deposit
 * route) the one that paid the id.
 */
export interface Submission {
  txHash: string
  /** Who sent it (lowercase); null when not known. */
  from: string | null
  nonce: number | null
  route: PaymentRoute
  /** Deposit route: when its signature expires (seconds since the epoch, chain time). */
  payUntil?: number
  /**
   * Deposit route: a block at or before the one the payment could first be mined in (where to look
   * for the id's Paid event).
   */
  fromBlock?: number
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
  /**
   * `txHash`, `from`, `nonce`: the transaction that pays (deposit route: possibly another than the
   * one recorded).
   */
  | {
      type: 'submission.included'
      txHash: string
      from: string | null
      nonce: number | null
      blockNumber: number
      blockHash: string
    }
  | { type: 'submission.reorged'; txHash: string }
  /** Gas or direct route: the recorded transaction's nonce went to another transaction. */
  | { type: 'submission.dropped'; txHash: string }
  /** Deposit route: nothing paid the id on-chain, and its signature has expired. */
  | { type: 'submission.expired'; txHash: string }
  /** Someone asked to give up a recorded payment the service found can no longer be mined. */
  | { type: 'submission.abandoned'; txHash: string; detail: string }
  /**
   * Gas or direct route: mined, reverted (or paying something else), with the network's
   * confirmations.
   */
  | {
      type: 'submission.reverted'
      txHash: string
      blockNumber: number
      blockHash: string
      detail: string
    }
  /**
   * `final`: on a network that waits for its safe or finalized block, whether it has reached the
   * payment's.
   */
  | { type: 'confirmations.updated'; confirmations: number; final?: boolean }
  | { type: 'payment.refused'; detail: string }
  | { type: 'cancel.requested' }

const watched = (c: RefundContext, e: { txHash: string }) =>
  c.submission !== null && c.submission.txHash === e.txHash
const route = (c: RefundContext) => c.submission?.route ?? null
/** Routes whose payment is one transaction of its own: only it can pay the refund. */
const ownTransaction = (c: RefundContext) => route(c) === 'gas' || route(c) === 'direct'

export const refundMachine = setup({
  types: {
    context: {} as RefundContext,
    events: {} as RefundEvent,
    input: {} as RefundInput,
  },
  guards: {
    isWatched: ({ context, event }) => 'txHash' in event && watched(context, event),
    // The deposit route is paid by whichever transaction delivered the signature first; the gas
    // route by its own only.
    paysIt: ({ context, event }) =>
      event.type === 'submission.included' &&
      context.submission !== null &&
      (route(context) === 'deposit' || watched(context, event)),
    // Re-included in another block (or, deposit route, by another transaction) after a reorg: the
    // confirmations count from there.
    isOtherInclusion: ({ context, event }) =>
      event.type === 'submission.included' &&
      context.submission !== null &&
      (route(context) === 'deposit' || watched(context, event)) &&
      (event.blockHash !== context.blockHash || event.txHash !== context.submission.txHash),
    ownTransactionRoute: ({ context, event }) =>
      'txHash' in event && watched(context, event) && ownTransaction(context),
    depositRoute: ({ context, event }) =>
      'txHash' in event && watched(context, event) && route(context) === 'deposit',
    enough: ({ context, event }) =>
      event.type === 'confirmations.updated' &&
      (event.final === undefined
        ? event.confirmations >= context.requiredConfirmations
        : event.final && event.confirmations >= 1),
    isNewCount: ({ context, event }) =>
      event.type === 'confirmations.updated' &&
      event.confirmations >= 0 &&
      event.confirmations !== context.confirmations,
  },
  actions: {
    recordSubmission: assign(({ event }) =>
      event.type === 'submission.recorded' ? { submission: event.submission } : {},
    ),
    recordInclusion: assign(({ context, event }) => {
      if (event.type !== 'submission.included' || !context.submission) return {}
      const paidBy =
        event.txHash === context.submission.txHash
          ? context.submission
          : { ...context.submission, txHash: event.txHash, from: event.from, nonce: event.nonce }
      return {
        submission: paidBy,
        blockNumber: event.blockNumber,
        blockHash: event.blockHash,
        confirmations: null,
      }
    }),
    recordRevert: assign(({ event }) =>
      event.type === 'submission.reverted'
        ? {
            blockNumber: event.blockNumber,
            blockHash: event.blockHash,
            confirmations: null,
            failureReason: 'reverted' as RefundFailure,
            failureDetail: event.detail,
          }
        : {},
    ),
    forgetBlock: assign({ blockNumber: null, blockHash: null, confirmations: null }),
    forgetSubmission: assign({
      submission: null,
      blockNumber: null,
      blockHash: null,
      confirmations: null,
    }),
    recordConfirmations: assign(({ event }) =>
      event.type === 'confirmations.updated' ? { confirmations: event.confirmations } : {},
    ),
    failUnpayable: assign(({ event }) =>
      event.type === 'payment.refused'
        ? { failureReason: 'unpayable' as RefundFailure, failureDetail: event.detail }
        : {},
    ),
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
        'submission.included': {
          guard: 'paysIt',
          target: 'confirming',
          actions: 'recordInclusion',
        },
        'submission.reverted': {
          guard: 'ownTransactionRoute',
          target: 'failed',
          actions: 'recordRevert',
        },
        'submission.dropped': {
          guard: 'ownTransactionRoute',
          target: 'pending',
          actions: 'forgetSubmission',
        },
        'submission.expired': {
          guard: 'depositRoute',
          target: 'pending',
          actions: 'forgetSubmission',
        },
        'submission.abandoned': {
          guard: 'isWatched',
          target: 'pending',
          actions: 'forgetSubmission',
        },
      },
    },
    confirming: {
      on: {
        'submission.reorged': { guard: 'isWatched', target: 'submitted', actions: 'forgetBlock' },
        'submission.included': { guard: 'isOtherInclusion', actions: 'recordInclusion' },
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
