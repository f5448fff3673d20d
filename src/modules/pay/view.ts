/**
 * What the pay page shows for a state, as data: for each element id, its text, whether it is
 * hidden and its attributes. The server renders the first view into HTML and the browser applies
 * every later one to the DOM, so both draw from this one function. Pure: no DOM, no I/O.
 */
import type { PayState } from './model.ts'
import { fill, type PayText } from './text.ts'

export interface Part {
  text?: string
  hidden?: boolean
  attrs?: Record<string, string>
}

/** Every element the view drives, by id. */
export const PART_IDS = [
  'countdown',
  'status',
  'status-title',
  'status-detail',
  'progress',
  'steps',
  'step-detected',
  'step-block',
  'step-confirmations',
  'step-complete',
  'choose',
  'pay',
  'pay-heading',
  'partial',
  'wrong-asset',
  'pay-amount',
  'pay-amount-copy',
  'pay-address',
  'pay-address-copy',
  'pay-network',
  'pay-contract',
  'pay-contract-value',
  'pay-warning',
  'qr',
  'open-wallet',
  'wallet-actions',
  'sign-wallet',
  'sign-hint',
  'browser-wallet',
  'test-wallet',
  'confirm',
  'change-token',
  'cancel-area',
  'chain-tx',
  'chain-tx-value',
  'receipt',
  'receipt-paid',
  'receipt-amount',
  'receipt-completed',
  'return',
  'stay',
] as const
export type PartId = (typeof PART_IDS)[number]
export type View = Record<PartId, Part>

/** How long the completed page shows before returning to `success_url`. */
export const SUCCESS_REDIRECT_MS = 3000

/**
 * Statuses after which nothing changes (the machine's final states; xstate stays out of the browser
 * bundle).
 */
export const FINAL: readonly string[] = ['completed', 'failed', 'expired', 'cancelled']
const AWAITING = ['prepared', 'pending']

/** An exact decimal string of `units` smallest units (no rounding, no trailing zeros). */
export function formatUnits(units: string, decimals: number): string {
  const neg = units.startsWith('-')
  const digits = (neg ? units.slice(1) : units).padStart(decimals + 1, '0')
  const whole = digits.slice(0, digits.length - decimals)
  const frac = digits.slice(digits.length - decimals).replace(/0+$/, '')
  return `${neg ? '-' : ''}${whole}${frac ? `.${frac}` : ''}`
}

/** `formatUnits` with thousands separators in the whole part, for reading. */
export function displayUnits(units: string, decimals: number): string {
  const [whole, frac] = formatUnits(units, decimals).split('.')
  const grouped = whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ',')
  return frac ? `${grouped}.${frac}` : grouped
}

const moneyFormats = new Map<string, Intl.NumberFormat>()
/** "$12.50", "€12.50", "¥1,500": the currency's symbol and places, written as the page reads (English). Formatters are cached: building one costs more than rendering the whole page. */
export function formatMoney(amount: number, currency: string): string {
  let f = moneyFormats.get(currency)
  if (!f)
    moneyFormats.set(
      currency,
      (f = new Intl.NumberFormat('en-US', { style: 'currency', currency })),
    )
  return f.format(amount)
}

