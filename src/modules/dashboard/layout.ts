import { html, PAGE_META, type Html } from '../../lib/html.ts'
import { PAY_PAGE_HEADERS } from '../pay/page.ts'
import type { Mode } from '../../projects/mode.ts'
import type { Membership } from '../../users/session.service.ts'

/** The pay page's policy, except that the dashboard's own forms may post (to itself only). */
export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

export const DASHBOARD_HEADERS: Record<string, string> = {
  ...PAY_PAGE_HEADERS,
  'content-security-policy': DASHBOARD_CSP,
}

export type AssetUrl = (name: string) => string
export type Section =
  | 'overview'
  | 'transactions'
  | 'funds'
  | 'keys'
  | 'endpoints'
  | 'deliveries'
  | 'settings'

const SECTIONS: [Section, string, string][] = [
  ['overview', 'Overview', ''],
  ['transactions', 'Transactions', '/transactions'],
  ['funds', 'Funds', '/funds'],
  ['keys', 'API keys', '/keys'],
  ['endpoints', 'Webhooks', '/endpoints'],
  ['deliveries', 'Deliveries', '/deliveries'],
  ['settings', 'Settings', '/settings'],
]

/**
 * Everything around a signed-in page: who, which project and mode, and the session's CSRF
 * token.
 */
export interface Frame {
  asset: AssetUrl
  email: string
  project: Membership
  projects: Membership[]
  mode: Mode
  csrf: string
}

/** `/dashboard/{project}/{mode}` plus `rest`: every signed-in page lives under it. */
export const base = (f: Pick<Frame, 'project' | 'mode'>, rest = '') =>
  `/dashboard/${encodeURIComponent(f.project.id)}/${f.mode}${rest}`

/** `?a=1&b=2` of the parameters that have a value; empty when none has. */
export function query(params: Record<string, string | number | null | undefined>): string {
  const p = new URLSearchParams()
  for (const [k, v] of Object.entries(params))
    if (v !== null && v !== undefined && v !== '') p.set(k, String(v))
  const s = p.toString()
  return s ? `?${s}` : ''
}

/** The one-line notices a redirect after an action may carry (`?notice=`): fixed texts only. */
export const NOTICES = {
  'signed-out': 'You are signed out.',
  'key-revoked': 'The key is revoked: requests with it now get 401.',
  'key-deleted': 'The key is deleted.',
  'endpoint-enabled': 'The endpoint is enabled.',
  'endpoint-disabled':
    'The endpoint is disabled: no events are sent to it until it is enabled again.',
  'test-sent': 'A test event is on its way; its delivery is listed below.',
  redelivered: 'The delivery is queued to be sent again now.',
  cancelled: 'The transaction is cancelled.',
  'webhook-retried':
    'A new transaction.completed delivery is queued for every endpoint that selected it.',
  'session-ended': 'Your session has ended. Sign in again.',
  'refund-created':
    'The refund is recorded, pending. Pay it with the treasury tool on your machine: ' +
    'npm run treasury -- refunds pay.',
  'refund-cancelled': 'The refund is cancelled: it will not be paid.',
  'refund-abandoned':
    'Its payment can never be mined, so it is given up: the refund is pending again, and the ' +
    'treasury tool pays it anew.',
} as const
export type Notice = keyof typeof NOTICES
export const isNotice = (s: unknown): s is Notice =>
  typeof s === 'string' && Object.hasOwn(NOTICES, s)

export function head(title: string, asset: AssetUrl, extra: Html | string = ''): Html {
  return html`<head>
${PAGE_META}
<title>${title} · Crypto Pay dashboard</title>
<link rel="icon" href="${asset('favicon.svg')}" type="image/svg+xml">
<link rel="stylesheet" href="${asset('base.css')}">
<link rel="stylesheet" href="${asset('dashboard.css')}">
<script type="module" src="${asset('dashboard.js')}"></script>
${extra}
</head>`
}

export const csrfField = (csrf: string) => html`<input type="hidden" name="csrf" value="${csrf}">`

