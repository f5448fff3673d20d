import { and, assign, emit, setup } from 'xstate'
import { inertDeadlineTimer, type TimerFired } from './deadline-timer.ts'

/**
 * The transaction lifecycle (docs/decisions/0011-cancel.md,
 * docs/decisions/0012-transaction-lifecycle.md, docs/decisions/0013-absolute-deadlines.md,
 * docs/decisions/0014-amounts-add-up.md, docs/decisions/0015-confirmations-and-reorgs.md): the
 * single source of truth for status changes. Pure: no I/O and no clock. Time arrives in events
 * (`at`).
 *
 * Expiry (docs/decisions/0013-absolute-deadlines.md): every state waiting for the customer or their
 * money invokes the child `expiryTimer` with the absolute deadline from context
 * (machines/deadline-timer.ts). When it fires, the machine does not move by itself: its
 * `requestExpiry` action asks whoever runs the actor to apply `expiry.reached` like any other
 * event, persisted before the actor takes it (by default it emits `expiry.due`;
 * src/actors/transaction-registry.ts provides it). Leaving the state stops the child, and with it
 * the timer.
 */

/** Stored with every persisted snapshot; bump it when a stored snapshot would no longer fit. */
export const MACHINE_VERSION = 1

export type TxStatus =
  | 'created'
  | 'prepared'
  | 'pending'
  | 'processing'
  | 'confirming'
  | 'completed'
  | 'failed'
  | 'expired'
  | 'cancelled'
export const FINAL_STATUSES: readonly TxStatus[] = ['completed', 'failed', 'expired', 'cancelled']

export type FailureReason = 'underpaid' | 'reverted' | 'wrong_asset'

/**
 * What the customer is to pay, locked when they select a token
 * (docs/decisions/0012-transaction-lifecycle.md, docs/decisions/0014-amounts-add-up.md).
 */
export interface Quote {
  tokenSymbol: string
  network: string
  /** Smallest token units, decimal string. */
  tokenAmount: string
  depositAddress: string
  /** Confirmations that complete the payment when the network counts them. */
  requiredConfirmations: number
  /**
   * The network waits for its `safe` or `finalized` block to reach the payment's block instead
   * of counting (absent: it counts). Reported to the merchant; the follower's events carry whether
   * the block is there yet (`confirmations.updated.final`).
   */
  finality?: 'safe' | 'finalized'
  /** The rates the amount was computed with (absent in quotes locked before they were kept). */
  rates?: QuoteRates
}

/**
 * A price or rate as it was read for a quote or a creation: dollars per unit (a whole token, or one
 * unit of a fiat currency) as an exact decimal, and where it came from, so an auditor can price
 * the payment again.
 */
export interface RecordedRate {
  usd: string
  source: 'chainlink' | 'fixed'
  /** The network whose feed answered (null for a fixed rate). */
  network: string | null
  feed: string | null
  roundId: string | null
  /** When the answer was set (the round's time; the read's time for a fixed rate). */
  updatedAt: string
}

/**
 * How a quote's token amount was reached (docs/decisions/0064-priced-in-the-merchants-currency.md):
 * `par`, a stablecoin of the transaction's own currency, one whole token per unit, no rate; `usd`,
 * through the token's USD price and the currency's USD rate (null for USD).
 */
export interface QuoteRates {
  quotedAt: string
  method: 'par' | 'usd'
  tokenUsd: RecordedRate | null
  currencyUsd: RecordedRate | null
}

/** A transfer to the deposit address; `blockNumber` is null until it is in a block. */
export interface Payment {
  txHash: string
  /**
   * The transfer's position in its transaction: the ERC-20 Transfer log's index, -1 for a native
   * transfer. One transaction may pay several times (a batch of transfers); each counts. Absent in
   * snapshots made before it was kept: such a payment is the one transfer of its hash.
   */
  logIndex?: number
  /** Smallest token units, decimal string. */
  amount: string
  blockNumber: number | null
}

