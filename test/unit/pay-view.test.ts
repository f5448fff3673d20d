import { describe, expect, test } from 'bun:test'
import { html, jsonForScript, template } from '../../src/lib/html.ts'
import type { PayState } from '../../src/modules/pay/model.ts'
import { renderPayPage } from '../../src/modules/pay/page.ts'
import { PAY_TEXT, fill } from '../../src/modules/pay/text.ts'
import { displayUnits, formatUnits, payView, remaining } from '../../src/modules/pay/view.ts'

const NOW = Date.parse('2026-11-22T10:00:00.000Z')
const ADDRESS = '0x5FbDB2315678afecb367f032d93F642f64180aa3'

function state(over: Partial<PayState> = {}): PayState {
  return {
    id: '0190f2a4-7f3c-7cc1-9b7e-0a1b2c3d4e5f',
    transaction_number: 'TX-1001',
    status: 'created',
    project_name: 'Acme',
    testing_mode: true,
    amount_usd: 12.5,
    currency: 'USD',
    amount_in_currency: 12.5,
    any_amount: false,
    order_description: 'Two coffees',
    expires_at: new Date(NOW + 3_600_000).toISOString(),
    server_time: new Date(NOW).toISOString(),
    completed_at: null,
    tokens: [{ token_symbol: 'TUSD', blockchain_network: 'devnet', decimals: 6, native: false }],
    quote: null,
    amount_received: null,
    amount_due: null,
    transaction_hash: null,
    block_number: null,
    confirmations: null,
    failure_reason: null,
    wrong_asset_received: false,
    success_url: null,
    cancel_url: null,
    test_wallet: false,
    authorization: null,
    version: 1,
    ...over,
  }
}

const quote = {
  token_symbol: 'TUSD',
  blockchain_network: 'devnet',
  chain_id: 31337,
  decimals: 6,
  token_address: '0x00000000000000000000000000000000000000aa',
  token_amount: '12500000',
  deposit_address: ADDRESS,
  payment_uri: `ethereum:0x00000000000000000000000000000000000000aa@31337/transfer?address=${ADDRESS}&uint256=12500000`,
  required_confirmations: 2,
  finality: 'confirmations' as const,
}
const prepared = (over: Partial<PayState> = {}) =>
  state({ status: 'prepared', quote, amount_received: '0', amount_due: '12500000', ...over })
const shown = (v: ReturnType<typeof payView>) =>
  Object.entries(v)
    .filter(([, p]) => p.hidden === false)
    .map(([id]) => id)

describe('formatUnits() and displayUnits()', () => {
  test('are exact: no rounding, no float, trailing zeros dropped', () => {
    expect(formatUnits('12500000', 6)).toBe('12.5')
    expect(formatUnits('1', 18)).toBe('0.000000000000000001')
    expect(formatUnits('4166666666666667', 18)).toBe('0.004166666666666667')
    expect(formatUnits('1000000', 6)).toBe('1')
    expect(formatUnits('0', 6)).toBe('0')
    expect(displayUnits('1234567891234', 6)).toBe('1,234,567.891234')
    expect(displayUnits('999000000', 6)).toBe('999')
  })
})

describe('remaining()', () => {
  test('counts down minutes and seconds, hours when long, null once past', () => {
    expect(remaining(new Date(NOW + 3_599_000).toISOString(), NOW)).toBe('59:59')
    expect(remaining(new Date(NOW + 61_000).toISOString(), NOW)).toBe('1:01')
    expect(remaining(new Date(NOW + 3 * 3_600_000 + 62_000).toISOString(), NOW)).toBe('3:01:02')
    expect(remaining(new Date(NOW).toISOString(), NOW)).toBeNull()
  })
})

