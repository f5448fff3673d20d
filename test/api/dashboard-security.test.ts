import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { createHmac, randomBytes } from 'node:crypto'
import { WEBHOOK_EVENT_TYPES } from '../../src/db/schema.ts'
import { SCOPES } from '../../src/keys/api-key.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { SESSION_COOKIE, SIGN_IN_COOKIE } from '../../src/modules/dashboard/access/cookies.ts'
import { DASHBOARD_CSP } from '../../src/modules/dashboard/layout.ts'
import { DEFAULT_RANGE_DAYS, DELIVERIES_PER_PAGE } from '../../src/modules/dashboard/service.ts'
import { SIGN_IN_LIMITS } from '../../src/services.ts'
import {
  LOCK_MS,
  MAX_FAILED_SIGN_INS,
  SESSION_ABSOLUTE_MS,
  SESSION_IDLE_MS,
} from '../../src/users/session.service.ts'
import { backends } from '../helpers/databases.ts'
import {
  csrfOf,
  dashboardClient,
  memberOf,
  revealedValue,
  unescapeHtml,
  type DashboardResponse,
} from '../helpers/dashboard.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'
import { verifyWebhookSignature } from '../../src/webhooks/verify-webhook/index.mjs'

/**
 * The dashboard's defences over HTTP, as a browser (or an attacker's script) meets them:
 * sign-in with lock-out and a per-IP limit, server-side sessions with idle and absolute
 * expiry, CSRF tokens bound to the session, project membership and the test/live split for
 * every route that takes an id, the pages' security headers and `next` redirects; then the
 * behaviour behind the forms, checked through the API and the services.
 *
 * Both servers run on a manual clock. The sign-in server's clock moves (expiry, lock-out,
 * rate windows); the other one's never does, so a failed webhook delivery stays "retrying"
 * with its next try a minute away and every state read before and after a request is stable.
 */

const START = Date.parse('2030-03-01T12:00:00.000Z')
const MINUTE = 60_000
const DAY = 86_400_000

type Client = ReturnType<typeof dashboardClient>
type Member = Awaited<ReturnType<typeof memberOf>>
type Mode = 'test' | 'live'

function must<T>(r: { ok: true; value: T } | { ok: false; message: string }): T {
  if (!r.ok) throw new Error(r.message)
  return r.value
}

/** The page's error alert as the reader sees it; null when it has none. */
const WRONG_PASSWORD = `The e-mail address or the password is wrong. After ${MAX_FAILED_SIGN_INS} wrong passwords in a row an account is locked for ${LOCK_MS / 60_000} minutes.`

function errorOf(page: string): string | null {
  const m = /<div class="alert error" role="alert">([^<]*)<\/div>/.exec(page)
  return m ? unescapeHtml(m[1]!) : null
}

/** The Set-Cookie line that gives a session, or null when the response gives none. */
function sessionCookieSet(res: DashboardResponse): string | null {
  return (
    res.headers
      .getSetCookie()
      .find((c) => c.startsWith(`${SESSION_COOKIE}=`) && !c.startsWith(`${SESSION_COOKIE}=;`)) ??
    null
  )
}

/** The sign-in form's hidden `next` field. */
function hiddenNext(page: string): string | null {
  const m = /name="next" value="([^"]*)"/.exec(page)
  return m ? unescapeHtml(m[1]!) : null
}

/** Every `<script …>` opening tag of a page. */
const scriptTags = (page: string) => [...page.matchAll(/<script\b[^>]*>/g)].map((m) => m[0])

/** The rows of a delivery table: id and status badge. */
function deliveryRowsOf(page: string): { id: string; status: string | null }[] {
  return [...page.matchAll(/<tr data-delivery="([^"]+)">([\s\S]*?)<\/tr>/g)].map((m) => ({
    id: m[1]!,
    status: /<td[^>]*><span class="badge badge-(\w+)">\1<\/span><\/td>/.exec(m[2]!)?.[1] ?? null,
  }))
}

/** The overview's numbers, read from its data-stat and data-status-count attributes. */
function overviewStats(page: string) {
  const text = (name: string) => {
    const m = new RegExp(`data-stat="${name}"[^>]*>([^<]*)<`).exec(page)
    if (!m) throw new Error(`no data-stat="${name}" in the page`)
    return Number(m[1]!.replace(/,/g, ''))
  }
  const value = (name: string) => {
    const m = new RegExp(`data-stat="${name}"\\s+data-value="([^"]*)"`).exec(page)
    if (!m) throw new Error(`no data-value for ${name} in the page`)
    return Number(m[1])
  }
  return {
    total_transactions: text('total_transactions'),
    total_volume_usd: value('total_volume_usd'),
    volume_by_currency: Object.fromEntries(
      [...page.matchAll(/data-currency-volume="(\w+)"\s+data-value="([^"]*)"/g)].map((m) => [
        m[1],
        Number(m[2]),
      ]),
    ),
    completed_transactions: text('completed_transactions'),
    conversion_rate: value('conversion_rate'),
    by_status: Object.fromEntries(
      [...page.matchAll(/data-status-count="(\w+)">(\d+)</g)].map((m) => [m[1], Number(m[2])]),
    ),
  }
}

function expectDashboardHeaders(label: string, res: DashboardResponse) {
  const h = (name: string) => res.headers.get(name)
  expect({
    page: label,
    csp: h('content-security-policy'),
    frame: h('x-frame-options'),
    referrer: h('referrer-policy'),
    cache: h('cache-control'),
    sniff: h('x-content-type-options'),
    type: h('content-type'),
  }).toEqual({
    page: label,
    csp: DASHBOARD_CSP,
    frame: 'DENY',
    referrer: 'no-referrer',
    cache: 'no-store',
    sniff: 'nosniff',
    type: 'text/html; charset=utf-8',
  })
}

/**
 * `next` values that must never send a signed-in user off the dashboard: other sites, and dot
 * segments a browser would resolve to a path outside it (`/dashboard/../x` is `/x`).
 */
const OFFSITE_NEXT = [
  '//evil.example',
  'https://evil.example',
  '/\\evil',
  '/dashboard/../x',
  '/dashboard/%2e%2e/x',
]

/** Every route that acts on one id, under `/dashboard/{project}/{mode}`. */
interface Ids {
  transaction: string
  completed: string
  key: string
  endpoint: string
  disabledEndpoint: string
  delivery: string
}
interface IdRoute {
  label: string
  method: 'GET' | 'POST'
  path: (ids: Ids) => string
  form?: (password: string) => Record<string, string>
}
const ID_ROUTES: IdRoute[] = [
  { label: 'GET transactions/:id', method: 'GET', path: (i) => `/transactions/${i.transaction}` },
  {
    label: 'POST transactions/:id/cancel',
    method: 'POST',
    path: (i) => `/transactions/${i.transaction}/cancel`,
  },
  {
    label: 'POST transactions/:id/retry-webhook (a completed one)',
    method: 'POST',
    path: (i) => `/transactions/${i.completed}/retry-webhook`,
  },
  { label: 'POST keys/:id/revoke', method: 'POST', path: (i) => `/keys/${i.key}/revoke` },
  { label: 'POST keys/:id/delete', method: 'POST', path: (i) => `/keys/${i.key}/delete` },
  { label: 'GET endpoints/:id', method: 'GET', path: (i) => `/endpoints/${i.endpoint}` },
  {
    label: 'POST endpoints/:id/reveal (with the right password)',
    method: 'POST',
    path: (i) => `/endpoints/${i.endpoint}/reveal`,
    form: (password) => ({ password }),
  },
  {
    label: 'POST endpoints/:id/rotate (with the right password)',
    method: 'POST',
    path: (i) => `/endpoints/${i.endpoint}/rotate`,
    form: (password) => ({ password }),
  },
  {
    label: 'POST endpoints/:id/enable (a disabled one)',
    method: 'POST',
    path: (i) => `/endpoints/${i.disabledEndpoint}/enable`,
  },
  {
    label: 'POST endpoints/:id/disable',
    method: 'POST',
    path: (i) => `/endpoints/${i.endpoint}/disable`,
  },
  {
    label: 'POST endpoints/:id/test',
    method: 'POST',
    path: (i) => `/endpoints/${i.endpoint}/test`,
    form: () => ({ event: 'transaction.completed' }),
  },
  { label: 'GET deliveries/:id', method: 'GET', path: (i) => `/deliveries/${i.delivery}` },
  {
    label: 'POST deliveries/:id/redeliver',
    method: 'POST',
    path: (i) => `/deliveries/${i.delivery}/redeliver`,
  },
]

/** The routes without an id. */
const PAGE_ROUTES: IdRoute[] = [
  { label: 'GET (overview)', method: 'GET', path: () => '' },
  { label: 'GET transactions', method: 'GET', path: () => '/transactions' },
  { label: 'GET keys', method: 'GET', path: () => '/keys' },
  {
    label: 'POST keys (create a key)',
    method: 'POST',
    path: () => '/keys',
    form: () => ({ name: 'Intruder' }),
  },
  { label: 'GET endpoints', method: 'GET', path: () => '/endpoints' },
  {
    label: 'POST endpoints (add an endpoint)',
    method: 'POST',
    path: () => '/endpoints',
    form: () => ({ url: 'http://127.0.0.1:9/intruder', events: 'transaction.completed' }),
  },
  { label: 'GET deliveries', method: 'GET', path: () => '/deliveries' },
  { label: 'GET settings', method: 'GET', path: () => '/settings' },
]