export interface TxContext {
  transactionId: string
  /** Absolute deadline, epoch ms (docs/decisions/0013-absolute-deadlines.md). */
  expiresAt: number
  quote: Quote | null
  payments: Payment[]
  /**
   * Sum of `payments`, decimal string (docs/decisions/0014-amounts-add-up.md: transfers to one
   * address add up).
   */
  received: string
  /** The payment whose block the confirmations count from. */
  txHash: string | null
  blockNumber: number | null
  confirmations: number | null
  confirmedAt: number | null
  failureReason: FailureReason | null
  /**
   * Transfers of another asset than the quoted one (docs/decisions/0012-transaction-lifecycle.md):
   * recorded, never a reason to move by themselves (1 wei of dust must not fail a transaction that
   * is then paid correctly); at the deadline, a transaction that received only these fails with
   * reason `wrong_asset`. Absent in snapshots made before it existed: read as none.
   */
  wrongAssets?: string[]
}

export interface TxInput {
  transactionId: string
  expiresAt: number
}

export type TxEvent =
  | { type: 'token.selected'; quote: Quote }
  | { type: 'customer.confirmed' }
  | {
      type: 'payment.detected'
      txHash: string
      logIndex?: number
      amount: string
      blockNumber?: number | null
    }
  | { type: 'payment.included'; txHash: string; logIndex?: number; blockNumber: number }
  /**
   * `final`: on a network that waits for its safe or finalized block, whether that block has
   * reached the payment's; absent on a network that counts confirmations.
   */
  | { type: 'confirmations.updated'; confirmations: number; at: number; final?: boolean }
  | { type: 'payment.reorged'; txHash: string; logIndex?: number }
  | { type: 'payment.reverted'; txHash: string; logIndex?: number }
  | {
      type: 'wrong_asset.received'
      txHash: string
      logIndex?: number
      tokenSymbol: string
      amount: string
    }
  | { type: 'wrong_asset.reorged'; txHash: string; logIndex?: number }
  | { type: 'expiry.reached'; at: number }
  | { type: 'cancel.requested'; by: 'merchant' | 'customer' }

/**
 * What the actor asks of whoever runs it: its deadline has passed, please apply `expiry.reached`.
 */
export interface ExpiryDue {
  type: 'expiry.due'
  at: number
}

export const EVENT_TYPES: readonly TxEvent['type'][] = [
  'token.selected',
  'customer.confirmed',
  'payment.detected',
  'payment.included',
  'confirmations.updated',
  'payment.reorged',
  'payment.reverted',
  'wrong_asset.received',
  'wrong_asset.reorged',
  'expiry.reached',
  'cancel.requested',
]

const sum = (payments: Payment[]) =>
  payments.reduce((acc, p) => acc + BigInt(p.amount), 0n).toString()
const expected = (c: TxContext) => (c.quote ? BigInt(c.quote.tokenAmount) : null)
/** A transfer as events name it: its transaction hash and, where known, its log index. */
type TransferRef = { txHash: string; logIndex?: number }
/**
 * The same transfer. A side without a log index (a payment recorded before log indexes were kept,
 * an operator's event) names the transfer of that hash.
 */
const isTransfer = (p: TransferRef, e: TransferRef) =>
  p.txHash === e.txHash &&
  (p.logIndex === undefined || e.logIndex === undefined || p.logIndex === e.logIndex)
const paymentOf = (e: TransferRef & { amount: string; blockNumber?: number | null }): Payment =>
  e.logIndex === undefined
    ? { txHash: e.txHash, amount: e.amount, blockNumber: e.blockNumber ?? null }
    : {
        txHash: e.txHash,
        logIndex: e.logIndex,
        amount: e.amount,
        blockNumber: e.blockNumber ?? null,
      }
/**
 * A wrong asset's entry in `wrongAssets`: the hash, with the log index after a colon when known.
 */
const wrongAssetKey = (e: TransferRef) =>
  e.logIndex === undefined ? e.txHash : `${e.txHash}:${e.logIndex}`