describe('payView()', () => {
  test('created: the token choice and cancel, no payment details', () => {
    const v = payView(state(), PAY_TEXT, NOW)
    expect(shown(v)).toEqual(['countdown', 'choose', 'cancel-area'])
    expect(v.countdown.text).toBe('Expires in 1:00:00')
    expect(v['status-title'].text).toBe(PAY_TEXT.statusCreated)
  })

  test('created with nothing offered says so and offers no choice', () => {
    const v = payView(state({ tokens: [] }), PAY_TEXT, NOW)
    expect(v.choose.hidden).toBe(true)
    expect(v['status-title'].text).toBe(PAY_TEXT.noTokens)
  })

  test('prepared: exact amount with its copy value, address, QR, wallet link, confirm and change token', () => {
    const v = payView(prepared({ test_wallet: true }), PAY_TEXT, NOW)
    expect(v['pay-amount'].text).toBe('12.5 TUSD')
    expect(v['pay-amount-copy'].attrs).toEqual({ 'data-copy': '12.5' })
    expect(v['pay-address'].text).toBe(ADDRESS)
    expect(v['open-wallet'].attrs!.href).toBe(quote.payment_uri)
    expect(v.qr.attrs!.src).toBe(`/pay/${state().id}/qr.svg?v=1`)
    expect(shown(v)).toEqual(
      expect.arrayContaining([
        'pay',
        'confirm',
        'change-token',
        'test-wallet',
        'cancel-area',
        'countdown',
      ]),
    )
    expect(v.choose.hidden).toBe(true)
    expect(v.partial.hidden).toBe(true)
  })

  test('the test wallet is offered only when the state says the devnet wallet can pay', () => {
    expect(payView(prepared(), PAY_TEXT, NOW)['test-wallet'].hidden).toBe(true)
  })

  test('a partial payment shows what arrived and asks for exactly the rest', () => {
    const v = payView(
      prepared({ status: 'pending', amount_received: '5000000', amount_due: '7500000' }),
      PAY_TEXT,
      NOW,
    )
    expect(v['status-title'].text).toBe(PAY_TEXT.statusPartial)
    expect(v.partial).toEqual({
      hidden: false,
      text: 'Received 5 TUSD of 12.5 TUSD. Still due: 7.5 TUSD.',
    })
    expect(v['pay-heading'].text).toBe(PAY_TEXT.payHeadingRest)
    expect(v['pay-amount'].text).toBe('7.5 TUSD')
    expect(v['pay-amount-copy'].attrs).toEqual({ 'data-copy': '7.5' })
    expect(v.confirm.hidden).toBe(true)
  })

  test('confirming: n of m in words and on the progress bar; nothing left to pay or cancel', () => {
    const v = payView(
      prepared({
        status: 'confirming',
        confirmations: 1,
        transaction_hash: '0xabc',
        block_number: 42,
        amount_due: '0',
      }),
      PAY_TEXT,
      NOW,
    )
    expect(v.steps.hidden).toBe(false)
    expect([
      v['step-detected'],
      v['step-block'],
      v['step-confirmations'],
      v['step-complete'],
    ]).toEqual([
      { text: 'Payment detected', attrs: { 'data-step': 'done' } },
      { text: 'Included in block 42', attrs: { 'data-step': 'done' } },
      { text: 'Confirmations: 1 of 2', attrs: { 'data-step': 'current' } },
      { text: 'Complete', attrs: { 'data-step': 'todo' } },
    ])
    expect(v['status-title'].text).toBe('Payment confirming: 1 of 2 confirmations.')
    expect(v.progress).toEqual({
      hidden: false,
      attrs: {
        value: '1',
        max: '2',
        'aria-valuetext': 'Payment confirming: 1 of 2 confirmations.',
      },
    })
    expect(v.pay.hidden).toBe(true)
    expect(v['cancel-area'].hidden).toBe(true)
    expect(v.countdown.hidden).toBe(true)
    expect(v['chain-tx-value'].text).toBe('0xabc')
  })

  test('confirming on a network that waits for finality: the words say so, no bar to fill', () => {
    const v = payView(
      prepared({
        status: 'confirming',
        confirmations: 5,
        transaction_hash: '0xabc',
        block_number: 42,
        amount_due: '0',
        quote: { ...quote, finality: 'finalized' },
      }),
      PAY_TEXT,
      NOW,
    )
    expect(v['step-confirmations']).toEqual({
      text: 'Finalized by the network (5 confirmations so far)',
      attrs: { 'data-step': 'current' },
    })
    expect(v['status-title'].text).toBe(
      'Payment confirming: waiting for the network to finalize its block (5 confirmations so far).',
    )
    expect(v.progress?.hidden ?? true).toBe(true)
  })

  test('completed with a success_url returns there; without one it shows a receipt', () => {
    const done = {
      status: 'completed',
      confirmations: 2,
      amount_received: '12500000',
      amount_due: '0',
      completed_at: new Date(NOW).toISOString(),
    }
    const back = payView(
      prepared({ ...done, success_url: 'https://shop.example/thanks' }),
      PAY_TEXT,
      NOW,
    )
    expect(back.receipt.hidden).toBe(true)
    expect(back.return).toEqual({
      hidden: false,
      text: PAY_TEXT.returnNow,
      attrs: { href: 'https://shop.example/thanks' },
    })
    expect(back['status-detail'].text).toBe('Taking you back to Acme…')
    expect(back.stay.hidden).toBe(false)
    const receipt = payView(prepared(done), PAY_TEXT, NOW)
    expect(receipt.receipt.hidden).toBe(false)
    expect(receipt['receipt-paid'].text).toBe('12.5 TUSD · devnet')
    expect(receipt['receipt-amount'].text).toBe('$12.50')
    expect(receipt.return.hidden).toBe(true)
    expect(receipt.stay.hidden).toBe(true)
  })

  test('docs/decisions/0012-transaction-lifecycle.md: another token received while the payment is awaited is named, and the customer told what still counts', () => {
    for (const status of ['prepared', 'pending']) {
      const v = payView(prepared({ status, wrong_asset_received: true }), PAY_TEXT, NOW)
      expect(v['wrong-asset']).toEqual({
        hidden: false,
        text: fill(PAY_TEXT.wrongAsset, { token: 'TUSD', network: 'devnet', project: 'Acme' }),
      })
      expect(v['pay-amount'].hidden).not.toBe(true)
    }
    expect(payView(prepared({ status: 'prepared' }), PAY_TEXT, NOW)['wrong-asset'].hidden).toBe(
      true,
    )
    // Once the payment is in, or the request is over, the note goes.
    for (const status of ['processing', 'completed', 'failed'])
      expect(
        payView(prepared({ status, wrong_asset_received: true }), PAY_TEXT, NOW)['wrong-asset']
          .hidden,
      ).toBe(true)
  })

  test('failed names its reason; expired and cancelled link back to cancel_url', () => {
    for (const [reason, text] of [
      ['underpaid', PAY_TEXT.failedUnderpaid],
      ['wrong_asset', PAY_TEXT.failedWrongAsset],
      ['reverted', PAY_TEXT.failedReverted],
      [null, PAY_TEXT.failedOther],
    ] as const) {
      const v = payView(prepared({ status: 'failed', failure_reason: reason }), PAY_TEXT, NOW)
      expect(v['status-title'].text).toBe(PAY_TEXT.statusFailed)
      expect(v['status-detail'].text).toBe(fill(text, { project: 'Acme' }))
    }
    for (const status of ['expired', 'cancelled']) {
      const v = payView(state({ status, cancel_url: 'https://shop.example/cart' }), PAY_TEXT, NOW)
      expect(shown(v)).toEqual(['status-detail', 'return'])
      expect(v.return.attrs!.href).toBe('https://shop.example/cart')
      expect(v.return.text).toBe('Return to Acme')
    }
  })
})

