import { html, type Html } from '../../../lib/html.ts'
import type { TransferView } from '../../../chain/deposit.service.ts'
import type { DeliveryView } from '../../../webhooks/webhook.service.ts'
import type { EndpointView } from '../../../webhooks/endpoint.service.ts'
import { displayUnits, formatMoney } from '../../pay/view.ts'
import { STATUSES, type TransactionView } from '../../transactions/model.ts'
import {
  badge,
  base,
  csrfField,
  formatCount,
  layout,
  postButton,
  query,
  table,
  when,
  type Frame,
} from '../layout.ts'
import type { RefundView } from '../../refunds/model.ts'
import { amountOf, shortHash, type TokenDecimals } from '../amounts.ts'
import { deliveryHeaders, deliveryRows } from '../webhooks/deliveries-page.ts'
import { modeOf } from '../../../projects/mode.ts'

export type { TokenDecimals } from '../amounts.ts'

const CANCELLABLE = ['created', 'prepared', 'pending']

export function transactionsPage(
  f: Frame,
  q: { status: string; orderId: string },
  data: {
    transactions: TransactionView[]
    page: number
    pagination: { total: number; has_more: boolean }
  } | null,
  opts: { error?: string | null },
): string {
  const pageLink = (page: number) =>
    base(
      f,
      `/transactions${query({ status: q.status, order_id: q.orderId, page: page > 1 ? page : null })}`,
    )
  const form = html`<form method="get" action="${base(f, '/transactions')}" class="filters" aria-label="Filter transactions">
  <label>Status <select name="status"><option value="">Any</option>${STATUSES.map((s) => html`<option value="${s}"${s === q.status ? html` selected` : ''}>${s}</option>`)}</select></label>
  <label>Order id <input type="search" name="order_id" value="${q.orderId}" placeholder="starts with…" maxlength="255"></label>
  <button type="submit" class="button secondary">Filter</button>
</form>`
  // The export of what the filters select, every page of it, each transaction with its refunds.
  const download = (format: 'csv' | 'jsonl') =>
    base(f, `/transactions/export${query({ format, status: q.status, order_id: q.orderId })}`)
  const downloads = html`<p class="downloads">
  <a href="${download('csv')}" download>Download CSV</a> · <a href="${download('jsonl')}" download>Download JSON lines</a>
  <span class="muted">— every page of what these filters select, each transaction with its refunds</span>
</p>`
  if (!data) return layout(f, 'transactions', 'Transactions', form, opts)
  const rows = data.transactions.map(
    (t) => html`<tr>
    <td><a href="${base(f, `/transactions/${t.id}`)}">${t.transaction_number}</a></td>
    <td>${badge(t.status)}</td>
    <td class="num">${priceOf(t)}</td>
    <td class="text">${t.order_id ?? html`<span class="muted">—</span>`}</td>
    <td>${t.token_symbol ?? html`<span class="muted">—</span>`}</td>
    <td>${when(t.created_at)}</td></tr>`,
  )
  const { total, has_more } = data.pagination
  const pager = html`<nav class="pager" aria-label="Pages">
    ${data.page > 1 ? html`<a href="${pageLink(data.page - 1)}" rel="prev">Newer</a>` : ''}
    <span>Page ${data.page} · ${formatCount(total)} transaction${total === 1 ? '' : 's'}</span>
    ${has_more ? html`<a href="${pageLink(data.page + 1)}" rel="next">Older</a>` : ''}</nav>`
  return layout(
    f,
    'transactions',
    'Transactions',
    html`${form}
${downloads}
${table('Transactions, newest first', ['Number', 'Status', 'Amount', 'Order id', 'Token', 'Created'], rows, q.status || q.orderId ? 'No transaction matches.' : `No ${f.mode} transactions yet.`)}
${pager}`,
    opts,
  )
}

/**
 * A Coinbase Commerce `no_price` charge has no price, only the currency payments are valued in: its
 * amount is 0, which no other transaction has (an API amount is greater than zero).
 */
const anyAmount = (t: Pick<TransactionView, 'amount_in_currency'>) => t.amount_in_currency === 0

/** What the customer was asked to pay. */
function priceOf(t: Pick<TransactionView, 'amount_in_currency' | 'currency'>): string {
  return anyAmount(t) ? `Any amount (${t.currency})` : formatMoney(t.amount_in_currency, t.currency)
}