const isWrongAsset = (entry: string, e: TransferRef) => {
  const [txHash, logIndex] = entry.split(':')
  return isTransfer(
    { txHash: txHash!, logIndex: logIndex === undefined ? undefined : Number(logIndex) },
    e,
  )
}
const withPayment = (c: TxContext, p: Payment) => {
  const payments = c.payments.some((x) => isTransfer(x, p)) ? c.payments : [...c.payments, p]
  return { payments, received: sum(payments) }
}
/** The earliest included payment, once everything included covers the quote. */
function settling(c: TxContext): Payment | null {
  const need = expected(c)
  if (need === null) return null
  let total = 0n
  for (const p of [...c.payments].sort(
    (a, b) => (a.blockNumber ?? Infinity) - (b.blockNumber ?? Infinity),
  )) {
    total += BigInt(p.amount)
    if (total >= need) return p
  }
  return null
}

const timerInput = ({ context }: { context: TxContext }) => ({ at: context.expiresAt })

/**
 * Another asset arriving, or leaving with a reorg, is recorded in every active status and moves
 * nothing (docs/decisions/0012-transaction-lifecycle.md).
 */
const wrongAssetMoves = {
  'wrong_asset.received': { guard: 'isNewWrongAsset', actions: 'recordWrongAsset' },
  'wrong_asset.reorged': { guard: 'isKnownWrongAsset', actions: 'forgetWrongAsset' },
} as const

/**
 * What every state waiting for the customer or their money accepts (docs/decisions/0011-cancel.md,
 * docs/decisions/0012-transaction-lifecycle.md).
 */
const waitingMoves = {
  ...wrongAssetMoves,
  'timer.fired': { actions: 'requestExpiry' },
  'cancel.requested': { target: 'cancelled' },
} as const

/**
 * At the deadline (docs/decisions/0012-transaction-lifecycle.md,
 * docs/decisions/0014-amounts-add-up.md): nothing received expires; only another asset received
 * fails with `wrong_asset`; part of the quote received fails `underpaid`.
 */
const expiryMoves = [
  {
    guard: and(['deadlinePassed', 'onlyWrongAssets']),
    target: 'failed',
    actions: 'failWrongAsset',
  },
  { guard: and(['deadlinePassed', 'nothingReceived']), target: 'expired' },
  { guard: 'deadlinePassed', target: 'failed', actions: 'failUnderpaid' },
] as const

/**
 * What both states settling a covering payment accept (docs/decisions/0014-amounts-add-up.md,
 * docs/decisions/0015-confirmations-and-reorgs.md).
 */
const settlingMoves = {
  ...wrongAssetMoves,
  // Further transfers while settling are counted (overpayment,
  // docs/decisions/0014-amounts-add-up.md).
  'payment.detected': { guard: 'isNewPayment', actions: 'recordPayment' },
  // docs/decisions/0015-confirmations-and-reorgs.md: never completes on a payment that left the
  // canonical chain. What is left may still cover the quote: already in blocks, it keeps confirming
  // (counted from its own block; nothing would send its inclusion again); not yet in a block, it
  // waits for that in processing.
  'payment.reorged': [
    { guard: 'stillIncludedAfterReorg', target: 'confirming', actions: 'forgetPayment' },
    { guard: 'stillCoveredAfterReorg', target: 'processing', actions: 'forgetPayment' },
    { guard: 'isKnownPayment', target: 'pending', actions: 'forgetPayment' },
  ],
  'payment.reverted': { guard: 'isKnownPayment', target: 'failed', actions: 'failReverted' },
} as const

