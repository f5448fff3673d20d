/**
 * The hosted pay page in headless Chromium against a real server on its own devnet (real
 * anvil, real transfers): what a customer sees and does, on a phone and on a desktop.
 */
import { afterAll, afterEach, beforeAll, beforeEach, expect, test } from 'bun:test'
import jsQR from 'jsqr'
import type { Page } from 'playwright-core'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { createDevnetClient, type DevnetClient } from '../../src/chain/devnet.ts'
import { manualClock } from '../../src/lib/clock.ts'
import type { PayState } from '../../src/modules/pay/model.ts'
import { fill, PAY_TEXT } from '../../src/modules/pay/text.ts'
import { describeWithBrowser, openBrowser, whenBrowser, type Browser } from '../helpers/browser.ts'
import { payNative, payToken, waitUntil } from '../helpers/chain.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

let t: TestServer
let browser: Browser
let key: string
let wallet: DevnetClient
let merchant: ReturnType<typeof Bun.serve>
const merchantUrl = (path: string) => `http://127.0.0.1:${merchant.port}${path}`

beforeAll(
  whenBrowser(async () => {
    t = await startTestServer('pglite', { NETWORKS_CONFIG: '' })
    key = (await t.project({ name: 'Acme Coffee' })).key
    wallet = createDevnetClient(t.server.devnet!.rpcUrl, t.server.devnet!.wallet.privateKey)
    // The merchant's shop, where success_url and cancel_url lead.
    merchant = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: (req) =>
        new Response(
          `<!doctype html><title>Shop</title><h1>Shop page ${new URL(req.url).pathname}</h1>`,
          { headers: { 'content-type': 'text/html' } },
        ),
    })
    browser = await openBrowser()
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.url })
  }),
)

// Each test judges only its own pages: failures start empty and every page is closed after.
beforeEach(
  whenBrowser(() => {
    browser.failures.length = 0
  }),
)
afterEach(
  whenBrowser(async () => {
    for (const p of browser.context.pages()) await p.close()
  }),
)

afterAll(
  whenBrowser(async () => {
    await browser?.close()
    merchant?.stop(true)
    await t?.stop()
  }),
)

async function createTx(body: Record<string, unknown> = {}): Promise<{ id: string; url: string }> {
  const r = await api(t, key).create({
    amount: 12.5,
    order_id: `o-${crypto.randomUUID()}`,
    order_description: 'Two flat whites',
    ...body,
  })
  const json = await r.json()
  if (r.status !== 200) throw new Error(JSON.stringify(json))
  return { id: json.transaction.id, url: json.transaction.payment_url }
}

const stateOf = async (server: TestServer, id: string): Promise<PayState> =>
  (await server.fetch(`/pay/${id}/state`)).json()

/** A raw JSON-RPC call to the devnet node (mining control, and the wallet stand-in below). */
const rpc = (method: string, params: unknown[] = []): Promise<unknown> =>
  wallet.request({ method, params } as never)

/**
 * A wallet extension stand-in on the page (window.ethereum, EIP-1193): each request goes to
 * `answer`, and what it leaves (undefined) goes to the devnet node, as a real wallet would.
 */
async function injectWallet(
  page: Page,
  answer: (method: string, params: unknown[]) => Promise<unknown> | unknown,
): Promise<void> {
  await page.exposeFunction('walletRpc', async (method: string, params: unknown[]) => {
    try {
      const own = await answer(method, params)
      return { result: own === undefined ? await rpc(method, params) : own }
    } catch (e) {
      return { error: { code: -32000, message: (e as Error).message } }
    }
  })
  await page.addInitScript(() => {
    const w = window as unknown as {
      walletRpc(
        m: string,
        p: unknown,
      ): Promise<{ result?: unknown; error?: { code: number; message: string } }>
      ethereum: unknown
    }
    w.ethereum = {
      async request({ method, params }: { method: string; params?: unknown[] }) {
        const r = await w.walletRpc(method, params ?? [])
        if (r.error) throw Object.assign(new Error(r.error.message), { code: r.error.code })
        return r.result
      },
      on() {},
      removeListener() {},
    }
  })
}

