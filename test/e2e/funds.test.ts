/**
 * Money out in the dashboard, in headless Chromium against a real server (PGlite) and a real chain
 * (docs/decisions/0038-refunds.md): a merchant refunds part of a paid transaction from its page,
 * the treasury tool pays it, and the page shows it completed; the Funds page shows what waits at
 * the deposit addresses, the sweep the tool made (with its transaction hash) and the refunds.
 * Screenshots at 360 px and at desktop width.
 */
import { afterAll, beforeEach, expect, test } from 'bun:test'
import type { Page } from 'playwright-core'
import { describeWithBrowser, openBrowser, type Browser } from '../helpers/browser.ts'
import { waitUntil } from '../helpers/chain.ts'
import { memberOf } from '../helpers/dashboard.ts'
import { runTreasuryTool } from '../helpers/processes.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'
import {
  killedAtSend,
  paidTransactions,
  setUpMerchant,
  toolArgs,
  type writeMerchantFiles,
  type TreasuryChain,
} from '../helpers/treasury.ts'

const CUSTOMER = '0x1f9090aaE28b8a3dCeaDf281B0F12828e676c326'
const TREASURY = '0x2B5AD5c4795c026514f8317c7a215E218DcCD6cF'

describeWithBrowser('money out in the dashboard', () => {
  let chain: TreasuryChain
  let t: TestServer
  let browser: Browser
  let member: Awaited<ReturnType<typeof memberOf>>
  let files: ReturnType<typeof writeMerchantFiles>
  /**
   * The treasury tool's key: the dashboard member's project key may create refunds, not record
   * their payment.
   */
  let toolApiKey: string

  useStack('pglite', { treasury: true, project: false }, async (s) => {
    chain = s.treasury
    t = s.t
    member = await memberOf(t, { projectName: 'Acme Coffee' })
    ;({ tool: toolApiKey, files } = await setUpMerchant(t, member.project.id, s.dir, chain))
    browser = await openBrowser()
  })
  // Each test judges only its own pages.
  beforeEach(() => {
    if (browser) browser.failures.length = 0
  })
  afterAll(() => browser?.close())

  const dash = (rest = '') => `${t.url}/dashboard/${member.project.id}/test${rest}`
  async function open(path: string, viewport = { width: 1280, height: 900 }): Promise<Page> {
    const page = await browser.newPage(viewport)
    await page.goto(path)
    if (new URL(page.url()).pathname === '/dashboard/sign-in') {
      await page.getByLabel('E-mail').fill(member.email)
      await page.getByLabel('Password').fill(member.password)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForURL(path)
    }
    return page
  }
  const toolFlags = (rpcUrl = chain.rpcUrl) => [
    ...toolArgs(t, toolApiKey, chain, files, rpcUrl),
    '--mnemonic-file',
    files.mnemonic,
    '--gas-key-file',
    files.gasKey,
    '--json',
  ]
  const tool = (args: string[]) => runTreasuryTool([...args, ...toolFlags()])

  test('refund part of a paid transaction from its page; the tool pays it and the page shows it completed', async () => {
    const [paid] = await paidTransactions(t, member.project.key, chain, 1, 'TUSD', 25)
    const page = await open(dash(`/transactions/${paid!.id}`))
    const refunds = page.locator('section[aria-labelledby="refunds"]')
    expect(await refunds.getByText('Left to refund:').textContent()).toContain('25 TUSD')
    // A typo in the address: refused with the reason, the form kept.
    await page.getByLabel('Amount').fill('12.5')
    await page.getByLabel("Customer's address").fill('0x1F9090aaE28b8a3dCeaDf281B0F12828e676c326')
    await page.getByLabel('Reason').fill('one coffee spilled')
    await page.getByRole('button', { name: 'Create refund' }).click()
    await page.locator('.alert.error').waitFor()
    expect(await page.locator('.alert.error').textContent()).toContain('EIP-55 checksum')
    expect(await page.getByLabel('Amount').inputValue()).toBe('12.5')
    // The address as the customer gave it.
    await page.getByLabel("Customer's address").fill(CUSTOMER)
    await page.getByRole('button', { name: 'Create refund' }).click()
    await page.waitForURL(/notice=refund-created/)
    expect(await page.getByRole('status').textContent()).toContain(
      'The refund is recorded, pending.',
    )
    const row = refunds.locator('tbody tr')
    expect(await row.count()).toBe(1)
    expect(await row.locator('td').nth(1).textContent()).toBe('12.5 TUSD ($12.50)')
    expect(await row.locator('.badge').textContent()).toBe('pending')
    expect(await refunds.getByText('Left to refund:').textContent()).toContain('12.5 TUSD')

    const before = await chain.tokenBalance(CUSTOMER)
    // The customer's address is not the one that paid: the merchant approves it by name on their
    // machine.
    const made = (
      (await (await api(t, member.project.key).get('/api/refunds?status=pending')).json()) as any
    ).refunds[0].id
    const unapproved = await tool(['refunds', 'pay'])
    expect(unapproved.json.awaiting_approval.map((a: any) => a.refund_id)).toEqual([made])
    const r = await tool(['refunds', 'pay', '--approve', made])
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
    expect((await chain.tokenBalance(CUSTOMER)) - before).toBe(12_500_000n)
    await chain.mine(3)
    const id = r.json.paid[0].refund_id
    await waitUntil(
      'the refund completed',
      async () =>
        ((await (await api(t, member.project.key).get(`/api/refunds/${id}`)).json()) as any).refund
          .status,
      (s) => s === 'completed',
    )
    await page.reload()
    expect(await refunds.locator('tbody tr .badge').textContent()).toBe('completed')
    expect(await refunds.locator('tbody tr code.hash-short').last().getAttribute('title')).toBe(
      r.json.paid[0].transaction_hash,
    )
    expect(await page.locator('ol.timeline').textContent()).toContain('refund.completed')
    await page.screenshot({
      path: browser.artifact('dashboard-transaction-refunded-desktop'),
      fullPage: true,
    })
    // The one refusal asked for above (the bad checksum), as the response and as Chromium's console
    // line.
    expect(browser.failures).toEqual([
      expect.stringMatching(/^POST .*\/refunds: HTTP 400$/),
      expect.stringContaining('status of 400'),
    ])
  })

  test('the Funds page: what waits at deposit addresses, the sweep with its transaction hash, refunds pending and paid, at 360 px and on a desktop', async () => {
    const paid = await paidTransactions(t, member.project.key, chain, 2, 'TUSD', 10)
    const waiting = await open(dash('/funds'))
    const cells = async (p: Page) =>
      p.locator('section[aria-labelledby="waiting"] tbody tr td').allTextContents()
    // 25 + 10 + 11 TUSD arrived, 12.5 refunded from a deposit address: 33.5 waits.
    expect(await cells(waiting)).toEqual(['localchain', 'TUSD', '46', '0', '12.5', '33.5', '3'])
    const sweep = await tool(['sweep', '--to', TREASURY])
    expect({ code: sweep.code, stderr: sweep.stderr }).toEqual({ code: 0, stderr: '' })
    await chain.mine(3)
    await waitUntil(
      'the sweep confirmed',
      async () =>
        ((await (await api(t, member.project.key).get('/api/sweeps')).json()) as any).sweeps[0]
          ?.status,
      (s) => s === 'confirmed',
    )
    // A refund made afterwards, pending, for the list.
    await api(t, member.project.key).post(`/api/transactions/${paid[0]!.id}/refunds`, {
      address: CUSTOMER,
      amount: '1000000',
    })
    for (const [size, viewport] of [
      ['360', { width: 360, height: 740 }],
      ['desktop', { width: 1280, height: 900 }],
    ] as const) {
      const page = await open(dash('/funds'), viewport)
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Funds')
      expect(await cells(page)).toEqual(['localchain', 'TUSD', '46', '33.5', '12.5', '0', '3'])
      const sweeps = page.locator('section[aria-labelledby="sweeps"] tbody tr')
      expect(await sweeps.count()).toBe(1)
      expect(await sweeps.locator('.badge').textContent()).toBe('confirmed')
      expect(await sweeps.locator('td').nth(4).textContent()).toBe('33.5 TUSD')
      expect(await sweeps.locator('code.hash-short').getAttribute('title')).toBe(
        sweep.json.sweeps[0].transaction_hash,
      )
      // Refunds: pending (and in flight) by default, paid ones behind the filter.
      expect(
        await page.locator('section[aria-labelledby="refunds"] tbody tr .badge').allTextContents(),
      ).toEqual(['pending'])
      await page.locator('select[name="refunds"]').selectOption('completed')
      await page.getByRole('button', { name: 'Show' }).click()
      await page.waitForURL(/refunds=completed/)
      expect(
        await page.locator('section[aria-labelledby="refunds"] tbody tr .badge').allTextContents(),
      ).toEqual(['completed'])
      const { scrollWidth, clientWidth } = await page.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        clientWidth: document.documentElement.clientWidth,
      }))
      expect(scrollWidth).toBeLessThanOrEqual(clientWidth)
      await page.screenshot({ path: browser.artifact(`dashboard-funds-${size}`), fullPage: true })
    }
    expect(browser.failures).toEqual([])
  })

  test('a refund whose recorded payment may still be mined: "Abandon payment" says until when, and leaves it submitted', async () => {
    const [paid] = await paidTransactions(t, member.project.key, chain, 1, 'TUSD', 12)
    const payer = chain.customer.account.address
    const made = (
      (await (
        await api(t, member.project.key).post(`/api/transactions/${paid!.id}/refunds`, {
          address: payer,
          amount: '2000000',
        })
      ).json()) as any
    ).refund
    // The tool records the payment and dies before sending it.
    await killedAtSend(chain.rpcUrl, (rpc) => [
      'refunds',
      'pay',
      ...toolFlags(rpc),
      '--refund',
      made.id,
    ])
    const page = await open(dash(`/transactions/${paid!.id}`))
    const refunds = page.locator('section[aria-labelledby="refunds"]')
    expect(await refunds.locator('tbody tr .badge').textContent()).toBe('submitted')
    const dialogs: string[] = []
    page.on('dialog', (d) => {
      dialogs.push(d.message())
      void d.accept()
    })
    await refunds.getByRole('button', { name: 'Abandon payment' }).click()
    await page.locator('.alert.error').waitFor()
    expect(dialogs[0]).toContain('Give up this payment?')
    expect(await page.locator('.alert.error').textContent()).toMatch(
      /may still be mined: its signature holds until \d{4}-/,
    )
    expect(await refunds.locator('tbody tr .badge').textContent()).toBe('submitted')
    await page.screenshot({
      path: browser.artifact('dashboard-refund-abandon-refused'),
      fullPage: true,
    })
    expect(browser.failures).toEqual([
      expect.stringMatching(/abandon: HTTP 409$/),
      expect.stringContaining('status of 409'),
    ])
  })
})
