import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { dashboardClient } from '../helpers/dashboard.ts'
import { freshDataDir } from '../helpers/databases.ts'
import { expectCountedOnceSince } from '../helpers/expect.ts'
import { killAllProcesses, runCli, spawnServer, type ServerProcess } from '../helpers/processes.ts'

// docs/decisions/0001-runtimes-bun-and-deno.md: the same code runs on Deno 2. `npm run start:deno`
// = `deno run --allow-all src/main.ts`, `npm run cli:deno` likewise; the test talks to it from Bun
// over real HTTPS.

const WINDOW_MS = { minute: 60_000, hour: 3_600_000, day: 86_400_000 }

describe('the server under Deno', () => {
  let dataDir: string
  let server: ServerProcess
  let key: string
  beforeAll(async () => {
    dataDir = await freshDataDir()
    server = await spawnServer(
      { DATA_DIR: dataDir, PORT: '0', HTTP_PORT: '0' },
      { runtime: 'deno' },
    )
    key = (await server.waitFor('stdout', /sk_test_[A-Za-z0-9]{32,}/))[0]
  })
  afterAll(async () => {
    await killAllProcesses()
    rmSync(dataDir, { recursive: true, force: true })
  })

  const auth = (k: string) => ({ authorization: `Bearer ${k}` })

  function expectApiHeaders(
    res: Response,
    limits: { minute: number; hour: number; day: number },
    notBefore: number,
  ) {
    expect(res.headers.get('x-request-id')).toMatch(/^req_[A-Za-z0-9]+$/)
    for (const w of ['minute', 'hour', 'day'] as const) {
      expect(res.headers.get(`x-ratelimit-limit-${w}`)).toBe(String(limits[w]))
      const remaining = Number(res.headers.get(`x-ratelimit-remaining-${w}`))
      expect(Number.isInteger(remaining) && remaining >= 0 && remaining < limits[w]).toBe(true)
      const reset = Date.parse(res.headers.get(`x-ratelimit-reset-${w}`) ?? '')
      // The end of the UTC-aligned window that holds this request
      // (docs/decisions/0023-rate-limits-exact.md).
      expect(reset % WINDOW_MS[w]).toBe(0)
      expect(reset).toBeGreaterThan(notBefore)
    }
  }

  test('starts, logs "listening" and prints the demo test key over a self-signed certificate in DATA_DIR/tls', () => {
    expect(server.listening).toMatchObject({ msg: 'listening', database: 'pglite' })
    expect(server.stdout()).toContain(`https://localhost:${server.port}/api`)
    expect(server.ca).toBe(readFileSync(join(dataDir, 'tls', 'cert.pem'), 'utf8'))
  })

  test('creates and gets a transaction over HTTPS, with X-Request-Id and the nine rate-limit headers', async () => {
    const t0 = Date.now()
    const created = await server.fetch('/api/transactions/create', {
      method: 'POST',
      headers: { ...auth(key), 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 12.34, order_id: 'deno-1', metadata: { runtime: 'deno' } }),
    })
    expect(created.status).toBe(200)
    // The demo project has the default limits (60 / 1,000 / 10,000).
    expectApiHeaders(created, { minute: 60, hour: 1000, day: 10_000 }, t0)
    const body = await created.json()
    expect(body.success).toBe(true)
    expect(body.transaction).toMatchObject({
      status: 'created',
      amount_usd: 12.34,
      order_id: 'deno-1',
      metadata: { runtime: 'deno' },
      testing_mode: true,
    })
    expect(body.payment_url).toBe(`https://localhost:${server.port}/pay/${body.transaction.id}`)

    const got = await server.fetch(`/api/transactions/${body.transaction.id}`, {
      headers: auth(key),
    })
    expect(got.status).toBe(200)
    expectApiHeaders(got, { minute: 60, hour: 1000, day: 10_000 }, t0)
    expect(got.headers.get('x-request-id')).not.toBe(created.headers.get('x-request-id'))
    expectCountedOnceSince(created, got, 'day')
    expect((await got.json()).transaction).toEqual(body.transaction)
  })

  test('serves the pay page and its assets under Deno', async () => {
    const created = await (
      await server.fetch('/api/transactions/create', {
        method: 'POST',
        headers: { ...auth(key), 'content-type': 'application/json' },
        body: JSON.stringify({ amount: 3, order_description: 'Deno <tea>' }),
      })
    ).json()
    const page = await server.fetch(`/pay/${created.transaction.id}`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
    const html = await page.text()
    expect(html).toContain('Deno &lt;tea&gt;')
    const script = /<script type="module" src="([^"]+)"/.exec(html)![1]!
    const asset = await server.fetch(script)
    expect(asset.status).toBe(200)
    expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
    expect((await asset.text()).length).toBeGreaterThan(1000)
  })

  test('the dashboard signs in with the printed demo user and shows its pages under Deno (scrypt and sessions run there too)', async () => {
    const [, email, password] = server
      .stdout()
      .match(/Dashboard sign-in \(shown once; keep it\): (\S+) \/ (\S+)/)!
    const browser = dashboardClient(server)
    const wrong = await browser.signIn(email!, 'not the password at all')
    expect(wrong.status).toBe(401)
    expect((await browser.signIn(email!, password!)).location).toBe('/dashboard')
    const home = (await browser.get('/dashboard')).location!
    for (const path of ['', '/keys', '/endpoints', '/deliveries', '/settings']) {
      const r = await browser.page(home + path)
      expect({ path, status: r.status }).toEqual({ path, status: 200 })
    }
    const created = await browser.post(`${home}/keys`, { name: 'From Deno', scopes: 'stats:read' })
    expect(created.status).toBe(201)
    const made = /id="revealed-value">(sk_test_[A-Za-z0-9]+)</.exec(created.text)![1]!
    expect((await server.fetch('/api/transactions/stats', { headers: auth(made) })).status).toBe(
      200,
    )
  })

  test('errors carry the docs/decisions/0004-one-error-table.md body and the same headers', async () => {
    const t0 = Date.now()
    const res = await server.fetch('/api/transactions/00000000-0000-4000-8000-000000000000', {
      headers: auth(key),
    })
    expect(res.status).toBe(404)
    expectApiHeaders(res, { minute: 60, hour: 1000, day: 10_000 }, t0)
    const err = await res.json()
    expect(err).toMatchObject({ success: false, error: { type: 'not_found_error' } })
    expect(typeof err.message).toBe('string')
  })

  test('the CLI runs under Deno against the running server (through its admin socket)', async () => {
    const env = { DATA_DIR: dataDir }
    const project = await runCli(['project', 'create', '--name', 'From Deno', '--json'], {
      env,
      runtime: 'deno',
    })
    expect({ code: project.code, stderr: project.stderr }).toEqual({ code: 0, stderr: '' })
    expect(project.json).toEqual({
      id: expect.stringMatching(/^proj_/),
      name: 'From Deno',
      status: 'active',
    })
    // The server still holds the database, so the project reached it through the socket:
    // a key for it works against the server at once.
    expect(JSON.parse(readFileSync(join(dataDir, 'pglite.lock'), 'utf8')).pid).toBe(server.pid)
    const k = await runCli(
      [
        'key',
        'create',
        '--project',
        project.json.id,
        '--mode',
        'live',
        '--name',
        'Deno key',
        '--json',
      ],
      { env, runtime: 'deno' },
    )
    expect(k.code).toBe(0)
    const res = await server.fetch('/api/transactions/create', {
      method: 'POST',
      headers: { ...auth(k.json.key), 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 1 }),
    })
    expect(res.status).toBe(200)
    expect((await res.json()).transaction.testing_mode).toBe(false)
  })

  test('SIGTERM shuts Deno down gracefully: exit 0, lock released', async () => {
    expect(await server.stop()).toEqual({ code: 0, signal: null })
    expect(existsSync(join(dataDir, 'pglite.lock'))).toBe(false)
    expect(existsSync(join(dataDir, 'run', 'admin.sock'))).toBe(false)
  })
})
