import { formatUnits } from 'viem'
import type { TransactionRow } from '../../db/schema.ts'
import { decimalToMinor, minorToDecimal, minorUnits } from '../../lib/currency.ts'
import { decimalToUnits } from '../../lib/money.ts'

/**
 * A transaction as Coinbase Commerce's API (version 2018-03-22) showed a charge
 * (docs/decisions/0065-coinbase-commerce-drop-in.md). Pure: everything it shows comes from the
 * transaction's row, its timeline and the transfers recorded to its deposit address.
 */

export type CommerceStatus =
  | 'NEW'
  | 'PENDING'
  | 'COMPLETED'
  | 'EXPIRED'
  | 'UNRESOLVED'
  | 'RESOLVED'
  | 'CANCELED'
export type UnresolvedContext = 'UNDERPAID' | 'OVERPAID' | 'DELAYED' | 'MULTIPLE' | 'OTHER'

export interface TimelineStep {
  time: string
  status: CommerceStatus
  context?: UnresolvedContext
}

/** A timeline entry of the transaction, as stored. */
export interface NativeStep {
  fromStatus: string | null
  toStatus: string
  cause: string
  details: Record<string, unknown>
  at: Date
}

/** A transfer recorded to the deposit address (not taken back by a reorg). */
export interface RecordedTransfer {
  network: string
  txHash: string
  blockNumber: number
  blockHash: string
  tokenSymbol: string
  amount: string
  kind: 'pending' | 'payment' | 'wrong_asset' | 'late'
  seenAt: Date
}

/** A token the charge may be paid in, with what it costs (smallest units) when that is known. */
export interface PricedToken {
  network: string
  symbol: string
  decimals: number
  units: bigint | null
}

export interface ChargeFacts {
  row: TransactionRow
  timeline: NativeStep[]
  transfers: RecordedTransfer[]
  /** The tokens the pay page offers it in, priced now (the chosen one at its quote). */
  tokens: PricedToken[]
  /** A token's decimals, or null when the network does not configure it. */
  decimals: (network: string, symbol: string) => number | null
  baseUrl: string
}

/** A key of `pricing` and `addresses`: the network and token, as `base_usdc`. */
export const pricingKey = (network: string, symbol: string) =>
  `${network}_${symbol}`.toLowerCase().replace(/[^a-z0-9]+/g, '_')

const money = (amount: string, currency: string) => ({ amount, currency })
const iso = (d: Date | null) => (d ? d.toISOString() : null)

/** The amount in the currency's own places, as Commerce wrote it ("49.99", "1000" for JPY). */
export const localAmount = (decimal: string, currency: string) =>
  minorToDecimal(decimalToMinor(decimal, currency), currency)

/**
 * Commerce's statuses for what the transaction went through: NEW at creation; PENDING once money
 * is seen; COMPLETED when it completes (then UNRESOLVED/OVERPAID when more than the quote came);
 * EXPIRED; UNRESOLVED/UNDERPAID when part of the quote came by the deadline, UNRESOLVED/OTHER for
 * another asset or a reverted payment; CANCELED; a payment after a final status UNRESOLVED/DELAYED
 * (after COMPLETED: MULTIPLE); RESOLVED when the merchant resolved it.
 */
export function commerceTimeline(row: TransactionRow, steps: NativeStep[]): TimelineStep[] {
  const out: TimelineStep[] = []
  const last = () => out[out.length - 1]
  const push = (s: TimelineStep) => {
    const l = last()
    if (!l || l.status !== s.status || l.context !== s.context) out.push(s)
  }
  for (const step of steps) {
    const time = step.at.toISOString()
    if (step.cause === 'transaction.created') {
      push({ time, status: 'NEW' })
      continue
    }
    if (step.cause === 'payment.late') {
      const completed = out.some((s) => s.status === 'COMPLETED')
      push({ time, status: 'UNRESOLVED', context: completed ? 'MULTIPLE' : 'DELAYED' })
      continue
    }
    if (step.cause === 'charge.resolved') {
      push({ time, status: 'RESOLVED' })
      continue
    }
    if (step.fromStatus === step.toStatus && step.cause !== 'payment.detected') continue
    switch (step.toStatus) {
      case 'pending':
        if (step.cause === 'payment.detected') push({ time, status: 'PENDING' })
        break
      case 'processing':
      case 'confirming':
        if (!out.some((s) => s.status === 'PENDING')) push({ time, status: 'PENDING' })
        break
      case 'completed': {
        push({ time, status: 'COMPLETED' })
        const received = BigInt(row.amountReceived ?? '0')
        if (!row.anyAmount && row.tokenAmount !== null && received > BigInt(row.tokenAmount))
          push({ time, status: 'UNRESOLVED', context: 'OVERPAID' })
        break
      }
      case 'expired':
        push({ time, status: 'EXPIRED' })
        break
      case 'failed':
        push({
          time,
          status: 'UNRESOLVED',
          context: step.details.reason === 'underpaid' ? 'UNDERPAID' : 'OTHER',
        })
        break
      case 'cancelled':
        push({ time, status: 'CANCELED' })
        break
    }
  }
  return out
}

