/**
 * The pay page's browser script (bundled to assets/pay-page.js by scripts/build-assets.ts). It
 * keeps the server-rendered page live: applies each new state through the same `payView` the server
 * rendered with, streams changes over SSE (polling while the stream is down), and wires the buttons
 * to the docs/decisions/0026-pay-page-endpoints.md endpoints. Text only ever enters the DOM as
 * textContent.
 */
import type { PayState } from '../model.ts'
import { PAY_TEXT as t, fill } from '../text.ts'
import {
  FINAL,
  PART_IDS,
  SUCCESS_REDIRECT_MS,
  countdownPart,
  payView,
  tokenKey,
  type Part,
} from '../view.ts'

type Provider = { request(args: { method: string; params?: unknown }): Promise<unknown> }
declare global {
  interface Window {
    ethereum?: Provider
  }
}

const POLL_MS = 3000

const byId = <T extends HTMLElement = HTMLElement>(id: string) =>
  document.getElementById(id) as T | null

let state: PayState = JSON.parse(byId('pay-state')!.textContent!)
/** server clock - device clock, so the countdown is right on a phone whose clock is off. */
let clockOffset = Date.parse(state.server_time) - Date.now()
const base = `/pay/${encodeURIComponent(state.id)}`
/** The customer pressed "Change token": show the choice again until they pick one. */
let changingToken = false
let redirectTimer: ReturnType<typeof setTimeout> | null = null
/** The customer chose to stay on the completed page instead of being taken back. */
let staying = false
/** A wallet send is in progress: the quote must not change under it. */
let sending = false
/**
 * What had arrived when a wallet on this page last sent the payment: until more arrives, the
 * pay buttons stay hidden, so a customer waiting for detection cannot pay twice.
 */
let sentWhenReceived: string | null = null

function applyPart(el: HTMLElement, p: Part): void {
  if (p.text !== undefined && el.textContent !== p.text) el.textContent = p.text
  if (p.hidden !== undefined) el.hidden = p.hidden
  for (const [name, value] of Object.entries(p.attrs ?? {})) {
    if (value === '') el.removeAttribute(name)
    else if (el.getAttribute(name) !== value) el.setAttribute(name, value)
  }
}

function render(): void {
  const v = payView(state, t, Date.now() + clockOffset)
  for (const id of PART_IDS) {
    const el = byId(id)
    if (el) applyPart(el, v[id])
  }
  if (!window.ethereum) {
    byId('browser-wallet')!.hidden = true
    byId('sign-wallet')!.hidden = true
    byId('sign-hint')!.hidden = true
  }
  if (sentWhenReceived !== null && (state.amount_received ?? '0') === sentWhenReceived) {
    byId('browser-wallet')!.hidden = true
    byId('sign-wallet')!.hidden = true
    byId('test-wallet')!.hidden = true
  }
  if (changingToken && state.status === 'prepared') {
    byId('choose')!.hidden = false
    byId('pay')!.hidden = true
  }
  const selected = state.quote
    ? tokenKey(state.quote.token_symbol, state.quote.blockchain_network)
    : null
  for (const b of document.querySelectorAll<HTMLButtonElement>('button.token')) {
    b.setAttribute(
      'aria-pressed',
      String(tokenKey(b.dataset.token!, b.dataset.network!) === selected),
    )
  }
  if (byId('cancel-area')!.hidden) showCancelQuestion(false)
  if (staying) byId('stay')!.hidden = true
  if (
    state.status === 'completed' &&
    state.success_url &&
    safeUrl(state.success_url) &&
    !redirectTimer &&
    !staying
  ) {
    const to = state.success_url
    redirectTimer = setTimeout(() => location.assign(to), SUCCESS_REDIRECT_MS)
  }
}

function tickCountdown(): void {
  const el = byId('countdown')
  if (el) applyPart(el, countdownPart(state, t, Date.now() + clockOffset))
}

/** Takes a state newer than (or as new as) the one shown. */
function setState(next: PayState): void {
  if (next.version < state.version) return
  state = next
  clockOffset = Date.parse(next.server_time) - Date.now()
  if (next.status !== 'prepared') changingToken = false
  render()
  if (FINAL.includes(next.status)) stopLive()
}

// ---- messages --------------------------------------------------------------------------

// Both regions stay in the page, empty when silent: screen readers announce changes only in
// live regions that were already there.
function showError(message: string | null): void {
  byId('error')!.textContent = message ?? ''
}

function walletMessage(message: string | null): void {
  byId('wallet-message')!.textContent = message ?? ''
}

function announce(message: string): void {
  const el = byId('announce')!
  el.textContent = ''
  // A fresh text node after a tick, so screen readers announce the same words twice in a row.
  setTimeout(() => (el.textContent = message), 50)
}

// ---- talking to the service ------------------------------------------------------------