function field(label: string, value: Html | string | number | null | undefined): Html {
  return html`<div><dt>${label}</dt><dd>${value === null || value === undefined || value === '' ? html`<span class="muted">—</span>` : value}</dd></div>`
}

function units(
  amount: string | null,
  symbol: string | null,
  network: string | null,
  decimals: TokenDecimals,
): string | null {
  if (amount === null) return null
  const d = symbol && network ? decimals(network, symbol) : null
  return d === null ? `${amount} smallest units` : `${displayUnits(amount, d)} ${symbol}`
}

/**
 * A record (a timeline entry's details, metadata) for reading: one `label: value` line per field,
 * nested fields one line each under their path, addresses and hashes as code. The service's own
 * fields read as words; the merchant's (metadata) keep the keys they wrote, nested ones joined
 * by dots.
 */
function readable(value: unknown, keys: 'labels' | 'as-written' = 'labels'): Html {
  const lines: [string, unknown][] = []
  const walk = (path: string, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v))
      for (const [k, x] of Object.entries(v))
        walk(path ? `${path}${keys === 'as-written' ? '.' : ' '}${k}` : k, x)
    else lines.push([path, v])
  }
  walk('', value)
  const label = (key: string) => {
    if (keys === 'as-written') return key
    const words = key
      .replace(/_/g, ' ')
      .replace(/([a-z])([A-Z])/g, '$1 $2')
      .toLowerCase()
    return words.charAt(0).toUpperCase() + words.slice(1)
  }
  const shown = (v: unknown) =>
    v === null || v === undefined
      ? html`<span class="muted">—</span>`
      : typeof v === 'string' && /^0x[0-9a-fA-F]+$/.test(v)
        ? html`<code class="wrap">${v}</code>`
        : Array.isArray(v)
          ? v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(', ')
          : String(v)
  return html`<dl class="readable">${lines.map(([k, v]) => html`<div><dt>${label(k)}</dt><dd>${shown(v)}</dd></div>`)}</dl>`
}

const TRANSFER_KIND: Record<TransferView['kind'], string> = {
  pending: 'being judged',
  payment: 'payment',
  wrong_asset: 'wrong asset',
  late: 'late payment',
}

