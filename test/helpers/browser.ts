import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe } from 'bun:test'
import { chromium, type BrowserContext, type Page } from 'playwright-core'

/** Where Chromium (or Chrome) usually is on Debian/Ubuntu, Fedora, snap, and macOS. */
const USUAL_PATHS = [
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/snap/bin/chromium',
  '/usr/bin/google-chrome',
  '/usr/bin/google-chrome-stable',
  '/Applications/Chromium.app/Contents/MacOS/Chromium',
  '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
]
/** CI=true (or 1): browser tests never skip; a missing browser fails them. */
export const IN_CI = ['1', 'true'].includes((process.env.CI ?? '').toLowerCase())

/**
 * The browser to drive: CHROMIUM_PATH when set (even if wrong: then none), else the first usual
 * path that exists.
 */
export function findChromium(env: Record<string, string | undefined> = process.env): string | null {
  const chosen = env.CHROMIUM_PATH?.trim()
  if (chosen) return existsSync(chosen) ? chosen : null
  return USUAL_PATHS.find((p) => existsSync(p)) ?? null
}

const CHROMIUM = findChromium()
const MISSING =
  `No Chromium found (${process.env.CHROMIUM_PATH ? `CHROMIUM_PATH=${process.env.CHROMIUM_PATH} does not exist` : `looked in ${USUAL_PATHS.join(', ')}`}). ` +
  'Install it (Debian/Ubuntu: sudo apt-get install -y chromium; macOS: brew install --cask chromium) or set CHROMIUM_PATH to a Chromium or Chrome binary.'

/**
 * Whether suites declared with `describeWithBrowser` run here (a browser was found, or CI=true).
 */
export const BROWSER_SUITES_RUN = !!CHROMIUM || IN_CI

/**
 * A file-level hook of a browser test file: it runs only where its suites do. Bun runs a file's
 * top-level `beforeAll` even when every suite in the file is skipped, and opening the browser
 * there would fail a machine that has none.
 */
export function whenBrowser<A extends unknown[]>(
  hook: (...args: A) => unknown,
): (...args: A) => unknown {
  return (...args: A) => (BROWSER_SUITES_RUN ? hook(...args) : undefined)
}

let told = false
/**
 * `describe` for a suite that drives a browser. Without one (outside CI) the suite is skipped and
 * the reason printed once, naming the command that enables it; under CI=true it always runs, and
 * a missing browser fails it.
 */
export function describeWithBrowser(name: string, body: () => void) {
  if (BROWSER_SUITES_RUN) return describe(name, body)
  if (!told) {
    told = true
    console.warn(`\nBrowser tests skipped: ${MISSING}\n`)
  }
  return describe.skip(`${name} (skipped: no Chromium; see the message above)`, body)
}
/** Screenshots land here (CI keeps the directory as an artifact; people look at them). */
export const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname

/** Playwright leaves /tmp/playwright-* directories behind; only ours are removed. */
const playwrightLeftovers = () =>
  new Set(readdirSync('/tmp').filter((f) => f.startsWith('playwright-')))

export interface Browser {
  context: BrowserContext
  /** Every URL the browser requested. */
  requests: string[]
  /**
   * Failed requests, HTTP errors, page errors and console errors, for
   * `expect(failures).toEqual([])`.
   */
  failures: string[]
  newPage(viewport?: { width: number; height: number }): Promise<Page>
  /** The path for a screenshot called `name`.png under test-artifacts/. */
  artifact(name: string): string
  close(): Promise<void>
}

/**
 * Chromium in a fresh profile, headless, with background networking off (a closed network
 * refuses its calls home). Suites use `describeWithBrowser`, so this runs only when a browser
 * was found or under CI, where a missing one is an error.
 */
export async function openBrowser(
  opts: {
    viewport?: { width: number; height: number }
    ignoreHttpStatus?: (url: string, status: number) => boolean
  } = {},
): Promise<Browser> {
  if (!CHROMIUM) throw new Error(MISSING)
  const leftoversBefore = playwrightLeftovers()
  const profile = mkdtempSync(join(tmpdir(), 'crypto-pay-chromium-'))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    ignoreHTTPSErrors: true,
    viewport: opts.viewport ?? { width: 1280, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  const requests: string[] = []
  const failures: string[] = []
  context.on('request', (r) => requests.push(r.url()))
  context.on('requestfailed', (r) => {
    // A page navigating away cancels its open event stream: that is not a failure.
    if (r.failure()?.errorText !== 'net::ERR_ABORTED')
      failures.push(`${r.method()} ${r.url()}: ${r.failure()?.errorText}`)
  })
  context.on('response', (r) => {
    if (r.status() >= 400 && !opts.ignoreHttpStatus?.(r.url(), r.status()))
      failures.push(`${r.request().method()} ${r.url()}: HTTP ${r.status()}`)
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
      for (const f of playwrightLeftovers())
        if (!leftoversBefore.has(f)) rmSync(join('/tmp', f), { recursive: true, force: true })
    },
  }
}