/** Records every text the status line shows, so stages that pass quickly are still seen. */
async function recordStatus(page: Page): Promise<() => Promise<string[]>> {
  await page.evaluate(() => {
    const el = document.getElementById('status-title')!
    const w = window as unknown as { seen: string[]; loadedOnce: boolean }
    w.seen = [el.textContent ?? '']
    w.loadedOnce = true
    new MutationObserver(() => w.seen.push(el.textContent ?? '')).observe(el, {
      childList: true,
      characterData: true,
      subtree: true,
    })
  })
  return () => page.evaluate(() => (window as unknown as { seen: string[] }).seen)
}

const statusTitle = (page: Page) => page.locator('#status-title')
const waitForStatus = (page: Page, text: string, timeout = 30_000) =>
  statusTitle(page).filter({ hasText: text }).waitFor({ timeout })

/** Reads the QR image's pixels in the page and decodes them with jsQR (an independent decoder). */
async function decodeQr(page: Page): Promise<string | null> {
  const size = 464
  const pixels = await page.evaluate(async (n) => {
    const img = document.getElementById('qr') as HTMLImageElement
    await img.decode()
    const canvas = document.createElement('canvas')
    canvas.width = canvas.height = n
    const g = canvas.getContext('2d')!
    g.fillStyle = '#fff'
    g.fillRect(0, 0, n, n)
    g.drawImage(img, 0, 0, n, n)
    return Array.from(g.getImageData(0, 0, n, n).data)
  }, size)
  return jsQR(new Uint8ClampedArray(pixels), size, size)?.data ?? null
}

/** A token button, found even while the choice is hidden. */
const tokenButton = (page: Page, symbol: string) =>
  page.locator(`button.token[data-token="${symbol}"][data-network="devnet"]`)

const clipboard = (page: Page) => page.evaluate(() => navigator.clipboard.readText())

