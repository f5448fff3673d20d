import { html, type Html } from '../../../lib/html.ts'
import { eventNameFor } from '../../../webhooks/commerce-format.ts'
import type { EndpointView } from '../../../webhooks/endpoint.service.ts'
import type { AttemptView, DeliveryView } from '../../../webhooks/webhook.service.ts'
import { badge, base, layout, postButton, query, table, when, type Frame } from '../layout.ts'

/**
 * The delivery log's filter (docs/integrating/webhooks.md): success, failed, retrying (and pending:
 * not yet tried).
 */
export const DELIVERY_FILTERS = ['success', 'failed', 'retrying', 'pending'] as const

/** The log's columns; with `endpoints`, which endpoint each delivery went to as well. */
export function deliveryHeaders(withEndpoint: boolean): string[] {
  return [
    'Event',
    'Status',
    'Next retry',
    'Attempts',
    'Retries',
    'Last HTTP status',
    'Last attempt',
    'Transaction',
    ...(withEndpoint ? ['Endpoint'] : []),
  ]
}

/** A response body longer than this is cut in the attempt detail (the database keeps 2 KiB). */
const SHOWN_RESPONSE_CHARS = 1024

const pending = (d: DeliveryView) => d.status === 'retrying' || d.status === 'pending'

export function deliveryRows(
  f: Frame,
  deliveries: DeliveryView[],
  endpoints?: EndpointView[],
): Html[] {
  const urls = endpoints ? new Map(endpoints.map((e) => [e.id, e.url])) : null
  const formats = new Map((endpoints ?? []).map((e) => [e.id, e.format]))
  return deliveries.map(
    (d) => html`<tr data-delivery="${d.id}">
    <td class="event"><a href="${base(f, `/deliveries/${d.id}`)}">${eventNameFor(formats.get(d.endpointId) ?? 'standard', d.eventType)}</a>${d.test ? html` ${badge('test event', 'test')}` : ''}</td>
    <td data-col="status">${badge(d.status)}</td>
    <td data-col="next-retry">${pending(d) ? when(d.nextAttemptAt) : html`<span class="muted">—</span>`}</td>
    <td class="num" data-col="attempts">${d.attempts}</td>
    <td class="num" data-col="retries">${d.retryCount}</td>
    <td class="num" data-col="last-status">${d.lastStatusCode ?? html`<span class="muted">—</span>`}</td>
    <td data-col="last-attempt">${when(d.lastAttemptAt)}</td>
    <td>${d.transactionId ? html`<a href="${base(f, `/transactions/${d.transactionId}`)}"><code>${d.transactionId.slice(0, 8)}…</code></a>` : html`<span class="muted">—</span>`}</td>
    ${urls ? html`<td class="url"><a href="${base(f, `/endpoints/${d.endpointId}`)}" title="${urls.get(d.endpointId) ?? d.endpointId}">${urls.get(d.endpointId) ?? d.endpointId}</a></td>` : ''}</tr>`,
  )
}

/** The status filter as links (works without script), the current one marked. */
export function statusFilter(current: string, href: (status: string) => string): Html {
  return html`<nav class="status-filter" aria-label="Filter by status"><ul>
    <li><a href="${href('')}"${current === '' ? html` aria-current="true"` : ''}>All</a></li>
    ${DELIVERY_FILTERS.map((s) => html`<li><a href="${href(s)}"${current === s ? html` aria-current="true"` : ''}>${s}</a></li>`)}</ul></nav>`
}

/** "Older" link: keyset paging from the last delivery shown. */
export function olderLink(
  deliveries: DeliveryView[],
  limit: number,
  href: (before: string) => string,
): Html {
  return deliveries.length === limit
    ? html`<nav class="pager" aria-label="Pages"><a href="${href(deliveries.at(-1)!.id)}" rel="next">Older</a></nav>`
    : html``
}

