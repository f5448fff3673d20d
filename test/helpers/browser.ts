import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'

const CHROMIUM = '/usr/bin/chromium'
/** Screenshots land here (CI keeps the directory as an artifact; people look at them). */
export const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname

/** Playwright leaves /tmp/playwright-* directories behind; only ours are removed. */
const playwrightLeftovers = () => new Set(readdirSync('/tmp').filter((f) => f.startsWith('playwright-')))

export interface Browser {
  context: BrowserContext
  /** Every URL the browser requested. */
  requests: string[]
  /** Failed requests, HTTP errors, page errors and console errors, for `expect(failures).toEqual([])`. */
  failures: string[]
  newPage(viewport?: { width: number; height: number }): Promise<Page>
  /** The path for a screenshot called `name`.png under test-artifacts/. */
  artifact(name: string): string
  close(): Promise<void>
}

/**
 * Debian's Chromium in a fresh profile, as TOOLING.md describes. Fails rather than skips when
 * Chromium is missing: CI installs it (`apt-get install -y chromium`).
 */
export async function openBrowser(opts: { viewport?: { width: number; height: number }; ignoreHttpStatus?: (url: string, status: number) => boolean } = {}): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install it with \`apt-get install -y chromium\` (TOOLING.md, "Browser tests")`)
  const leftoversBefore = playwrightLeftovers()
  const profile = mkdtempSync(join(tmpdir(), 'crypto-pay-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    ignoreHTTPSErrors: true,
    viewport: opts.viewport ?? { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  const requests: string[] = []
  const failures: string[] = []
  context.on('request', (r) => requests.push(r.url()))
  context.on('requestfailed', (r) => {
    // A page navigating away cancels its open event stream: that is not a failure.
    if (r.failure()?.errorText !== 'net::ERR_ABORTED') failures.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`)
  })
  context.on('response', (r) => {
    if (r.status() >= 400 && !opts.ignoreHttpStatus?.(r.url(), r.status())) failures.push(`${r.request().method()} ${r.url()}: HTTP ${r.status()}`)
  })
  const watch = (page: Page) => {
    page.on('pageerror', (e) => failures.push(`page error: ${e.message}`))
    page.on('console', (m) => {
      if (m.type() === 'error') failures.push(`console error: ${m.text()}`)
    })
  }
  context.on('page', watch)
  for (const p of context.pages()) watch(p)
  mkdirSync(ARTIFACTS, { recursive: true })
  return {
    context,
    requests,
    failures,
    async newPage(viewport) {
      const page = await context.newPage()
      if (viewport) await page.setViewportSize(viewport)
      return page
    },
    artifact: (name) => join(ARTIFACTS, `${name}.png`),
    async close() {
      await context.close()
      rmSync(profile, { recursive: true, force: true })
      for (const f of playwrightLeftovers()) if (!leftoversBefore.has(f)) rmSync(join('/tmp', f), { recursive: true, force: true })
    },
  }
}
