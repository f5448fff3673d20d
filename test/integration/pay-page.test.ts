import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { getAddress } from 'viem'
import { manualClock } from '../../src/lib/clock.ts'
import { SHARED_ASSETS_DIR } from '../../src/http/static-assets.ts'
import { PAY_ASSETS_DIR } from '../../src/modules/pay/index.ts'
import { PAY_PAGE_CSP } from '../../src/modules/pay/page.ts'
import { qrSvg } from '../../src/modules/pay/qr.ts'
import { PAY_TEXT } from '../../src/modules/pay/text.ts'
import { backends } from '../helpers/databases.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

/**
 * The hosted pay page (docs/decisions/0026-pay-page-endpoints.md) over HTTP, as a browser would
 * fetch it but without running its script: the server-rendered HTML, its headers, the files it
 * loads and its QR code. The Chromium test drives the page's behaviour in a real browser.
 */

const DESCRIPTION_ATTACK = '<script>alert(1)</script><img src=x onerror=alert(2)>'

/** The text of an attribute value as the browser reads it. */
const unescapeHtml = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')

/** The opening tag of the element with `id`, e.g. `<button type="button" id="x" …>`. */
function openTag(html: string, id: string): string {
  const m = new RegExp(`<[a-z0-9]+\\b[^>]*\\sid="${id}"[^>]*>`).exec(html)
  if (!m) throw new Error(`no element with id="${id}" in the page`)
  return m[0]
}

/** An attribute of a tag, unescaped; null when absent. */
function attr(tag: string, name: string): string | null {
  const m = new RegExp(`\\s${name}="([^"]*)"`).exec(tag)
  return m ? unescapeHtml(m[1]!) : null
}

const isHidden = (tag: string) => /\shidden[\s>]/.test(tag)

/** The text content of the element with `id` (for elements with no children). */
function textOf(html: string, id: string): string {
  const tag = openTag(html, id)
  const start = html.indexOf(tag) + tag.length
  return unescapeHtml(html.slice(start, html.indexOf('<', start)))
}

/** The state the server embedded for the browser script. */
function embeddedState(html: string): any {
  const m = /<script type="application\/json" id="pay-state">([\s\S]*?)<\/script>/.exec(html)
  if (!m) throw new Error('no embedded pay-state script in the page')
  return JSON.parse(m[1]!)
}

/** Every URL the page makes the browser load: scripts, linked files and the wallet script. */
function loadedUrls(html: string): string[] {
  const all = (re: RegExp) => [...html.matchAll(re)].map((m) => unescapeHtml(m[1]!))
  return [
    ...all(/<script\b[^>]*\ssrc="([^"]*)"/g),
    ...all(/<link\b[^>]*\shref="([^"]*)"/g),
    ...all(/\sdata-wallet-script="([^"]*)"/g),
  ]
}

const count = (haystack: string, needle: RegExp) => (haystack.match(needle) ?? []).length

function expectPageSecurityHeaders(res: Response) {
  expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8')
  expect(res.headers.get('content-security-policy')).toBe(PAY_PAGE_CSP)
  expect(res.headers.get('content-security-policy')).not.toContain('unsafe-inline')
  expect(res.headers.get('x-frame-options')).toBe('DENY')
  expect(res.headers.get('referrer-policy')).toBe('no-referrer')
  expect(res.headers.get('x-content-type-options')).toBe('nosniff')
  expect(res.headers.get('cache-control')).toBe('no-store')
}

