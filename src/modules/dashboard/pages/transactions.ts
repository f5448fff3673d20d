import { html, type Html } from '../../../lib/html.ts'
import type { TransferView } from '../../../chain/deposit.service.ts'
import type { DeliveryView } from '../../../webhooks/webhook.service.ts'
import type { EndpointView } from '../../../webhooks/endpoint.service.ts'
import { displayUnits, formatUsd } from '../../pay/view.ts'
import { STATUSES, type TransactionView } from '../../transactions/model.ts'
import { badge, base, layout, postButton, query, table, when, type Frame } from '../layout.ts'
import { deliveryHeaders, deliveryRows } from './deliveries.ts'
import { modeOf } from '../../../projects/mode.ts'

/** Decimals of a token on a network, for showing smallest units as amounts; null when unknown. */
export type TokenDecimals = (network: string, symbol: string) => number | null

const CANCELLABLE = ['created', 'prepared', 'pending']

export function transactionsPage(f: Frame, q: { status: string; orderId: string }, data: { transactions: TransactionView[]; page: number; pagination: { total: number; has_more: boolean } } | null, opts: { error?: string | null }): string {
  const pageLink = (page: number) => base(f, `/transactions${query({ status: q.status, order_id: q.orderId, page: page > 1 ? page : null })}`)
  const form = html`<form method="get" action="${base(f, '/transactions')}" class="filters" aria-label="Filter transactions">
  <label>Status <select name="status"><option value="">Any</option>${STATUSES.map((s) => html`<option value="${s}"${s === q.status ? html` selected` : ''}>${s}</option>`)}</select></label>
  <label>Order id <input type="search" name="order_id" value="${q.orderId}" placeholder="starts with…" maxlength="255"></label>
  <button type="submit" class="button secondary">Filter</button>
</form>`
  if (!data) return layout(f, 'transactions', 'Transactions', form, opts)
  const rows = data.transactions.map((t) => html`<tr>
    <td><a href="${base(f, `/transactions/${t.id}`)}">${t.transaction_number}</a></td>
    <td>${badge(t.status)}</td>
    <td class="num">${formatUsd(t.amount_usd, t.currency)}</td>
    <td class="text">${t.order_id ?? html`<span class="muted">—</span>`}</td>
    <td>${t.token_symbol ?? html`<span class="muted">—</span>`}</td>
    <td>${when(t.created_at)}</td></tr>`)
  const { total, has_more } = data.pagination
  const pager = html`<nav class="pager" aria-label="Pages">
    ${data.page > 1 ? html`<a href="${pageLink(data.page - 1)}" rel="prev">Newer</a>` : ''}
    <span>Page ${data.page} · ${total.toLocaleString('en-US')} transaction${total === 1 ? '' : 's'}</span>
    ${has_more ? html`<a href="${pageLink(data.page + 1)}" rel="next">Older</a>` : ''}</nav>`
  return layout(f, 'transactions', 'Transactions', html`${form}
${table('Transactions, newest first', ['Number', 'Status', 'Amount', 'Order id', 'Token', 'Created'], rows, q.status || q.orderId ? 'No transaction matches.' : `No ${f.mode} transactions yet.`)}
${pager}`, opts)
}

function field(label: string, value: Html | string | number | null | undefined): Html {
  return html`<div><dt>${label}</dt><dd>${value === null || value === undefined || value === '' ? html`<span class="muted">—</span>` : value}</dd></div>`
}

function units(amount: string | null, symbol: string | null, network: string | null, decimals: TokenDecimals): string | null {
  if (amount === null) return null
  const d = symbol && network ? decimals(network, symbol) : null
  return d === null ? `${amount} smallest units` : `${displayUnits(amount, d)} ${symbol}`
}

const TRANSFER_KIND: Record<TransferView['kind'], string> = { pending: 'being judged', payment: 'payment', wrong_asset: 'wrong asset', late: 'late payment' }

