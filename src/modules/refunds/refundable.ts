import { FINAL_REFUND_STATUSES, type RefundStatus } from '../../../machines/refund.machine.ts'

/** What arrived in one token on one network, what refunds took, and what is left to refund. */
export interface RefundableLine {
  network: string
  tokenSymbol: string
  received: bigint
  refunded: bigint
  refundable: bigint
}

/**
 * What may still be refunded from a transaction, per token and network
 * (docs/decisions/0038-refunds.md): the money that arrived at its deposit address (the payments,
 * late payments and other assets recorded there, not taken back by a reorg) whose block has the
 * network's confirmations, less every refund that has not failed or been cancelled. An arrival not
 * confirmed yet is not refundable yet: a reorg could still take it back, and the merchant would
 * refund money never received.
 */
export function refundableLines(
  facts: {
    arrivals: readonly {
      network: string
      tokenSymbol: string
      amount: bigint
      blockNumber: number
    }[]
    refunds: readonly {
      network: string
      tokenSymbol: string
      amount: bigint
      status: RefundStatus
    }[]
    heights: ReadonlyMap<string, bigint>
  },
  confirmationsOf: (network: string) => number | null,
): RefundableLine[] {
  const lines = new Map<string, RefundableLine>()
  const line = (network: string, tokenSymbol: string) => {
    const key = `${network}\u0000${tokenSymbol}`
    let l = lines.get(key)
    if (!l)
      lines.set(key, (l = { network, tokenSymbol, received: 0n, refunded: 0n, refundable: 0n }))
    return l
  }
  for (const a of facts.arrivals) {
    const height = facts.heights.get(a.network)
    const needed = confirmationsOf(a.network)
    if (
      height === undefined ||
      needed === null ||
      height - BigInt(a.blockNumber) + 1n < BigInt(needed)
    )
      continue
    line(a.network, a.tokenSymbol).received += a.amount
  }
  for (const r of facts.refunds) {
    if (r.status === 'failed' || r.status === 'cancelled') continue
    line(r.network, r.tokenSymbol).refunded += r.amount
  }
  for (const l of lines.values())
    l.refundable = l.received > l.refunded ? l.received - l.refunded : 0n
  return [...lines.values()]
}

/** Statuses whose refund still holds its amount (and its deposit address's funds, for a sweep). */
export const OPEN_REFUND_STATUSES: readonly RefundStatus[] = ['pending', 'submitted', 'confirming']
export const isOpenRefund = (s: RefundStatus) => !FINAL_REFUND_STATUSES.includes(s)