export const transactionMachine = setup({
  types: {
    context: {} as TxContext,
    events: {} as TxEvent | TimerFired,
    input: {} as TxInput,
    emitted: {} as ExpiryDue,
  },
  actors: {
    expiryTimer: inertDeadlineTimer,
  },
  guards: {
    // docs/decisions/0014-amounts-add-up.md: partial payments add up; the transaction proceeds once
    // the total reaches the quote.
    paysInFull: ({ context, event }) => {
      if (event.type !== 'payment.detected') return false
      const need = expected(context)
      return (
        need !== null &&
        BigInt(withPayment(context, paymentOf({ ...event, blockNumber: null })).received) >= need
      )
    },
    isNewPayment: ({ context, event }) =>
      event.type === 'payment.detected' && !context.payments.some((p) => isTransfer(p, event)),
    isKnownPayment: ({ context, event }) =>
      'txHash' in event && context.payments.some((p) => isTransfer(p, event)),
    // While confirming, a known payment in a block it is not recorded in yet: the same inclusion
    // judged again (a follower redelivering a block after a crash) must not reset the count.
    isNewInclusion: ({ context, event }) =>
      event.type === 'payment.included' &&
      context.payments.some((p) => isTransfer(p, event) && p.blockNumber !== event.blockNumber),
    nothingReceived: ({ context }) => context.received === '0',
    onlyWrongAssets: ({ context }) =>
      context.received === '0' && (context.wrongAssets ?? []).length > 0,
    isNewWrongAsset: ({ context, event }) =>
      event.type === 'wrong_asset.received' &&
      !(context.wrongAssets ?? []).some((w) => isWrongAsset(w, event)),
    isKnownWrongAsset: ({ context, event }) =>
      event.type === 'wrong_asset.reorged' &&
      (context.wrongAssets ?? []).some((w) => isWrongAsset(w, event)),
    // docs/decisions/0013-absolute-deadlines.md: the timer carries the deadline it was armed for;
    // an early event is refused.
    deadlinePassed: ({ context, event }) =>
      event.type === 'expiry.reached' && event.at >= context.expiresAt,
    // docs/decisions/0015-confirmations-and-reorgs.md: confirmations = head - block + 1, complete
    // at the network's requirement; on a network that waits for its safe or finalized block, once
    // that block has reached the payment's.
    enoughConfirmations: ({ context, event }) =>
      event.type === 'confirmations.updated' &&
      context.quote !== null &&
      (event.final === undefined
        ? event.confirmations >= context.quote.requiredConfirmations
        : event.final && event.confirmations >= 1),
    isConfirmationUpdate: ({ context, event }) =>
      event.type === 'confirmations.updated' &&
      event.confirmations >= 0 &&
      event.confirmations !== context.confirmations,
    // After a reorg the payments left, all of them in blocks, may still cover the quote.
    stillIncludedAfterReorg: ({ context, event }) => {
      if (event.type !== 'payment.reorged' || !context.payments.some((p) => isTransfer(p, event)))
        return false
      const settle = settling({
        ...context,
        payments: context.payments.filter((p) => !isTransfer(p, event)),
      })
      return settle !== null && settle.blockNumber !== null
    },
    // After a reorg the remaining payments may still cover the quote.
    stillCoveredAfterReorg: ({ context, event }) => {
      if (event.type !== 'payment.reorged' || !context.payments.some((p) => isTransfer(p, event)))
        return false
      const need = expected(context)
      const rest = context.payments.filter((p) => !isTransfer(p, event))
      return need !== null && rest.reduce((a, p) => a + BigInt(p.amount), 0n) >= need
    },
  },
  actions: {
    requestExpiry: emit(({ event }) => ({
      type: 'expiry.due' as const,
      at: (event as TimerFired).at,
    })),
    lockQuote: assign(({ event }) =>
      event.type === 'token.selected' ? { quote: event.quote } : {},
    ),
    recordPayment: assign(({ context, event }) =>
      event.type === 'payment.detected' ? withPayment(context, paymentOf(event)) : {},
    ),
    recordInclusion: assign(({ context, event }) => {
      if (event.type !== 'payment.included') return {}
      const payments = context.payments.map((p) =>
        isTransfer(p, event) ? { ...p, blockNumber: event.blockNumber } : p,
      )
      const settle = settling({ ...context, payments })
      return {
        payments,
        txHash: settle?.txHash ?? event.txHash,
        blockNumber: settle?.blockNumber ?? event.blockNumber,
        confirmations: null,
      }
    }),
    recordConfirmations: assign(({ event }) =>
      event.type === 'confirmations.updated' ? { confirmations: event.confirmations } : {},
    ),
    markConfirmed: assign(({ event }) =>
      event.type === 'confirmations.updated' ? { confirmedAt: event.at } : {},
    ),
    forgetPayment: assign(({ context, event }) => {
      if (event.type !== 'payment.reorged') return {}
      const payments = context.payments.filter((p) => !isTransfer(p, event))
      const settle = settling({ ...context, payments })
      return {
        payments,
        received: sum(payments),
        txHash: settle?.txHash ?? null,
        blockNumber: settle?.blockNumber ?? null,
        confirmations: null,
      }
    }),
    failUnderpaid: assign({ failureReason: 'underpaid' as FailureReason }),
    failReverted: assign({ failureReason: 'reverted' as FailureReason }),
    failWrongAsset: assign({ failureReason: 'wrong_asset' as FailureReason }),
    recordWrongAsset: assign(({ context, event }) =>
      event.type === 'wrong_asset.received'
        ? { wrongAssets: [...(context.wrongAssets ?? []), wrongAssetKey(event)] }
        : {},
    ),
    forgetWrongAsset: assign(({ context, event }) =>
      event.type === 'wrong_asset.reorged'
        ? { wrongAssets: (context.wrongAssets ?? []).filter((w) => !isWrongAsset(w, event)) }
        : {},
    ),
  },
}).createMachine({
  id: 'transaction',
  context: ({ input }) => ({
    transactionId: input.transactionId,
    expiresAt: input.expiresAt,
    quote: null,
    payments: [],
    received: '0',
    txHash: null,
    blockNumber: null,
    confirmations: null,
    confirmedAt: null,
    failureReason: null,
    wrongAssets: [],
  }),
  initial: 'created',
  states: {
    created: {
      invoke: { src: 'expiryTimer', input: timerInput },
      on: {
        ...waitingMoves,
        'token.selected': { target: 'prepared', actions: 'lockQuote' },
        'expiry.reached': expiryMoves,
      },
    },
    prepared: {
      invoke: { src: 'expiryTimer', input: timerInput },
      on: {
        ...waitingMoves,
        // docs/decisions/0012-transaction-lifecycle.md: re-selecting replaces the quote (nothing
        // can have been paid against it here).
        'token.selected': { target: 'prepared', actions: 'lockQuote' },
        'customer.confirmed': { target: 'pending' },
        'payment.detected': [
          { guard: 'paysInFull', target: 'processing', actions: 'recordPayment' },
          // A partial payment: the customer is paying; wait for the rest
          // (docs/decisions/0014-amounts-add-up.md).
          { guard: 'isNewPayment', target: 'pending', actions: 'recordPayment' },
        ],
        'expiry.reached': expiryMoves,
      },
    },
    pending: {
      invoke: { src: 'expiryTimer', input: timerInput },
      on: {
        ...waitingMoves,
        'payment.detected': [
          { guard: 'paysInFull', target: 'processing', actions: 'recordPayment' },
          { guard: 'isNewPayment', actions: 'recordPayment' },
        ],
        'payment.included': { guard: 'isKnownPayment', actions: 'recordInclusion' },
        'payment.reorged': { guard: 'isKnownPayment', actions: 'forgetPayment' },
        'expiry.reached': expiryMoves,
      },
    },
    processing: {
      on: {
        ...settlingMoves,
        'payment.included': {
          guard: 'isKnownPayment',
          target: 'confirming',
          actions: 'recordInclusion',
        },
      },
    },
    confirming: {
      on: {
        ...settlingMoves,
        'payment.included': { guard: 'isNewInclusion', actions: 'recordInclusion' },
        'confirmations.updated': [
          {
            guard: 'enoughConfirmations',
            target: 'completed',
            actions: ['recordConfirmations', 'markConfirmed'],
          },
          { guard: 'isConfirmationUpdate', actions: 'recordConfirmations' },
        ],
      },
    },
    completed: { type: 'final' },
    failed: { type: 'final' },
    expired: { type: 'final' },
    cancelled: { type: 'final' },
  },
})
