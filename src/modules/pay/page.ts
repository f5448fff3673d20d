/**
 * The hosted pay page's HTML (docs/decisions/0026-pay-page-endpoints.md `GET /pay/{id}`): the first
 * view rendered on the server, the state embedded as JSON for the browser script, which keeps it
 * live. The markup is compiled once (`template`): a request only fills its slots, and every value a
 * slot gives is escaped, so no merchant-supplied string can become markup.
 */
import {
  escapeHtml,
  Html,
  html,
  jsonForScript,
  PAGE_META,
  template,
  type Slot,
  type Template,
} from '../../lib/html.ts'
import type { PayState } from './model.ts'
import { PAY_TEXT, fill } from './text.ts'
import { payView, tokenKey, type Part, type PartId, type View } from './view.ts'

/** Strict enough that nothing but our own files run, load or frame the page. */
export const PAY_PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

export const PAY_PAGE_HEADERS: Record<string, string> = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': PAY_PAGE_CSP,
  'cache-control': 'no-store',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
}

/** Where the page's static files are (content-hashed URLs). */
export type AssetUrl = (name: string) => string

const t = PAY_TEXT
/** The same texts escaped once, for markup: most of the page is these constants. */
const T = Object.fromEntries(
  Object.entries(PAY_TEXT).map(([k, v]) => [k, new Html(escapeHtml(v))]),
) as { readonly [K in keyof typeof PAY_TEXT]: Html }

/** The head of our pages, its title a slot; compiled, with the asset URLs as constants. */
function head<C>(title: Slot<C>, asset: AssetUrl, withScript: boolean): Template<C> {
  return template<C>`<head>
${PAGE_META}
<title>${title}</title>
<link rel="icon" href="${asset('favicon.svg')}" type="image/svg+xml">
<link rel="stylesheet" href="${asset('base.css')}">
<link rel="stylesheet" href="${asset('pay.css')}">
${withScript ? html`<script type="module" src="${asset('pay-page.js')}"></script>` : ''}
</head>`
}

/**
 * `build(asset)` once per asset map (the server has one): a page's template is compiled on its
 * first render.
 */
function perAsset<C>(build: (asset: AssetUrl) => Template<C>): (asset: AssetUrl) => Template<C> {
  const compiled = new WeakMap<AssetUrl, Template<C>>()
  return (asset) => {
    let made = compiled.get(asset)
    if (!made) compiled.set(asset, (made = build(asset)))
    return made
  }
}

/** What a render of the page reads: the state, its view, and the token chosen. */
interface PageContext {
  s: PayState
  v: View
  /** `tokenKey` of the quote's token, or null. */
  selected: string | null
}
type PageSlot = Slot<PageContext>

/** `id="…"` plus the view's hidden flag and attributes for that element, then `extra`. */
function at(id: PartId, extra: Html | null = null): PageSlot {
  const base = `id="${id}"`
  const tail = extra ? ` ${extra.value}` : ''
  // Built as one string (it runs for every part of the page): ids and attribute names are the
  // view's own constants, values are escaped.
  return ({ v }) => {
    const p: Part = v[id]
    let out = p.hidden ? `${base} hidden` : base
    for (const k in p.attrs) {
      const value = p.attrs[k]!
      if (value !== '') out += ` ${k}="${escapeHtml(value)}"`
    }
    return new Html(out + tail)
  }
}

/** The view's text for that element. */
const text =
  (id: PartId): PageSlot =>
  ({ v }) =>
    v[id].text ?? ''

const TEST_BANNER = html`<div class="test-banner" role="note"><strong>${T.testBanner}</strong></div>`

const DESCRIPTION = template<string>`<p class="description"><span class="visually-hidden">${T.orderLabel}: </span>${(d) => d}</p>`