describe('payView() for any amount (a Commerce no_price charge)', () => {
  const anyQuote = {
    ...quote,
    token_amount: '1',
    payment_uri: `ethereum:0x00000000000000000000000000000000000000aa@31337/transfer?address=${ADDRESS}`,
  }
  const anyState = (over: Partial<PayState> = {}) =>
    state({
      any_amount: true,
      currency: 'EUR',
      amount_in_currency: 0,
      amount_usd: 0,
      ...over,
    })
  const anyPrepared = (over: Partial<PayState> = {}) =>
    anyState({
      status: 'prepared',
      quote: anyQuote,
      amount_received: '0',
      amount_due: null,
      test_wallet: true,
      ...over,
    })

  test('the headline says any amount in the currency, not a price of 0', () => {
    const v = payView(anyState(), PAY_TEXT, NOW)
    expect(v['receipt-amount'].text).toBe('Any amount (EUR)')
    expect(v['status-title'].text).toBe(PAY_TEXT.statusCreatedAny)
    expect(shown(v)).toEqual(['countdown', 'choose', 'cancel-area'])
    const page = renderPayPage(anyState(), (name) => `/assets/${name}`)
    expect(page).toContain('Any amount (EUR)')
    expect(page).not.toContain('€0.00')
    expect(page).toContain(
      '<p class="amount"><span class="visually-hidden">Amount due: </span>Any amount (EUR)</p>',
    )
  })

  test('prepared: send any amount of the token to the address; no amount, no amount copy, no browser-wallet pay', () => {
    const v = payView(anyPrepared(), PAY_TEXT, NOW)
    expect(v['pay-heading'].text).toBe('Send any amount of TUSD')
    expect(v['pay-amount'].text).toBe(fill(PAY_TEXT.sendAnyAmount, { token: 'TUSD' }))
    expect(v['pay-amount'].text).not.toContain('0.000001')
    expect(v['pay-amount-copy']).toEqual({ hidden: true, attrs: { 'data-copy': '' } })
    expect(v['status-detail'].text).toBe(PAY_TEXT.statusPreparedAnyDetail)
    // The address, the QR code and the amount-less payment URI stay.
    expect(v['pay-address'].text).toBe(ADDRESS)
    expect(v['pay-address-copy'].attrs).toEqual({ 'data-copy': ADDRESS })
    expect(v['open-wallet'].attrs!.href).toBe(anyQuote.payment_uri)
    expect(v.qr.attrs!.src).toBe(`/pay/${state().id}/qr.svg?v=1`)
    expect(v.qr.attrs!.alt).toBe(
      `QR code of the payment request: any amount of TUSD to ${ADDRESS} on devnet`,
    )
    // One click pays an amount the page would have to make up: not offered.
    expect(v['browser-wallet'].hidden).toBe(true)
    expect(v['sign-wallet'].hidden).toBe(true)
    expect(v['sign-hint'].hidden).toBe(true)
    expect(v.partial.hidden).toBe(true)
    expect(shown(v)).toEqual(
      expect.arrayContaining(['pay', 'wallet-actions', 'confirm', 'change-token', 'cancel-area']),
    )
    expect(v['receipt-amount'].text).toBe('Any amount (EUR)')
  })

  test('the rendered page has no amount to send or copy', () => {
    const page = renderPayPage(anyPrepared(), (name) => `/assets/${name}`)
    expect(page).toContain(
      'id="pay-amount" class="mono strong">Any amount of TUSD: you choose how much</span>',
    )
    expect(page).toMatch(/<button type="button" id="pay-amount-copy" hidden class="copy"/)
    expect(page).not.toContain('0.000001')
    expect(page).toMatch(/<button type="button" id="browser-wallet" hidden/)
    expect(page).toContain(`href="${anyQuote.payment_uri}"`)
  })

  test('something arriving while awaited is not a partial payment', () => {
    const v = payView(anyPrepared({ status: 'pending', amount_received: '5000000' }), PAY_TEXT, NOW)
    expect(v.partial.hidden).toBe(true)
    expect(v['status-title'].text).toBe(PAY_TEXT.statusPending)
    expect(v['pay-heading'].text).toBe('Send any amount of TUSD')
  })

  test('confirming and completed work as before and show what was received', () => {
    const confirming = payView(
      anyPrepared({
        status: 'confirming',
        confirmations: 1,
        amount_received: '5000000',
        transaction_hash: '0xabc',
        block_number: 42,
      }),
      PAY_TEXT,
      NOW,
    )
    expect(confirming['status-title'].text).toBe('Payment confirming: 1 of 2 confirmations.')
    expect(confirming.pay.hidden).toBe(true)
    const done = payView(
      anyPrepared({
        status: 'completed',
        confirmations: 2,
        amount_received: '5000000',
        transaction_hash: '0xabc',
        completed_at: new Date(NOW).toISOString(),
      }),
      PAY_TEXT,
      NOW,
    )
    expect(done['status-title'].text).toBe(PAY_TEXT.statusCompleted)
    expect(done.receipt.hidden).toBe(false)
    expect(done['receipt-paid'].text).toBe('5 TUSD · devnet')
    expect(done['receipt-amount'].text).toBe('Any amount (EUR)')
    expect(done['chain-tx-value'].text).toBe('0xabc')
  })

  test('a priced transaction is unchanged: its amount, copy value and wallet pay button', () => {
    const v = payView(prepared(), PAY_TEXT, NOW)
    expect(v['receipt-amount'].text).toBe('$12.50')
    expect(v['pay-heading'].text).toBe(PAY_TEXT.payHeading)
    expect(v['pay-amount'].text).toBe('12.5 TUSD')
    expect(v['pay-amount-copy']).toEqual({ attrs: { 'data-copy': '12.5' } })
    expect(v['browser-wallet'].hidden).toBe(false)
    expect(v['status-detail'].text).toBe(PAY_TEXT.statusPreparedDetail)
    expect(v.qr.attrs!.alt).toBe(
      `QR code of the payment request: 12.5 TUSD to ${ADDRESS} on devnet`,
    )
    expect(payView(state(), PAY_TEXT, NOW)['status-title'].text).toBe(PAY_TEXT.statusCreated)
  })
})