/** POSTs to a pay endpoint; returns the JSON on 2xx, shows the service's message otherwise. */
async function post(path: string, body?: unknown): Promise<unknown | null> {
  showError(null)
  let res: Response
  try {
    res = await fetch(base + path, {
      method: 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  } catch {
    showError(t.networkError)
    return null
  }
  const json = await res.json().catch(() => null)
  if (!res.ok) {
    showError(fill(t.actionFailed, { message: json?.error?.message ?? `HTTP ${res.status}` }))
    return null
  }
  return json
}

/**
 * Runs `work` once at a time per button. aria-disabled rather than `disabled`: a disabled
 * button drops keyboard focus to the page, an aria-disabled one keeps it.
 */
async function withBusy<T>(button: HTMLButtonElement, work: () => Promise<T>): Promise<T | null> {
  if (button.getAttribute('aria-disabled') === 'true') return null
  button.setAttribute('aria-disabled', 'true')
  button.setAttribute('aria-busy', 'true')
  try {
    return await work()
  } finally {
    button.removeAttribute('aria-disabled')
    button.removeAttribute('aria-busy')
  }
}

async function refresh(): Promise<void> {
  try {
    const res = await fetch(`${base}/state`, { cache: 'no-store' })
    if (res.ok) setState(await res.json())
  } catch {
    // Offline for a moment: the next poll or the stream catches up.
  }
}

// ---- live updates: SSE, with polling while it is down ----------------------------------

let events: EventSource | null = null
let pollTimer: ReturnType<typeof setInterval> | null = null
let reconnectTimer: ReturnType<typeof setTimeout> | null = null
let reconnectDelay = 2000

function startPolling(): void {
  if (!pollTimer && !FINAL.includes(state.status)) pollTimer = setInterval(refresh, POLL_MS)
}
function stopPolling(): void {
  if (pollTimer) clearInterval(pollTimer)
  pollTimer = null
}

function connect(): void {
  if (FINAL.includes(state.status)) return
  if (typeof EventSource === 'undefined') {
    startPolling()
    return
  }
  events = new EventSource(`${base}/events`)
  events.addEventListener('state', (e) => setState(JSON.parse((e as MessageEvent).data)))
  events.onopen = () => {
    reconnectDelay = 2000
    stopPolling()
    // Whatever changed while the stream was down arrives as the stream's first state.
  }
  events.onerror = () => {
    if (FINAL.includes(state.status)) return stopLive()
    startPolling()
    // EventSource retries by itself unless the server refused the stream (closed state).
    if (events?.readyState === EventSource.CLOSED) {
      events = null
      reconnectTimer = setTimeout(connect, reconnectDelay)
      reconnectDelay = Math.min(reconnectDelay * 2, 30_000)
    }
  }
}

function stopLive(): void {
  events?.close()
  events = null
  stopPolling()
  if (reconnectTimer) clearTimeout(reconnectTimer)
}

// ---- actions ---------------------------------------------------------------------------

function safeUrl(url: string): boolean {
  try {
    return ['http:', 'https:'].includes(new URL(url).protocol)
  } catch {
    return false
  }
}

async function chooseToken(button: HTMLButtonElement): Promise<void> {
  if (sending) return
  const r = await withBusy(button, () =>
    post('/select', {
      token_symbol: button.dataset.token,
      blockchain_network: button.dataset.network,
    }),
  )
  if (!r) return
  changingToken = false
  sentWhenReceived = null
  walletMessage(null)
  setState(r as PayState)
  byId('pay-heading')?.focus()
}

function changeToken(): void {
  if (sending) return
  changingToken = true
  render()
  const pressed = document.querySelector<HTMLButtonElement>('button.token[aria-pressed="true"]')
  ;(pressed ?? document.querySelector<HTMLButtonElement>('button.token'))?.focus()
}

async function copy(button: HTMLButtonElement): Promise<void> {
  const value = button.dataset.copy ?? ''
  try {
    await navigator.clipboard.writeText(value)
  } catch {
    showError(t.copyFailed)
    return
  }
  button.textContent = t.copied
  announce(button.dataset.copied ?? t.copied)
  setTimeout(() => (button.textContent = t.copy), 2000)
}

async function confirmSent(button: HTMLButtonElement): Promise<void> {
  const r = await withBusy(button, () => post('/confirm'))
  if (!r) return
  setState(r as PayState)
  // The button is gone now; the status says what happens next.
  byId('status-title')?.focus()
}

function showCancelQuestion(show: boolean): void {
  byId('cancel-ask')!.hidden = !show
  byId('cancel')!.hidden = show
}

async function cancel(button: HTMLButtonElement): Promise<void> {
  const r = (await withBusy(button, () => post('/cancel'))) as PayState | null
  if (!r) return
  setState(r)
  if (r.cancel_url && safeUrl(r.cancel_url)) location.assign(r.cancel_url)
  else byId('status-title')?.focus()
}

async function payWithTestWallet(button: HTMLButtonElement): Promise<void> {
  walletMessage(t.testWalletBusy)
  sending = true
  try {
    const r = (await withBusy(button, () => post('/test-wallet'))) as {
      transaction_hash: string
    } | null
    walletMessage(r ? fill(t.testWalletSent, { hash: r.transaction_hash }) : null)
    if (r) paid()
  } finally {
    sending = false
  }
}

/** A wallet on this page sent the payment: no second one until the chain shows it. */
function paid(): void {
  sentWhenReceived = state.amount_received ?? '0'
  render()
  byId('wallet-message')?.setAttribute('tabindex', '-1')
  byId('wallet-message')?.focus()
}

async function payWithBrowserWallet(button: HTMLButtonElement): Promise<void> {
  const provider = window.ethereum
  const q = state.quote
  // Any amount: the customer chooses it, so there is no amount to send (the view hides the button).
  if (!provider || !q || sending || state.any_amount) return
  // The payment is fixed now: the quote and the amount due as shown when the button was pressed.
  const amount = BigInt(state.amount_due ?? q.token_amount)
  walletMessage(t.browserWalletBusy)
  sending = true
  await withBusy(button, async () => {
    // A separate bundle (viem), fetched only now; its URL carries its content hash.
    const walletScript: string = document.body.dataset.walletScript!
    const { sendWithBrowserWallet }: typeof import('./browser-wallet.ts') = await import(
      walletScript
    )
    const r = await sendWithBrowserWallet(provider, {
      chainId: q.chain_id,
      token: q.token_address,
      to: q.deposit_address,
      amount,
    })
    if (r.ok) {
      walletMessage(fill(t.browserWalletSent, { hash: r.hash }))
      paid()
      // docs/decisions/0012-transaction-lifecycle.md: a wallet transaction submitted from the page
      // counts as "I have sent the payment".
      if (state.status === 'prepared') {
        const c = await post('/confirm')
        if (c) setState(c as PayState)
        else showError(null) // the payment may already be detected; the stream tells
      }
    } else walletRefused(r, q.blockchain_network, q.chain_id)
  }).finally(() => (sending = false))
}

/** Why the wallet did not pay or sign, in the customer's words. */
function walletRefused(
  r: { reason: 'rejected' | 'unknown_chain' | 'error'; message: string },
  network: string,
  chainId: number,
): void {
  walletMessage(null)
  showError(
    r.reason === 'rejected'
      ? t.browserWalletRejected
      : r.reason === 'unknown_chain'
        ? fill(t.browserWalletWrongChain, { network, chainId })
        : fill(t.browserWalletFailed, { message: r.message }),
  )
}

/** The wallet signs an EIP-3009 authorization; the service's relayer submits it and pays gas. */
async function payBySignature(button: HTMLButtonElement): Promise<void> {
  const provider = window.ethereum
  const offer = state.authorization
  if (!provider || !offer || sending) return
  walletMessage(t.signWalletBusy)
  sending = true
  await withBusy(button, async () => {
    const walletScript: string = document.body.dataset.walletScript!
    const { signAuthorization }: typeof import('./browser-wallet.ts') = await import(walletScript)
    const r = await signAuthorization(provider, offer)
    if (!r.ok) return walletRefused(r, state.quote?.blockchain_network ?? '', offer.domain.chainId)
    const sent = (await post('/authorization', r.signed)) as { transaction_hash: string } | null
    if (!sent) {
      walletMessage(null)
      return
    }
    walletMessage(fill(t.signWalletSent, { hash: sent.transaction_hash }))
    paid()
    if (state.status === 'prepared') {
      const c = await post('/confirm')
      if (c) setState(c as PayState)
      else showError(null)
    }
  }).finally(() => (sending = false))
}

function wire(): void {
  for (const b of document.querySelectorAll<HTMLButtonElement>('button.token'))
    b.addEventListener('click', () => chooseToken(b))
  for (const b of document.querySelectorAll<HTMLButtonElement>('button.copy'))
    b.addEventListener('click', () => copy(b))
  const on = (id: string, fn: (b: HTMLButtonElement) => unknown) => {
    const el = byId<HTMLButtonElement>(id)
    el?.addEventListener('click', () => fn(el))
  }
  on('change-token', changeToken)
  on('confirm', confirmSent)
  on('test-wallet', payWithTestWallet)
  on('browser-wallet', payWithBrowserWallet)
  on('sign-wallet', payBySignature)
  on('cancel', () => {
    showCancelQuestion(true)
    byId('cancel-yes')?.focus()
  })
  on('cancel-no', () => {
    showCancelQuestion(false)
    byId('cancel')?.focus()
  })
  on('cancel-yes', cancel)
  on('stay', () => {
    staying = true
    if (redirectTimer) clearTimeout(redirectTimer)
    render()
    announce(t.stayingHere)
    byId('return')?.focus()
  })
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && !FINAL.includes(state.status)) refresh()
  })
}

wire()
render()
connect()
setInterval(tickCountdown, 1000)