export function transactionPage(
  f: Frame,
  d: {
    transaction: TransactionView
    timeline: {
      from_status: string | null
      to_status: string
      cause: string
      details: unknown
      at: string
    }[]
    deliveries: DeliveryView[]
    endpoints: EndpointView[]
    transfers: TransferView[]
    refunds: RefundView[]
    refundable: RefundableView[]
  },
  decimals: TokenDecimals,
  opts: { notice?: string | null; error?: string | null; refundForm?: RefundForm },
): string {
  const t = d.transaction
  // Offered only when it would reach someone: an enabled endpoint of this mode that selected the
  // event.
  const receivers = d.endpoints.filter(
    (e) => e.enabled && e.eventTypes.includes('transaction.completed'),
  ).length
  const resend =
    t.status !== 'completed'
      ? ''
      : receivers > 0
        ? postButton(
            f,
            base(f, `/transactions/${t.id}/retry-webhook`),
            'Send transaction.completed again',
          )
        : html`<p class="muted">No enabled ${f.mode} endpoint receives <code>transaction.completed</code>, so there is nothing to send again. <a href="${base(f, '/endpoints')}">Webhooks</a></p>`
  const actions = html`<div class="actions">
    ${CANCELLABLE.includes(t.status) ? postButton(f, base(f, `/transactions/${t.id}/cancel`), 'Cancel transaction', { danger: true, confirm: 'Cancel this transaction? The customer can no longer pay it.' }) : ''}
    ${resend}
  </div>`
  const late = d.transfers.filter((x) => x.kind === 'late')
  const body = html`<p class="lead">${badge(t.status)} <strong>${priceOf(t)}</strong> ${t.order_description ? html`<span>${t.order_description}</span>` : ''}</p>
${late.length ? html`<div class="alert error" role="alert">A late payment arrived after this transaction ended (${late.map((x) => units(x.amount, x.tokenSymbol, x.network, decimals)).join(', ')}). The status does not change; settle it with the customer.</div>` : ''}
${actions}
<section aria-labelledby="fields"><h2 id="fields">Details</h2>
<dl class="fields">
  ${field('Id', html`<code>${t.id}</code>`)}
  ${field('Number', t.transaction_number)}
  ${field('Status', t.status)}
  ${field('Amount', priceOf(t))}
  ${field('USD value at creation', t.currency === 'USD' || anyAmount(t) ? null : html`${formatMoney(t.amount_usd, 'USD')} ${t.usd_rate ? html`<span class="muted">at ${rateText(t.usd_rate)}</span>` : ''}`)}
  ${field(
    'Quoted',
    t.quote_rates
      ? t.quote_rates.method === 'par'
        ? `at par: one ${t.token_symbol} per ${t.currency}, no rate`
        : html`${t.quote_rates.token_usd ? html`${t.token_symbol} at ${rateText(t.quote_rates.token_usd)}` : ''}${t.quote_rates.currency_usd ? html`; ${t.currency} at ${rateText(t.quote_rates.currency_usd)}` : ''} <span class="muted">(${when(t.quote_rates.quoted_at)})</span>`
      : null,
  )}
  ${field('Mode', modeOf(t.testing_mode))}
  ${field('Order id', t.order_id)}
  ${field('Order description', t.order_description)}
  ${field('Customer name', t.customer_name)}
  ${field('Customer e-mail', t.customer_email)}
  ${field('Metadata', t.metadata && Object.keys(t.metadata).length ? readable(t.metadata, 'as-written') : null)}
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
<ol class="timeline">${d.timeline.map(
    (e) =>
      html`<li><span class="at">${when(e.at)}</span> <strong>${e.from_status ? `${e.from_status} → ` : ''}${e.to_status}</strong> <span class="muted">(${e.cause})</span>${
        Object.keys(e.details ?? {}).length ? readable(e.details) : ''
      }</li>`,
  )}</ol></section>
<section aria-labelledby="transfers"><h2 id="transfers">Transfers seen on chain</h2>
${table(
  'Transfers to the deposit address',
  ['Kind', 'Amount', 'From', 'Chain transaction', 'Block', 'Seen'],
  d.transfers.map(
    (x) => html`<tr>
  <td>${badge(TRANSFER_KIND[x.kind], x.kind)}${x.reorged ? html` ${badge('reorged out', 'failed')}` : ''}</td><td class="num">${units(x.amount, x.tokenSymbol, x.network, decimals)}</td>
  <td class="hash" title="${x.fromAddress}"><code>${x.fromAddress}</code></td><td class="hash" title="${x.txHash}"><code>${x.txHash}</code></td><td>${x.blockNumber}</td><td>${when(x.seenAt)}</td></tr>`,
  ),
  "No transfer to this transaction's deposit address has been seen.",
)}
</section>
${refundsSection(f, d, decimals, opts.refundForm)}
<section aria-labelledby="deliveries"><h2 id="deliveries">Webhook deliveries</h2>
${table('Webhook deliveries of this transaction', deliveryHeaders(true), deliveryRows(f, d.deliveries, d.endpoints), 'No webhook delivery for this transaction.')}
</section>`
  return layout(f, 'transactions', `Transaction ${t.transaction_number}`, body, opts)
}

/** What is left to refund in one token (the API's `refundable` line). */
export interface RefundableView {
  token_symbol: string
  blockchain_network: string
  received: string
  refunded: string
  refundable: string
}

/** The refund form's fields as entered (shown again with an error). */
export interface RefundForm {
  asset: string
  amount: string
  address: string
  reason: string
}

const FINISHED = ['completed', 'failed', 'expired', 'cancelled']

/**
 * The transaction's refunds, what is left to refund, and the form to make one
 * (docs/decisions/0038-refunds.md).
 */
/** "$1.08 per unit (feed 0x… on base, round 7)": a recorded rate, for reading. */
function rateText(r: NonNullable<TransactionView['usd_rate']>): string {
  const where = r.feed ? ` from feed ${r.feed} on ${r.network}, round ${r.round_id}` : ' (fixed)'
  return `${r.usd} USD${where}`
}