describeWithBrowser('pay page in Chromium on the devnet', () => {
  test('the whole flow: choose TUSD, see amount, address and QR, confirm, pay with the test wallet, watch it confirm, land on success_url', async () => {
    const tx = await createTx({
      success_url: merchantUrl('/thanks?order=1'),
      cancel_url: merchantUrl('/cart'),
    })
    const page = await browser.newPage()
    await page.goto(tx.url)
    const seen = await recordStatus(page)

    // Header: project, order, amount, live countdown, test banner.
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Acme Coffee')
    expect(await page.locator('.description').textContent()).toContain('Two flat whites')
    expect(await page.locator('.amount').textContent()).toContain('$12.50')
    expect(await page.locator('.test-banner').textContent()).toBe(PAY_TEXT.testBanner)
    const countdown = await page.locator('#countdown').textContent()
    expect(countdown).toMatch(/^Expires in (59:\d\d|1:00:00)$/)
    await page.waitForFunction(
      (first) => document.getElementById('countdown')!.textContent !== first,
      countdown,
    )

    // Choose the stablecoin.
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay').waitFor({ state: 'visible' })
    const s = await stateOf(t, tx.id)
    expect(s.status).toBe('prepared')
    expect(await page.locator('#pay-amount').textContent()).toBe('12.5 TUSD')
    expect(await page.locator('#pay-address').textContent()).toBe(s.quote!.deposit_address)
    expect(await tokenButton(page, 'TUSD').getAttribute('aria-pressed')).toBe('true')
    expect(await page.getByRole('link', { name: PAY_TEXT.openWallet }).getAttribute('href')).toBe(
      s.quote!.payment_uri,
    )
    expect(s.quote!.payment_uri).toBe(
      `ethereum:${t.server.devnet!.stablecoin}@31337/transfer?address=${s.quote!.deposit_address}&uint256=12500000`,
    )
    expect(await decodeQr(page)).toBe(s.quote!.payment_uri)
    // Copy buttons give the exact values.
    await page.getByRole('button', { name: PAY_TEXT.copyAmount }).click()
    expect(await clipboard(page)).toBe('12.5')
    await page.getByRole('button', { name: PAY_TEXT.copyAddress }).click()
    expect(await clipboard(page)).toBe(s.quote!.deposit_address)
    await page.screenshot({ path: browser.artifact('pay-page-desktop'), fullPage: true })

    // "I have sent the payment" -> pending.
    await page.getByRole('button', { name: PAY_TEXT.confirmSent }).click()
    await waitForStatus(page, PAY_TEXT.statusPending)
    expect((await stateOf(t, tx.id)).status).toBe('pending')

    // Pay with the test wallet while the test mines blocks by hand, so each stage is seen.
    await rpc('evm_setIntervalMining', [0])
    try {
      await page.getByRole('button', { name: PAY_TEXT.testWallet }).click()
      const from = t.server.devnet!.wallet.address
      await waitUntil(
        'the payment in the mempool',
        async () => [
          await rpc('eth_getTransactionCount', [from, 'pending']),
          await rpc('eth_getTransactionCount', [from, 'latest']),
        ],
        ([pending, mined]) => pending !== mined,
      )
      await rpc('evm_mine')
      await waitForStatus(page, 'Payment confirming: 1 of 2 confirmations.')
      expect(await page.locator('#step-detected').getAttribute('data-step')).toBe('done')
      expect(await page.locator('#step-block').textContent()).toMatch(/^Included in block \d+$/)
      expect(await page.locator('#step-confirmations').textContent()).toBe('Confirmations: 1 of 2')
      expect(await page.locator('#progress').getAttribute('value')).toBe('1')
      await page.screenshot({
        path: browser.artifact('pay-page-confirming-desktop'),
        fullPage: true,
      })
      await rpc('evm_mine')
      await waitForStatus(page, PAY_TEXT.statusCompleted)
    } finally {
      await rpc('evm_setIntervalMining', [1])
    }
    expect(await page.locator('#status-detail').textContent()).toBe(
      'Taking you back to Acme Coffee…',
    )
    // Every state is pushed as it is committed. Stages the follower passes within one block scan
    // (detected, 0 confirmations) may show for a moment or fold into the next; nothing else may
    // appear, and the order holds.
    const stages = [
      PAY_TEXT.statusCreated,
      PAY_TEXT.statusPrepared,
      PAY_TEXT.statusPending,
      PAY_TEXT.statusProcessing,
      'Payment confirming: 0 of 2 confirmations.',
      'Payment confirming: 1 of 2 confirmations.',
      PAY_TEXT.statusCompleted,
    ]
    const shown = await seen()
    expect(shown).toEqual(stages.filter((s) => shown.includes(s)))
    expect(shown).toEqual(
      expect.arrayContaining([
        PAY_TEXT.statusCreated,
        PAY_TEXT.statusPrepared,
        PAY_TEXT.statusPending,
        'Payment confirming: 1 of 2 confirmations.',
        PAY_TEXT.statusCompleted,
      ]),
    )
    // No reload happened: the page's own marker survived every change.
    expect(
      await page.evaluate(() => (window as unknown as { loadedOnce?: boolean }).loadedOnce),
    ).toBe(true)

    // Then back to the shop after a short pause.
    await page.waitForURL(merchantUrl('/thanks?order=1'), { timeout: 15_000 })
    expect(await page.locator('h1').textContent()).toBe('Shop page /thanks')
    expect((await stateOf(t, tx.id)).status).toBe('completed')
    expect(browser.failures).toEqual([])
  })

  test('the token can be changed before paying: ETH gets its own amount, QR and native payment URI', async () => {
    const tx = await createTx()
    const page = await browser.newPage()
    await page.goto(tx.url)
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay-amount').filter({ hasText: 'TUSD' }).waitFor()

    await page.getByRole('button', { name: PAY_TEXT.changeToken }).click()
    await page.locator('#choose').waitFor({ state: 'visible' })
    expect(await page.locator('#pay').isHidden()).toBe(true)
    // Focus goes to the token chosen so far.
    expect(
      await page.evaluate(() => document.activeElement?.textContent?.replace(/\s+/g, ' ').trim()),
    ).toBe('TUSD on devnet')
    await page.getByRole('button', { name: 'ETH on devnet' }).click()
    await page.locator('#pay-amount').filter({ hasText: 'ETH' }).waitFor()

    const s = await stateOf(t, tx.id)
    expect(s.quote!.token_symbol).toBe('ETH')
    expect(s.quote!.token_amount).toMatch(/^\d+$/)
    // $12.50 at the devnet's $3,000 feed, rounded up to the wei.
    expect(BigInt(s.quote!.token_amount)).toBe(4166666666666667n)
    expect(await page.locator('#pay-amount').textContent()).toBe('0.004166666666666667 ETH')
    expect(s.quote!.payment_uri).toBe(
      `ethereum:${s.quote!.deposit_address}@31337?value=4166666666666667`,
    )
    expect(await decodeQr(page)).toBe(s.quote!.payment_uri)
    expect(await page.locator('#pay-contract-value').textContent()).toBe(
      "ETH, the network's own coin",
    )
    expect(await tokenButton(page, 'ETH').getAttribute('aria-pressed')).toBe('true')
    expect(await tokenButton(page, 'TUSD').getAttribute('aria-pressed')).toBe('false')
    expect(browser.failures).toEqual([])
  })

  test('Cancel asks once more, cancels, and returns to cancel_url', async () => {
    const tx = await createTx({ cancel_url: merchantUrl('/cart?back=1') })
    const page = await browser.newPage()
    await page.goto(tx.url)
    await page.getByRole('button', { name: PAY_TEXT.cancel }).click()
    expect(await page.getByText(PAY_TEXT.cancelAsk).isVisible()).toBe(true)
    // "No" keeps the payment going.
    await page.getByRole('button', { name: PAY_TEXT.cancelNo }).click()
    expect(await page.getByText(PAY_TEXT.cancelAsk).isHidden()).toBe(true)
    expect((await stateOf(t, tx.id)).status).toBe('created')

    await page.getByRole('button', { name: PAY_TEXT.cancel }).click()
    await page.getByRole('button', { name: PAY_TEXT.cancelYes }).click()
    await page.waitForURL(merchantUrl('/cart?back=1'))
    expect((await stateOf(t, tx.id)).status).toBe('cancelled')
    expect(browser.failures).toEqual([])
  })

  test('a partial payment shows what is still due; paying the rest completes it with a receipt', async () => {
    const tx = await createTx()
    const page = await browser.newPage()
    await page.goto(tx.url)
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay').waitFor({ state: 'visible' })
    const s = await stateOf(t, tx.id)

    await payToken(wallet, t.server.devnet!.stablecoin, s.quote!.deposit_address, 5_000_000n)
    await page
      .locator('#partial')
      .filter({ hasText: 'Received 5 TUSD of 12.5 TUSD. Still due: 7.5 TUSD.' })
      .waitFor({ timeout: 30_000 })
    expect(await statusTitle(page).textContent()).toBe(PAY_TEXT.statusPartial)
    expect(await page.locator('#pay-heading').textContent()).toBe(PAY_TEXT.payHeadingRest)
    expect(await page.locator('#pay-amount').textContent()).toBe('7.5 TUSD')
    const rest = await stateOf(t, tx.id)
    expect(rest.amount_due).toBe('7500000')
    expect(await decodeQr(page)).toBe(
      `ethereum:${t.server.devnet!.stablecoin}@31337/transfer?address=${s.quote!.deposit_address}&uint256=7500000`,
    )
    await page.screenshot({ path: browser.artifact('pay-page-partial-desktop'), fullPage: true })

    // The test wallet pays exactly the rest.
    await page.getByRole('button', { name: PAY_TEXT.testWallet }).click()
    await waitForStatus(page, PAY_TEXT.statusCompleted)
    await page.locator('#receipt').waitFor({ state: 'visible' })
    expect(await page.locator('#receipt-paid').textContent()).toBe('12.5 TUSD · devnet')
    expect(await page.locator('#receipt-amount').textContent()).toBe('$12.50')
    expect(await page.locator('#return').isHidden()).toBe(true)
    await page.screenshot({ path: browser.artifact('pay-page-receipt-desktop'), fullPage: true })
    expect(browser.failures).toEqual([])
  })

  test('a EUR price (docs/decisions/0064-priced-in-the-merchants-currency.md): shown in euros, paid at par in TEUR with the test wallet, a euro receipt; TUSD is quoted through the EUR rate', async () => {
    const tx = await createTx({ amount: 19.99, currency: 'EUR', order_description: 'Croissants' })
    const page = await browser.newPage()
    await page.goto(tx.url)
    expect(await page.locator('.amount').textContent()).toContain('€19.99')
    // Through USD: 19.99 EUR at the devnet's 1.08 is $21.5892, rounded up in TUSD's 6 places.
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay').waitFor({ state: 'visible' })
    expect(await page.locator('#pay-amount').textContent()).toBe('21.5892 TUSD')
    // At par: one TEUR per euro.
    await page.getByRole('button', { name: 'Change token' }).click()
    await page.getByRole('button', { name: 'TEUR on devnet' }).click()
    await page.locator('#pay-amount').filter({ hasText: '19.99 TEUR' }).waitFor()
    await page.screenshot({ path: browser.artifact('pay-page-eur-desktop'), fullPage: true })
    await page.getByRole('button', { name: PAY_TEXT.testWallet }).click()
    await waitForStatus(page, PAY_TEXT.statusCompleted)
    await page.locator('#receipt').waitFor({ state: 'visible' })
    expect(await page.locator('#receipt-paid').textContent()).toBe('19.99 TEUR · devnet')
    expect(await page.locator('#receipt-amount').textContent()).toBe('€19.99')
    await page.screenshot({
      path: browser.artifact('pay-page-eur-receipt-desktop'),
      fullPage: true,
    })
    const done = (await (await api(t, key).get(`/api/transactions/${tx.id}`)).json()).transaction
    expect([done.status, done.currency, done.amount_in_currency, done.amount_usd]).toEqual([
      'completed',
      'EUR',
      19.99,
      21.59,
    ])
    expect(browser.failures).toEqual([])
  })

  test('another token sent is named on the page and does not count; the right payment then completes (docs/decisions/0012-transaction-lifecycle.md)', async () => {
    const tx = await createTx({ cancel_url: merchantUrl('/cart') })
    const page = await browser.newPage()
    await page.goto(tx.url)
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay').waitFor({ state: 'visible' })
    const s = await stateOf(t, tx.id)

    // A little ETH to the TUSD address: recorded, named, and the page still asks for TUSD.
    await payNative(wallet, s.quote!.deposit_address, 10n ** 15n)
    await page.locator('#wrong-asset').waitFor({ state: 'visible', timeout: 30_000 })
    expect(await page.locator('#wrong-asset').textContent()).toBe(
      fill(PAY_TEXT.wrongAsset, { token: 'TUSD', network: 'devnet', project: 'Acme Coffee' }),
    )
    expect(await statusTitle(page).textContent()).toBe(PAY_TEXT.statusPrepared)
    expect(await page.locator('#pay-amount').textContent()).toBe('12.5 TUSD')
    expect(await page.locator('#cancel-area').isVisible()).toBe(true)
    await page.screenshot({
      path: browser.artifact('pay-page-wrong-asset-desktop'),
      fullPage: true,
    })

    await page.getByRole('button', { name: PAY_TEXT.testWallet }).click()
    await waitForStatus(page, PAY_TEXT.statusCompleted)
    expect(await page.locator('#wrong-asset').isHidden()).toBe(true)
    expect(browser.failures).toEqual([])
  })

  test('merchant text with markup is shown as text and never runs', async () => {
    const evil =
      '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b>bold</b>'
    const tx = await createTx({ order_description: evil })
    const page = await browser.newPage()
    await page.goto(tx.url)
    expect(await page.locator('.description').textContent()).toBe(`Order: ${evil}`)
    expect(
      await page.locator('.description img, .description script, .description b').count(),
    ).toBe(0)
    expect(
      await page.evaluate(() => (window as unknown as { pwned?: number }).pwned),
    ).toBeUndefined()
    // The page keeps the description as text through a live update too.
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay').waitFor({ state: 'visible' })
    expect(
      await page.evaluate(() => (window as unknown as { pwned?: number }).pwned),
    ).toBeUndefined()
    expect(browser.failures).toEqual([])
  })

  test('at 360 px wide everything fits without sideways scrolling', async () => {
    const tx = await createTx({
      order_description:
        'A very long order description that has to wrap on a small phone screen without pushing anything sideways: 2 × flat white, 1 × croissant',
    })
    const page = await browser.newPage({ width: 360, height: 740 })
    await page.goto(tx.url)
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    await page.screenshot({ path: browser.artifact('pay-page-choose-360'), fullPage: true })
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay').waitFor({ state: 'visible' })
    await page.evaluate(() => (document.getElementById('qr') as HTMLImageElement).decode())
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    // The QR code stays large enough to scan.
    const box = (await page.locator('#qr').boundingBox())!
    expect(box.width).toBeGreaterThanOrEqual(200)
    expect(await decodeQr(page)).toBe((await stateOf(t, tx.id)).quote!.payment_uri)
    await page.screenshot({ path: browser.artifact('pay-page-360'), fullPage: true })
    expect(browser.failures).toEqual([])
  })

  test('keyboard only: choose, confirm, pay and finish without a mouse', async () => {
    const tx = await createTx()
    const page = await browser.newPage()
    await page.goto(tx.url)
    const focused = () =>
      page.evaluate(() => {
        const el = document.activeElement as HTMLElement | null
        return el?.id || el?.textContent?.replace(/\s+/g, ' ').trim() || ''
      })
    await page.keyboard.press('Tab')
    expect(await focused()).toBe('TUSD on devnet')
    await page.keyboard.press('Tab')
    expect(await focused()).toBe('ETH on devnet')
    await page.keyboard.press('Shift+Tab')
    await page.keyboard.press('Enter')
    await page.locator('#pay').waitFor({ state: 'visible' })
    // Focus moves to what to pay, then through it in reading order.
    await page.waitForFunction(() => document.activeElement?.id === 'pay-heading')
    const order: string[] = []
    for (let i = 0; i < 6; i++) {
      await page.keyboard.press('Tab')
      order.push(await focused())
    }
    expect(order).toEqual([
      'pay-amount-copy',
      'pay-address-copy',
      'open-wallet',
      'test-wallet',
      'confirm',
      'change-token',
    ])
    // Back to "I have sent the payment" and press it with the space bar.
    await page.keyboard.press('Shift+Tab')
    await page.keyboard.press(' ')
    await waitForStatus(page, PAY_TEXT.statusPending)
    // The pressed button is gone: focus lands on the status, and Tab goes on from there.
    await page.waitForFunction(() => document.activeElement?.id === 'status-title')
    for (let i = 0; i < 4; i++) await page.keyboard.press('Tab')
    expect(await focused()).toBe('test-wallet')
    await page.keyboard.press('Enter')
    await waitForStatus(page, PAY_TEXT.statusCompleted)
    expect(browser.failures).toEqual([])
  })

  test('"Pay with browser wallet" sends the transfer through an EIP-1193 wallet with viem, switching chain first', async () => {
    const tx = await createTx()
    const page = await browser.newPage()
    const calls: string[] = []
    let chainId = '0x1'
    const account = t.server.devnet!.wallet.address
    // Answers account and chain requests itself; anvil's unlocked account signs what it sends.
    await injectWallet(page, (method, params) => {
      calls.push(method)
      if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [account]
      if (method === 'eth_chainId') return chainId
      if (method === 'wallet_switchEthereumChain') {
        chainId = (params[0] as { chainId: string }).chainId
        return null
      }
      return undefined
    })
    await page.goto(tx.url)
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    // Blocks by hand: the page must refuse a second payment while the first is not yet seen.
    await rpc('evm_setIntervalMining', [0])
    try {
      await page.getByRole('button', { name: PAY_TEXT.browserWallet }).click()
      await page
        .locator('#wallet-message')
        .filter({ hasText: /^Sent from your wallet\. Transaction 0x[0-9a-f]{64}$/ })
        .waitFor()
      await waitForStatus(page, PAY_TEXT.statusPending)
      expect(await page.locator('#browser-wallet').isHidden()).toBe(true)
      expect(await page.locator('#test-wallet').isHidden()).toBe(true)
      expect(calls.filter((c) => c === 'eth_sendTransaction')).toHaveLength(1)
      await rpc('evm_mine')
      await rpc('evm_mine')
      await waitForStatus(page, PAY_TEXT.statusCompleted)
    } finally {
      await rpc('evm_setIntervalMining', [1])
    }
    expect(calls).toContain('wallet_switchEthereumChain')
    expect(calls).toContain('eth_sendTransaction')
    expect(chainId).toBe('0x7a69')
    // A wallet transaction submitted from the page counts as "I have sent the payment"
    // (docs/decisions/0012-transaction-lifecycle.md).
    const timeline = await (await api(t, key).get(`/api/transactions/${tx.id}/timeline`)).json()
    expect(timeline.timeline.map((e: { to_status: string }) => e.to_status)).toContain('pending')
    expect(browser.failures).toEqual([])
  })

  test('"Pay by signature": a customer holding TUSD and 0 ETH signs once in an EIP-1193 wallet, the relayer pays the gas, the payment completes and the customer still has 0 ETH', async () => {
    const tx = await createTx()
    const customer = privateKeyToAccount(generatePrivateKey())
    await wallet.waitForTransactionReceipt({
      hash: await wallet.writeContract({
        address: t.server.devnet!.stablecoin,
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [customer.address, 100_000_000n],
      }),
    })
    const page = await browser.newPage()
    const calls: string[] = []
    let chainId = '0x1'
    // The wallet holds the customer's key: it signs typed data itself.
    await injectWallet(page, (method, params) => {
      calls.push(method)
      if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [customer.address]
      if (method === 'eth_chainId') return chainId
      if (method === 'wallet_switchEthereumChain') {
        chainId = (params[0] as { chainId: string }).chainId
        return null
      }
      if (method === 'eth_signTypedData_v4') {
        const typed = JSON.parse(params[1] as string)
        const { EIP712Domain: _, ...types } = typed.types
        const uint = new Set(['value', 'validAfter', 'validBefore'])
        const message = Object.fromEntries(
          Object.entries(typed.message).map(([k, v]) => [k, uint.has(k) ? BigInt(v as string) : v]),
        )
        return customer.signTypedData({
          domain: typed.domain,
          types,
          primaryType: typed.primaryType,
          message,
        } as never)
      }
      return undefined
    })
    await page.goto(tx.url)
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await expect(page.locator('#sign-hint').textContent()).resolves.toBe(PAY_TEXT.signHint)
    await page.screenshot({ path: browser.artifact('pay-by-signature-offer'), fullPage: true })
    await page.getByRole('button', { name: PAY_TEXT.signWallet }).click()
    await page
      .locator('#wallet-message')
      .filter({
        hasText: /^Signed\. The payment was submitted for you: transaction 0x[0-9a-f]{64}$/,
      })
      .waitFor()
    await waitForStatus(page, PAY_TEXT.statusCompleted)
    expect(calls).toContain('eth_signTypedData_v4')
    expect(calls).not.toContain('eth_sendTransaction')
    expect(chainId).toBe('0x7a69')
    expect(await wallet.getBalance({ address: customer.address })).toBe(0n)
    const done = await stateOf(t, tx.id)
    expect(done.status).toBe('completed')
    expect(done.amount_received).toBe(done.quote!.token_amount)
    expect(browser.failures).toEqual([])
  })

  test('without a browser wallet the button is not offered', async () => {
    const tx = await createTx()
    const page = await browser.newPage()
    await page.goto(tx.url)
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay').waitFor({ state: 'visible' })
    expect(await page.locator('#browser-wallet').isHidden()).toBe(true)
    // And the wallet bundle is never downloaded.
    expect(
      browser.requests.filter((u) => u.includes('browser-wallet.js') && u.includes(tx.id)),
    ).toEqual([])
  })

  test('when the event stream is unavailable the page polls and still shows the change', async () => {
    const tx = await createTx()
    const page = await browser.newPage()
    await page.route('**/events', (route) => route.abort('aborted'))
    await page.goto(tx.url)
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page.locator('#pay').waitFor({ state: 'visible' })
    // The merchant cancels through the API; only polling can bring that to the page.
    expect((await api(t, key).post(`/api/transactions/${tx.id}/cancel`, {})).status).toBe(200)
    await waitForStatus(page, PAY_TEXT.statusCancelled, 15_000)
    expect(await page.locator('#pay').isHidden()).toBe(true)
  })
})