const TOKEN = template<{
  k: PayState['tokens'][number]
  selected: string | null
}>`<li><button type="button" class="token" data-token="${({ k }) => k.token_symbol}" data-network="${({ k }) => k.blockchain_network}" aria-pressed="${({ k, selected }) => (tokenKey(k.token_symbol, k.blockchain_network) === selected ? 'true' : 'false')}">
      <span class="token-symbol">${({ k }) => k.token_symbol}</span> <span class="token-network">${({ k }) => fill(t.tokenNetwork, { network: k.blockchain_network })}</span>
    </button></li>`

/** The page's markup, its constants (texts, asset URLs) joined once. */
const pageTemplate = perAsset(
  (asset) => template<PageContext>`<!doctype html>
<html lang="en">
${head<PageContext>(({ s }) => fill(t.pageTitle, { project: s.project_name }), asset, true)}
<body data-wallet-script="${asset('browser-wallet.js')}">
${({ s }) => (s.testing_mode ? TEST_BANNER : '')}
<main class="card">
<header class="order">
  <h1 class="merchant">${({ s }) => s.project_name}</h1>
  ${({ s }) => (s.order_description ? DESCRIPTION.render(s.order_description) : '')}
  <p class="amount"><span class="visually-hidden">${T.amountLabel}: </span>${text('receipt-amount')}</p>
  <p ${at('countdown')} class="countdown">${text('countdown')}</p>
</header>

<section ${at('status')} class="status" role="status" aria-live="polite" aria-atomic="true">
  <p ${at('status-title', html`tabindex="-1"`)} class="status-title">${text('status-title')}</p>
  <p ${at('status-detail')} class="status-detail">${text('status-detail')}</p>
  <progress ${at('progress')} aria-label="${T.progressLabel}"></progress>
</section>
<ol ${at('steps')} class="steps" aria-label="${T.stepsLabel}">
  <li ${at('step-detected')}>${text('step-detected')}</li>
  <li ${at('step-block')}>${text('step-block')}</li>
  <li ${at('step-confirmations')}>${text('step-confirmations')}</li>
  <li ${at('step-complete')}>${text('step-complete')}</li>
</ol>
<p id="error" class="error" role="alert"></p>

<section ${at('choose')} aria-labelledby="choose-heading">
  <h2 id="choose-heading" tabindex="-1">${T.chooseHeading}</h2>
  <p class="hint">${T.chooseHint}</p>
  <ul class="tokens">
    ${({ s, selected }) => s.tokens.map((k) => TOKEN.render({ k, selected }))}
  </ul>
</section>

<section ${at('pay')} aria-labelledby="pay-heading">
  <h2 ${at('pay-heading', html`tabindex="-1"`)}>${text('pay-heading')}</h2>
  <p ${at('partial')} class="partial">${text('partial')}</p>
  <p ${at('wrong-asset')} class="partial" role="note">${text('wrong-asset')}</p>
  <div class="pay-grid">
    <figure class="qr">
      <img ${at('qr')} width="232" height="232">
      <figcaption>${T.qrHint}</figcaption>
    </figure>
    <dl class="fields">
      <div class="field">
        <dt>${T.sendLabel}</dt>
        <dd><span ${at('pay-amount')} class="mono strong">${text('pay-amount')}</span>
          <button type="button" ${at('pay-amount-copy')} class="copy" data-copied="${T.copiedAmount}" aria-label="${T.copyAmount}">${T.copy}</button></dd>
      </div>
      <div class="field">
        <dt>${T.addressLabel}</dt>
        <dd><span ${at('pay-address')} class="mono address">${text('pay-address')}</span>
          <button type="button" ${at('pay-address-copy')} class="copy" data-copied="${T.copiedAddress}" aria-label="${T.copyAddress}">${T.copy}</button></dd>
      </div>
      <div class="field">
        <dt>${T.networkLabel}</dt>
        <dd ${at('pay-network')}>${text('pay-network')}</dd>
      </div>
      <div ${at('pay-contract')} class="field">
        <dt>${T.tokenContractLabel}</dt>
        <dd ${at('pay-contract-value')} class="mono address">${text('pay-contract-value')}</dd>
      </div>
    </dl>
  </div>
  <p ${at('pay-warning')} class="hint">${text('pay-warning')}</p>
  <div ${at('wallet-actions')} class="actions">
    <a ${at('open-wallet')} class="button">${T.openWallet}</a>
    <button type="button" ${at('sign-wallet')} class="button primary">${T.signWallet}</button>
    <button type="button" ${at('browser-wallet')} class="button">${T.browserWallet}</button>
    <button type="button" ${at('test-wallet')} class="button test">${T.testWallet}</button>
  </div>
  <p ${at('sign-hint')} class="hint">${T.signHint}</p>
  <p id="wallet-message" class="wallet-message" role="status" aria-live="polite"></p>
  <div class="actions">
    <button type="button" ${at('confirm')} class="button">${T.confirmSent}</button>
    <button type="button" ${at('change-token')} class="button quiet">${T.changeToken}</button>
  </div>
</section>

<p ${at('chain-tx')} class="chain-tx">${T.transactionHashLabel}: <span ${at('chain-tx-value')} class="mono address">${text('chain-tx-value')}</span></p>

<section ${at('receipt')} aria-labelledby="receipt-heading">
  <h2 id="receipt-heading">${T.receiptHeading}</h2>
  <dl class="fields">
    <div class="field"><dt>${T.receiptAmount}</dt><dd ${at('receipt-amount')}>${text('receipt-amount')}</dd></div>
    <div class="field"><dt>${T.receiptPaid}</dt><dd ${at('receipt-paid')} class="mono">${text('receipt-paid')}</dd></div>
    <div class="field"><dt>${T.receiptCompletedAt}</dt><dd ${at('receipt-completed')}>${text('receipt-completed')}</dd></div>
  </dl>
</section>

<div class="actions">
  <a ${at('return', html`rel="noreferrer"`)} class="button primary">${text('return')}</a>
  <button type="button" ${at('stay')} class="button quiet">${T.stayHere}</button>
</div>

<div ${at('cancel-area')} class="cancel-area">
  <button type="button" id="cancel" class="button quiet danger">${T.cancel}</button>
  <div id="cancel-ask" class="cancel-ask" role="group" aria-labelledby="cancel-ask-text" hidden>
    <p id="cancel-ask-text">${T.cancelAsk}</p>
    <button type="button" id="cancel-yes" class="button danger">${T.cancelYes}</button>
    <button type="button" id="cancel-no" class="button">${T.cancelNo}</button>
  </div>
</div>

<footer class="reference">${T.transactionLabel}: <span class="mono">${({ s }) => s.transaction_number}</span></footer>
</main>
<p id="announce" class="visually-hidden" aria-live="polite"></p>
<script type="application/json" id="pay-state">${({ s }) => jsonForScript(s)}</script>
</body>
</html>
`,
)

/** The page for `state`, counting down from its `server_time`. */
export function renderPayPage(state: PayState, asset: AssetUrl): string {
  const v = payView(state, t, Date.parse(state.server_time))
  // Shown by the browser script only when the browser has a wallet.
  v['browser-wallet'] = { hidden: true }
  v['sign-wallet'] = { hidden: true }
  v['sign-hint'] = { hidden: true }
  const selected = state.quote
    ? tokenKey(state.quote.token_symbol, state.quote.blockchain_network)
    : null
  return pageTemplate(asset).render({ s: state, v, selected }).value
}

const messageTemplate = perAsset(
  (asset) => template<{ title: string; body: string }>`<!doctype html>
<html lang="en">
${head<{ title: string }>(({ title }) => title, asset, false)}
<body>
<main class="card">
  <h1>${({ title }) => title}</h1>
  <p>${({ body }) => body}</p>
</main>
</body>
</html>
`,
)

/** A page that only says something: an unknown payment, too many requests. */
export function renderMessagePage(asset: AssetUrl, title: string, body: string): string {
  return messageTemplate(asset).render({ title, body }).value
}
