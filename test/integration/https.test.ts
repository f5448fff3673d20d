import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { X509Certificate } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect } from 'node:tls'
import { generate } from 'selfsigned'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { expectCountedOnceSince, expectStatus } from '../helpers/expect.ts'
import {
  freePort,
  killAllProcesses,
  runCli,
  spawnServer,
  type ServerProcess,
} from '../helpers/processes.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

// docs/decisions/0003-https-only.md: TLS on PORT, a plain-HTTP listener that refuses /api and
// redirects the rest, the operator's own certificate, and TRUST_PROXY behind a TLS-terminating
// proxy.

afterAll(killAllProcesses)

/**
 * SHA-256 fingerprint of the certificate a TLS listener presents (verification off: we only look).
 */
function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(
      { host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false },
      () => {
        const fp = socket.getPeerCertificate().fingerprint256
        socket.end()
        resolve(fp)
      },
    )
    socket.on('error', reject)
  })
}

/**
 * An docs/decisions/0004-one-error-table.md body for plain HTTP to /api: invalid_request_error,
 * saying HTTPS is required.
 */
async function expectHttpsRequired(res: Response) {
  await expectStatus(res, 403)
  expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  const body = await res.json()
  expect(body.success).toBe(false)
  expect(body.error.type).toBe('invalid_request_error')
  expect(body.error.message).toContain('HTTPS')
  expect(body.message).toBe(body.error.message)
}

const stats = async (t: TestServer, key: string, headers: Record<string, string> = {}) => {
  const res = await api(t, key).get('/api/transactions/stats', headers)
  await expectStatus(res, 200)
  return { res, total: (await res.json()).stats.total_transactions as number }
}