export function transactionPage(
  f: Frame,
  d: { transaction: TransactionView; timeline: { from_status: string | null; to_status: string; cause: string; details: unknown; at: string }[]; deliveries: DeliveryView[]; endpoints: EndpointView[]; transfers: TransferView[] },
  decimals: TokenDecimals,
  opts: { notice?: string | null; error?: string | null },
): string {
  const t = d.transaction
  // Offered only when it would reach someone: an enabled endpoint of this mode that selected the event.
  const receivers = d.endpoints.filter((e) => e.enabled && e.eventTypes.includes('transaction.completed')).length
  const resend = t.status !== 'completed' ? ''
    : receivers > 0 ? postButton(f, base(f, `/transactions/${t.id}/retry-webhook`), 'Send transaction.completed again')
    : html`<p class="muted">No enabled ${f.mode} endpoint receives <code>transaction.completed</code>, so there is nothing to send again. <a href="${base(f, '/endpoints')}">Webhooks</a></p>`
  const actions = html`<div class="actions">
    ${CANCELLABLE.includes(t.status) ? postButton(f, base(f, `/transactions/${t.id}/cancel`), 'Cancel transaction', { danger: true, confirm: 'Cancel this transaction? The customer can no longer pay it.' }) : ''}
    ${resend}
  </div>`
  const late = d.transfers.filter((x) => x.kind === 'late')
  const body = html`<p class="lead">${badge(t.status)} <strong>${formatUsd(t.amount_usd, t.currency)}</strong> ${t.order_description ? html`<span>${t.order_description}</span>` : ''}</p>
${late.length ? html`<div class="alert error" role="alert">A late payment arrived after this transaction ended (${late.map((x) => units(x.amount, x.tokenSymbol, x.network, decimals)).join(', ')}). The status does not change; settle it with the customer.</div>` : ''}
${actions}
<section aria-labelledby="fields"><h2 id="fields">Details</h2>
<dl class="fields">
  ${field('Id', html`<code>${t.id}</code>`)}
  ${field('Number', t.transaction_number)}
  ${field('Status', t.status)}
  ${field('Amount', formatUsd(t.amount_usd, t.currency))}
  ${field('Mode', modeOf(t.testing_mode))}
  ${field('Order id', t.order_id)}
  ${field('Order description', t.order_description)}
  ${field('Customer name', t.customer_name)}
  ${field('Customer e-mail', t.customer_email)}
  ${field('Metadata', t.metadata ? html`<code class="wrap">${JSON.stringify(t.metadata)}</code>` : null)}
  ${field('Pay page', html`<a href="${t.payment_url}" rel="noreferrer" target="_blank">${t.payment_url}</a>`)}
  ${field('Success URL', t.success_url)}
  ${field('Cancel URL', t.cancel_url)}
  ${field('Token', t.token_symbol ? `${t.token_symbol} on ${t.blockchain_network}` : null)}
  ${field('Amount due', units(t.token_amount, t.token_symbol, t.blockchain_network, decimals))}
  ${field('Amount received', units(t.amount_received, t.token_symbol, t.blockchain_network, decimals))}
  ${field('Deposit address', t.deposit_address ? html`<code class="wrap">${t.deposit_address}</code>` : null)}
  ${field('Chain transaction', t.transaction_hash ? html`<code class="wrap">${t.transaction_hash}</code>` : null)}
  ${field('Block', t.block_number)}
  ${field('Confirmations', t.confirmations === null ? null : `${t.confirmations} of ${t.required_confirmations}`)}
  ${field('Created', when(t.created_at))}
  ${field('Expires', when(t.expires_at))}
  ${field('Confirmed', when(t.confirmed_at))}
  ${field('Completed', when(t.completed_at))}
  ${field('Updated', when(t.updated_at))}
</dl></section>
<section aria-labelledby="timeline"><h2 id="timeline">Timeline</h2>
<ol class="timeline">${d.timeline.map((e) => html`<li><span class="at">${when(e.at)}</span> <strong>${e.from_status ? `${e.from_status} → ` : ''}${e.to_status}</strong> <span class="muted">(${e.cause})</span>${
    Object.keys(e.details ?? {}).length ? html`<code class="wrap details">${JSON.stringify(e.details)}</code>` : ''}</li>`)}</ol></section>
<section aria-labelledby="transfers"><h2 id="transfers">Transfers seen on chain</h2>
${table('Transfers to the deposit address', ['Kind', 'Amount', 'From', 'Chain transaction', 'Block', 'Seen'], d.transfers.map((x) => html`<tr>
  <td>${badge(TRANSFER_KIND[x.kind], x.kind)}${x.reorged ? html` ${badge('reorged out', 'failed')}` : ''}</td><td class="num">${units(x.amount, x.tokenSymbol, x.network, decimals)}</td>
  <td class="hash" title="${x.fromAddress}"><code>${x.fromAddress}</code></td><td class="hash" title="${x.txHash}"><code>${x.txHash}</code></td><td>${x.blockNumber}</td><td>${when(x.seenAt)}</td></tr>`), 'No transfer to this transaction\'s deposit address has been seen.')}
</section>
<section aria-labelledby="deliveries"><h2 id="deliveries">Webhook deliveries</h2>
${table('Webhook deliveries of this transaction', deliveryHeaders(true), deliveryRows(f, d.deliveries, d.endpoints), 'No webhook delivery for this transaction.')}
</section>`
  return layout(f, 'transactions', `Transaction ${t.transaction_number}`, body, opts)
}