/** "59:07" or "1:02:03" until `expiresAt`, measured on the server's clock; null once past. */
export function remaining(expiresAt: string, serverNow: number): string | null {
  const left = Math.floor((Date.parse(expiresAt) - serverNow) / 1000)
  if (left <= 0) return null
  const h = Math.floor(left / 3600)
  const m = Math.floor((left % 3600) / 60)
  const s = String(left % 60).padStart(2, '0')
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`
}

export function countdownPart(s: PayState, t: PayText, serverNow: number): Part {
  if (!['created', ...AWAITING].includes(s.status)) return { hidden: true, text: '' }
  const left = remaining(s.expires_at, serverNow)
  if (left === null) return { hidden: false, text: t.expiredAlready }
  const soon = Date.parse(s.expires_at) - serverNow < 5 * 60_000
  return { hidden: false, text: fill(soon ? t.expiresSoon : t.expiresIn, { time: left }) }
}

/** The key of a token choice, as the page's token buttons carry it. */
export const tokenKey = (symbol: string, network: string) => `${symbol}@${network}`

/** The whole view of `s`; `serverNow` is the server's clock (see `PayState.server_time`). */
export function payView(s: PayState, t: PayText, serverNow: number): View {
  const q = s.quote
  const project = s.project_name
  // Any amount pays it (a Commerce `no_price` charge): no price, nothing due, no part to complete;
  // the customer chooses what to send.
  const any = s.any_amount
  const received = BigInt(s.amount_received ?? '0')
  const partial = !any && q !== null && received > 0n && AWAITING.includes(s.status)
  const wrongAsset = q !== null && s.wrong_asset_received && AWAITING.includes(s.status)
  const due = q && !any ? (s.amount_due ?? q.token_amount) : null
  const paid = s.amount_received ?? (any ? null : (q?.token_amount ?? null))
  const amountOf = (units: string) =>
    q ? `${displayUnits(units, q.decimals)} ${q.token_symbol}` : ''
  const awaiting = AWAITING.includes(s.status) && q !== null
  const returnTo =
    s.status === 'completed' ? s.success_url : FINAL.includes(s.status) ? s.cancel_url : null

  const [title, detail] = statusText(s, t, partial)
  const v: View = {
    countdown: countdownPart(s, t, serverNow),
    status: { attrs: { 'data-status': s.status } },
    'status-title': { text: title },
    'status-detail': { text: detail, hidden: detail === '' },
    progress: { hidden: true, attrs: { value: '0', max: '1' } },
    ...stepParts(s, t),
    choose: {
      hidden: !(
        s.tokens.length > 0 &&
        (s.status === 'created' || (s.status === 'prepared' && q === null))
      ),
    },
    pay: { hidden: !awaiting },
    'pay-heading': {
      text: partial
        ? t.payHeadingRest
        : any && q
          ? fill(t.payHeadingAny, { token: q.token_symbol })
          : t.payHeading,
    },
    partial: {
      hidden: !partial,
      text:
        partial && q
          ? fill(t.partial, {
              received: amountOf(received.toString()),
              total: amountOf(q.token_amount),
              due: amountOf(due!),
            })
          : '',
    },
    'wrong-asset': {
      hidden: !wrongAsset,
      text:
        wrongAsset && q
          ? fill(t.wrongAsset, { token: q.token_symbol, network: q.blockchain_network, project })
          : '',
    },
    'pay-amount': {
      text: due ? amountOf(due) : any && q ? fill(t.sendAnyAmount, { token: q.token_symbol }) : '',
    },
    // No amount to copy when the customer chooses it.
    'pay-amount-copy': any
      ? { hidden: true, attrs: { 'data-copy': '' } }
      : { attrs: { 'data-copy': q && due ? formatUnits(due, q.decimals) : '' } },
    'pay-address': { text: q?.deposit_address ?? '' },
    'pay-address-copy': { attrs: { 'data-copy': q?.deposit_address ?? '' } },
    'pay-network': {
      text: q ? fill(t.networkValue, { network: q.blockchain_network, chainId: q.chain_id }) : '',
    },
    'pay-contract': { hidden: !q },
    'pay-contract-value': {
      text: q ? (q.token_address ?? fill(t.nativeToken, { token: q.token_symbol })) : '',
    },
    'pay-warning': { text: q ? fill(t.warnExact, { network: q.blockchain_network }) : '' },
    qr: {
      attrs: {
        src: q ? `/pay/${encodeURIComponent(s.id)}/qr.svg?v=${s.version}` : '',
        alt:
          q && due
            ? fill(t.qrAlt, {
                amount: amountOf(due),
                address: q.deposit_address,
                network: q.blockchain_network,
              })
            : q && any
              ? fill(t.qrAltAny, {
                  token: q.token_symbol,
                  address: q.deposit_address,
                  network: q.blockchain_network,
                })
              : '',
      },
    },
    'open-wallet': { attrs: { href: q?.payment_uri ?? '#' } },
    'wallet-actions': { hidden: !awaiting },
    // The browser script shows it only when the browser has a wallet (EIP-1193 provider). It sends
    // what is due: not offered for any amount, where the customer chooses it (address and QR stay).
    'browser-wallet': { hidden: !(awaiting && !any) },
    // Paying by one signature, gas paid by the service: for tokens that take EIP-3009, when the
    // service runs a relayer (the browser script also needs a wallet to show it).
    'sign-wallet': { hidden: !(awaiting && s.authorization) },
    'sign-hint': { hidden: !(awaiting && s.authorization) },
    'test-wallet': { hidden: !(awaiting && s.test_wallet) },
    confirm: { hidden: s.status !== 'prepared' || q === null },
    'change-token': { hidden: !(s.status === 'prepared' && q !== null) },
    'cancel-area': { hidden: !(s.status === 'created' || AWAITING.includes(s.status)) },
    'chain-tx': { hidden: s.transaction_hash === null || AWAITING.includes(s.status) },
    'chain-tx-value': { text: s.transaction_hash ?? '' },
    receipt: { hidden: s.status !== 'completed' || s.success_url !== null },
    'receipt-paid': {
      text: q && paid ? `${amountOf(paid)} · ${q.blockchain_network}` : '',
    },
    // Also the page's headline: no price for any amount.
    'receipt-amount': {
      text: any
        ? fill(t.anyAmount, { currency: s.currency })
        : formatMoney(s.amount_in_currency, s.currency),
    },
    'receipt-completed': {
      text: s.completed_at
        ? new Date(s.completed_at).toLocaleString('en-US', {
            dateStyle: 'medium',
            timeStyle: 'short',
          })
        : '',
    },
    // The automatic return can be stopped (WCAG 2.2.1, timing adjustable).
    stay: { hidden: !(s.status === 'completed' && s.success_url !== null) },
    return: {
      hidden: returnTo === null,
      text: s.status === 'completed' ? t.returnNow : fill(t.returnToMerchant, { project }),
      attrs: { href: returnTo ?? '#' },
    },
  }
  // Waiting for finality has no count to fill a bar with: the status line says it.
  if (s.status === 'confirming' && q && q.finality === 'confirmations') {
    const n = Math.min(s.confirmations ?? 0, q.required_confirmations)
    v.progress = {
      hidden: false,
      attrs: {
        value: String(n),
        max: String(q.required_confirmations),
        'aria-valuetext': fill(t.statusConfirming, { n, m: q.required_confirmations }),
      },
    }
  }
  return v
}

/** Once money moves, the steps show everything passed so far, however fast it went by. */
function stepParts(
  s: PayState,
  t: PayText,
): Pick<View, 'steps' | 'step-detected' | 'step-block' | 'step-confirmations' | 'step-complete'> {
  const reached = ['processing', 'confirming', 'completed'].indexOf(s.status)
  const step = (done: boolean, current: boolean, text: string): Part => ({
    text,
    attrs: { 'data-step': done ? 'done' : current ? 'current' : 'todo' },
  })
  const required = s.quote?.required_confirmations ?? 0
  const inBlock = s.block_number !== null && reached >= 1
  const confirmations = Math.min(s.confirmations ?? (reached === 2 ? required : 0), required)
  return {
    steps: { hidden: reached < 0 },
    'step-detected': step(reached >= 0, false, t.stepDetected),
    'step-block': step(
      inBlock,
      reached === 0,
      inBlock ? fill(t.stepBlockDone, { block: s.block_number! }) : t.stepBlock,
    ),
    'step-confirmations': step(
      reached === 2,
      reached === 1,
      s.quote && s.quote.finality !== 'confirmations'
        ? fill(t.stepFinality, { n: s.confirmations ?? 0 })
        : fill(t.stepConfirmations, { n: confirmations, m: required }),
    ),
    'step-complete': step(reached === 2, false, t.stepComplete),
  }
}

function statusText(s: PayState, t: PayText, partial: boolean): [string, string] {
  const project = s.project_name
  switch (s.status) {
    case 'created':
      return [
        s.tokens.length ? (s.any_amount ? t.statusCreatedAny : t.statusCreated) : t.noTokens,
        '',
      ]
    case 'prepared':
      return partial
        ? [t.statusPartial, t.statusPartialDetail]
        : [t.statusPrepared, s.any_amount ? t.statusPreparedAnyDetail : t.statusPreparedDetail]
    case 'pending':
      return partial
        ? [t.statusPartial, t.statusPartialDetail]
        : [t.statusPending, t.statusPendingDetail]
    case 'processing':
      return [t.statusProcessing, t.statusProcessingDetail]
    case 'confirming':
      return s.quote && s.quote.finality !== 'confirmations'
        ? [fill(t.statusFinalizing, { n: s.confirmations ?? 0 }), t.statusConfirmingDetail]
        : [
            fill(t.statusConfirming, {
              n: s.confirmations ?? 0,
              m: s.quote?.required_confirmations ?? '?',
            }),
            t.statusConfirmingDetail,
          ]
    case 'completed':
      return [
        t.statusCompleted,
        s.success_url ? fill(t.statusCompletedRedirect, { project }) : t.statusCompletedReceipt,
      ]
    case 'expired':
      return [t.statusExpired, t.statusExpiredDetail]
    case 'failed': {
      const reason =
        {
          underpaid: t.failedUnderpaid,
          wrong_asset: t.failedWrongAsset,
          reverted: t.failedReverted,
        }[s.failure_reason ?? ''] ?? t.failedOther
      return [t.statusFailed, fill(reason, { project })]
    }
    case 'cancelled':
      return [t.statusCancelled, t.statusCancelledDetail]
    default:
      return [s.status, '']
  }
}