for (const backend of backends()) {
  describe(`HTTPS on PORT and the plain-HTTP listener on HTTP_PORT [${backend}]`, () => {
    let t: TestServer
    let key: string
    let plain: string
    beforeAll(async () => {
      const httpPort = await freePort()
      t = await startTestServer(backend, { HTTP_PORT: String(httpPort) })
      key = (await t.project()).key
      plain = `http://localhost:${httpPort}`
    })
    afterAll(() => t?.stop())

    const plainFetch = (path: string, init: RequestInit = {}) =>
      fetch(plain + path, { redirect: 'manual', ...init })

    test('listens on both ports', () => {
      expect(t.httpPort).toBe(Number(new URL(plain).port))
      expect(t.port).not.toBe(t.httpPort)
    })

    test('HTTPS works: the API answers and Swagger is served', async () => {
      const res = await api(t, key).create({ amount: 3 })
      await expectStatus(res, 200)
      await expectStatus(await t.fetch('/swagger/json'), 200)
    })

    test('/api over plain HTTP is a 403 with the docs/decisions/0004-one-error-table.md body and X-Request-Id, whatever the route', async () => {
      await expectHttpsRequired(
        await plainFetch('/api/transactions/stats', {
          headers: { authorization: `Bearer ${key}` },
        }),
      )
      await expectHttpsRequired(
        await plainFetch('/api/transactions/00000000-0000-4000-8000-000000000000'),
      )
      await expectHttpsRequired(await plainFetch('/api/no-such-route', { method: 'DELETE' }))
      await expectHttpsRequired(await plainFetch('/api'))
    })

    test('a create with a valid key over plain HTTP is not processed: nothing created, nothing counted', async () => {
      const before = await stats(t, key)
      const res = await plainFetch('/api/transactions/create', {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ amount: 10 }),
      })
      await expectHttpsRequired(res)
      const after = await stats(t, key)
      expect(after.total).toBe(before.total)
      // Only the second stats call was counted against the project's limit.
      expectCountedOnceSince(before.res, after.res)
    })

    test('everything else is redirected with 308 to the HTTPS URL, path and query kept', async () => {
      for (const path of [
        '/swagger?x=1&y=two%20words',
        '/swagger/json',
        '/pay/0b7c2a34-0000-4000-8000-000000000000?lang=en',
        '/dashboard',
        '/',
      ]) {
        const res = await plainFetch(path)
        expect(res.status).toBe(308)
        expect(res.headers.get('location')).toBe(`https://localhost:${t.port}${path}`)
        expect(res.headers.get('x-request-id')).toMatch(/^req_/)
      }
      const post = await plainFetch('/pay/0b7c2a34-0000-4000-8000-000000000000/cancel', {
        method: 'POST',
      })
      expect(post.status).toBe(308)
    })

    test('without TRUST_PROXY, X-Forwarded-For and X-Forwarded-Proto are ignored', async () => {
      const p = await t.project()
      const set = await t.server.services.projects.setIpAllowlist(p.id, ['10.0.0.0/8'])
      expect(set.ok).toBe(true)
      const spoofed = await api(t, p.key).get('/api/transactions/stats', {
        'x-forwarded-for': '10.1.2.3',
      })
      await expectStatus(spoofed, 403)
      expect((await spoofed.json()).error.type).toBe('permission_error')
      // HTTPS is HTTPS, whatever a client claims.
      await expectStatus(
        await api(t, key).get('/api/transactions/stats', { 'x-forwarded-proto': 'http' }),
        200,
      )
    })
  })

  describe(`TLS_CERT_FILE and TLS_KEY_FILE [${backend}]`, () => {
    const dir = mkdtempSync(join(tmpdir(), 'crypto-pay-cert-'))
    let t: TestServer
    let certPem: string
    beforeAll(async () => {
      const pems = await generate([{ name: 'commonName', value: 'operator-provided.test' }], {
        keyType: 'ec',
        algorithm: 'sha256',
        days: 30,
        extensions: [
          {
            name: 'subjectAltName',
            altNames: [
              { type: 2, value: 'localhost' },
              { type: 7, ip: '127.0.0.1' },
            ],
          },
        ],
      } as any)
      certPem = pems.cert
      writeFileSync(join(dir, 'cert.pem'), pems.cert)
      writeFileSync(join(dir, 'key.pem'), pems.private, { mode: 0o600 })
      t = await startTestServer(backend, {
        TLS_CERT_FILE: join(dir, 'cert.pem'),
        TLS_KEY_FILE: join(dir, 'key.pem'),
      })
    })
    afterAll(async () => {
      await t?.stop()
      rmSync(dir, { recursive: true, force: true })
    })

    test('the served certificate is the configured one, and no self-signed one is made', async () => {
      expect(await servedFingerprint(t.port)).toBe(new X509Certificate(certPem).fingerprint256)
      expect(existsSync(join(t.dataDir, 'tls'))).toBe(false)
    })

    test('a client trusting only that certificate gets answers', async () => {
      const { key } = await t.project()
      await expectStatus(await api(t, key).create({ amount: 1 }), 200)
    })
  })

  // A real `npm start` process, as an operator behind a proxy runs it.
  describe(`TRUST_PROXY=1 behind a TLS-terminating proxy (server process) [${backend}]`, () => {
    let server: ServerProcess
    let cliEnv: Record<string, string>
    let pg: Awaited<ReturnType<typeof freshPostgres>> | null = null
    let dataDir: string
    let key: string
    const cli = async (...args: string[]) => {
      const r = await runCli([...args, '--json'], { env: cliEnv })
      expect(r.stderr).toBe('')
      return r.json
    }
    /** A project with a test key and limits no test reaches. */
    const project = async () => {
      const p = await cli('project', 'create', '--name', 'Behind a proxy')
      await cli(
        'project',
        'set-limits',
        '--project',
        p.id,
        '--minute',
        '100000',
        '--hour',
        '1000000',
        '--day',
        '10000000',
      )
      return {
        id: p.id as string,
        key: (await cli('key', 'create', '--project', p.id, '--mode', 'test', '--name', 'k'))
          .key as string,
      }
    }
    beforeAll(async () => {
      dataDir = await freshDataDir()
      pg = backend === 'postgres' ? await freshPostgres() : null
      cliEnv = { DATA_DIR: dataDir, ...(pg ? pg.env : {}) }
      server = await spawnServer({
        ...cliEnv,
        TRUST_PROXY: '1',
        BASE_URL: 'https://pay.example.com',
        PORT: '0',
        HTTP_PORT: '0',
      })
      key = (await project()).key
    })
    afterAll(async () => {
      await server?.stop()
      await pg?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    })

    const viaProxy = (
      path: string,
      headers: Record<string, string>,
      init: RequestInit = {},
      apiKey = key,
    ) => server.fetch(path, { ...init, headers: { authorization: `Bearer ${apiKey}`, ...headers } })
    const createVia = (headers: Record<string, string>) =>
      viaProxy(
        '/api/transactions/create',
        { 'content-type': 'application/json', ...headers },
        { method: 'POST', body: JSON.stringify({ amount: 2 }) },
      )
    const proxiedStats = async () => {
      const res = await viaProxy('/api/transactions/stats', { 'x-forwarded-proto': 'https' })
      await expectStatus(res, 200)
      return { res, total: (await res.json()).stats.total_transactions as number }
    }

    test('the main listener speaks plain HTTP and no second listener is opened', () => {
      expect(server.url).toStartWith('http://')
      expect(server.httpPort).toBeNull()
      expect(server.listening.tls).toContain('TRUST_PROXY')
    })

    test('X-Forwarded-Proto https is served', async () => {
      const res = await createVia({ 'x-forwarded-proto': 'https' })
      await expectStatus(res, 200)
      expect(res.headers.get('x-request-id')).toMatch(/^req_/)
      expect((await res.json()).payment_url).toStartWith('https://pay.example.com/pay/')
    })

    test('X-Forwarded-Proto http, or none, makes /api a 403 that processes nothing', async () => {
      const before = await proxiedStats()
      await expectHttpsRequired(await createVia({ 'x-forwarded-proto': 'http' }))
      await expectHttpsRequired(await createVia({}))
      await expectHttpsRequired(
        await viaProxy('/api/transactions/stats', { 'x-forwarded-proto': 'ws' }),
      )
      const after = await proxiedStats()
      expect(after.total).toBe(before.total)
      expectCountedOnceSince(before.res, after.res)
    })

    test('X-Forwarded-Proto http, or none, redirects other paths with 308 to the public HTTPS URL, query kept', async () => {
      for (const headers of [{ 'x-forwarded-proto': 'http' }, {}] as Record<string, string>[]) {
        const res = await viaProxy('/swagger?x=1&y=2', headers)
        expect(res.status).toBe(308)
        expect(res.headers.get('location')).toBe('https://pay.example.com/swagger?x=1&y=2')
        expect(res.headers.get('x-request-id')).toMatch(/^req_/)
      }
    })

    test("the last X-Forwarded-For hop is the client IP the project's allow-list checks", async () => {
      const p = await project()
      await cli('project', 'set-ip-allowlist', '--project', p.id, '--cidrs', '10.0.0.0/8')
      const call = (xff?: string) =>
        viaProxy(
          '/api/transactions/stats',
          {
            'x-forwarded-proto': 'https',
            ...(xff === undefined ? {} : { 'x-forwarded-for': xff }),
          },
          {},
          p.key,
        )
      await expectStatus(await call('1.2.3.4, 10.1.2.3'), 200)
      await expectStatus(await call('10.9.9.9'), 200)
      const refused = await call('10.1.2.3, 1.2.3.4')
      await expectStatus(refused, 403)
      expect((await refused.json()).error.type).toBe('permission_error')
      // Without the header the proxy's own address (here 127.0.0.1) is the client.
      await expectStatus(await call(), 403)
    })

    test('requests without a key are counted per forwarded client IP (the last hop)', async () => {
      const anonymous = async (xff: string) => {
        const res = await server.fetch('/api/transactions/stats', {
          headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': xff },
        })
        await expectStatus(res, 401)
        return res
      }
      const first = await anonymous('203.0.113.5')
      const second = await anonymous('198.51.100.1, 203.0.113.5')
      expectCountedOnceSince(first, second)
      // Another client has its own counter; a spoofed first hop does not move it.
      const other = await anonymous('203.0.113.6')
      expectCountedOnceSince(other, await anonymous('203.0.113.6'))
      expectCountedOnceSince(second, await anonymous('203.0.113.6, 203.0.113.5'))
    })
  })

  describe(`BASE_URL given to startServer in its config [${backend}]`, () => {
    let t: TestServer
    beforeAll(async () => {
      t = await startTestServer(backend, { BASE_URL: 'https://pay.example.com' })
    })
    afterAll(() => t?.stop())

    test('payment URLs use it', async () => {
      const { key } = await t.project()
      const res = await api(t, key).create({ amount: 1 })
      expect((await res.json()).payment_url).toStartWith('https://pay.example.com/pay/')
    })
  })

  describe(`TRUST_PROXY=1 without BASE_URL [${backend}]`, () => {
    let t: TestServer
    beforeAll(async () => {
      t = await startTestServer(backend, { TRUST_PROXY: '1' })
    })
    afterAll(() => t?.stop())

    test('a request the proxy forwarded as http is redirected to an https:// URL', async () => {
      const res = await t.fetch('/swagger?x=1', {
        headers: { 'x-forwarded-proto': 'http', host: 'pay.example.com' },
      })
      expect(res.status).toBe(308)
      expect(res.headers.get('location')).toBe('https://pay.example.com/swagger?x=1')
    })
  })
}