describe('HTML rendering', () => {
  test('html`` escapes every interpolated string; jsonForScript cannot close its script element', () => {
    const evil = `</script><img src=x onerror=alert(1)>"'&`
    expect(html`<p title="${evil}">${evil}</p>`.value).toBe(
      '<p title="&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;">&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;</p>',
    )
    const json = jsonForScript({ s: evil, u: '\u2028' }).value
    expect(json).not.toContain('<')
    expect(json).not.toContain('\u2028')
    expect(JSON.parse(json)).toEqual({ s: evil, u: '\u2028' })
  })

  test('a compiled template escapes its constants once and every slot value at each render; nested templates keep their slots', () => {
    const evil = `</script><img src=x onerror=alert(1)>"'&`
    const escaped = '&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;'
    const inner = template<{ name: string }>`<b>${({ name }) => name}</b>`
    const page = template<{
      name: string
      n: number
      raw: boolean
    }>`<p title="${evil}">${inner} ${({ n }) => n} ${({ raw }) => (raw ? html`<i>x</i>` : null)}</p>`
    expect(page.render({ name: evil, n: 3, raw: true }).value).toBe(
      `<p title="${escaped}"><b>${escaped}</b> 3 <i>x</i></p>`,
    )
    // The same template again, other values: nothing of the first render stays.
    expect(page.render({ name: 'Acme', n: 0, raw: false }).value).toBe(
      `<p title="${escaped}"><b>Acme</b> 0 </p>`,
    )
  })

  test('the page renders merchant text as text, in the markup and in the embedded state', () => {
    const s = prepared({
      project_name: 'Shop <b>bold</b>',
      order_description: '<script>alert("x")</script>',
    })
    const page = renderPayPage(s, (name) => `/assets/${name}`)
    expect(page).not.toContain('<script>alert')
    expect(page).not.toContain('<b>bold')
    expect(page).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;')
    // Only our own two script elements: the module and the inert JSON state.
    expect(page.match(/<script\b/g)).toHaveLength(2)
    const embedded = /<script type="application\/json" id="pay-state">(.*)<\/script>/.exec(
      page,
    )![1]!
    expect(JSON.parse(embedded).order_description).toBe('<script>alert("x")</script>')
  })

  test('the first view is in the HTML: amount, address and which sections are hidden', () => {
    const page = renderPayPage(prepared(), (name) => `/assets/${name}`)
    expect(page).toContain('id="pay-amount" class="mono strong">12.5 TUSD</span>')
    expect(page).toContain(`data-copy="${ADDRESS}"`)
    expect(page).toMatch(/<section id="choose" hidden/)
    expect(page).toMatch(/<section id="pay" aria-labelledby/)
    expect(page).toContain('<h2 id="pay-heading" tabindex="-1">')
    expect(page).toMatch(/<a id="return" hidden href="#" rel="noreferrer"/)
    expect(page).toContain('<div class="test-banner" role="note">')
    expect(
      renderPayPage(prepared({ testing_mode: false }), (name) => `/assets/${name}`),
    ).not.toContain('test-banner')
  })
})
