import { html, type Html } from '../../../lib/html.ts'
import { WEBHOOK_EVENT_TYPES } from '../../../db/schema.ts'
import { COMMERCE_EVENT_OF } from '../../../webhooks/commerce-format.ts'
import type { EndpointFormat, EndpointView } from '../../../webhooks/endpoint.service.ts'
import type { DeliveryView } from '../../../webhooks/webhook.service.ts'
import {
  badge,
  base,
  csrfField,
  layout,
  postButton,
  query,
  table,
  when,
  type Frame,
} from '../layout.ts'
import { deliveryHeaders, deliveryRows, olderLink, statusFilter } from './deliveries-page.ts'

/** A secret or key shown in full, with a copy button (the browser script wires it). */
export function revealed(label: string, value: string, note: string): Html {
  return html`<div class="reveal" role="region" aria-label="${label}">
  <p><strong>${label}</strong></p>
  <div class="copy-row"><code class="secret" id="revealed-value">${value}</code><button type="button" class="button secondary" data-copy="revealed-value">Copy</button></div>
  <p class="muted">${note}</p>
</div>`
}

const REASONS = {
  manual: 'disabled',
  gone: 'disabled: 410 Gone',
  failing: 'disabled: failing',
} as const

function stateBadge(e: EndpointView): Html {
  if (e.enabled) return e.failingSince ? badge('failing', 'warning') : badge('enabled', 'success')
  return badge(REASONS[e.disabledReason ?? 'manual'], 'failed')
}

/** Why and since when an endpoint stopped receiving, or that its deliveries are failing. */
function health(e: EndpointView): Html | string {
  if (!e.enabled && e.disabledReason === 'gone') {
    return html`<p class="alert error" role="status">Disabled automatically ${when(e.disabledAt)}: the endpoint answered <strong>410 Gone</strong>. Deliveries already queued wait for it; new events are not sent to it until it is enabled again.</p>`
  }
  if (!e.enabled && e.disabledReason === 'failing') {
    return html`<p class="alert error" role="status">Disabled automatically ${when(e.disabledAt)}: every delivery failed since ${when(e.failingSince)}. Deliveries already queued wait for it; new events are not sent to it until it is enabled again. Once it receives again, enable it and recover what failed.</p>`
  }
  if (!e.enabled) return html`<p class="muted">Disabled by hand ${when(e.disabledAt)}.</p>`
  if (e.failingSince)
    return html`<p class="alert warning" role="status">Failing since ${when(e.failingSince)}: no attempt has succeeded since. It is disabled automatically if this goes on.</p>`
  return ''
}

/** How the pages name each endpoint format. */
const FORMAT_LABELS: Record<EndpointFormat, string> = {
  standard: 'Standard',
  commerce: 'Coinbase Commerce',
}

const FORMAT_HELP =
  "Coinbase Commerce: Commerce's webhook body and X-CC-Webhook-Signature, for shops that moved from Commerce; hears every charge event."

/** The Commerce events a Commerce-format endpoint hears, in order. */
const CHARGE_EVENTS = [...new Set(Object.values(COMMERCE_EVENT_OF))]

/** What an endpoint receives, as its list row shows it. */
function eventsSummary(e: EndpointView): string {
  if (e.format === 'commerce') return 'every charge event'
  return e.eventTypes.length === WEBHOOK_EVENT_TYPES.length ? 'all events' : e.eventTypes.join(', ')
}

/** A datetime-local input's value (UTC, to the minute). */
const inputTime = (d: Date) => d.toISOString().slice(0, 16)

export function endpointsPage(
  f: Frame,
  endpoints: EndpointView[],
  form: { url: string; events: string[]; format: string },
  opts: { error?: string | null },
): string {
  const rows = endpoints.map(
    (e) => html`<tr data-endpoint="${e.id}">
    <td class="text"><a href="${base(f, `/endpoints/${e.id}`)}">${e.url}</a></td>
    <td>${stateBadge(e)}</td>
    <td class="text">${eventsSummary(e)}</td>
    <td class="text" data-col="format">${FORMAT_LABELS[e.format]}</td>
    <td>${when(e.createdAt)}</td></tr>`,
  )
  const formats = Object.entries(FORMAT_LABELS).map(
    ([value, label]) =>
      html`<label class="check"><input type="radio" name="format" value="${value}"${form.format === value ? html` checked` : ''}> ${label}</label>`,
  )
  const body = html`${table(`${f.mode} webhook endpoints`, ['URL', 'State', 'Events', 'Format', 'Created'], rows, `No ${f.mode} webhook endpoints yet.`)}
<section aria-labelledby="new-endpoint"><h2 id="new-endpoint">Add an endpoint</h2>
<form method="post" action="${base(f, '/endpoints')}" class="stack">
  ${csrfField(f.csrf)}
  <label>URL <input type="url" name="url" value="${form.url}" required maxlength="2048" placeholder="https://shop.example.com/webhooks/crypto-pay" autocomplete="off"></label>
  <p class="muted">${f.mode === 'live' ? 'Live endpoints must use https and a public address.' : 'Test endpoints may use http; local addresses only where the operator allows them.'}</p>
  <fieldset aria-describedby="format-help"><legend>Format</legend>
  ${formats}
  <p class="muted" id="format-help">${FORMAT_HELP}</p>
  </fieldset>
  <fieldset aria-describedby="events-help"><legend>Events to send</legend>
  <p class="muted" id="events-help">Standard: choose at least one. Coinbase Commerce: not needed, leave them unchecked (it hears every charge event).</p>
  ${WEBHOOK_EVENT_TYPES.map((t) => html`<label class="check"><input type="checkbox" name="events" value="${t}"${form.events.includes(t) ? html` checked` : ''}> ${t}</label>`)}
  </fieldset>
  <button type="submit" class="button">Add ${f.mode} endpoint</button>
</form></section>`
  return layout(f, 'endpoints', 'Webhook endpoints', body, opts)
}

