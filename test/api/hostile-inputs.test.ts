import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect as plainConnect } from 'node:net'
import { connect } from 'node:tls'
import { backends } from '../helpers/databases.ts'
import {
  dashboardClient,
  memberOf,
  unescapeHtml,
  type DashboardResponse,
} from '../helpers/dashboard.ts'
import { freePort } from '../helpers/processes.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

/**
 * docs/decisions/0055-hostile-input-never-500.md, item 8: requests a fuzz of every route answered
 * with 500, sent through the real HTTPS listener (raw TLS sockets where `fetch` cannot send them).
 * Each class is refused before anything is written:
 * - text PostgreSQL cannot store (U+0000, an unpaired UTF-16 surrogate), in any string, key or
 *   value at any depth of a JSON body, a form, or a query string: 400 naming the field;
 * - a request that names no host (HTTP/1.0 without Host, an empty or malformed Host): 400;
 * - a path with U+0000 or malformed percent-encoding: 404.
 */

interface RawResponse {
  status: number
  headers: Map<string, string>
  body: string
}

/**
 * Writes `request` as is over TLS (trusting the server's certificate), or to the plain-HTTP
 * listener, and reads the answer until the server closes (HTTP/1.0, or `Connection: close`).
 * The socket is not half-closed first: a server may take that for a client that went away.
 */
function rawRequest(
  t: TestServer,
  request: string,
  over: 'tls' | 'plain' = 'tls',
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const send = () => socket.write(Buffer.from(request, 'latin1'))
    const socket =
      over === 'tls'
        ? connect({ host: '127.0.0.1', port: t.port, servername: 'localhost', ca: t.ca }, send)
        : plainConnect(t.httpPort!, '127.0.0.1', send)
    socket.on('data', (d: Buffer) => chunks.push(d))
    socket.on('error', reject)
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const split = text.indexOf('\r\n\r\n')
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n')
      const headers = new Map(
        lines.map((l) => [
          l.slice(0, l.indexOf(':')).toLowerCase(),
          l.slice(l.indexOf(':') + 1).trim(),
        ]),
      )
      let body = text.slice(split + 4)
      if (headers.get('transfer-encoding') === 'chunked') {
        let out = ''
        for (let at = 0; ; ) {
          const eol = body.indexOf('\r\n', at)
          const size = parseInt(body.slice(at, eol), 16)
          if (!size) break
          out += body.slice(eol + 2, eol + 2 + size)
          at = eol + 2 + size + 2
        }
        body = out
      }
      resolve({
        status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0),
        headers,
        body,
      })
    })
  })
}

/**
 * An docs/decisions/0004-one-error-table.md error body with its X-Request-Id; `details` (when
 * given) must be exactly these.
 */
function expectR4(
  res: { status: number; headers: { get(name: string): string | null | undefined }; body: string },
  status: number,
  type: string,
  details?: { path: string; message: RegExp | string }[],
) {
  expect({ status: res.status, body: res.status === status ? '' : res.body }).toEqual({
    status,
    body: '',
  })
  expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8')
  const requestId = res.headers.get('x-request-id')
  expect(requestId).toMatch(/^req_/)
  const body = JSON.parse(res.body)
  expect(body).toMatchObject({
    success: false,
    message: body.error.message,
    error: { type, request_id: requestId },
  })
  if (details) {
    expect(body.error.details).toHaveLength(details.length)
    details.forEach((d, i) => {
      expect(body.error.details[i].path).toBe(d.path)
      if (typeof d.message === 'string') expect(body.error.details[i].message).toBe(d.message)
      else expect(body.error.details[i].message).toMatch(d.message)
    })
  }
  return body
}

/** A fetch Response read whole, in the shape `expectR4` takes. */
const whole = async (res: Response) => ({
  status: res.status,
  headers: res.headers,
  body: await res.text(),
})

const NUL = /must not contain U\+0000 \(NUL\)/
const SURROGATE = (unit: string) =>
  new RegExp(`must not contain an unpaired UTF-16 surrogate \\(\\\\u${unit}\\)`)

/** A dashboard HTML page with the status and X-Request-Id, whose text says `says`. */
function expectDashboardPage(res: DashboardResponse, status: number, says: string[] = []) {
  expect({ status: res.status, type: res.headers.get('content-type') }).toEqual({
    status,
    type: 'text/html; charset=utf-8',
  })
  expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  expect(res.headers.get('content-security-policy')).toContain("default-src 'none'")
  const text = unescapeHtml(res.text)
  for (const s of says) expect(text).toContain(s)
}

