import { afterAll, beforeAll, expect, test } from 'bun:test'
import { statSync } from 'node:fs'
import type { Page } from 'playwright-core'
import { WEBHOOK_EVENT_TYPES } from '../../src/db/schema.ts'
import { describeWithBrowser, openBrowser, type Browser } from '../helpers/browser.ts'
import { startTestServer, type TestServer } from '../helpers/server.ts'

const OPERATIONS = [
  ['POST', '/api/transactions/create'],
  ['GET', '/api/transactions/{id}'],
  ['GET', '/api/transactions/project/{projectId}'],
  ['GET', '/api/transactions/stats'],
  ['GET', '/api/transactions/export'],
  ['POST', '/api/transactions/{id}/cancel'],
  ['GET', '/api/transactions/{id}/timeline'],
  ['POST', '/api/transactions/{id}/retry-webhook'],
  ['POST', '/api/transactions/{id}/refunds'],
  ['GET', '/api/transactions/{id}/refunds'],
  ['GET', '/api/refunds'],
  ['GET', '/api/refunds/{id}'],
  ['POST', '/api/refunds/{id}/cancel'],
  ['POST', '/api/refunds/{id}/payment'],
  ['POST', '/api/refunds/{id}/unpayable'],
  ['POST', '/api/refunds/{id}/abandon'],
  ['GET', '/api/networks'],
  ['GET', '/api/deposit-key'],
  ['GET', '/api/deposit-addresses'],
  ['GET', '/api/sweeps'],
  ['GET', '/api/sweeps/{id}'],
  ['POST', '/api/sweeps'],
  ['GET', '/api/x402/pay-to'],
  ['GET', '/api/x402/supported'],
  ['POST', '/api/x402/verify'],
  ['POST', '/api/x402/settle'],
  ['GET', '/pay/{id}/x402'],
  ['POST', '/commerce/charges'],
  ['GET', '/commerce/charges'],
  ['GET', '/commerce/charges/{id}'],
  ['POST', '/commerce/charges/{id}/cancel'],
  ['POST', '/commerce/charges/{id}/resolve'],
  ['POST', '/commerce/checkouts'],
  ['GET', '/commerce/checkouts'],
  ['GET', '/commerce/checkouts/{id}'],
  ['PUT', '/commerce/checkouts/{id}'],
  ['DELETE', '/commerce/checkouts/{id}'],
  ['GET', '/commerce/events'],
  ['GET', '/commerce/events/{id}'],
  ['GET', '/checkout/{id}'],
]

describeWithBrowser('Swagger UI at /swagger', () => {
  let t: TestServer | undefined
  let browser: Browser | undefined

  beforeAll(async () => {
    t = await startTestServer('pglite')
  })

  afterAll(async () => {
    await browser?.close()
    await t?.stop()
  })

  async function openPage(): Promise<Page> {
    browser = await openBrowser()
    return browser.context.pages()[0] ?? (await browser.newPage())
  }

  test('renders every operation from assets served by the service itself, with no failed request', async () => {
    const page = await openPage()
    const res = await page.goto(`${t!.url}/swagger`, { waitUntil: 'load' })
    expect(res?.status()).toBe(200)

    await page.locator('.opblock').first().waitFor({ state: 'visible', timeout: 30_000 })
    // Every operation, and every webhook the service sends (OpenAPI 3.1's webhooks section).
    expect(await page.locator('.opblock').count()).toBe(
      OPERATIONS.length + WEBHOOK_EVENT_TYPES.length,
    )
    for (const [method, path] of OPERATIONS) {
      // One path can have two operations (GET and POST): the block is the one of this method.
      const block = page
        .locator('.opblock', {
          has: page.locator('.opblock-summary-path', {
            hasText: new RegExp(`^${path.replace(/[{}]/g, '\\$&')}$`),
          }),
        })
        .filter({
          has: page.locator('.opblock-summary-method', { hasText: new RegExp(`^${method}$`) }),
        })
      expect(await block.count(), `${method} ${path}`).toBe(1)
      expect(await block.isVisible(), `${method} ${path}`).toBe(true)
      expect(await block.locator('.opblock-summary-method').textContent()).toBe(method)
    }
    expect(await page.locator('.info .title').textContent()).toContain('Crypto Pay merchant API')
    // The security scheme is offered: the Authorize button is there.
    expect(await page.locator('.btn.authorize').isVisible()).toBe(true)

    // Expanding an operation shows its parameters and its documented responses.
    const create = page.locator('#operations-Transactions-createTransaction')
    await create.locator('.opblock-summary').click()
    await create.locator('.opblock-body').waitFor({ state: 'visible' })
    // The body appears before Swagger UI has rendered its responses table: wait for the table.
    await create.locator('.responses-table tr.response').first().waitFor({ state: 'visible' })
    for (const status of ['200', '400', '401', '429', '500']) {
      expect(
        await create.locator(`.responses-table tr.response[data-code="${status}"]`).count(),
      ).toBe(1)
    }
    expect(await create.locator('.opblock-section-request-body').isVisible()).toBe(true)

    // A webhook expands to its body and signed headers.
    const completed = page.locator('.opblock', {
      has: page.locator('.opblock-summary-path', { hasText: /^transaction\.completed$/ }),
    })
    expect(await completed.count()).toBe(1)
    await completed.locator('.opblock-summary').click()
    await completed.locator('.opblock-section-request-body').waitFor({ state: 'visible' })
    expect(await completed.locator('.parameters').textContent()).toContain('x-service-signature')

    const desktop = browser!.artifact('swagger-ui-desktop')
    await page.screenshot({ path: desktop, fullPage: true })
    await page.setViewportSize({ width: 360, height: 740 })
    await page.waitForTimeout(200) // let the layout settle at the new width
    // Long paths and code samples wrap or scroll inside their boxes; the page itself does not.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    const narrow = browser!.artifact('swagger-ui-360')
    await page.screenshot({ path: narrow, fullPage: true })
    for (const f of [desktop, narrow]) expect(statSync(f).size).toBeGreaterThan(10_000)

    const origin = new URL(t!.url).origin
    const { requests, failures } = browser!
    const http = requests.filter((u) => /^https?:/.test(u))
    expect(http.length).toBeGreaterThan(0)
    expect(http.filter((u) => new URL(u).origin !== origin)).toEqual([])
    expect(requests.filter((u) => !/^(https?|data):/.test(u))).toEqual([])
    for (const asset of [
      '/swagger',
      '/swagger/assets/swagger-ui.css',
      '/swagger/assets/swagger-ui-bundle.js',
      '/swagger/assets/init.js',
      '/swagger/json',
    ]) {
      expect(http.map((u) => new URL(u).pathname)).toContain(asset)
    }
    expect(failures).toEqual([])
  })
})