describeWithBrowser('pay page in Chromium, expiry', () => {
  const clock = manualClock(Date.now())
  let ts: TestServer
  let keyOf: string

  beforeAll(async () => {
    ts = await startTestServer('pglite', {}, { clock })
    keyOf = (await ts.project({ name: 'Acme Coffee' })).key
  })
  afterAll(async () => {
    await ts?.stop()
  })

  test('the page counts down and turns into the expired page at the deadline, without a reload', async () => {
    const r = await (
      await api(ts, keyOf).create({
        amount: 5,
        expires_in_minutes: 1,
        cancel_url: 'https://shop.example/cart',
      })
    ).json()
    const page = await browser.newPage()
    await page.goto(r.transaction.payment_url)
    const countdown = await page.locator('#countdown').textContent()
    expect(countdown).toMatch(/^Expires in (1:00|0:\d\d)\. Pay now to keep this price\.$/)
    // Nothing is offered on this server (no networks): the page says so.
    expect(await statusTitle(page).textContent()).toBe(PAY_TEXT.noTokens)

    clock.advance(60_000)
    ts.server.services.scheduler.runDue()
    await waitForStatus(page, PAY_TEXT.statusExpired, 15_000)
    expect(await page.locator('#status-detail').textContent()).toBe(PAY_TEXT.statusExpiredDetail)
    expect(await page.locator('#countdown').isHidden()).toBe(true)
    expect(await page.locator('#cancel-area').isHidden()).toBe(true)
    expect(
      await page.getByRole('link', { name: 'Return to Acme Coffee' }).getAttribute('href'),
    ).toBe('https://shop.example/cart')
    expect((await stateOf(ts, r.transaction.id)).status).toBe('expired')
    await page.screenshot({ path: browser.artifact('pay-page-expired-desktop'), fullPage: true })
  })
})
