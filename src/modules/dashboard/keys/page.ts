import { Html, html } from '../../../lib/html.ts'
import { DEFAULT_SCOPES, SCOPES } from '../../../keys/api-key.ts'
import type { ApiKeyRecord } from '../../../keys/key.service.ts'
import { badge, base, csrfField, layout, postButton, table, when, type Frame } from '../layout.ts'
import { revealed } from '../webhooks/endpoints-page.ts'

/**
 * API keys of the viewed mode. A new key is shown once, in the response to the form that made it,
 * and never stored: only its hash and display prefix are kept
 * (docs/decisions/0022-api-keys-and-scopes.md).
 */
const SHOWN_ONCE =
  'Copy it now: it is shown only this once. Keep it on your server, never in client-side code ' +
  'or version control.'
const ROTATE =
  'To rotate a key: create a new one, switch your application to it, then delete the old one.'
// Markup already (a constant), so its apostrophe is written as it is.
const MONEY_OUT_SCOPES = new Html(
  'sweeps:write and refunds:pay record money leaving your deposit addresses: give them only to ' +
    "the key of the treasury tool on your own machine, never to your shop's server.",
)

export function keysPage(
  f: Frame,
  keys: ApiKeyRecord[],
  opts: {
    created?: { key: string; name: string }
    form?: { name: string; scopes: string[] }
    notice?: string | null
    error?: string | null
  },
): string {
  const form = opts.form ?? { name: '', scopes: [...DEFAULT_SCOPES] }
  const rows = keys.map((k) => {
    const state = k.revokedAt
      ? html`${badge('revoked', 'failed')} ${when(k.revokedAt)}`
      : badge('active', 'success')
    const revoke = k.revokedAt
      ? ''
      : postButton(f, base(f, `/keys/${k.id}/revoke`), 'Revoke', {
          confirm: `Revoke "${k.name}"? Requests with it get 401 from now on.`,
        })
    const remove = postButton(f, base(f, `/keys/${k.id}/delete`), 'Delete', {
      danger: true,
      confirm: `Delete "${k.name}"? Requests with it get 401 and it leaves this list.`,
    })
    return html`<tr data-key="${k.id}">
    <td class="text">${k.name}</td>
    <td><code>${k.displayPrefix}</code></td>
    <td>${k.mode}</td>
    <td class="text">${k.scopes.join(', ')}</td>
    <td>${when(k.createdAt)}</td>
    <td>${when(k.lastUsedAt)}</td>
    <td>${state}</td>
    <td class="row-actions">
      ${revoke}
      ${remove}
    </td></tr>`
  })
  const created = opts.created
    ? revealed(`Your new key "${opts.created.name}"`, opts.created.key, SHOWN_ONCE)
    : ''
  const headers = [
    ...['Name', 'Key', 'Mode', 'Scopes', 'Created', 'Last used', 'State'],
    html`<span class="visually-hidden">Actions</span>`,
  ]
  const scopes = SCOPES.map((s) => {
    const checked = form.scopes.includes(s) ? html` checked` : ''
    return html`<label class="check"><input type="checkbox" name="scopes"
      value="${s}"${checked}> ${s}</label>`
  })
  const body = html`${created}
${table(`${f.mode} API keys`, headers, rows, `No ${f.mode} keys yet.`)}
<p class="muted">${ROTATE}</p>
<section aria-labelledby="new-key"><h2 id="new-key">Create a ${f.mode} key</h2>
<form method="post" action="${base(f, '/keys')}" class="stack">
  ${csrfField(f.csrf)}
  <label>Name <input type="text" name="name" value="${form.name}" required maxlength="100"
    placeholder="Checkout server" autocomplete="off"></label>
  <fieldset><legend>Scopes</legend>
  ${scopes}
  <p class="muted">${MONEY_OUT_SCOPES}</p>
  </fieldset>
  <button type="submit" class="button">Create ${f.mode} key</button>
</form></section>`
  return layout(f, 'keys', 'API keys', body, opts)
}