function refundsSection(
  f: Frame,
  d: { transaction: TransactionView; refunds: RefundView[]; refundable: RefundableView[] },
  decimals: TokenDecimals,
  form?: RefundForm,
): Html {
  const t = d.transaction
  const rows = d.refunds.map(
    (r) => html`<tr>
    <td>${when(r.created_at)}</td><td class="num">${amountOf(r.amount, r.token_symbol, r.blockchain_network, decimals)}${r.amount_in_currency !== null && r.currency ? html` <span class="muted">(${formatMoney(r.amount_in_currency, r.currency)})</span>` : ''}</td><td>${shortHash(r.address)}</td>
    <td class="text">${r.reason ?? html`<span class="muted">—</span>`}</td>
    <td>${badge(r.status, r.status === 'submitted' || r.status === 'confirming' ? 'processing' : r.status)}${r.failure_detail ? html` <span class="muted">${r.failure_detail}</span>` : ''}</td>
    <td>${shortHash(r.paid_from)}</td><td>${shortHash(r.transaction_hash)}</td>
    <td class="row-actions">${
      r.status === 'pending'
        ? postButton(f, base(f, `/refunds/${r.id}/cancel`), 'Cancel', {
            danger: true,
            confirm: 'Cancel this refund? It will not be paid.',
          })
        : r.status === 'submitted'
          ? postButton(f, base(f, `/refunds/${r.id}/abandon`), 'Abandon payment', {
              confirm:
                'Give up this payment? Only one that can never be mined is given up (its signature expired unpaid, or its nonce went to another transaction); the refund is then pending again.',
            })
          : ''
    }</td></tr>`,
  )
  const open = d.refundable.filter((l) => BigInt(l.refundable) > 0n)
  const left = d.refundable.length
    ? html`<p>Left to refund: ${d.refundable.map((l) => html`<strong>${amountOf(l.refundable, l.token_symbol, l.blockchain_network, decimals)}</strong> on ${l.blockchain_network} <span class="muted">(${amountOf(l.received, l.token_symbol, l.blockchain_network, decimals)} received, ${amountOf(l.refunded, l.token_symbol, l.blockchain_network, decimals)} refunded)</span>`).map((x, i) => (i ? html`; ${x}` : x))}.</p>`
    : ''
  const why = !FINISHED.includes(t.status)
    ? 'A refund can be made once the transaction has completed, failed, expired or been cancelled.'
    : open.length === 0
      ? 'Nothing is left to refund: no confirmed payment arrived, or all of it is refunded.'
      : null
  const fields = form ?? {
    asset: open[0] ? `${open[0].blockchain_network}|${open[0].token_symbol}` : '',
    amount: '',
    address: '',
    reason: '',
  }
  const create = why
    ? html`<p class="muted">${why}</p>`
    : html`<form method="post" action="${base(f, `/transactions/${t.id}/refunds`)}" class="stack" aria-label="Refund this transaction">
  ${csrfField(f.csrf)}
  <label>Token <select name="asset">${open.map((l) => {
    const v = `${l.blockchain_network}|${l.token_symbol}`
    return html`<option value="${v}"${v === fields.asset ? html` selected` : ''}>${l.token_symbol} on ${l.blockchain_network} (up to ${amountOf(l.refundable, l.token_symbol, l.blockchain_network, decimals)})</option>`
  })}</select></label>
  <label>Amount <input type="text" name="amount" value="${fields.amount}" inputmode="decimal" autocomplete="off" placeholder="everything left"></label>
  <label>Customer's address <input type="text" name="address" value="${fields.address}" required maxlength="42" pattern="0x[0-9a-fA-F]{40}" autocomplete="off" placeholder="0x…" spellcheck="false"></label>
  <label>Reason <input type="text" name="reason" value="${fields.reason}" maxlength="500" autocomplete="off" placeholder="optional"></label>
  <p class="muted">The refund is recorded here; the treasury tool pays it on your machine (<code>npm run treasury -- refunds pay</code>), and it completes once its payment has the network's confirmations.</p>
  <button type="submit" class="button">Create refund</button>
</form>`
  return html`<section aria-labelledby="refunds"><h2 id="refunds">Refunds</h2>
${table('Refunds of this transaction', ['Created', 'Amount', 'To', 'Reason', 'Status', 'Paid from', 'Payment', ''], rows, 'No refund yet.')}
${left}${create}</section>`
}