for (const backend of backends()) {
  describe(`hosted pay page over HTTP (docs/decisions/0026-pay-page-endpoints.md) [${backend}]`, () => {
    let t: TestServer
    let project: { id: string; key: string }
    beforeAll(async () => {
      // No NETWORKS_CONFIG: the server runs its own devnet with TUSD and ETH.
      t = await startTestServer(backend, { NETWORKS_CONFIG: '' })
      project = await t.project({ name: 'Corner Coffee' })
    })
    afterAll(() => t?.stop())

    const create = async (key: string, body: Record<string, unknown> = { amount: 12.5 }) => {
      const r = await api(t, key).create(body)
      expect(r.status).toBe(200)
      return ((await r.json()) as any).transaction.id as string
    }
    const page = async (id: string) => {
      const res = await t.fetch(`/pay/${id}`)
      return { res, html: await res.text() }
    }
    const state = async (id: string) => {
      const res = await t.fetch(`/pay/${id}/state`)
      expect(res.status).toBe(200)
      return (await res.json()) as any
    }
    const selectTusd = async (id: string) => {
      const res = await t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: 'TUSD', blockchain_network: 'devnet' }),
      })
      expect(res.status).toBe(200)
      return (await res.json()) as any
    }

    test("a fresh test transaction's page is strict-CSP HTML with the merchant, amount, test banner, token choices and its state embedded", async () => {
      const id = await create(project.key, { amount: 12.5, order_description: 'Two flat whites' })
      const { res, html } = await page(id)
      expect(res.status).toBe(200)
      expectPageSecurityHeaders(res)

      expect(html).toStartWith('<!doctype html>')
      expect(textOf(html, 'choose-heading')).toBe(PAY_TEXT.chooseHeading)
      expect(html).toContain('<h1 class="merchant">Corner Coffee</h1>')
      expect(html).toContain('Two flat whites')
      expect(html).toContain('$12.50')
      expect(html).toContain(PAY_TEXT.testBanner)
      expect(html).toContain('data-token="TUSD" data-network="devnet"')
      expect(html).toContain('data-token="ETH" data-network="devnet"')

      const { server_time: embeddedTime, ...embedded } = embeddedState(html)
      const { server_time: polledTime, ...polled } = await state(id)
      expect(embedded).toEqual(polled)
      expect(embedded).toMatchObject({
        id,
        status: 'created',
        project_name: 'Corner Coffee',
        amount_usd: 12.5,
        testing_mode: true,
        quote: null,
      })
      expect(Number.isNaN(Date.parse(embeddedTime))).toBe(false)
      expect(Number.isNaN(Date.parse(polledTime))).toBe(false)
    })

    test('every file the page loads is a same-origin /assets/ URL, served immutable at its own version and only briefly cached at any other', async () => {
      const { html } = await page(await create(project.key))
      const urls = loadedUrls(html)
      const names = urls.map((u) => new URL(u, t.url).pathname.replace('/assets/', '')).sort()
      expect(names).toEqual([
        'base.css',
        'browser-wallet.js',
        'favicon.svg',
        'pay-page.js',
        'pay.css',
      ])
      const types: Record<string, string> = {
        js: 'text/javascript; charset=utf-8',
        css: 'text/css; charset=utf-8',
        svg: 'image/svg+xml',
      }
      for (const u of urls) {
        expect(u).toStartWith('/assets/')
        const url = new URL(u, t.url)
        expect(url.origin).toBe(new URL(t.url).origin)
        const name = url.pathname.slice('/assets/'.length)
        const version = url.searchParams.get('v')
        expect(version).toMatch(/^[0-9a-f]{12}$/)

        const current = await t.fetch(u)
        expect(current.status).toBe(200)
        expect(current.headers.get('content-type')).toBe(types[name.split('.').pop()!]!)
        expect(current.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
        expect(new Uint8Array(await current.arrayBuffer())).toEqual(
          new Uint8Array(
            readFileSync(join(name === 'base.css' ? SHARED_ASSETS_DIR : PAY_ASSETS_DIR, name)),
          ),
        )

        for (const other of [`/assets/${name}?v=000000000000`, `/assets/${name}`]) {
          const stale = await t.fetch(other)
          expect(stale.status).toBe(200)
          expect(stale.headers.get('content-type')).toBe(types[name.split('.').pop()!]!)
          expect(stale.headers.get('cache-control')).not.toContain('immutable')
          await stale.body?.cancel()
        }
      }
    })

    test('an unknown asset name is 404', async () => {
      for (const path of ['/assets/no-such-file.js', '/assets/index.ts', '/assets/..%2Fpage.ts']) {
        const res = await t.fetch(path)
        expect(res.status).toBe(404)
        await res.body?.cancel()
      }
    })

    test("a merchant's order description and project name are shown as text, never as markup", async () => {
      const name = 'Acme <b>Coffee</b> & "Sons"'
      const hostile = await t.project({ name })
      const id = await create(hostile.key, { amount: 5, order_description: DESCRIPTION_ATTACK })
      const { res, html } = await page(id)
      expect(res.status).toBe(200)

      expect(html).toContain(
        '&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;',
      )
      expect(html).toContain(
        '<h1 class="merchant">Acme &lt;b&gt;Coffee&lt;/b&gt; &amp; &quot;Sons&quot;</h1>',
      )
      expect(html).toContain(
        '<title>Pay Acme &lt;b&gt;Coffee&lt;/b&gt; &amp; &quot;Sons&quot;</title>',
      )
      expect(html).not.toContain('<b>')
      expect(html).not.toContain('<img src=x')
      // The page's own two scripts (the bundle and the embedded state) and its own QR image only.
      expect(count(html, /<script/gi)).toBe(2)
      expect(count(html, /<img/gi)).toBe(1)
      expect(openTag(html, 'qr')).toStartWith('<img id="qr"')

      // The embedded state carries the strings unchanged, with nothing that could end its script
      // element.
      const raw = /<script type="application\/json" id="pay-state">([\s\S]*?)<\/script>/.exec(
        html,
      )![1]!
      expect(raw).not.toContain('<')
      expect(embeddedState(html)).toMatchObject({
        project_name: name,
        order_description: DESCRIPTION_ATTACK,
      })
    })

    test("a live transaction's page has no test banner", async () => {
      const live = await t.key(project.id, 'live')
      const id = await create(live.key, { amount: 12.5 })
      const { res, html } = await page(id)
      expect(res.status).toBe(200)
      expectPageSecurityHeaders(res)
      expect(html).toContain('Corner Coffee')
      expect(html).toContain('$12.50')
      expect(html).not.toContain(PAY_TEXT.testBanner)
      expect(html).not.toContain('test-banner')
      expect(embeddedState(html).testing_mode).toBe(false)
      // The devnet is a test network, so a live transaction is offered no token on it.
      expect(html).not.toContain('data-token=')
      expect(textOf(html, 'status-title')).toBe(PAY_TEXT.noTokens)
    })

    test('a malformed or unknown id gets a 404 HTML page saying the payment was not found, under the same CSP', async () => {
      for (const id of ['not-a-uuid', crypto.randomUUID()]) {
        const { res, html } = await page(id)
        expect(res.status).toBe(404)
        expectPageSecurityHeaders(res)
        expect(html).toStartWith('<!doctype html>')
        expect(html).toContain(`<h1>${PAY_TEXT.notFoundTitle}</h1>`)
        expect(html).not.toContain('id="pay-state"')
      }
    })

    test('the QR code is 404 until a token is chosen, then an inert SVG of the EIP-681 payment request', async () => {
      const id = await create(project.key, { amount: 12.5 })
      const before = await t.fetch(`/pay/${id}/qr.svg`)
      expect(before.status).toBe(404)
      await before.body?.cancel()

      const chosen = await selectTusd(id)
      const s = await state(id)
      expect(s.quote).toEqual(chosen.quote)
      const token = getAddress(t.server.devnet!.stablecoin)
      expect(s.quote.token_amount).toBe('12500000')
      expect(s.quote.payment_uri).toBe(
        `ethereum:${token}@31337/transfer?address=${s.quote.deposit_address}&uint256=12500000`,
      )

      // The page points its QR image at this URL.
      const src = attr(openTag((await page(id)).html, 'qr'), 'src')!
      expect(src).toStartWith(`/pay/${id}/qr.svg?v=`)
      const res = await t.fetch(src)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toBe('image/svg+xml')
      expect(res.headers.get('cache-control')).toBe('no-store')
      const svg = await res.text()
      expect(svg).toStartWith('<svg')
      expect(svg).not.toContain('<script')
      expect(svg).toBe(qrSvg(s.quote.payment_uri))

      const unknown = await t.fetch(`/pay/${crypto.randomUUID()}/qr.svg`)
      expect(unknown.status).toBe(404)
      await unknown.body?.cancel()
    })

    test('after a token is chosen the page shows the exact token amount and the checksummed deposit address to copy', async () => {
      const id = await create(project.key, { amount: 12.5 })
      const s = await selectTusd(id)
      const address = s.quote.deposit_address as string
      expect(address).toBe(getAddress(address))
      expect(address).not.toBe(address.toLowerCase())

      const { res, html } = await page(id)
      expect(res.status).toBe(200)
      expect(isHidden(openTag(html, 'pay'))).toBe(false)
      expect(isHidden(openTag(html, 'choose'))).toBe(true)
      expect(textOf(html, 'pay-amount')).toBe('12.5 TUSD')
      expect(attr(openTag(html, 'pay-amount-copy'), 'data-copy')).toBe('12.5')
      expect(textOf(html, 'pay-address')).toBe(address)
      expect(attr(openTag(html, 'pay-address-copy'), 'data-copy')).toBe(address)
      expect(attr(openTag(html, 'open-wallet'), 'href')).toBe(s.quote.payment_uri)
      expect(html).toContain('data-token="TUSD" data-network="devnet" aria-pressed="true"')
      expect(html).toContain('data-token="ETH" data-network="devnet" aria-pressed="false"')
    })
  })

  describe(`hosted pay page rate limit (docs/decisions/0026-pay-page-endpoints.md) [${backend}]`, () => {
    // Half a minute into the window, so the minute count cannot roll over mid-test and Retry-After
    // is exact.
    const clock = manualClock(Date.parse('2030-03-04T10:00:30.000Z'))
    let t: TestServer
    beforeAll(async () => {
      // The operator's setting (PAY_RATE_LIMITS), small so the test is quick.
      t = await startTestServer(backend, { PAY_RATE_LIMITS: `${LIMIT}/1000/10000` }, { clock })
    })
    afterAll(() => t?.stop())
    const LIMIT = 40
    const PAY_LIMITS = { minute: LIMIT }

    test('loading the page counts toward the per-IP pay limit (PAY_RATE_LIMITS): past it the page is 429 with Retry-After until the window ends', async () => {
      const p = await t.project()
      const id = ((await (await api(t, p.key).create({ amount: 1 })).json()) as any).transaction
        .id as string
      const statuses: number[] = []
      for (let i = 0; i < PAY_LIMITS.minute; i++) {
        const res = await t.fetch(`/pay/${id}`)
        statuses.push(res.status)
        await res.body?.cancel()
      }
      expect(statuses.filter((s) => s === 200).length).toBe(PAY_LIMITS.minute)

      const refused = await t.fetch(`/pay/${id}`)
      expect(refused.status).toBe(429)
      expect(refused.headers.get('retry-after')).toBe('30')
      // People get a page that says so, under the page's own CSP.
      expect(refused.headers.get('content-type')).toBe('text/html; charset=utf-8')
      expect(refused.headers.get('content-security-policy')).toBe(PAY_PAGE_CSP)
      const body = await refused.text()
      expect(body).toContain(`<h1>${PAY_TEXT.tooManyTitle}</h1>`)
      expect(body).toContain('wait 30 seconds')
      // One budget for the page and its JSON endpoints, which answer in JSON.
      const polled = await t.fetch(`/pay/${id}/state`)
      expect(polled.status).toBe(429)
      expect((await polled.json()).error.type).toBe('rate_limit_error')

      clock.advance(30_000)
      const next = await t.fetch(`/pay/${id}`)
      expect(next.status).toBe(200)
      await next.body?.cancel()
    })
  })
}
