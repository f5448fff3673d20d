/**
 * docs/decisions/0034-hosted-pay-page.md's "done when", as a newcomer does it: start the service on
 * its defaults, run the curl example it prints, open the payment_url in a browser and pay on the
 * devnet.
 */
import { afterAll, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { PAY_TEXT } from '../../src/modules/pay/text.ts'
import { describeWithBrowser, openBrowser, type Browser } from '../helpers/browser.ts'
import { freshDataDir } from '../helpers/databases.ts'
import { spawnServer, type ServerProcess } from '../helpers/processes.ts'

describeWithBrowser('a newcomer after npm start', () => {
  let server: ServerProcess | null = null
  let browser: Browser | null = null
  let dataDir = ''
  afterAll(async () => {
    await browser?.close()
    await server?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  test('runs the printed curl example, opens its payment_url and pays it with the test wallet', async () => {
    dataDir = await freshDataDir()
    server = await spawnServer({
      DATA_DIR: dataDir,
      PORT: '0',
      HTTP_PORT: '0',
      LOG_LEVEL: 'info',
      NETWORKS_CONFIG: '',
    })
    const [banner] = await server.waitFor(
      'stdout',
      /Create a test transaction:\n[\s\S]*?\nThen open the payment_url[^\n]*\n/,
    )
    expect(banner).toContain('Pay with test wallet')
    // The command exactly as printed, run by a shell.
    const command = banner
      .split('\n')
      .filter((l) => l.startsWith('  '))
      .join('\n')
    expect(command).toStartWith('  curl -k https://localhost:')
    const curl = Bun.spawnSync(['bash', '-c', command])
    expect(curl.exitCode).toBe(0)
    const created = JSON.parse(curl.stdout.toString())
    expect(created.transaction).toMatchObject({
      status: 'created',
      amount_usd: 25,
      testing_mode: true,
    })

    browser = await openBrowser({ viewport: { width: 390, height: 844 } })
    const page = await browser.newPage()
    await page.goto(created.payment_url)
    await page.getByRole('button', { name: 'TUSD on devnet' }).click()
    await page
      .locator('#pay-amount')
      .filter({ hasText: /^25 TUSD$/ })
      .waitFor()
    await page.getByRole('button', { name: PAY_TEXT.testWallet }).click()
    await page
      .locator('#status-title')
      .filter({ hasText: PAY_TEXT.statusCompleted })
      .waitFor({ timeout: 60_000 })
    expect(await page.locator('#receipt-paid').textContent()).toBe('25 TUSD · devnet')
    await page.screenshot({
      path: browser.artifact('pay-page-newcomer-completed-390'),
      fullPage: true,
    })
    expect(browser.failures).toEqual([])
  })
})