/** An id that is not one: transaction ids are UUIDs, the others prefixed random strings. */
const NOT_AN_ID = 'not-an-id'
const MALFORMED: Ids = {
  transaction: NOT_AN_ID,
  completed: NOT_AN_ID,
  key: NOT_AN_ID,
  endpoint: NOT_AN_ID,
  disabledEndpoint: NOT_AN_ID,
  delivery: NOT_AN_ID,
}

for (const backend of backends()) {
  describe(`dashboard sign-in and sessions [${backend}]`, () => {
    const clock = manualClock(START)
    let t: TestServer
    let m: Member
    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
      m = await memberOf(t, { projectName: 'Sign-in shop' })
    })
    afterAll(() => t?.stop())
    // Sign-ins are limited per client IP and every request here comes from this machine: each
    // test starts in a minute of its own, so only its own attempts count.
    beforeEach(() => clock.advance(MINUTE))

    const overview = () => `/dashboard/${m.project.id}/test`
    const toSignIn = (path: string) => ({
      status: 303,
      location: `/dashboard/sign-in?next=${encodeURIComponent(path)}`,
    })
    /** The answer to a request carrying only this session token (the client's jar bypassed). */
    async function replay(token: string, path = overview()) {
      const res = await t.fetch(path, { headers: { cookie: `${SESSION_COOKIE}=${token}` } })
      await res.arrayBuffer()
      return { status: res.status, location: res.headers.get('location') }
    }
    async function signedIn(email = m.email, password = m.password) {
      const c = dashboardClient(t)
      const res = await c.signIn(email, password)
      expect({ status: res.status, location: res.location }).toEqual({
        status: 303,
        location: '/dashboard',
      })
      return c
    }

    describe('signing in', () => {
      test('the right password answers 303 to /dashboard with a __Host- session cookie that is HttpOnly, Secure, SameSite=Strict, Path=/ and nothing else', async () => {
        const c = dashboardClient(t)
        const res = await c.signIn(m.email, m.password)
        expect({ status: res.status, location: res.location }).toEqual({
          status: 303,
          location: '/dashboard',
        })
        const cookie = sessionCookieSet(res)
        expect(cookie).not.toBeNull()
        const [pair, ...attributes] = cookie!.split(';').map((s) => s.trim())
        const name = pair!.slice(0, pair!.indexOf('='))
        expect(name).toStartWith('__Host-')
        expect(pair!.slice(name.length + 1).length).toBeGreaterThanOrEqual(32)
        // No Domain (the __Host- rule) and no Expires/Max-Age: it lives as long as the browser
        // session at most.
        expect(attributes.map((a) => a.toLowerCase()).sort()).toEqual([
          'httponly',
          'path=/',
          'samesite=strict',
          'secure',
        ])
        // The sign-in form's pre-session cookie is dropped.
        expect(
          res.headers
            .getSetCookie()
            .some((c) => c.startsWith(`${SIGN_IN_COOKIE}=;`) && /max-age=0/i.test(c)),
        ).toBe(true)

        expect((await c.get('/dashboard')).location).toBe(overview())
        const page = await c.get(overview())
        expect(page.status).toBe(200)
        expect(page.text).toContain(m.email)
      })

      test('a wrong password answers 401 with a message that does not say which part was wrong, and no session cookie', async () => {
        const c = dashboardClient(t)
        const res = await c.signIn(m.email, 'not the right password')
        expect(res.status).toBe(401)
        expect(errorOf(res.text)).toBe(WRONG_PASSWORD)
        expect(sessionCookieSet(res)).toBeNull()
        expect(c.jar.has(SESSION_COOKIE)).toBe(false)
        expect((await c.get(overview())).status).toBe(303)
      })

      test('an unknown e-mail address gets the same status and message as a wrong password, and no session cookie', async () => {
        const wrong = await dashboardClient(t).signIn(m.email, 'not the right password')
        const unknown = await dashboardClient(t).signIn('nobody-here@example.com', m.password)
        expect({ status: unknown.status, error: errorOf(unknown.text) }).toEqual({
          status: wrong.status,
          error: errorOf(wrong.text),
        })
        expect(unknown.status).toBe(401)
        expect(sessionCookieSet(unknown)).toBeNull()
      })

      test(`${MAX_FAILED_SIGN_INS} wrong passwords lock the account: the right one is refused with the wrong-password answer until LOCK_MS has passed, then it works`, async () => {
        const email = 'locked-out@example.com'
        const password = 'the locked user password'
        must(await t.server.services.users.create({ email, password, projectId: m.project.id }))
        const c = dashboardClient(t)
        const answers: { status: number; error: string | null }[] = []
        for (let i = 0; i < MAX_FAILED_SIGN_INS; i++) {
          const r = await c.signIn(email, `wrong guess ${i}`)
          answers.push({ status: r.status, error: errorOf(r.text) })
        }
        expect(answers).toEqual(
          Array(MAX_FAILED_SIGN_INS).fill({ status: 401, error: WRONG_PASSWORD }),
        )

        // Locked, the right password gets the very answer a wrong one gets: the reply tells
        // nobody which accounts exist or are locked.
        const locked = await c.signIn(email, password)
        expect({ status: locked.status, error: errorOf(locked.text) }).toEqual({
          status: 401,
          error: WRONG_PASSWORD,
        })
        expect(sessionCookieSet(locked)).toBeNull()

        // The lock is the account's, not the address's: another member signs in meanwhile.
        await signedIn()

        clock.advance(LOCK_MS - 1)
        const almost = await c.signIn(email, password)
        expect({ status: almost.status, error: errorOf(almost.text) }).toEqual({
          status: 401,
          error: WRONG_PASSWORD,
        })
        expect(sessionCookieSet(almost)).toBeNull()

        clock.advance(1)
        const after = await c.signIn(email, password)
        expect({ status: after.status, location: after.location }).toEqual({
          status: 303,
          location: '/dashboard',
        })
        expect(sessionCookieSet(after)).not.toBeNull()
      })

      test(`from one address, sign-in POST number ${SIGN_IN_LIMITS.minute + 1} within a minute gets 429 with Retry-After, even with the right password; the next minute it works`, async () => {
        const limit = SIGN_IN_LIMITS.minute
        const tries = await Promise.all(
          Array.from({ length: limit }, (_, i) =>
            dashboardClient(t).signIn(`nobody-${i}@example.com`, 'some password'),
          ),
        )
        expect(tries.map((r) => r.status)).toEqual(Array(limit).fill(401))

        const c = dashboardClient(t)
        const refused = await c.signIn(m.email, m.password)
        const now = clock.now()
        const windowEnd = now - (now % MINUTE) + MINUTE
        expect({ status: refused.status, retryAfter: refused.headers.get('retry-after') }).toEqual({
          status: 429,
          retryAfter: String(Math.ceil((windowEnd - now) / 1000)),
        })
        expect(errorOf(refused.text)).toStartWith('Too many sign-in attempts from your address')
        expect(sessionCookieSet(refused)).toBeNull()

        clock.set(windowEnd)
        const res = await c.signIn(m.email, m.password)
        expect(res.status).toBe(303)
        expect(sessionCookieSet(res)).not.toBeNull()
      })

      test("a sign-in POST is refused with 403 unless it carries its own form's pre-session cookie and token from this site (login CSRF), even with the right password", async () => {
        const foreign = dashboardClient(t)
        const foreignToken = csrfOf((await foreign.get('/dashboard/sign-in')).text)
        const fields = { email: m.email, password: m.password }
        const withForm = async () => {
          const c = dashboardClient(t)
          const token = csrfOf((await c.get('/dashboard/sign-in')).text)
          return { c, token }
        }
        const cases: [string, () => Promise<DashboardResponse>][] = [
          [
            'no pre-session cookie and no token',
            () => dashboardClient(t).post('/dashboard/sign-in', fields, { csrf: null }),
          ],
          [
            "another browser's token without its cookie",
            () => dashboardClient(t).post('/dashboard/sign-in', fields, { csrf: foreignToken }),
          ],
          [
            'the pre-session cookie without a token',
            async () => (await withForm()).c.post('/dashboard/sign-in', fields, { csrf: null }),
          ],
          [
            "the pre-session cookie with another browser's token",
            async () =>
              (await withForm()).c.post('/dashboard/sign-in', fields, { csrf: foreignToken }),
          ],
          [
            'cookie and token with Sec-Fetch-Site: cross-site',
            async () => {
              const { c, token } = await withForm()
              return c.post('/dashboard/sign-in', fields, {
                csrf: token,
                headers: { 'sec-fetch-site': 'cross-site' },
              })
            },
          ],
        ]
        for (const [label, post] of cases) {
          const res = await post()
          expect({ case: label, status: res.status, session: sessionCookieSet(res) }).toEqual({
            case: label,
            status: 403,
            session: null,
          })
        }
        const { c, token } = await withForm()
        expect((await c.post('/dashboard/sign-in', fields, { csrf: token })).status).toBe(303)
      })
    })

    describe('sessions', () => {
      test('every page without a session redirects to sign-in with next=, a form post does nothing, and signing in through that form lands on the page', async () => {
        const c = dashboardClient(t)
        for (const rest of [
          '',
          '/transactions',
          '/keys',
          '/endpoints',
          '/deliveries',
          '/settings',
        ]) {
          const path = `${overview()}${rest}`
          const res = await c.get(path)
          expect({ status: res.status, location: res.location }).toEqual(toSignIn(path))
        }
        const keysBefore = (await t.server.services.keys.list(m.project.id)).length
        const posted = await c.post(
          `${overview()}/keys`,
          { name: 'Made without a session' },
          { csrf: 'anything' },
        )
        expect({ status: posted.status, location: posted.location }).toEqual({
          status: 303,
          location: '/dashboard/sign-in?notice=session-ended',
        })
        expect((await t.server.services.keys.list(m.project.id)).length).toBe(keysBefore)

        const path = `${overview()}/keys`
        const form = await c.get(toSignIn(path).location)
        expect(hiddenNext(form.text)).toBe(path)
        const res = await c.post(
          '/dashboard/sign-in',
          { email: m.email, password: m.password, next: hiddenNext(form.text)! },
          { csrf: csrfOf(form.text) },
        )
        expect({ status: res.status, location: res.location }).toEqual({
          status: 303,
          location: path,
        })
        expect((await c.get(path)).status).toBe(200)
      })

      test('a forged or random session cookie value gets the sign-in redirect, and the cookie is cleared', async () => {
        const real = await signedIn()
        const csrf = csrfOf((await real.page(overview())).text)
        const forgeries: [string, string][] = [
          ['a word', 'forged'],
          ['32 random bytes', randomBytes(32).toString('base64url')],
          ["a session's CSRF token", csrf],
          ['a very long value', 'x'.repeat(500)],
        ]
        for (const [label, value] of forgeries) {
          const res = await t.fetch(overview(), {
            headers: { cookie: `${SESSION_COOKIE}=${value}` },
          })
          await res.arrayBuffer()
          expect({
            forgery: label,
            status: res.status,
            location: res.headers.get('location'),
          }).toEqual({ forgery: label, ...toSignIn(overview()) })
          expect(
            res.headers
              .getSetCookie()
              .some((c) => c.startsWith(`${SESSION_COOKIE}=;`) && /max-age=0/i.test(c)),
          ).toBe(true)
          const root = await t.fetch('/dashboard', {
            headers: { cookie: `${SESSION_COOKIE}=${value}` },
          })
          await root.arrayBuffer()
          expect({
            forgery: label,
            status: root.status,
            location: root.headers.get('location'),
          }).toEqual({ forgery: label, status: 303, location: '/dashboard/sign-in' })
        }
      })

      test('a session unused for SESSION_IDLE_MS is gone on the server, while one used within the idle window lives on', async () => {
        const c = await signedIn()
        const token = c.jar.get(SESSION_COOKIE)!
        clock.advance(SESSION_IDLE_MS - 1)
        expect((await c.get(overview())).status).toBe(200)
        clock.advance(SESSION_IDLE_MS - 1)
        expect((await c.get(overview())).status).toBe(200)

        clock.advance(SESSION_IDLE_MS)
        const res = await c.get(overview())
        expect({ status: res.status, location: res.location }).toEqual(toSignIn(overview()))
        expect(await replay(token)).toEqual(toSignIn(overview()))
      })

      test('a session ends SESSION_ABSOLUTE_MS after sign-in even when it is used every 25 minutes', async () => {
        const c = await signedIn()
        const token = c.jar.get(SESSION_COOKIE)!
        const signedInAt = clock.now()
        const step = 25 * MINUTE
        while (clock.now() + step < signedInAt + SESSION_ABSOLUTE_MS) {
          clock.advance(step)
          expect({
            after: clock.now() - signedInAt,
            status: (await c.get(overview())).status,
          }).toEqual({ after: clock.now() - signedInAt, status: 200 })
        }
        clock.set(signedInAt + SESSION_ABSOLUTE_MS - 1)
        expect((await c.get(overview())).status).toBe(200)

        clock.advance(1)
        const res = await c.get(overview())
        expect({ status: res.status, location: res.location }).toEqual(toSignIn(overview()))
        expect(await replay(token)).toEqual(toSignIn(overview()))
      })

      test('signing out with the CSRF token ends the session on the server: the old cookie value replayed gets the sign-in redirect', async () => {
        const c = await signedIn()
        await c.page(overview())
        const token = c.jar.get(SESSION_COOKIE)!
        expect(await replay(token)).toEqual({ status: 200, location: null })

        const out = await c.post('/dashboard/sign-out', {})
        expect({ status: out.status, location: out.location }).toEqual({
          status: 303,
          location: '/dashboard/sign-in?notice=signed-out',
        })
        expect(
          out.headers
            .getSetCookie()
            .some((s) => s.startsWith(`${SESSION_COOKIE}=;`) && /max-age=0/i.test(s)),
        ).toBe(true)
        expect(await replay(token)).toEqual(toSignIn(overview()))
      })
    })

    describe('next= after sign-in stays on the dashboard', () => {
      for (const next of OFFSITE_NEXT) {
        test(`next=${next} lands on /dashboard: in the sign-in form, after signing in, and when already signed in`, async () => {
          const c = dashboardClient(t)
          const form = await c.get(`/dashboard/sign-in?next=${encodeURIComponent(next)}`)
          // Posted as given, as an attacker's page would, not as the form rewrote it.
          const res = await c.post(
            '/dashboard/sign-in',
            { email: m.email, password: m.password, next },
            { csrf: csrfOf(form.text) },
          )
          expect(res.status).toBe(303)
          const again = await c.get(`/dashboard/sign-in?next=${encodeURIComponent(next)}`)
          expect({
            form: hiddenNext(form.text),
            afterSignIn: res.location,
            signedIn: again.location,
          }).toEqual({ form: '/dashboard', afterSignIn: '/dashboard', signedIn: '/dashboard' })
        })
      }
    })
  })

  describe(`dashboard forms, projects and modes [${backend}]`, () => {
    const clock = manualClock(START)
    let t: TestServer
    let receiver: ReturnType<typeof Bun.serve>
    let a: Member
    let b: Member
    let aLiveKey: string
    /** A's main session, A's second session (another device) and B's session. */
    let browserA: Client
    let browserA2: Client
    let browserB: Client
    let aTest: Resources
    let aLive: Resources
    let bTest: Resources

    interface Resources extends Ids {
      secret: string
      /**
       * Strings only a page about these resources would show (not their ids: a page may echo the id
       * it was asked for).
       */
      tells: string[]
    }

    const services = () => t.server.services
    const base = (who: Member, mode: Mode = 'test') => `/dashboard/${who.project.id}/${mode}`

    async function signedIn(who: Member) {
      const c = dashboardClient(t)
      const res = await c.signIn(who.email, who.password)
      if (res.status !== 303) throw new Error(`sign-in of ${who.email}: ${res.status}`)
      await c.page(base(who))
      if (!c.csrf) throw new Error('no CSRF token on the overview')
      return c
    }

    async function createTx(key: string, body: Record<string, unknown>) {
      const res = await api(t, key).create(body)
      const json = (await res.json()) as any
      if (res.status !== 200)
        throw new Error(`create transaction: ${res.status} ${JSON.stringify(json)}`)
      return json.transaction as { id: string; transaction_number: string }
    }

    async function complete(id: string) {
      for (const e of PATH_TO.completed) must(await services().lifecycle.apply(id, e))
    }

    /** An endpoint that hears of nothing by itself (the clock never reaches an expiry here). */
    async function quietEndpoint(projectId: string, url: string, enabled = true) {
      const ep = must(
        await services().endpoints.create({
          projectId,
          mode: 'test',
          url,
          eventTypes: ['transaction.expired'],
        }),
      )
      if (!enabled) must(await services().endpoints.setEnabled(ep.endpoint.id, false))
      return ep
    }

    /** One of everything with an id, in one project and mode. */
    async function resources(
      who: Member,
      key: string,
      mode: Mode,
      url: string,
      orderId: string,
    ): Promise<Resources> {
      const s = services()
      const endpoint = must(
        await s.endpoints.create({
          projectId: who.project.id,
          mode,
          url,
          eventTypes: [...WEBHOOK_EVENT_TYPES],
        }),
      )
      const disabled = must(
        await s.endpoints.create({
          projectId: who.project.id,
          mode,
          url: `${url}-off`,
          eventTypes: [...WEBHOOK_EVENT_TYPES],
        }),
      )
      must(await s.endpoints.setEnabled(disabled.endpoint.id, false))
      const transaction = await createTx(key, { amount: 10, order_id: orderId })
      const completed = await createTx(key, { amount: 25, order_id: `${orderId}-paid` })
      await complete(completed.id)
      const extraKey = await t.key(who.project.id, mode)
      const delivery = must(
        await s.webhooks.sendTest(endpoint.endpoint.id, 'transaction.completed'),
      )
      await s.dispatcher.runOnce()
      return {
        transaction: transaction.id,
        completed: completed.id,
        key: extraKey.keyId,
        endpoint: endpoint.endpoint.id,
        disabledEndpoint: disabled.endpoint.id,
        delivery: delivery.id,
        secret: endpoint.secret,
        tells: [
          endpoint.secret,
          disabled.secret,
          url,
          orderId,
          transaction.transaction_number,
          completed.transaction_number,
        ],
      }
    }

    /**
     * Everything a project has in one mode that a dashboard form could change, read through the
     * services.
     */
    async function stateOf(who: Member, mode: Mode) {
      const s = services()
      const scope = { projectId: who.project.id, mode }
      await s.dispatcher.runOnce()
      const keys = (await s.keys.list(who.project.id, mode)).map((k) => ({
        id: k.id,
        revokedAt: k.revokedAt?.toISOString() ?? null,
      }))
      const endpoints = await Promise.all(
        (await s.endpoints.list(who.project.id, mode)).map(async (e) => ({
          id: e.id,
          enabled: e.enabled,
          eventTypes: e.eventTypes,
          secret: must(await s.endpoints.revealSecret(e.id)).secret,
        })),
      )
      const transactions = must(
        await s.transactions.list(scope, who.project.id, { limit: 100, offset: 0 }),
      ).transactions.map((x) => ({ id: x.id, status: x.status }))
      const deliveries = must(await s.webhooks.listDeliveries(scope, { limit: 100 })).map((d) => ({
        id: d.id,
        status: d.status,
        attempts: d.attempts,
        nextAttemptAt: d.nextAttemptAt?.toISOString() ?? null,
      }))
      return { keys, endpoints, transactions, deliveries }
    }

    const send = (c: Client, route: IdRoute, prefix: string, ids: Ids, password: string) =>
      route.method === 'GET'
        ? c.get(prefix + route.path(ids))
        : c.post(prefix + route.path(ids), route.form?.(password) ?? {})

    beforeAll(async () => {
      receiver = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('ok') })
      // Live endpoints' host names resolve to a documentation address the SSRF guard refuses:
      // their deliveries fail at once, and nothing leaves this machine.
      t = await startTestServer(backend, {}, { clock, resolver: async () => ['192.0.2.1'] })
      a = await memberOf(t, { projectName: 'Shop A' })
      b = await memberOf(t, { projectName: 'Shop B' })
      aLiveKey = (await t.key(a.project.id, 'live')).key
      browserA = await signedIn(a)
      browserA2 = await signedIn(a)
      browserB = await signedIn(b)
      aTest = await resources(a, a.project.key, 'test', 'http://127.0.0.1:9/a-hook', 'order-a')
      aLive = await resources(
        a,
        aLiveKey,
        'live',
        'https://hooks.shop-a.example/live',
        'order-a-live',
      )
      bTest = await resources(b, b.project.key, 'test', 'http://127.0.0.1:9/b-hook', 'order-b')
      bTest.tells.push('Shop B')
    })
    afterAll(async () => {
      await t?.stop()
      receiver?.stop(true)
    })

    describe("another project's ids under A's own URL", () => {
      for (const route of ID_ROUTES) {
        test(`${route.label} with project B's id is 404, shows nothing of B and changes nothing in B`, async () => {
          const before = await stateOf(b, 'test')
          const res = await send(browserA, route, base(a), bTest, a.password)
          expect(res.status).toBe(404)
          for (const tell of bTest.tells) expect(res.text).not.toContain(tell)
          expect(await stateOf(b, 'test')).toEqual(before)
        })
      }

      test("filtering A's deliveries by B's endpoint id lists none of B's deliveries", async () => {
        const res = await browserA.get(`${base(a)}/deliveries?endpoint=${bTest.endpoint}`)
        expect(res.status).toBe(200)
        expect(deliveryRowsOf(res.text)).toEqual([])
        for (const tell of bTest.tells) expect(res.text).not.toContain(tell)
      })
    })

    describe("project B's URL, for A who is not a member of B", () => {
      for (const route of [...PAGE_ROUTES, ...ID_ROUTES]) {
        test(`${route.label} under B's URL is 404 for A, shows nothing of B and changes nothing in B`, async () => {
          const before = await stateOf(b, 'test')
          const res = await send(browserA, route, base(b), bTest, a.password)
          expect(res.status).toBe(404)
          for (const tell of bTest.tells) expect(res.text).not.toContain(tell)
          expect(await stateOf(b, 'test')).toEqual(before)
        })
      }

      test("a mode other than test or live is 404, also in A's own project", async () => {
        for (const path of [
          `/dashboard/${a.project.id}/staging`,
          `/dashboard/${a.project.id}/Test/keys`,
          `/dashboard/${a.project.id}/live%20/keys`,
        ]) {
          expect({ path, status: (await browserA.get(path)).status }).toEqual({ path, status: 404 })
        }
      })
    })

    describe("A's own live ids under A's test URL", () => {
      for (const route of ID_ROUTES) {
        test(`${route.label} with a live id under /test/ is 404 and changes nothing in live mode`, async () => {
          const before = await stateOf(a, 'live')
          const res = await send(browserA, route, base(a, 'test'), aLive, a.password)
          expect(res.status).toBe(404)
          for (const tell of aLive.tells) expect(res.text).not.toContain(tell)
          expect(await stateOf(a, 'live')).toEqual(before)
        })
      }

      test('the test-mode lists (keys, endpoints, transactions, deliveries) show no live item, and the live lists no test item', async () => {
        const aTestKeyId = a.project.keyId
        const lists = async (mode: Mode) => {
          const [keys, endpoints, transactions, deliveries] = await Promise.all(
            ['/keys', '/endpoints', '/transactions', '/deliveries'].map((p) =>
              browserA.get(`${base(a, mode)}${p}`),
            ),
          )
          for (const r of [keys, endpoints, transactions, deliveries]) expect(r!.status).toBe(200)
          return {
            keys: keys!.text,
            endpoints: endpoints!.text,
            transactions: transactions!.text,
            deliveries: deliveries!.text,
          }
        }
        const shows = (l: Awaited<ReturnType<typeof lists>>, own: Ids, extraKey: string) => ({
          keys: [
            l.keys.includes(`data-key="${own.key}"`),
            l.keys.includes(`data-key="${extraKey}"`),
          ],
          endpoints: [
            l.endpoints.includes(`/endpoints/${own.endpoint}"`),
            l.endpoints.includes(`/endpoints/${own.disabledEndpoint}"`),
          ],
          transactions: [
            l.transactions.includes(`/transactions/${own.transaction}"`),
            l.transactions.includes(`/transactions/${own.completed}"`),
          ],
          deliveries: [l.deliveries.includes(`data-delivery="${own.delivery}"`)],
        })
        const liveKeyId = (await services().keys.list(a.project.id, 'live')).find(
          (k) => k.id !== aLive.key,
        )!.id
        const testLists = await lists('test')
        const live = await lists('live')
        const all = {
          keys: [true, true],
          endpoints: [true, true],
          transactions: [true, true],
          deliveries: [true],
        }
        const none = {
          keys: [false, false],
          endpoints: [false, false],
          transactions: [false, false],
          deliveries: [false],
        }
        expect({
          testShowsTest: shows(testLists, aTest, aTestKeyId),
          testShowsLive: shows(testLists, aLive, liveKeyId),
          liveShowsLive: shows(live, aLive, liveKeyId),
          liveShowsTest: shows(live, aTest, aTestKeyId),
        }).toEqual({
          testShowsTest: all,
          testShowsLive: none,
          liveShowsLive: all,
          liveShowsTest: none,
        })
      })
    })

    describe('ids that are not ids', () => {
      // Transaction ids are UUID columns: text that is no UUID must be "not found", never a
      // database error.
      for (const route of ID_ROUTES) {
        test(`${route.label} with an id that is no id ("${NOT_AN_ID}") is the 404 page, like any unknown id`, async () => {
          const before = await stateOf(a, 'test')
          const res = await send(browserA, route, base(a), MALFORMED, a.password)
          expect({ status: res.status, type: res.headers.get('content-type') }).toEqual({
            status: 404,
            type: 'text/html; charset=utf-8',
          })
          expect(await stateOf(a, 'test')).toEqual(before)
        })
      }
    })

    describe('CSRF: every state-changing form', () => {
      interface Target {
        path: string
        fields?: Record<string, string | string[]>
        /**
         * Who posts (A's main session unless said), and a session of the same user whose token must
         * not work either.
         */
        client?: Client
        otherSession?: Client
        /** Must never appear in a refused response. */
        secret?: string
        /** What the post would change. */
        read: () => Promise<unknown>
        /** The accepted post's response and what it changed. */
        accepted: (res: DashboardResponse, before: unknown) => Promise<void>
      }
      const scope = () => ({ projectId: a.project.id, mode: 'test' as const })
      const redirectTo = (res: DashboardResponse, location: string) =>
        expect({ status: res.status, location: res.location }).toEqual({ status: 303, location })

      const FORMS: { label: string; prepare: () => Promise<Target> }[] = [
        {
          label: 'sign-out',
          prepare: async () => {
            const c = await signedIn(a)
            return {
              path: '/dashboard/sign-out',
              client: c,
              otherSession: browserA,
              read: async () => (await c.get(base(a))).status,
              accepted: async (res) => {
                redirectTo(res, '/dashboard/sign-in?notice=signed-out')
                expect((await c.get(base(a))).status).toBe(303)
              },
            }
          },
        },
        {
          label: 'keys (create a key)',
          prepare: async () => ({
            path: `${base(a)}/keys`,
            fields: { name: 'CSRF probe', scopes: [...SCOPES] },
            read: async () => (await services().keys.list(a.project.id, 'test')).length,
            accepted: async (res, before) => {
              expect(res.status).toBe(201)
              expect(revealedValue(res.text)).toMatch(/^sk_test_/)
              expect((await services().keys.list(a.project.id, 'test')).length).toBe(
                (before as number) + 1,
              )
            },
          }),
        },
        {
          label: 'keys/:id/revoke',
          prepare: async () => {
            const k = await t.key(a.project.id, 'test')
            const read = async () =>
              (await services().keys.list(a.project.id, 'test'))
                .find((x) => x.id === k.keyId)
                ?.revokedAt?.toISOString() ?? 'active'
            return {
              path: `${base(a)}/keys/${k.keyId}/revoke`,
              read,
              accepted: async (res) => {
                redirectTo(res, `${base(a)}/keys?notice=key-revoked`)
                expect(await read()).not.toBe('active')
              },
            }
          },
        },
        {
          label: 'keys/:id/delete',
          prepare: async () => {
            const k = await t.key(a.project.id, 'test')
            const read = async () =>
              (await services().keys.list(a.project.id, 'test')).some((x) => x.id === k.keyId)
            return {
              path: `${base(a)}/keys/${k.keyId}/delete`,
              read,
              accepted: async (res) => {
                redirectTo(res, `${base(a)}/keys?notice=key-deleted`)
                expect(await read()).toBe(false)
              },
            }
          },
        },
        {
          label: 'endpoints (add an endpoint)',
          prepare: async () => ({
            path: `${base(a)}/endpoints`,
            fields: { url: 'http://127.0.0.1:9/csrf-new', events: ['transaction.expired'] },
            read: async () => (await services().endpoints.list(a.project.id, 'test')).length,
            accepted: async (res, before) => {
              expect(res.status).toBe(201)
              expect(revealedValue(res.text)).toMatch(/^whsec_/)
              expect((await services().endpoints.list(a.project.id, 'test')).length).toBe(
                (before as number) + 1,
              )
            },
          }),
        },
        {
          label: 'endpoints/:id/reveal (with the right password)',
          prepare: async () => {
            const ep = await quietEndpoint(a.project.id, 'http://127.0.0.1:9/csrf-reveal')
            return {
              path: `${base(a)}/endpoints/${ep.endpoint.id}/reveal`,
              fields: { password: a.password },
              secret: ep.secret,
              read: async () => null,
              accepted: async (res) => {
                expect(res.status).toBe(200)
                expect(revealedValue(res.text)).toBe(ep.secret)
              },
            }
          },
        },
        {
          label: 'endpoints/:id/rotate (with the right password)',
          prepare: async () => {
            const ep = await quietEndpoint(a.project.id, 'http://127.0.0.1:9/csrf-rotate')
            const read = async () =>
              must(await services().endpoints.revealSecret(ep.endpoint.id)).secret
            return {
              path: `${base(a)}/endpoints/${ep.endpoint.id}/rotate`,
              fields: { password: a.password },
              read,
              accepted: async (res) => {
                expect(res.status).toBe(200)
                const now = await read()
                expect(now).not.toBe(ep.secret)
                expect(revealedValue(res.text)).toBe(now)
              },
            }
          },
        },
        {
          label: 'endpoints/:id/enable',
          prepare: async () => {
            const ep = await quietEndpoint(a.project.id, 'http://127.0.0.1:9/csrf-enable', false)
            const read = async () => must(await services().endpoints.get(ep.endpoint.id)).enabled
            return {
              path: `${base(a)}/endpoints/${ep.endpoint.id}/enable`,
              read,
              accepted: async (res) => {
                redirectTo(res, `${base(a)}/endpoints/${ep.endpoint.id}?notice=endpoint-enabled`)
                expect(await read()).toBe(true)
              },
            }
          },
        },
        {
          label: 'endpoints/:id/disable',
          prepare: async () => {
            const ep = await quietEndpoint(a.project.id, 'http://127.0.0.1:9/csrf-disable')
            const read = async () => must(await services().endpoints.get(ep.endpoint.id)).enabled
            return {
              path: `${base(a)}/endpoints/${ep.endpoint.id}/disable`,
              read,
              accepted: async (res) => {
                redirectTo(res, `${base(a)}/endpoints/${ep.endpoint.id}?notice=endpoint-disabled`)
                expect(await read()).toBe(false)
              },
            }
          },
        },
        {
          label: 'endpoints/:id/test',
          prepare: async () => {
            const ep = await quietEndpoint(a.project.id, 'http://127.0.0.1:9/csrf-test')
            const read = async () => {
              await services().dispatcher.runOnce()
              return must(
                await services().webhooks.listDeliveries(scope(), { endpointId: ep.endpoint.id }),
              ).length
            }
            return {
              path: `${base(a)}/endpoints/${ep.endpoint.id}/test`,
              fields: { event: 'transaction.completed' },
              read,
              accepted: async (res) => {
                redirectTo(res, `${base(a)}/endpoints/${ep.endpoint.id}?notice=test-sent`)
                expect(await read()).toBe(1)
              },
            }
          },
        },
        {
          label: 'transactions/:id/cancel',
          prepare: async () => {
            const tx = await createTx(a.project.key, { amount: 3 })
            const read = async () => must(await services().transactions.get(scope(), tx.id)).status
            return {
              path: `${base(a)}/transactions/${tx.id}/cancel`,
              read,
              accepted: async (res) => {
                redirectTo(res, `${base(a)}/transactions/${tx.id}?notice=cancelled`)
                expect(await read()).toBe('cancelled')
              },
            }
          },
        },
        {
          label: 'transactions/:id/retry-webhook',
          prepare: async () => {
            const tx = await createTx(a.project.key, { amount: 4 })
            await complete(tx.id)
            // A's first test endpoint takes every event, transaction.completed included.
            const read = async () => {
              await services().dispatcher.runOnce()
              return must(
                await services().webhooks.listDeliveries(scope(), { transactionId: tx.id }),
              ).filter((d) => d.eventType === 'transaction.completed').length
            }
            return {
              path: `${base(a)}/transactions/${tx.id}/retry-webhook`,
              read,
              accepted: async (res, before) => {
                redirectTo(res, `${base(a)}/transactions/${tx.id}?notice=webhook-retried`)
                expect(await read()).toBeGreaterThan(before as number)
              },
            }
          },
        },
        {
          label: 'deliveries/:id/redeliver',
          prepare: async () => {
            const ep = await quietEndpoint(a.project.id, 'http://127.0.0.1:9/csrf-redeliver')
            const d = must(
              await services().webhooks.sendTest(ep.endpoint.id, 'transaction.completed'),
            )
            const read = async () => {
              await services().dispatcher.runOnce()
              const v = must(await services().webhooks.getDelivery(d.id)).delivery
              return {
                status: v.status,
                attempts: v.attempts,
                nextAttemptAt: v.nextAttemptAt?.toISOString() ?? null,
              }
            }
            await read()
            return {
              path: `${base(a)}/deliveries/${d.id}/redeliver`,
              read,
              accepted: async (res, before) => {
                redirectTo(res, `${base(a)}/deliveries/${d.id}?notice=redelivered`)
                expect((await read()).attempts).toBe((before as { attempts: number }).attempts + 1)
              },
            }
          },
        },
      ]

      for (const form of FORMS) {
        test(`POST ${form.label} is refused with 403 and changes nothing without a valid token of this session from this site, and works with one`, async () => {
          const target = await form.prepare()
          const c = target.client ?? browserA
          const other = target.otherSession ?? browserA2
          const valid = c.csrf!
          expect(other.csrf).not.toBe(valid)
          const refusals: {
            label: string
            csrf: string | null
            headers?: Record<string, string>
          }[] = [
            { label: '(a) no csrf field', csrf: null },
            { label: '(b) a wrong csrf value', csrf: 'A'.repeat(valid.length) },
            { label: "(c) the token of another user's session", csrf: browserB.csrf },
            { label: "(c) the token of the same user's other session", csrf: other.csrf },
            {
              label: '(d) a valid token with Sec-Fetch-Site: cross-site',
              csrf: valid,
              headers: { 'sec-fetch-site': 'cross-site' },
            },
            {
              label: '(d) a valid token with Sec-Fetch-Site: same-site',
              csrf: valid,
              headers: { 'sec-fetch-site': 'same-site' },
            },
            {
              label: '(e) a valid token in a text/plain body',
              csrf: valid,
              headers: { 'content-type': 'text/plain' },
            },
          ]
          const before = await target.read()
          for (const r of refusals) {
            const res = await c.post(target.path, target.fields ?? {}, {
              csrf: r.csrf,
              headers: r.headers,
            })
            expect({ refusal: r.label, status: res.status }).toEqual({
              refusal: r.label,
              status: 403,
            })
            if (target.secret)
              expect({ refusal: r.label, leaks: res.text.includes(target.secret) }).toEqual({
                refusal: r.label,
                leaks: false,
              })
            expect({ refusal: r.label, state: await target.read() }).toEqual({
              refusal: r.label,
              state: before,
            })
          }
          const res = await c.post(target.path, target.fields ?? {}, {
            headers: { 'sec-fetch-site': 'same-origin' },
          })
          await target.accepted(res, before)
        })
      }
    })

    describe('security headers', () => {
      test('every dashboard page carries the dashboard CSP, X-Frame-Options DENY, Referrer-Policy no-referrer, Cache-Control no-store and nosniff', async () => {
        const pages: [string, () => Promise<DashboardResponse>, number][] = [
          ['overview', () => browserA.get(base(a)), 200],
          ['overview (live)', () => browserA.get(base(a, 'live')), 200],
          ['transactions', () => browserA.get(`${base(a)}/transactions`), 200],
          ['transaction', () => browserA.get(`${base(a)}/transactions/${aTest.transaction}`), 200],
          ['keys', () => browserA.get(`${base(a)}/keys`), 200],
          ['endpoints', () => browserA.get(`${base(a)}/endpoints`), 200],
          ['endpoint', () => browserA.get(`${base(a)}/endpoints/${aTest.endpoint}`), 200],
          ['deliveries', () => browserA.get(`${base(a)}/deliveries`), 200],
          ['delivery', () => browserA.get(`${base(a)}/deliveries/${aTest.delivery}`), 200],
          ['settings', () => browserA.get(`${base(a)}/settings`), 200],
          ['sign-in form', () => dashboardClient(t).get('/dashboard/sign-in'), 200],
          [
            'sign-in refused (login CSRF)',
            () =>
              dashboardClient(t).post(
                '/dashboard/sign-in',
                { email: a.email, password: a.password },
                { csrf: null },
              ),
            403,
          ],
          [
            'form refused (CSRF)',
            () => browserA.post(`${base(a)}/keys`, { name: 'x' }, { csrf: null }),
            403,
          ],
          [
            'sign-out refused (CSRF)',
            () => browserA.post('/dashboard/sign-out', {}, { csrf: null }),
            403,
          ],
          [
            "another project's id",
            () => browserA.get(`${base(a)}/transactions/${bTest.transaction}`),
            404,
          ],
          ['another project', () => browserA.get(base(b)), 404],
          ['a bad filter', () => browserA.get(`${base(a)}/deliveries?status=bogus`), 400],
          [
            'a conflict (cancel a completed transaction)',
            () => browserA.post(`${base(a)}/transactions/${aTest.completed}/cancel`, {}),
            409,
          ],
          [
            'a wrong password (reveal)',
            () =>
              browserA.post(`${base(a)}/endpoints/${aTest.endpoint}/reveal`, {
                password: 'not the password',
              }),
            401,
          ],
        ]
        for (const [label, get, status] of pages) {
          const res = await get()
          expect({ page: label, status: res.status }).toEqual({ page: label, status })
          expectDashboardHeaders(label, res)
        }
        // The policy itself: nothing inline or from elsewhere, no framing, forms post only here.
        for (const directive of [
          "default-src 'none'",
          "script-src 'self'",
          "style-src 'self'",
          "frame-ancestors 'none'",
          "form-action 'self'",
          "base-uri 'none'",
        ]) {
          expect(DASHBOARD_CSP.split(';').map((d) => d.trim())).toContain(directive)
        }
        expect(DASHBOARD_CSP).not.toMatch(/unsafe-|\*|data:|https?:/)
        // The wrong password above counted towards A's lock; the right one clears the count.
        expect(
          (
            await browserA.post(`${base(a)}/endpoints/${aTest.endpoint}/reveal`, {
              password: a.password,
            })
          ).status,
        ).toBe(200)
      })

      test('redirects are not cached and carry the frame, referrer and sniffing headers too', async () => {
        const redirects: [string, () => Promise<DashboardResponse>][] = [
          ['/dashboard, signed in', () => browserA.get('/dashboard')],
          ['the sign-in page, signed in', () => browserA.get('/dashboard/sign-in')],
          ['a page, signed out', () => dashboardClient(t).get(base(a))],
          [
            'a form, signed out',
            () => dashboardClient(t).post(`${base(a)}/keys`, { name: 'x' }, { csrf: 'x' }),
          ],
        ]
        for (const [label, get] of redirects) {
          const res = await get()
          const h = (n: string) => res.headers.get(n)
          expect({
            label,
            status: res.status,
            cache: h('cache-control'),
            frame: h('x-frame-options'),
            referrer: h('referrer-policy'),
            sniff: h('x-content-type-options'),
          }).toEqual({
            label,
            status: 303,
            cache: 'no-store',
            frame: 'DENY',
            referrer: 'no-referrer',
            sniff: 'nosniff',
          })
        }
      })
    })

    describe('behaviour through the forms', () => {
      test('a notice in the URL shows one of the fixed texts or nothing, never the text given', async () => {
        const notices = async (query: string) =>
          [
            ...(await browserA.get(`${base(a)}/keys${query}`)).text.matchAll(
              /role="status">([^<]*)</g,
            ),
          ].map((m) => unescapeHtml(m[1]!))
        expect(await notices('?notice=key-deleted')).toEqual(['The key is deleted.'])
        for (const given of [
          '<script>alert(1)</script>',
          '__proto__',
          'constructor',
          'toString',
          'Your account is suspended, call +1 555 0100',
        ]) {
          expect({ given, shown: await notices(`?notice=${encodeURIComponent(given)}`) }).toEqual({
            given,
            shown: [],
          })
        }
      })

      test('a key made with the form is shown once and works on the API; the list never shows it again; revoked or deleted it gets 401, and deleted it leaves the list', async () => {
        const created = await browserA.post(`${base(a)}/keys`, {
          name: 'Checkout server',
          scopes: [...SCOPES],
        })
        expect(created.status).toBe(201)
        const key = revealedValue(created.text)!
        expect(key).toMatch(/^sk_test_[A-Za-z0-9]+$/)
        expect((await api(t, key).get('/api/transactions/stats')).status).toBe(200)

        const keyIdNamed = (page: string, name: string) =>
          new RegExp(`<tr data-key="([^"]+)">\\s*<td[^>]*>${name}</td>`).exec(page)?.[1] ?? null
        const list = await browserA.page(`${base(a)}/keys`)
        expect(list.text).not.toContain(key)
        expect(revealedValue(list.text)).toBeNull()
        const id = keyIdNamed(list.text, 'Checkout server')!
        expect(id).toStartWith('key_')

        const revoked = await browserA.post(`${base(a)}/keys/${id}/revoke`, {})
        expect({ status: revoked.status, location: revoked.location }).toEqual({
          status: 303,
          location: `${base(a)}/keys?notice=key-revoked`,
        })
        expect((await api(t, key).get('/api/transactions/stats')).status).toBe(401)
        const afterRevoke = await browserA.get(`${base(a)}/keys`)
        expect(
          new RegExp(`<tr data-key="${id}">[\\s\\S]*?badge-failed">revoked<`).test(
            afterRevoke.text,
          ),
        ).toBe(true)
        expect(afterRevoke.text).not.toContain(key)

        const deleted = await browserA.post(`${base(a)}/keys/${id}/delete`, {})
        expect({ status: deleted.status, location: deleted.location }).toEqual({
          status: 303,
          location: `${base(a)}/keys?notice=key-deleted`,
        })
        expect((await browserA.get(`${base(a)}/keys`)).text).not.toContain(`data-key="${id}"`)
        expect((await api(t, key).get('/api/transactions/stats')).status).toBe(401)

        // Deleting a key that was never revoked stops it as well.
        const second = await browserA.post(`${base(a)}/keys`, {
          name: 'Second server',
          scopes: [...SCOPES],
        })
        const secondKey = revealedValue(second.text)!
        expect((await api(t, secondKey).get('/api/transactions/stats')).status).toBe(200)
        const secondId = keyIdNamed((await browserA.get(`${base(a)}/keys`)).text, 'Second server')!
        expect((await browserA.post(`${base(a)}/keys/${secondId}/delete`, {})).status).toBe(303)
        expect((await api(t, secondKey).get('/api/transactions/stats')).status).toBe(401)
        expect((await browserA.get(`${base(a)}/keys`)).text).not.toContain(`data-key="${secondId}"`)
      })

      test("the overview's numbers equal GET /api/transactions/stats for the same dates, in test and in live mode", async () => {
        const paid = await createTx(a.project.key, { amount: 12.34 })
        await complete(paid.id)
        await createTx(a.project.key, { amount: 1.5 })
        const today = new Date(START).toISOString().slice(0, 10)
        const defaultStart = new Date(START - (DEFAULT_RANGE_DAYS - 1) * DAY)
          .toISOString()
          .slice(0, 10)
        const cases: {
          label: string
          mode: Mode
          key: string
          query: string
          range: [string, string]
        }[] = [
          {
            label: 'test, a month',
            mode: 'test',
            key: a.project.key,
            query: '?start_date=2030-02-01&end_date=2030-03-01',
            range: ['2030-02-01', '2030-03-01'],
          },
          {
            label: 'test, the default range',
            mode: 'test',
            key: a.project.key,
            query: '',
            range: [defaultStart, today],
          },
          {
            label: 'test, an empty range',
            mode: 'test',
            key: a.project.key,
            query: '?start_date=2030-01-01&end_date=2030-01-31',
            range: ['2030-01-01', '2030-01-31'],
          },
          {
            label: 'live, the default range',
            mode: 'live',
            key: aLiveKey,
            query: '',
            range: [defaultStart, today],
          },
        ]
        const seen: Record<string, ReturnType<typeof overviewStats>> = {}
        for (const c of cases) {
          const page = await browserA.get(`${base(a, c.mode)}${c.query}`)
          expect({ case: c.label, status: page.status }).toEqual({ case: c.label, status: 200 })
          const res = await api(t, c.key).get(
            `/api/transactions/stats?start_date=${c.range[0]}&end_date=${c.range[1]}`,
          )
          expect(res.status).toBe(200)
          const fromApi = ((await res.json()) as any).stats
          seen[c.label] = overviewStats(page.text)
          expect({ case: c.label, stats: seen[c.label] }).toEqual({ case: c.label, stats: fromApi })
        }
        // Not trivially equal: the ranges hold completed and open transactions, or none at all.
        for (const label of ['test, a month', 'live, the default range']) {
          expect(seen[label]!.completed_transactions).toBeGreaterThan(0)
          expect(seen[label]!.total_transactions).toBeGreaterThan(
            seen[label]!.completed_transactions,
          )
        }
        expect(seen['test, an empty range']!.total_transactions).toBe(0)
      })

      test("cancel on the transaction page cancels a created transaction; cancelling it again is 409 with the API's message", async () => {
        const tx = await createTx(a.project.key, { amount: 7 })
        const path = `${base(a)}/transactions/${tx.id}`
        const first = await browserA.post(`${path}/cancel`, {})
        expect({ status: first.status, location: first.location }).toEqual({
          status: 303,
          location: `${path}?notice=cancelled`,
        })
        const got = (await (
          await api(t, a.project.key).get(`/api/transactions/${tx.id}`)
        ).json()) as any
        expect(got.transaction.status).toBe('cancelled')

        const again = await browserA.post(`${path}/cancel`, {})
        const fromApi = await api(t, a.project.key).post(`/api/transactions/${tx.id}/cancel`, {})
        expect(fromApi.status).toBe(409)
        const message = ((await fromApi.json()) as any).error.message
        expect({ status: again.status, error: errorOf(again.text) }).toEqual({
          status: 409,
          error: message,
        })
      })

      test("retry-webhook on a transaction that is not completed is 409 with the API's message, and sends nothing", async () => {
        const tx = await createTx(a.project.key, { amount: 8 })
        const before = await stateOf(a, 'test')
        const res = await browserA.post(`${base(a)}/transactions/${tx.id}/retry-webhook`, {})
        expect(await stateOf(a, 'test')).toEqual(before)
        const fromApi = await api(t, a.project.key).post(
          `/api/transactions/${tx.id}/retry-webhook`,
          {},
        )
        expect(fromApi.status).toBe(409)
        const message = ((await fromApi.json()) as any).error.message
        expect({ status: res.status, error: errorOf(res.text) }).toEqual({
          status: 409,
          error: message,
        })
      })

      test('the deliveries status filter (?status=) shows exactly the deliveries of that status', async () => {
        const ok = await quietEndpoint(a.project.id, `http://127.0.0.1:${receiver.port}/ok`)
        must(await services().webhooks.sendTest(ok.endpoint.id, 'transaction.completed'))
        await services().dispatcher.runOnce()
        const scope = { projectId: a.project.id, mode: 'test' as const }
        const all = deliveryRowsOf((await browserA.get(`${base(a)}/deliveries`)).text)
        expect(new Set(all.map((r) => r.status))).toEqual(new Set(['success', 'retrying']))
        for (const status of ['success', 'retrying', 'failed', 'pending']) {
          const page = await browserA.get(`${base(a)}/deliveries?status=${status}`)
          expect({ status, code: page.status }).toEqual({ status, code: 200 })
          const rows = deliveryRowsOf(page.text)
          const expected = must(
            await services().webhooks.listDeliveries(scope, { status, limit: DELIVERIES_PER_PAGE }),
          ).map((d) => d.id)
          expect({ status, rows }).toEqual({ status, rows: expected.map((id) => ({ id, status })) })
        }
        expect((await browserA.get(`${base(a)}/deliveries?status=bogus`)).status).toBe(400)
      })

      test('revealing a secret with the wrong password is 401 and shows no secret; with the right one it is the secret shown at creation', async () => {
        const created = await browserA.post(`${base(a)}/endpoints`, {
          url: 'http://127.0.0.1:9/reveal-me',
          events: ['transaction.expired'],
        })
        expect(created.status).toBe(201)
        const secret = revealedValue(created.text)!
        expect(secret).toMatch(/^whsec_/)
        const id = /\/endpoints\/(ep_[A-Za-z0-9]+)\/reveal"/.exec(created.text)![1]!

        const plain = await browserA.get(`${base(a)}/endpoints/${id}`)
        expect(plain.status).toBe(200)
        expect(plain.text).not.toContain(secret)

        const wrong = await browserA.post(`${base(a)}/endpoints/${id}/reveal`, {
          password: 'not the password at all',
        })
        expect({
          status: wrong.status,
          error: errorOf(wrong.text),
          revealed: revealedValue(wrong.text),
        }).toEqual({
          status: 401,
          error: `The password is wrong, or this account is locked after ${MAX_FAILED_SIGN_INS} wrong passwords in a row (for ${LOCK_MS / MINUTE} minutes)`,
          revealed: null,
        })
        expect(wrong.text).not.toContain(secret)

        const right = await browserA.post(`${base(a)}/endpoints/${id}/reveal`, {
          password: a.password,
        })
        expect(right.status).toBe(200)
        expect(revealedValue(right.text)).toBe(secret)
        expect(must(await services().endpoints.revealSecret(id)).secret).toBe(secret)
      })

      test('the endpoint form takes a format: a Coinbase Commerce endpoint needs no events and shows its format on the list and its page, and its test event is Commerce-shaped and signed with X-CC-Webhook-Signature; a standard endpoint still needs events; an unknown format is refused by name', async () => {
        const heard: { body: string; headers: Headers }[] = []
        const hooks = Bun.serve({
          port: 0,
          hostname: '127.0.0.1',
          async fetch(req) {
            heard.push({ body: await req.text(), headers: req.headers })
            return new Response('ok')
          },
        })
        try {
          // A project of its own: A's test mode is near its endpoint limit by now.
          const shop = await memberOf(t, { projectName: 'Moved from Commerce' })
          const c = await signedIn(shop)
          const list = `${base(shop)}/endpoints`
          const hook = (path: string) => `http://127.0.0.1:${hooks.port}/${path}`
          const field = (page: string, name: string) => {
            const m = new RegExp(`<dt>${name}</dt><dd>([^<]*)</dd>`).exec(page)
            return m ? unescapeHtml(m[1]!) : null
          }
          const idOf = (page: string) => /\/endpoints\/(ep_[A-Za-z0-9]+)\/reveal"/.exec(page)![1]!
          const EVERY_CHARGE_EVENT =
            'every charge event (charge:created, charge:pending, charge:confirmed, charge:failed, charge:delayed, charge:resolved)'

          // The form offers both formats, Standard chosen, and says a Commerce endpoint needs no
          // events: no script needed to read it.
          const form = await c.page(list)
          expect(form.status).toBe(200)
          const formText = unescapeHtml(form.text)
          expect(formText).toContain(
            '<input type="radio" name="format" value="standard" checked> Standard',
          )
          expect(formText).toContain(
            '<input type="radio" name="format" value="commerce"> Coinbase Commerce',
          )
          expect(formText).toContain(
            "Coinbase Commerce: Commerce's webhook body and X-CC-Webhook-Signature, for shops that moved from Commerce; hears every charge event.",
          )
          expect(formText).toContain(
            'Standard: choose at least one. Coinbase Commerce: not needed, leave them unchecked',
          )

          // Commerce with no event checked: made, its secret shown once, its format on its page.
          const made = await c.post(list, { url: hook('commerce'), format: 'commerce' })
          expect(made.status).toBe(201)
          const secret = revealedValue(made.text)!
          expect(secret).toMatch(/^whsec_/)
          const commerce = idOf(made.text)
          expect({
            format: field(made.text, 'Format'),
            events: field(made.text, 'Events'),
          }).toEqual({ format: 'Coinbase Commerce', events: EVERY_CHARGE_EVENT })
          // Events checked anyway are not what it hears: it hears every charge event.
          const ticked = await c.post(list, {
            url: hook('commerce-ticked'),
            format: 'commerce',
            events: ['transaction.completed'],
          })
          expect({ status: ticked.status, events: field(ticked.text, 'Events') }).toEqual({
            status: 201,
            events: EVERY_CHARGE_EVENT,
          })

          // A standard endpoint still needs events, whether the form says standard or (an older
          // form) says no format at all; the form comes back as it was sent.
          const unchosen: [string, Record<string, string>][] = [
            ['format=standard', { url: hook('standard-bare'), format: 'standard' }],
            ['no format field', { url: hook('standard-bare') }],
          ]
          for (const [label, fields] of unchosen) {
            const res = await c.post(list, fields)
            expect({
              label,
              status: res.status,
              error: errorOf(res.text),
              standardChosen: res.text.includes('name="format" value="standard" checked'),
              urlKept: res.text.includes(`value="${hook('standard-bare')}"`),
            }).toEqual({
              label,
              status: 400,
              error: 'Select at least one event type',
              standardChosen: true,
              urlKept: true,
            })
          }
          // A format the service has no name for is refused, naming the ones it has.
          const bogus = await c.post(list, {
            url: hook('bogus'),
            format: 'shopify',
            events: ['transaction.completed'],
          })
          expect({ status: bogus.status, error: errorOf(bogus.text) }).toEqual({
            status: 400,
            error: 'format must be standard or commerce',
          })
          const standard = await c.post(list, {
            url: hook('standard'),
            format: 'standard',
            events: ['transaction.completed'],
          })
          expect(standard.status).toBe(201)
          expect({
            format: field(standard.text, 'Format'),
            events: field(standard.text, 'Events'),
          }).toEqual({ format: 'Standard', events: 'transaction.completed' })

          // The list: exactly the three made (nothing of the refused posts), each with its format.
          const listed = await c.page(list)
          const rows = [
            ...listed.text.matchAll(/<tr data-endpoint="([^"]+)">([\s\S]*?)<\/tr>/g),
          ].map((m) => [
            m[1],
            unescapeHtml(/data-col="format">([^<]*)</.exec(m[2]!)![1]!),
            m[2]!.includes('every charge event'),
          ])
          expect(rows.sort()).toEqual(
            [
              [commerce, 'Coinbase Commerce', true],
              [idOf(ticked.text), 'Coinbase Commerce', true],
              [idOf(standard.text), 'Standard', false],
            ].sort(),
          )

          // Its page: the format again, and a test event that needs no type.
          const shown = await c.page(`${list}/${commerce}`)
          expect(field(shown.text, 'Format')).toBe('Coinbase Commerce')
          expect(shown.text).not.toContain('<select name="event">')
          expect(shown.text).not.toContain(secret)
          const sent = await c.post(
            `${list}/${commerce}/test`,
            Object.fromEntries(
              [...shown.text.matchAll(/<input type="hidden" name="(event)" value="([^"]*)">/g)].map(
                (m) => [m[1]!, m[2]!],
              ),
            ),
          )
          expect({ status: sent.status, location: sent.location }).toEqual({
            status: 303,
            location: `${list}/${commerce}?notice=test-sent`,
          })
          await services().dispatcher.runOnce()
          expect(heard).toHaveLength(1)
          const [got] = heard
          expect(got!.headers.get('x-cc-webhook-signature')).toBe(
            createHmac('sha256', secret).update(got!.body).digest('hex'),
          )
          expect(got!.headers.get('x-service-signature')).toBeNull()
          expect(JSON.parse(got!.body)).toMatchObject({
            attempt_number: 1,
            event: { type: 'charge:created', data: { code: 'TEST', metadata: { test: true } } },
          })
        } finally {
          hooks.stop(true)
        }
      })

      test("rotating a secret asks for the password as revealing does: without it or with a wrong one the answer is reveal's 401 and nothing changes (the old secret still signs); with the right one the new secret is shown and signs the next delivery", async () => {
        const heard: { body: string; signature: string | null }[] = []
        const hooks = Bun.serve({
          port: 0,
          hostname: '127.0.0.1',
          async fetch(req) {
            heard.push({
              body: await req.text(),
              signature: req.headers.get('x-service-signature'),
            })
            return new Response('ok')
          },
        })
        try {
          const ep = await quietEndpoint(a.project.id, `http://127.0.0.1:${hooks.port}/rotate-me`)
          const path = `${base(a)}/endpoints/${ep.endpoint.id}`
          const secretNow = async () =>
            must(await services().endpoints.revealSecret(ep.endpoint.id)).secret
          /** Sends a test event and returns what the receiver got. */
          const deliverOne = async () => {
            const d = must(
              await services().webhooks.sendTest(ep.endpoint.id, 'transaction.completed'),
            )
            await services().dispatcher.runOnce()
            expect(must(await services().webhooks.getDelivery(d.id)).delivery.status).toBe(
              'success',
            )
            return heard.at(-1)!
          }

          const wrongReveal = await browserA.post(`${path}/reveal`, {
            password: 'not the password at all',
          })
          expect(wrongReveal.status).toBe(401)
          const refusals: [string, Record<string, string>][] = [
            ['no password', {}],
            ['a wrong password', { password: 'not the password at all' }],
          ]
          for (const [label, fields] of refusals) {
            const res = await browserA.post(`${path}/rotate`, fields)
            expect({
              label,
              status: res.status,
              error: errorOf(res.text),
              revealed: revealedValue(res.text),
            }).toEqual({ label, status: 401, error: errorOf(wrongReveal.text), revealed: null })
            expect(res.text).not.toContain(ep.secret)
            expect({ label, secret: await secretNow() }).toEqual({ label, secret: ep.secret })
          }
          const before = await deliverOne()
          expect(verifyWebhookSignature(before.body, before.signature, ep.secret)).toBe(true)

          const right = await browserA.post(`${path}/rotate`, { password: a.password })
          expect(right.status).toBe(200)
          const fresh = revealedValue(right.text)!
          expect(fresh).toMatch(/^whsec_/)
          expect(fresh).not.toBe(ep.secret)
          expect(await secretNow()).toBe(fresh)
          const after = await deliverOne()
          expect({
            newSecret: verifyWebhookSignature(after.body, after.signature, fresh),
            oldSecret: verifyWebhookSignature(after.body, after.signature, ep.secret),
          }).toEqual({ newSecret: true, oldSecret: false })
        } finally {
          hooks.stop(true)
        }
      })

      test(`wrong passwords on rotate count towards the account lock: after ${MAX_FAILED_SIGN_INS} the right one is refused too, at rotate and at sign-in, and the secret never changes`, async () => {
        const email = 'rotating-locked@example.com'
        const password = 'the rotating user password'
        must(await services().users.create({ email, password, projectId: a.project.id }))
        const c = dashboardClient(t)
        expect((await c.signIn(email, password)).status).toBe(303)
        await c.page(base(a))
        const ep = await quietEndpoint(a.project.id, 'http://127.0.0.1:9/rotate-lock')
        const path = `${base(a)}/endpoints/${ep.endpoint.id}/rotate`
        const answers: number[] = []
        for (let i = 0; i < MAX_FAILED_SIGN_INS; i++)
          answers.push((await c.post(path, { password: `wrong guess ${i}` })).status)
        expect(answers).toEqual(Array(MAX_FAILED_SIGN_INS).fill(401))

        const locked = await c.post(path, { password })
        expect({ status: locked.status, revealed: revealedValue(locked.text) }).toEqual({
          status: 401,
          revealed: null,
        })
        expect(must(await services().endpoints.revealSecret(ep.endpoint.id)).secret).toBe(ep.secret)
        const signIn = await dashboardClient(t).signIn(email, password)
        expect({ status: signIn.status, error: errorOf(signIn.text) }).toEqual({
          status: 401,
          error: WRONG_PASSWORD,
        })
      })

      test('merchant-supplied text is escaped on the transaction pages, never markup', async () => {
        const tx = await createTx(a.project.key, {
          amount: 5,
          order_description: '<script>alert(1)</script>',
          order_id: '<b>order</b>',
          customer_name: '"><img src=x onerror=alert(2)>',
          metadata: { note: '</code><script>alert(3)</script>' },
        })
        const page = await browserA.get(`${base(a)}/transactions/${tx.id}`)
        expect(page.status).toBe(200)
        expect(page.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;')
        for (const raw of ['<script>alert(1)', '<b>order</b>', '<img src=x', '<script>alert(3)'])
          expect(page.text).not.toContain(raw)
        const ordinary = await browserA.get(`${base(a)}/transactions/${aTest.transaction}`)
        expect(scriptTags(page.text)).toEqual(scriptTags(ordinary.text))

        const list = await browserA.get(`${base(a)}/transactions`)
        expect(list.text).toContain('&lt;b&gt;order&lt;/b&gt;')
        expect(list.text).not.toContain('<b>order</b>')
      })
    })
  })
}
