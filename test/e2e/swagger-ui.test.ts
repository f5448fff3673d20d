import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { startTestServer, type TestServer } from '../helpers/server.ts'

const CHROMIUM = '/usr/bin/chromium'
const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname
const OPERATIONS = [
  ['POST', '/api/transactions/create'],
  ['GET', '/api/transactions/{id}'],
  ['GET', '/api/transactions/project/{projectId}'],
  ['GET', '/api/transactions/stats'],
  ['POST', '/api/transactions/{id}/cancel'],
  ['GET', '/api/transactions/{id}/timeline'],
  ['POST', '/api/transactions/{id}/retry-webhook'],
]

/** Playwright leaves /tmp/playwright-* directories behind; only ours are removed. */
const playwrightLeftovers = () => new Set(readdirSync('/tmp').filter((f) => f.startsWith('playwright-')))

describe('Swagger UI at /swagger', () => {
  let t: TestServer | undefined
  let context: BrowserContext | undefined
  let profile: string | undefined
  let leftoversBefore = new Set<string>()
  const requests: string[] = []
  const failures: string[] = []

  beforeAll(async () => {
    t = await startTestServer('pglite')
  })

  afterAll(async () => {
    await context?.close()
    if (profile) rmSync(profile, { recursive: true, force: true })
    for (const f of playwrightLeftovers()) if (!leftoversBefore.has(f)) rmSync(join('/tmp', f), { recursive: true, force: true })
    await t?.stop()
  })

  /** Fails rather than skips: CI installs Chromium (`apt-get install -y chromium`). */
  async function openBrowser(): Promise<Page> {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install it with \`apt-get install -y chromium\` (TOOLING.md, "Browser tests")`)
    leftoversBefore = playwrightLeftovers()
    profile = mkdtempSync(join(tmpdir(), 'crypto-pay-chromium-'))
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      ignoreHTTPSErrors: true,
      viewport: { width: 1280, height: 900 },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    })
    context.on('request', (r) => requests.push(r.url()))
    context.on('requestfailed', (r) => failures.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`))
    context.on('response', (r) => {
      if (r.status() >= 400) failures.push(`${r.request().method()} ${r.url()}: HTTP ${r.status()}`)
    })
    const page = context.pages()[0] ?? (await context.newPage())
    page.on('pageerror', (e) => failures.push(`page error: ${e.message}`))
    page.on('console', (m) => {
      if (m.type() === 'error') failures.push(`console error: ${m.text()}`)
    })
    return page
  }

  test('renders every operation from assets served by the service itself, with no failed request', async () => {
    const page = await openBrowser()
    const res = await page.goto(`${t!.url}/swagger`, { waitUntil: 'load' })
    expect(res?.status()).toBe(200)

    await page.locator('.opblock').first().waitFor({ state: 'visible', timeout: 30_000 })
    expect(await page.locator('.opblock').count()).toBe(OPERATIONS.length)
    for (const [method, path] of OPERATIONS) {
      const block = page.locator('.opblock', { has: page.locator('.opblock-summary-path', { hasText: new RegExp(`^${path.replace(/[{}]/g, '\\$&')}$`) }) })
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
      expect(await create.locator(`.responses-table tr.response[data-code="${status}"]`).count()).toBe(1)
    }
    expect(await create.locator('.opblock-section-request-body').isVisible()).toBe(true)

    mkdirSync(ARTIFACTS, { recursive: true })
    const desktop = join(ARTIFACTS, 'swagger-ui-desktop.png')
    await page.screenshot({ path: desktop, fullPage: true })
    await page.setViewportSize({ width: 360, height: 740 })
    await page.waitForTimeout(200) // let the layout settle at the new width
    // Long paths and code samples wrap or scroll inside their boxes; the page itself does not.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360)
    const narrow = join(ARTIFACTS, 'swagger-ui-360.png')
    await page.screenshot({ path: narrow, fullPage: true })
    for (const f of [desktop, narrow]) expect(statSync(f).size).toBeGreaterThan(10_000)

    const origin = new URL(t!.url).origin
    const http = requests.filter((u) => /^https?:/.test(u))
    expect(http.length).toBeGreaterThan(0)
    expect(http.filter((u) => new URL(u).origin !== origin)).toEqual([])
    expect(requests.filter((u) => !/^(https?|data):/.test(u))).toEqual([])
    for (const asset of ['/swagger', '/swagger/assets/swagger-ui.css', '/swagger/assets/swagger-ui-bundle.js', '/swagger/assets/init.js', '/swagger/json']) {
      expect(http.map((u) => new URL(u).pathname)).toContain(asset)
    }
    expect(failures).toEqual([])
  })
})