/** The token amount a payment is worth in the charge's currency, to its places (rounded down). */
function localValue(row: TransactionRow, units: bigint, decimals: number): string | null {
  const currency = row.currency
  const places = minorUnits(currency)
  const rates = row.quoteRates
  if (!row.anyAmount && row.tokenAmount !== null && BigInt(row.tokenAmount) > 0n) {
    // In proportion to the quote: paying the quote is worth the charge's amount exactly.
    const minor = (decimalToMinor(row.amountInCurrency, currency) * units) / BigInt(row.tokenAmount)
    return minorToDecimal(minor, currency)
  }
  if (!rates) return null
  if (rates.method === 'par')
    return minorToDecimal((units * 10n ** BigInt(places)) / 10n ** BigInt(decimals), currency)
  if (!rates.tokenUsd) return null
  // units × tokenUsd / currencyUsd, with 18 places of the rates kept exact.
  const usdPerToken = decimalToUnits(rates.tokenUsd.usd, 18)
  const usdPerUnit = rates.currencyUsd ? decimalToUnits(rates.currencyUsd.usd, 18) : 10n ** 18n
  if (usdPerToken === null || !usdPerUnit) return null
  const minor =
    (units * usdPerToken * 10n ** BigInt(places)) / (usdPerUnit * 10n ** BigInt(decimals))
  return minorToDecimal(minor, currency)
}

/** The charge object (`resource: "charge"`). */
export function chargeOf(f: ChargeFacts) {
  const r = f.row
  const c = r.commerce
  const noPrice = r.anyAmount
  const timeline = commerceTimeline(r, f.timeline)
  const local = money(localAmount(r.amountInCurrency, r.currency), r.currency)
  const pricing: Record<string, { amount: string; currency: string }> = {}
  if (!noPrice) {
    pricing.local = local
    for (const t of f.tokens)
      if (t.units !== null)
        pricing[pricingKey(t.network, t.symbol)] = money(formatUnits(t.units, t.decimals), t.symbol)
  }
  const addresses: Record<string, string> = {}
  if (r.depositAddress && r.blockchainNetwork && r.tokenSymbol)
    addresses[pricingKey(r.blockchainNetwork, r.tokenSymbol)] = r.depositAddress
  // The confirmations of the paying block tell the head; every payment counts from it.
  const head =
    r.blockNumber !== null && r.confirmations !== null ? r.blockNumber + r.confirmations - 1 : null
  const completed = r.status === 'completed'
  const payments = f.transfers
    .filter((t) => t.kind === 'payment' || t.kind === 'late' || t.kind === 'pending')
    .map((t) => {
      const decimals = f.decimals(t.network, t.tokenSymbol) ?? 18
      const units = BigInt(t.amount)
      const confirmations = head === null ? 0 : Math.max(0, head - t.blockNumber + 1)
      const required = r.requiredConfirmations ?? 1
      const localPaid = localValue(r, units, decimals)
      return {
        network: t.network,
        transaction_id: t.txHash,
        status:
          (completed && t.kind === 'payment') || confirmations >= required
            ? 'CONFIRMED'
            : 'PENDING',
        detected_at: t.seenAt.toISOString(),
        value: {
          local: localPaid === null ? null : money(localPaid, r.currency),
          crypto: money(formatUnits(units, decimals), t.tokenSymbol),
        },
        block: {
          height: t.blockNumber,
          hash: t.blockHash,
          confirmations_accumulated: confirmations,
          confirmations_required: required,
        },
      }
    })
  return {
    id: r.id,
    resource: 'charge' as const,
    code: r.transactionNumber,
    name: c?.name ?? r.orderDescription ?? null,
    description: c?.description ?? null,
    logo_url: null,
    hosted_url: `${f.baseUrl}/pay/${r.id}`,
    created_at: r.createdAt.toISOString(),
    expires_at: r.expiresAt.toISOString(),
    confirmed_at: iso(r.confirmedAt),
    checkout: c?.checkoutId ? { id: c.checkoutId } : null,
    timeline,
    metadata: r.metadata ?? {},
    pricing_type: noPrice ? ('no_price' as const) : ('fixed_price' as const),
    local_price: noPrice ? null : local,
    pricing,
    payments,
    addresses,
    redirect_url: r.successUrl,
    cancel_url: r.cancelUrl,
  }
}

export type Charge = ReturnType<typeof chargeOf>

/** The last status of a charge's timeline (NEW before anything happened). */
export const currentStatus = (charge: Pick<Charge, 'timeline'>): TimelineStep =>
  charge.timeline[charge.timeline.length - 1] ?? { time: '', status: 'NEW' }
