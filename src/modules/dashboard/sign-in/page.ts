import { html } from '../../../lib/html.ts'
import { alert, plainPage, type AssetUrl } from '../layout.ts'

const CREATE_USER = 'npm run cli -- user create --email … --password … --project …'

export function signInPage(
  asset: AssetUrl,
  form: { email: string; next: string; csrf: string },
  opts: { error?: string | null; notice?: string | null } = {},
): string {
  return plainPage(
    asset,
    'Sign in',
    html`${alert('notice', opts.notice)}${alert('error', opts.error)}
<form method="post" action="/dashboard/sign-in" class="stack">
  <input type="hidden" name="csrf" value="${form.csrf}">
  <input type="hidden" name="next" value="${form.next}">
  <label>E-mail <input type="email" name="email" value="${form.email}" required
    autocomplete="username" autofocus></label>
  <label>Password <input type="password" name="password" required
    autocomplete="current-password"></label>
  <button type="submit" class="button">Sign in</button>
</form>
<p class="muted">Accounts are created by the operator: <code>${CREATE_USER}</code></p>`,
  )
}
