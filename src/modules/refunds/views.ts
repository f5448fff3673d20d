/**
 * A refund as the API, the dashboard and its webhook events show it, with the transfers that
 * arrived at its transaction's deposit address in its token and network.
 */
import { getAddress } from 'viem'
import { refundMachine } from '../../../machines/refund.machine.ts'
import { restoreActor } from '../../actors/restore-actor.ts'
import { INTERNAL_TRACED, INTERNAL_TRANSFER } from '../../chain/transfer-scan.ts'
import type { RefundView } from './model.ts'
import type { Arrival, RefundRepo, RefundRow } from './refund.repo.ts'
import type { RefundableLine } from './refundable.ts'
import type { TransactionRow } from '../transactions/transaction.repo.ts'
import { decimalToMinor, minorToDecimal, unitsInCurrency } from '../../lib/currency.ts'

/** What a refund's value in its transaction's currency is computed from: the locked quote. */
export type TxPricing = Pick<
  TransactionRow,
  'id' | 'currency' | 'amountInCurrency' | 'tokenAmount' | 'tokenSymbol' | 'blockchainNetwork'
>

/**
 * The refund in the transaction's currency, pro rata to the locked quote and rounded down
 * (docs/decisions/0064-priced-in-the-merchants-currency.md); null for another token than the one
 * quoted, which the price was never stated in.
 */
function inCurrency(r: RefundRow, p: TxPricing | undefined): number | null {
  if (!p || p.tokenSymbol !== r.tokenSymbol || p.blockchainNetwork !== r.network) return null
  const minor = unitsInCurrency(BigInt(r.amount), {
    tokenAmount: p.tokenAmount,
    amountMinor: decimalToMinor(p.amountInCurrency, p.currency),
  })
  return minor === null ? null : Number(minorToDecimal(minor, p.currency))
}

/**
 * One arrival as the API shows it: which transfer, from whom (null where only its block is known),
 * how much.
 */
function arrivalView(a: Arrival) {
  const blockOnly = a.logIndex === INTERNAL_TRANSFER && a.txHash === a.blockHash
  return {
    kind:
      a.logIndex >= 0
        ? ('token' as const)
        : a.logIndex === INTERNAL_TRANSFER || a.logIndex === INTERNAL_TRACED
          ? ('internal' as const)
          : ('native' as const),
    transaction_hash: blockOnly ? null : a.txHash,
    block_hash: a.blockHash,
    block_number: a.blockNumber,
    log_index: a.logIndex >= 0 ? a.logIndex : null,
    from_address: blockOnly || /^0x0{40}$/.test(a.fromAddress) ? null : getAddress(a.fromAddress),
    amount: a.amount.toString(),
  }
}

/** The refund's own arrivals: its token on its network. */
const arrivalsOfRefund = (r: RefundRow, all: readonly Arrival[]) =>
  all.filter((a) => a.network === r.network && a.tokenSymbol === r.tokenSymbol).map(arrivalView)

export function view(r: RefundRow, arrivals: readonly Arrival[], pricing?: TxPricing): RefundView {
  const c = restoreActor(refundMachine, r.snapshot).getSnapshot().context
  return {
    id: r.id,
    transaction_id: r.transactionId,
    status: r.status,
    testing_mode: r.mode === 'test',
    amount: r.amount,
    token_symbol: r.tokenSymbol,
    blockchain_network: r.network,
    currency: pricing?.currency ?? null,
    amount_in_currency: inCurrency(r, pricing),
    address: r.address,
    reason: r.reason,
    deposit_address: getAddress(r.depositAddress),
    paid_from: r.paidFrom ? getAddress(r.paidFrom) : null,
    transaction_hash: r.txHash,
    raw_transaction: r.rawTransaction,
    block_number: r.blockNumber,
    confirmations: r.confirmations,
    required_confirmations: c.finality ? null : c.requiredConfirmations,
    failure_reason: r.failureReason,
    failure_detail: r.failureDetail,
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
    submitted_at: r.submittedAt?.toISOString() ?? null,
    completed_at: r.completedAt?.toISOString() ?? null,
    arrivals: arrivalsOfRefund(r, arrivals),
  }
}

/** Views of refunds, each with its arrivals (read in one query). */
export async function views(
  repo: Pick<RefundRepo, 'arrivals' | 'pricing'>,
  rows: readonly RefundRow[],
): Promise<RefundView[]> {
  const ids = rows.map((r) => r.transactionId)
  const [arrivals, pricing] = await Promise.all([repo.arrivals(ids), repo.pricing(ids)])
  return rows.map((r) =>
    view(
      r,
      arrivals.filter((a) => a.transactionId === r.transactionId),
      pricing.find((p) => p.id === r.transactionId),
    ),
  )
}

/** The refund in a webhook event's `refund` member. */
export function eventFields(r: RefundRow) {
  const v = view(r, [])
  return {
    id: v.id,
    status: v.status,
    amount: v.amount,
    token_symbol: v.token_symbol,
    blockchain_network: v.blockchain_network,
    address: v.address,
    reason: v.reason,
    paid_from: v.paid_from,
    transaction_hash: v.transaction_hash,
    block_number: v.block_number,
    failure_reason: v.failure_reason,
    failure_detail: v.failure_detail,
    created_at: v.created_at,
    completed_at: v.completed_at,
  }
}

export const lineView = (l: RefundableLine) => ({
  token_symbol: l.tokenSymbol,
  blockchain_network: l.network,
  received: l.received.toString(),
  refunded: l.refunded.toString(),
  refundable: l.refundable.toString(),
})
