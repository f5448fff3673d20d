import { html } from '../../../lib/html.ts'
import { displayUnits } from '../../pay/view.ts'
import type { RefundView } from '../../refunds/model.ts'
import { badge, base, layout, query, table, when, type Frame } from '../layout.ts'
import { amountOf, shortHash, type TokenDecimals } from '../amounts.ts'

/** A sweep as the Funds page lists it (the API's sweep object). */
export interface SweepRowView {
  id: string
  status: string
  blockchain_network: string
  treasury: string
  transaction_hash: string
  fee: string | null
  items: { address: string; token_symbol: string; planned: string; swept: string | null }[]
  created_at: string
  confirmed_at: string | null
}

export interface WaitingLine {
  network: string
  tokenSymbol: string
  arrived: bigint
  swept: bigint
  refunded: bigint
  waiting: bigint
  addresses: number
  decimals: number | null
}

export const REFUND_FILTERS = {
  open: 'Pending and in flight',
  completed: 'Paid',
  failed: 'Failed',
  cancelled: 'Cancelled',
  all: 'All',
} as const
export type RefundFilter = keyof typeof REFUND_FILTERS

/**
 * The Funds page (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md): what waits at
 * the deposit addresses per network and token (as the service has seen it), the sweeps the treasury
 * tool made, and refunds pending and paid.
 */
/** A network's native coin, for showing fees. */
export type NativeCoin = (network: string) => { symbol: string; decimals: number } | null

export function fundsPage(
  f: Frame,
  d: {
    waiting: WaitingLine[]
    sweeps: SweepRowView[]
    refunds: RefundView[]
    filter: RefundFilter
  },
  units: { decimals: TokenDecimals; native: NativeCoin },
  opts: { notice?: string | null; error?: string | null } = {},
): string {
  const { decimals } = units
  const waiting = table(
    'What waits at deposit addresses',
    ['Network', 'Token', 'Arrived', 'Swept', 'Refunded from there', 'Waiting', 'Addresses'],
    d.waiting.map((w) => {
      const show = (v: bigint) =>
        w.decimals === null ? `${v}` : displayUnits(v.toString(), w.decimals)
      return html`<tr><td>${w.network}</td><td>${w.tokenSymbol}</td><td class="num">${show(w.arrived)}</td><td class="num">${show(w.swept)}</td><td class="num">${show(w.refunded)}</td><td class="num"><strong>${show(w.waiting)}</strong></td><td class="num">${w.addresses}</td></tr>`
    }),
    `Nothing has arrived at ${f.mode} deposit addresses yet.`,
  )

  const sweeps = table(
    'Sweeps, newest first',
    ['Created', 'Network', 'Status', 'Addresses', 'Swept', 'Gas paid', 'Transaction'],
    d.sweeps.map((s) => {
      const totals = new Map<string, bigint>()
      for (const i of s.items)
        totals.set(
          i.token_symbol,
          (totals.get(i.token_symbol) ?? 0n) + BigInt(i.swept ?? i.planned),
        )
      const moved = [...totals]
        .map(([symbol, amount]) => amountOf(amount, symbol, s.blockchain_network, decimals))
        .join(', ')
      return html`<tr><td>${when(s.created_at)}</td><td>${s.blockchain_network}</td><td>${badge(s.status, s.status === 'confirmed' ? 'completed' : s.status === 'dropped' ? 'cancelled' : s.status)}</td>
      <td class="num">${new Set(s.items.map((i) => i.address)).size}</td><td class="num">${moved}${s.status !== 'confirmed' ? html` <span class="muted">(planned)</span>` : ''}</td>
      <td class="num">${s.fee === null ? html`<span class="muted">—</span>` : feeOf(s.fee, s.blockchain_network, units.native)}</td><td>${shortHash(s.transaction_hash)}</td></tr>`
    }),
    'No sweep yet.',
  )

  const filters = html`<form method="get" action="${base(f, '/funds')}" class="filters" aria-label="Filter refunds">
  <label>Refunds <select name="refunds">${(Object.keys(REFUND_FILTERS) as RefundFilter[]).map((k) => html`<option value="${k}"${k === d.filter ? html` selected` : ''}>${REFUND_FILTERS[k]}</option>`)}</select></label>
  <button type="submit" class="button secondary">Show</button>
</form>`
  const refunds = table(
    'Refunds, newest first',
    ['Created', 'Transaction', 'Amount', 'To', 'Status', 'Paid from', 'Payment'],
    d.refunds.map(
      (r) => html`<tr>
    <td>${when(r.created_at)}</td><td><a href="${base(f, `/transactions/${r.transaction_id}`)}#refunds">${r.transaction_id.slice(0, 8)}…</a></td>
    <td class="num">${amountOf(r.amount, r.token_symbol, r.blockchain_network, decimals)}</td><td>${shortHash(r.address)}</td>
    <td>${badge(r.status, r.status === 'submitted' || r.status === 'confirming' ? 'processing' : r.status)}</td><td>${shortHash(r.paid_from)}</td><td>${shortHash(r.transaction_hash)}</td></tr>`,
    ),
    `No ${REFUND_FILTERS[d.filter].toLowerCase()} refund.`,
  )

  const body = html`<section aria-labelledby="waiting"><h2 id="waiting">Waiting at deposit addresses</h2>
<p class="muted">What customers sent to this mode's deposit addresses, less what confirmed sweeps took and refunds paid from there, as this service has seen it. The treasury tool reads the chain itself: <code>npm run treasury -- balances --network NAME --rpc-url URL</code>.</p>
${waiting}
<p>To move it to your treasury, run on your own machine (the keys never leave it): <code class="wrap">npm run treasury -- sweep --network NAME --rpc-url URL --to YOUR_TREASURY --mnemonic-file FILE --gas-key-file FILE --dry-run</code>, then again without <code>--dry-run</code>.</p></section>
<section aria-labelledby="sweeps"><h2 id="sweeps">Sweeps</h2>${sweeps}</section>
<section aria-labelledby="refunds"><h2 id="refunds">Refunds</h2>
<p class="muted">Made through the API or on a transaction's page; the treasury tool pays them: <code>npm run treasury -- refunds pay --network NAME …</code>.</p>
${filters}${refunds}</section>`
  return layout(f, 'funds', 'Funds', body, opts)
}

/** A fee in the network's native coin. */
function feeOf(smallest: string, network: string, native: NativeCoin): string {
  const coin = native(network)
  return coin
    ? `${displayUnits(smallest, coin.decimals)} ${coin.symbol}`
    : `${smallest} (smallest units of the native coin)`
}

export const refundFilterOf = (raw: string | null): RefundFilter =>
  raw && Object.hasOwn(REFUND_FILTERS, raw) ? (raw as RefundFilter) : 'open'
export const refundQuery = (filter: RefundFilter) =>
  query({ refunds: filter === 'open' ? null : filter })