/** A form with one button that posts to `action`; `confirm` asks first (in the browser script). */
export function postButton(
  f: Pick<Frame, 'csrf'>,
  action: string,
  label: string,
  opts: { confirm?: string; danger?: boolean; fields?: Record<string, string> } = {},
): Html {
  const confirm = opts.confirm ? html` data-confirm="${opts.confirm}"` : ''
  const fields = Object.entries(opts.fields ?? {}).map(
    ([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`,
  )
  const kind = opts.danger ? 'button danger' : 'button secondary'
  const button = html`<button type="submit" class="${kind}">${label}</button>`
  return html`<form method="post" action="${action}" class="inline"${confirm}>${[
    csrfField(f.csrf),
    fields,
    button,
  ]}</form>`
}

/** A date as UTC text in a `<time>` (the browser script shows it in the reader's zone too). */
const COUNT = new Intl.NumberFormat('en-US')
/** "1,500": a count, grouped as the dashboard reads (English); the formatter is made once. */
export const formatCount = (n: number): string => COUNT.format(n)

export function when(d: Date | string | null | undefined): Html {
  if (!d) return html`<span class="muted">—</span>`
  const date = typeof d === 'string' ? new Date(d) : d
  const iso = date.toISOString()
  return html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`
}

export function alert(kind: 'notice' | 'error', text: string | null | undefined): Html {
  if (!text) return html``
  return kind === 'error'
    ? html`<div class="alert error" role="alert">${text}</div>`
    : html`<div class="alert notice" role="status">${text}</div>`
}

/** A table that scrolls on its own on a narrow screen, never the page. */
export function table(
  caption: string,
  headers: (string | Html)[],
  rows: Html[],
  empty: string,
): Html {
  if (rows.length === 0) return html`<p class="empty">${empty}</p>`
  return html`<div class="table-wrap" role="region" aria-label="${caption}"
tabindex="0"><table><caption class="visually-hidden">${caption}</caption>
<thead><tr>${headers.map((h) => html`<th scope="col">${h}</th>`)}</tr></thead>
<tbody>${rows}</tbody></table></div>`
}

export const badge = (text: string, kind = text) =>
  html`<span class="badge badge-${kind}">${text}</span>`

const TEST_BANNER = html`<div class="test-banner" role="note"><strong>Test mode</strong> — ${[
  'you are viewing test data. Nothing here moves real money.',
]}</div>`

/** The project's name, or a menu of the user's projects when there are several. */
function projectSwitch(f: Frame): Html {
  if (f.projects.length <= 1) return html`<span class="project-name">${f.project.name}</span>`
  const items = f.projects.map((p) => {
    const current = p.id === f.project.id ? html` aria-current="true"` : ''
    return html`<li><a href="${base({ project: p, mode: f.mode })}"${current}>${p.name}</a></li>`
  })
  const name = html`<span class="visually-hidden">Project: </span>${f.project.name}`
  return html`<details class="project-switch"><summary>${name}</summary><ul>${items}</ul></details>`
}

/** The same section in the other mode. */
function modeSwitch(f: Frame, section: Section): Html {
  const other: Mode = f.mode === 'test' ? 'live' : 'test'
  const sectionPath = SECTIONS.find(([s]) => s === section)![2]
  const href = base({ project: f.project, mode: other }, sectionPath)
  const on = (mode: Mode) => (f.mode === mode ? 'on' : '')
  return html`<a class="mode-switch" href="${href}" data-mode="${f.mode}"
    aria-label="Viewing ${f.mode} data. Switch to ${other} data">
    <span class="${on('test')}">Test</span><span class="${on('live')}">Live</span></a>`
}

function signOut(f: Frame): Html {
  const button = html`<button type="submit" class="link">Sign out<span class="visually-hidden"> ${[
    f.email,
  ]}</span></button>`
  return html`<form method="post" action="/dashboard/sign-out" class="sign-out">${[
    csrfField(f.csrf),
    button,
  ]}</form>`
}

function sections(f: Frame, section: Section): Html {
  return html`<ul>${SECTIONS.map(([s, label, path]) => {
    const current = s === section ? html` aria-current="page"` : ''
    return html`<li><a href="${base(f, path)}"${current}>${label}</a></li>`
  })}</ul>`
}

/** A signed-in page: header with project and mode switch, navigation, and `body`. */
export function layout(
  f: Frame,
  section: Section,
  title: string,
  body: Html,
  opts: { head?: Html; notice?: string | null; error?: string | null } = {},
): string {
  return html`<!doctype html>
<html lang="en">
${head(`${title} · ${f.project.name}`, f.asset, opts.head ?? '')}
<body data-mode="${f.mode}">
<a class="skip" href="#main">Skip to content</a>
${f.mode === 'test' ? TEST_BANNER : ''}
<header class="top">
  <div class="brand"><a href="${base(f)}">Crypto Pay</a></div>
  ${projectSwitch(f)}
  ${modeSwitch(f, section)}
  ${signOut(f)}
</header>
<nav class="sections" aria-label="Dashboard">
  ${sections(f, section)}
</nav>
<main id="main" tabindex="-1">
<h1>${title}</h1>
${alert('notice', opts.notice)}${alert('error', opts.error)}
${body}
</main>
</body>
</html>`.value
}

/** A page without the signed-in frame: sign-in, not found, too many requests. */
export function plainPage(asset: AssetUrl, title: string, body: Html): string {
  return html`<!doctype html>
<html lang="en">
${head(title, asset)}
<body class="plain">
<main id="main" class="narrow">
<p class="brand">Crypto Pay</p>
<h1>${title}</h1>
${body}
</main>
</body>
</html>`.value
}