for (const backend of backends()) {
  describe(`hostile inputs never answer 500, and write nothing [${backend}]`, () => {
    let t: TestServer
    let project: { id: string; key: string }
    let member: Awaited<ReturnType<typeof memberOf>>
    let browser: ReturnType<typeof dashboardClient>
    let home: string
    let txId: string

    beforeAll(async () => {
      t = await startTestServer(backend, { HTTP_PORT: String(await freePort()) })
      project = await t.project()
      const created = await api(t, project.key).create({ amount: 1, order_id: 'first' })
      txId = (await created.json()).transaction.id
      member = await memberOf(t)
      browser = dashboardClient(t)
      expect((await browser.signIn(member.email, member.password)).status).toBe(303)
      home = `/dashboard/${member.project.id}/test`
      await browser.page(`${home}/keys`)
    })
    afterAll(() => t?.stop())

    /** The project's transaction count, as the stats endpoint reports it. */
    const total = async () => {
      const res = await api(t, project.key).get('/api/transactions/stats')
      expect(res.status).toBe(200)
      return (await res.json()).stats.total_transactions as number
    }

    describe('text PostgreSQL cannot store: U+0000 and unpaired UTF-16 surrogates are refused, never replaced', () => {
      const CREATES: {
        label: string
        body: string
        details: { path: string; message: RegExp }[]
      }[] = [
        {
          label: 'a lone high surrogate in order_id',
          body: '{"amount":10,"order_id":"\\ud800"}',
          details: [{ path: 'order_id', message: SURROGATE('d800') }],
        },
        {
          label: 'U+0000 in order_id',
          body: '{"amount":10,"order_id":"a\\u0000b"}',
          details: [{ path: 'order_id', message: NUL }],
        },
        {
          label: 'a surrogate pair written backwards in customer_name',
          body: '{"amount":10,"customer_name":"\\udfff\\ud800"}',
          details: [{ path: 'customer_name', message: SURROGATE('dfff') }],
        },
        {
          label: 'a lone low surrogate as a metadata key and its value',
          body: '{"amount":10,"metadata":{"\\udc00":"\\udc00"}}',
          details: [
            {
              path: 'metadata.\\udc00',
              message: /^key must not contain an unpaired UTF-16 surrogate/,
            },
          ],
        },
        {
          label: 'U+0000 in a metadata value',
          body: '{"amount":10,"metadata":{"cart":"c\\u0000"}}',
          details: [{ path: 'metadata.cart', message: NUL }],
        },
        {
          label: 'U+0000 deep inside an array in metadata',
          body: '{"amount":10,"metadata":{"a":{"b":["ok","\\u0000"]}}}',
          details: [{ path: 'metadata.a.b.1', message: NUL }],
        },
        {
          label: 'U+0000 in an unknown field name',
          body: '{"amount":10,"\\u0000":1}',
          details: [{ path: '\\u0000', message: /^key must not contain U\+0000/ }],
        },
        {
          label: 'two fields at once, one problem each',
          body: '{"amount":10,"order_id":"\\u0000","order_description":"\\udbff"}',
          details: [
            { path: 'order_id', message: NUL },
            { path: 'order_description', message: SURROGATE('dbff') },
          ],
        },
      ]
      for (const c of CREATES) {
        test(`create with ${c.label}: 400 naming the field, nothing created`, async () => {
          const before = await total()
          const res = await api(t, project.key).post('/api/transactions/create', c.body)
          const body = expectR4(await whole(res), 400, 'invalid_request_error', c.details)
          expect(body.error.message).toStartWith('Invalid request body: ')
          expect(await total()).toBe(before)
        })
      }

      test('a well-formed surrogate pair (an emoji) is stored and returned exactly', async () => {
        const res = await api(t, project.key).post(
          '/api/transactions/create',
          '{"amount":10,"order_id":"\\ud83d\\ude00","metadata":{"\\ud83c\\udf75":"\\ud83d\\udc4d"}}',
        )
        expect(res.status).toBe(200)
        const tx = (await res.json()).transaction
        expect(tx.order_id).toBe('😀')
        expect(tx.metadata).toEqual({ '🍵': '👍' })
        const read = await (await api(t, project.key).get(`/api/transactions/${tx.id}`)).json()
        expect(read.transaction.order_id).toBe('😀')
      })

      test('a refused create leaves its Idempotency-Key unused: the same key with a good body creates', async () => {
        const before = await total()
        const key = `hostile-${Date.now()}`
        const refused = await api(t, project.key).post(
          '/api/transactions/create',
          '{"amount":10,"order_id":"\\u0000"}',
          { 'idempotency-key': key },
        )
        expect(refused.status).toBe(400)
        expect(await total()).toBe(before)
        const created = await api(t, project.key).post(
          '/api/transactions/create',
          '{"amount":10,"order_id":"fine"}',
          { 'idempotency-key': key },
        )
        expect(created.status).toBe(200)
        expect(await total()).toBe(before + 1)
      })

      test('U+0000 in a query parameter of the API is 400 naming it: list filters and stats dates', async () => {
        const list = await api(t, project.key).get(
          `/api/transactions/project/${project.id}?status=created%00`,
        )
        expectR4(await whole(list), 400, 'invalid_request_error', [
          { path: 'status', message: NUL },
        ])
        const stats = await api(t, project.key).get(
          '/api/transactions/stats?start_date=2026-01-01%00&end_date=2026-01-31',
        )
        expectR4(await whole(stats), 400, 'invalid_request_error', [
          { path: 'start_date', message: NUL },
        ])
        const name = await api(t, project.key).get('/api/transactions/stats?a%00=1')
        expectR4(await whole(name), 400, 'invalid_request_error', [
          { path: 'a\\u0000', message: /^name must not contain U\+0000/ },
        ])
      })

      test('an API caller without a key still hears 401 first, never what is wrong with its text', async () => {
        const res = await api(t, null).post(
          '/api/transactions/create',
          '{"amount":10,"order_id":"\\u0000"}',
        )
        expectR4(await whole(res), 401, 'authentication_error')
        expectR4(
          await whole(await api(t, null).get('/api/transactions/stats?start_date=%00')),
          401,
          'authentication_error',
        )
      })

      test('U+0000 in the Idempotency-Key header never reaches the app: the HTTP parser refuses it, nothing is created', async () => {
        const before = await total()
        const body = '{"amount":10}'
        const res = await rawRequest(
          t,
          `POST /api/transactions/create HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${project.key}\r\nContent-Type: application/json\r\nIdempotency-Key: a\u0000b\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        )
        expect(res.status).toBe(400)
        expect(await total()).toBe(before)
      })

      test("the pay page's JSON endpoint refuses them by field, as the API does", async () => {
        for (const [body, details] of [
          [
            '{"token_symbol":"\\ud800","blockchain_network":"devnet"}',
            [{ path: 'token_symbol', message: SURROGATE('d800') }],
          ],
          [
            '{"token_symbol":"TUSD","blockchain_network":"a\\u0000"}',
            [{ path: 'blockchain_network', message: NUL }],
          ],
        ] as const) {
          const res = await t.fetch(`/pay/${txId}/select`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body,
          })
          expectR4(await whole(res), 400, 'invalid_request_error', [...details])
        }
        const state = await (await t.fetch(`/pay/${txId}/state`)).json()
        expect({ status: state.status, quote: state.quote }).toEqual({
          status: 'created',
          quote: null,
        })
      })

      test('dashboard forms with U+0000 are a 400 page naming the field, and create nothing', async () => {
        const keys = (await t.server.services.keys.list(member.project.id, 'test')).length
        const endpoints = (await t.server.services.endpoints.list(member.project.id, 'test')).length
        expectDashboardPage(
          await browser.post(`${home}/keys`, { name: 'Nul\u0000key', scopes: ['stats:read'] }),
          400,
          ['name must not contain U+0000 (NUL)'],
        )
        expectDashboardPage(
          await browser.post(`${home}/endpoints`, {
            url: 'https://example.com/\u0000',
            events: ['transaction.completed'],
          }),
          400,
          ['url must not contain U+0000 (NUL)'],
        )
        expectDashboardPage(
          await browser.post(`${home}/keys`, { name: 'fine', 'scopes\u0000': 'x' }),
          400,
          ['scopes\\u0000 name must not contain U+0000 (NUL)'],
        )
        expect((await t.server.services.keys.list(member.project.id, 'test')).length).toBe(keys)
        expect((await t.server.services.endpoints.list(member.project.id, 'test')).length).toBe(
          endpoints,
        )
      })

      test('sign-in with U+0000 in the e-mail address is a 400 page; the session goes on', async () => {
        const other = dashboardClient(t)
        const form = await other.get('/dashboard/sign-in')
        const csrf = /name="csrf" value="([^"]*)"/.exec(form.text)![1]!
        expectDashboardPage(
          await other.post(
            '/dashboard/sign-in',
            { email: `${member.email}\u0000`, password: member.password },
            { csrf: unescapeHtml(csrf) },
          ),
          400,
          ['email must not contain U+0000 (NUL)'],
        )
        expect(other.jar.has('__Host-cp_session')).toBe(false)
      })

      test('a form from another site is refused as before (403), whatever its text', async () => {
        const res = await browser.post(
          `${home}/keys`,
          { name: 'Nul\u0000key' },
          { headers: { 'sec-fetch-site': 'cross-site' } },
        )
        expect(res.status).toBe(403)
      })

      test("U+0000 in the dashboard's search boxes and filters is a 400 page naming the parameter", async () => {
        expectDashboardPage(await browser.get(`${home}/transactions?order_id=ord%00`), 400, [
          'order_id must not contain U+0000 (NUL)',
        ])
        expectDashboardPage(await browser.get(`${home}/transactions?status=%00`), 400, [
          'status must not contain U+0000 (NUL)',
        ])
        expectDashboardPage(await browser.get(`${home}/deliveries?endpoint=%00`), 400, [
          'endpoint must not contain U+0000 (NUL)',
        ])
        expectDashboardPage(await browser.get(`${home}/deliveries?before=%00`), 400, [
          'before must not contain U+0000 (NUL)',
        ])
        expectDashboardPage(await browser.get(`${home}?start_date=%00`), 400, [
          'start_date must not contain U+0000 (NUL)',
        ])
        // Still signed in, and the pages work without the bad parameter.
        expect((await browser.get(`${home}/transactions?order_id=ord`)).status).toBe(200)
      })
    })

    describe('a request that names no host is a 400, not a 500', () => {
      const stats = (version: string, host: string | null) =>
        `GET /api/transactions/stats HTTP/${version}\r\n${host === null ? '' : `Host: ${host}\r\n`}Authorization: Bearer ${project.key}\r\nConnection: close\r\n\r\n`

      for (const [label, version, host] of [
        ['HTTP/1.0 without Host', '1.0', null],
        ['HTTP/1.1 with an empty Host', '1.1', ''],
        ['HTTP/1.1 with a Host that is not a host name', '1.1', '[::'],
        ['HTTP/1.1 with a port out of range', '1.1', 'localhost:99999'],
      ] as const) {
        test(`${label} to /api/transactions/stats: 400 with the docs/decisions/0004-one-error-table.md body and X-Request-Id`, async () => {
          const res = await rawRequest(t, stats(version, host))
          expectR4(
            { ...res, headers: { get: (n: string) => res.headers.get(n) } },
            400,
            'invalid_request_error',
            [{ path: 'host', message: /host name/ }],
          )
        })
      }

      test('a create over HTTP/1.0 without Host creates nothing', async () => {
        const before = await total()
        const body = '{"amount":10}'
        const res = await rawRequest(
          t,
          `POST /api/transactions/create HTTP/1.0\r\nAuthorization: Bearer ${project.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
        )
        expect(res.status).toBe(400)
        expect(await total()).toBe(before)
      })

      test('the dashboard answers a 400 page and the pay page a 400, never a 500', async () => {
        const dashboard = await rawRequest(t, 'GET /dashboard/sign-in HTTP/1.0\r\n\r\n')
        expect({ status: dashboard.status, type: dashboard.headers.get('content-type') }).toEqual({
          status: 400,
          type: 'text/html; charset=utf-8',
        })
        expect(dashboard.headers.get('x-request-id')).toMatch(/^req_/)
        expect(dashboard.body).toContain('Host')
        for (const path of [`/pay/${txId}`, `/pay/${txId}/state`]) {
          const pay = await rawRequest(
            t,
            `GET ${path} HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n`,
          )
          expectR4(
            { ...pay, headers: { get: (n: string) => pay.headers.get(n) } },
            400,
            'invalid_request_error',
          )
        }
      })

      test('the plain-HTTP listener answers them as any plain request: 403 with the docs/decisions/0004-one-error-table.md body on /api, a redirect elsewhere', async () => {
        const apiRes = await rawRequest(
          t,
          `GET /api/transactions/stats HTTP/1.0\r\nAuthorization: Bearer ${project.key}\r\n\r\n`,
          'plain',
        )
        const body = expectR4(
          { ...apiRes, headers: { get: (n: string) => apiRes.headers.get(n) } },
          403,
          'invalid_request_error',
        )
        expect(body.error.message).toContain('HTTPS')
        const page = await rawRequest(
          t,
          'GET /dashboard/sign-in?x=1 HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n',
          'plain',
        )
        expect({ status: page.status, location: page.headers.get('location') }).toEqual({
          status: 308,
          location: `https://localhost:${t.port}/dashboard/sign-in?x=1`,
        })
      })

      test('the same requests with a Host are served', async () => {
        const res = await rawRequest(t, stats('1.0', `localhost:${t.port}`))
        expect(res.status).toBe(200)
        expect(JSON.parse(res.body).success).toBe(true)
      })
    })

    describe('a path with U+0000 or malformed percent-encoding is a 404, not a 500', () => {
      const BAD = ['%00', 'a%00b', '%zz', '%', '%E0%A4%A', '%ED%A0%80', '%C0%80']

      test('under /dashboard: the HTML not-found page, for every route that takes an id', async () => {
        for (const bad of BAD) {
          for (const path of [
            `${home}/endpoints/${bad}`,
            `${home}/transactions/${bad}`,
            `${home}/deliveries/${bad}`,
            `/dashboard/${bad}/test`,
          ]) {
            const res = await browser.get(path)
            expect({ path, status: res.status, type: res.headers.get('content-type') }).toEqual({
              path,
              status: 404,
              type: 'text/html; charset=utf-8',
            })
            expect(res.text).toContain('Not found')
          }
          const keys = (await t.server.services.keys.list(member.project.id, 'test')).length
          const post = await browser.post(`${home}/keys/${bad}/revoke`, {})
          expect({ bad, status: post.status }).toEqual({ bad, status: 404 })
          expect((await t.server.services.keys.list(member.project.id, 'test')).length).toBe(keys)
        }
      })

      test('under /pay: the HTML not-found page', async () => {
        for (const bad of BAD) {
          for (const [method, path] of [
            ['GET', `/pay/${bad}`],
            ['GET', `/pay/${bad}/state`],
            ['POST', `/pay/${bad}/cancel`],
            ['GET', `/pay/${txId}/${bad}`],
          ] as const) {
            const res = await t.fetch(path, { method })
            expect({ path, status: res.status, type: res.headers.get('content-type') }).toEqual({
              path,
              status: 404,
              type: 'text/html; charset=utf-8',
            })
            expect(res.headers.get('x-request-id')).toMatch(/^req_/)
            expect(await res.text()).toContain('Payment not found')
          }
        }
      })

      test('under /api: the docs/decisions/0004-one-error-table.md 404, after the key is checked', async () => {
        for (const bad of BAD) {
          for (const [method, path] of [
            ['GET', `/api/transactions/${bad}`],
            ['GET', `/api/transactions/project/${bad}`],
            ['POST', `/api/transactions/${bad}/cancel`],
            ['GET', `/api/${bad}`],
          ] as const) {
            const res = await t.fetch(path, {
              method,
              headers: { authorization: `Bearer ${project.key}` },
            })
            expect({ path, status: res.status }).toEqual({ path, status: 404 })
            expectR4(await whole(res), 404, 'not_found_error')
          }
          expectR4(
            await whole(await t.fetch(`/api/transactions/${bad}`)),
            401,
            'authentication_error',
          )
        }
      })

      test('the raw bytes reach the server as sent (fetch does not rewrite them)', async () => {
        const res = await rawRequest(
          t,
          `GET ${home}/endpoints/%00 HTTP/1.1\r\nHost: localhost\r\nCookie: ${[...browser.jar].map(([k, v]) => `${k}=${v}`).join('; ')}\r\nConnection: close\r\n\r\n`,
        )
        expect(res.status).toBe(404)
      })
    })
  })
}