export function endpointPage(
  f: Frame,
  d: { endpoint: EndpointView; deliveries: DeliveryView[] },
  q: { status: string },
  limit: number,
  opts: {
    secret?: { value: string; why: 'created' | 'revealed' | 'rotated' }
    notice?: string | null
    error?: string | null
    status?: number
  },
): string {
  const e = d.endpoint
  const here = (rest = '') => base(f, `/endpoints/${e.id}${rest}`)
  const link = (status: string, before = '') => here(query({ status, before }))
  const commerce = e.format === 'commerce'
  const secretNote = {
    created:
      "Store it in your server's configuration now. You can reveal it again here after entering your password.",
    revealed: commerce
      ? "Verify each delivery's X-CC-Webhook-Signature with it (HMAC-SHA-256 of the raw body): it is the shared secret your Commerce webhook code expects."
      : "Verify each delivery's x-service-signature with it (HMAC-SHA-256 of the raw body).",
    rotated:
      'The old secret stopped working: deliveries from now on are signed with this one. Update your server.',
  }
  const recoverFrom = inputTime(e.failingSince ?? e.disabledAt ?? new Date(Date.now() - 86_400_000))
  const body = html`<p class="lead"><code class="wrap">${e.url}</code> ${stateBadge(e)}</p>
${health(e)}
${opts.secret ? revealed('Signing secret', opts.secret.value, secretNote[opts.secret.why]) : ''}
<dl class="fields">
  <div><dt>Id</dt><dd><code>${e.id}</code></dd></div>
  <div><dt>Mode</dt><dd>${e.mode}</dd></div>
  <div><dt>Format</dt><dd>${FORMAT_LABELS[e.format]}</dd></div>
  <div><dt>Events</dt><dd>${commerce ? `every charge event (${CHARGE_EVENTS.join(', ')})` : e.eventTypes.join(', ')}</dd></div>
  <div><dt>Created</dt><dd>${when(e.createdAt)}</dd></div>
</dl>
<div class="actions">
  ${e.enabled ? postButton(f, here('/disable'), 'Disable', { confirm: 'Disable this endpoint? No events are sent to it until it is enabled again.' }) : postButton(f, here('/enable'), 'Enable')}
</div>
<section aria-labelledby="recover-title"><h2 id="recover-title">${e.enabled ? 'Recover failed deliveries' : 'Enable and recover'}</h2>
<form method="post" action="${here(e.enabled ? '/recover' : '/enable')}" class="filters">
  ${csrfField(f.csrf)}
  <label>Failed since (UTC) <input type="datetime-local" name="recover_since" value="${recoverFrom}" required></label>
  <button type="submit" class="button secondary">${e.enabled ? 'Send them again' : 'Enable and send them again'}</button>
</form>
<p class="muted">Every delivery to this endpoint that failed since then is sent again now, signed afresh, in the order they were made.</p>
</section>
<section aria-labelledby="reveal-title"><h2 id="reveal-title">Reveal the signing secret</h2>
<form method="post" action="${here('/reveal')}" class="stack narrow">
  ${csrfField(f.csrf)}
  <label>Your password <input type="password" name="password" required autocomplete="current-password"></label>
  <button type="submit" class="button secondary">Reveal secret</button>
</form></section>
<section aria-labelledby="rotate-title"><h2 id="rotate-title">Rotate the signing secret</h2>
<form method="post" action="${here('/rotate')}" class="stack narrow" data-confirm="Rotate the signing secret? The current one stops working at once.">
  ${csrfField(f.csrf)}
  <label>Password to confirm <input type="password" name="password" required autocomplete="current-password"></label>
  <button type="submit" class="button danger">Rotate secret</button>
</form>
<p class="muted">A new secret replaces the current one at once: deliveries from then on are signed with it.</p>
</section>
<section aria-labelledby="test-title"><h2 id="test-title">Send a test event</h2>
<form method="post" action="${here('/test')}" class="filters">
  ${csrfField(f.csrf)}
  ${commerce ? html`<input type="hidden" name="event" value="transaction.created">` : html`<label>Event type <select name="event">${WEBHOOK_EVENT_TYPES.map((t) => html`<option value="${t}">${t}</option>`)}</select></label>`}
  <button type="submit" class="button"${e.enabled ? '' : html` disabled`}>Send test event</button>
</form>
<p class="muted">${commerce ? html`A Commerce <code>charge:created</code> event for a made-up charge (code <code>TEST</code>, <code>"metadata": {"test": true}</code>), signed like any other delivery.` : html`The payload carries <code>"test": true</code> and a made-up transaction, signed like any other delivery.`}${e.enabled ? '' : ' Enable the endpoint first.'}</p>
</section>
<section aria-labelledby="deliveries-title"><h2 id="deliveries-title">Deliveries to this endpoint</h2>
${statusFilter(q.status, (s) => link(s))}
${table('Deliveries to this endpoint, newest first', deliveryHeaders(false), deliveryRows(f, d.deliveries), q.status ? `No ${q.status} deliveries.` : 'Nothing has been sent to this endpoint yet.')}
${olderLink(d.deliveries, limit, (before) => link(q.status, before))}
</section>`
  return layout(f, 'endpoints', 'Webhook endpoint', body, opts)
}