export function deliveriesPage(
  f: Frame,
  q: { status: string; endpointId: string },
  data: { endpoints: EndpointView[]; deliveries: DeliveryView[] } | null,
  limit: number,
  opts: { error?: string | null },
): string {
  const link = (status: string, before = '') =>
    base(f, `/deliveries${query({ status, endpoint: q.endpointId, before })}`)
  const endpointForm =
    data && data.endpoints.length > 1
      ? html`<form method="get" action="${base(f, '/deliveries')}" class="filters" aria-label="Filter by endpoint">
      ${q.status ? html`<input type="hidden" name="status" value="${q.status}">` : ''}
      <label>Endpoint <select name="endpoint"><option value="">All endpoints</option>${data.endpoints.map((e) => html`<option value="${e.id}"${e.id === q.endpointId ? html` selected` : ''}>${e.url}</option>`)}</select></label>
      <button type="submit" class="button secondary">Show</button></form>`
      : ''
  const body = html`${statusFilter(q.status, (s) => link(s))}${endpointForm}
${data ? table('Webhook deliveries, newest first', deliveryHeaders(true), deliveryRows(f, data.deliveries, data.endpoints), q.status ? `No ${q.status} deliveries.` : `No ${f.mode} webhook deliveries yet.`) : ''}
${data ? olderLink(data.deliveries, limit, (before) => link(q.status, before)) : ''}`
  return layout(f, 'deliveries', 'Webhook deliveries', body, opts)
}

function attempt(a: AttemptView): Html {
  const response = a.responseBody ?? ''
  return html`<li class="attempt"><h3>Attempt ${a.number} <span class="muted">(${a.trigger})</span></h3>
  <dl class="fields">
    <div><dt>Started</dt><dd>${when(a.startedAt)}</dd></div>
    <div><dt>Was due</dt><dd>${when(a.scheduledFor)}</dd></div>
    <div><dt>Took</dt><dd>${a.durationMs} ms</dd></div>
    <div><dt>HTTP status</dt><dd data-col="attempt-status">${a.statusCode ?? html`<span class="muted">no response</span>`}</dd></div>
    ${a.error ? html`<div><dt>Error</dt><dd>${a.error}</dd></div>` : ''}
  </dl>
  <details><summary>Request body sent</summary><pre class="body">${a.requestBody}</pre></details>
  <details${a.statusCode !== null && a.statusCode >= 300 ? html` open` : ''}><summary>Response received${response.length > SHOWN_RESPONSE_CHARS ? ' (truncated)' : ''}</summary><pre class="body">${response ? response.slice(0, SHOWN_RESPONSE_CHARS) : '(empty)'}</pre></details>
</li>`
}

export function deliveryPage(
  f: Frame,
  d: {
    delivery: DeliveryView
    data: Record<string, unknown>
    attempts: AttemptView[]
    /** Its endpoint's format: the event is named as that format names it. */
    format: string
  },
  opts: { notice?: string | null; error?: string | null },
): string {
  const v = d.delivery
  const body = html`<p class="lead">${badge(v.status)} <strong>${eventNameFor(d.format, v.eventType)}</strong>${v.test ? html` ${badge('test event', 'test')}` : ''}</p>
<div class="actions">${postButton(f, base(f, `/deliveries/${v.id}/redeliver`), pending(v) ? 'Send now' : 'Redeliver')}</div>
<dl class="fields">
  <div><dt>Event id</dt><dd><code>${v.eventId}</code></dd></div>
  <div><dt>Endpoint</dt><dd><a href="${base(f, `/endpoints/${v.endpointId}`)}"><code>${v.endpointId}</code></a></dd></div>
  <div><dt>Transaction</dt><dd>${v.transactionId ? html`<a href="${base(f, `/transactions/${v.transactionId}`)}"><code>${v.transactionId}</code></a>` : html`<span class="muted">— (test event)</span>`}</dd></div>
  <div><dt>Attempts</dt><dd>${v.attempts}</dd></div>
  <div><dt>Retries</dt><dd>${v.retryCount}</dd></div>
  <div><dt>Next retry</dt><dd>${pending(v) ? when(v.nextAttemptAt) : html`<span class="muted">—</span>`}</dd></div>
  ${v.failedBecause ? html`<div><dt>Stopped because</dt><dd>${v.failedBecause.replaceAll('_', ' ')}</dd></div>` : ''}
  <div><dt>Created</dt><dd>${when(v.createdAt)}</dd></div>
</dl>
<h2>Attempts</h2>
${d.attempts.length ? html`<ol class="attempts">${d.attempts.map(attempt)}</ol>` : html`<p class="empty">No attempt has been made yet.</p>`}`
  return layout(f, 'deliveries', `Delivery ${v.id}`, body, opts)
}
