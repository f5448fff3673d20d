import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dashboardClient } from '../helpers/dashboard.ts'
import {
  freePort,
  killAllProcesses,
  spawnServer,
  startProcess,
  type ServerProcess,
} from '../helpers/processes.ts'

// docs/decisions/0024-start-and-configuration.md: `npm start` (= `bun src/main.ts`) as an operator
// meets it: first start on an empty DATA_DIR, restarts, SIGTERM, a second instance on a held
// DATA_DIR, bad configuration.

const root = mkdtempSync(join(tmpdir(), 'crypto-pay-start-'))
afterAll(async () => {
  await killAllProcesses()
  rmSync(root, { recursive: true, force: true })
})

const BANNER_END = /Then open the payment_url it returns[^\n]*\n|Make another: [^\n]*\n/
const KEY_RE = /sk_(test|live)_[A-Za-z0-9]{32,}/

/** The whole banner: the "listening" line is logged just before it is printed. */
async function bannerOf(server: ServerProcess) {
  await server.waitFor('stdout', BANNER_END)
  return server.stdout()
}

function run(
  cmd: string,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as any).code ?? 1) : 0, stdout, stderr }),
    )
  })
}
const hasCurl = (await run('sh', ['-c', 'command -v curl'])).code === 0

describe('npm start on a fresh, empty DATA_DIR', () => {
  const dataDir = join(root, 'data') // not created, not migrated: the server does both
  let httpPort: number
  const env = () => ({ DATA_DIR: dataDir, PORT: '0', HTTP_PORT: String(httpPort) })
  let first: ServerProcess
  let banner: string
  let key: string
  let projectId: string

  beforeAll(async () => {
    httpPort = await freePort()
    first = await spawnServer(env())
    banner = await bannerOf(first)
  })

  const create = (server: ServerProcess, apiKey: string) =>
    server.fetch('/api/transactions/create', {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 25, order_id: 'order-1001' }),
    })

  test('the first start logs where it listens and prints the demo test key, the URLs and a curl example', () => {
    expect(first.port).toBeGreaterThan(0)
    expect(first.listening).toMatchObject({
      level: 'info',
      msg: 'listening',
      port: first.port,
      httpPort,
      database: 'pglite',
    })
    const base = `https://localhost:${first.port}`
    for (const url of [`${base}/api`, `${base}/swagger`, `${base}/pay/`, `${base}/dashboard`])
      expect(banner).toContain(url)
    expect(banner).toContain(`port ${httpPort}`)
    const m = banner.match(KEY_RE)
    expect(m?.[1]).toBe('test')
    key = m![0]
    projectId = banner.match(/Demo project (proj_[A-Za-z0-9]+)/)![1]
    expect(banner).toContain(`curl -k ${base}/api/transactions/create`)
    expect(banner).toContain(`-H "Authorization: Bearer ${key}"`)
    expect(banner).toContain('-H "Content-Type: application/json"')
  })

  test('the key never reaches the log (stderr)', () => {
    expect(first.stderr()).not.toMatch(KEY_RE)
  })

  test('the printed key creates and reads a transaction over HTTPS, trusting DATA_DIR/tls/cert.pem', async () => {
    expect(first.ca).toContain('BEGIN CERTIFICATE')
    const res = await create(first, key)
    expect(res.status).toBe(200)
    const { transaction } = await res.json()
    expect(transaction.testing_mode).toBe(true)
    expect(transaction.payment_url).toBe(`https://localhost:${first.port}/pay/${transaction.id}`)
    const got = await first.fetch(`/api/transactions/${transaction.id}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    expect(got.status).toBe(200)
    expect((await got.json()).transaction.id).toBe(transaction.id)
  })

  test.if(hasCurl)('the curl example runs as printed', async () => {
    const lines = banner.split('\n')
    const from = lines.findIndex((l) => l.trim().startsWith('curl '))
    const to = lines.findIndex((l, i) => i > from && l.trim().startsWith('-d '))
    expect(from).toBeGreaterThan(-1)
    expect(to).toBeGreaterThan(from)
    const command = lines.slice(from, to + 1).join('\n')
    const r = await run('sh', ['-c', `${command} --silent --show-error`])
    expect(r.stderr).toBe('')
    const body = JSON.parse(r.stdout)
    expect(body.success).toBe(true)
    expect(body.transaction.order_id).toBe('order-1001')
  })

  test("the printed dashboard sign-in opens the demo project's dashboard; the password never reaches the log", async () => {
    const m = banner.match(/Dashboard sign-in \(shown once; keep it\): (\S+) \/ (\S+)/)
    expect(m).not.toBeNull()
    const [, email, password] = m!
    expect(first.stderr()).not.toContain(password)
    const browser = dashboardClient(first)
    const signedIn = await browser.signIn(email!, password!)
    expect({ status: signedIn.status, location: signedIn.location }).toEqual({
      status: 303,
      location: '/dashboard',
    })
    expect((await browser.get('/dashboard')).location).toBe(`/dashboard/${projectId}/test`)
    const overview = await browser.get(`/dashboard/${projectId}/test`)
    expect(overview.status).toBe(200)
    expect(overview.text).toContain('Demo project')
  })

  test('a second server on the same DATA_DIR exits non-zero with a clear message; the first keeps serving', async () => {
    const second = startProcess('src/main.ts', {
      env: { DATA_DIR: dataDir, PORT: '0', HTTP_PORT: '0' },
    })
    const exit = await second.exited
    expect(exit.code).not.toBe(0)
    expect(exit.code).not.toBeNull()
    expect(second.stderr()).toContain(
      `The embedded database in ${dataDir} is in use by server (pid ${first.pid})`,
    )
    expect(second.stdout()).not.toMatch(KEY_RE)
    expect(JSON.parse(readFileSync(join(dataDir, 'pglite.lock'), 'utf8')).pid).toBe(first.pid)
    expect((await create(first, key)).status).toBe(200)
  })

  test('SIGTERM shuts down gracefully: exit 0, lock and admin socket released', async () => {
    expect(existsSync(join(dataDir, 'run', 'admin.sock'))).toBe(true)
    expect(await first.stop()).toEqual({ code: 0, signal: null })
    expect(first.stderr()).toContain('SIGTERM')
    expect(existsSync(join(dataDir, 'pglite.lock'))).toBe(false)
    expect(existsSync(join(dataDir, 'run', 'admin.sock'))).toBe(false)
  })

  test('the second start prints no key, but the project id and how to make a key; the first key still works', async () => {
    const second = await spawnServer(env())
    try {
      const text = await bannerOf(second)
      expect(text).not.toMatch(KEY_RE)
      expect(text).toContain(projectId)
      expect(text).toContain(`npm run cli -- key create --project ${projectId} --mode test`)
      expect(text).toContain(
        `npm run cli -- user create --email you@example.com --password '<12+ characters>' --project ${projectId}`,
      )
      expect((await create(second, key)).status).toBe(200)
      // The certificate was made once and kept (docs/decisions/0003-https-only.md).
      expect(second.ca).toBe(first.ca)
    } finally {
      expect(await second.stop()).toEqual({ code: 0, signal: null })
    }
  })

  test('a third start succeeds: the lock was released by the SIGTERM before', async () => {
    const third = await spawnServer(env())
    try {
      expect((await create(third, key)).status).toBe(200)
    } finally {
      expect(await third.stop()).toEqual({ code: 0, signal: null })
    }
  })
})

describe('npm start with bad configuration exits non-zero naming the variable', () => {
  const cert = join(root, 'junk.pem')
  writeFileSync(cert, 'not a certificate\n')
  const cases: [string, Record<string, string>, string][] = [
    ['PORT=abc', { PORT: 'abc' }, 'PORT'],
    ['PORT=70000', { PORT: '70000' }, 'PORT'],
    ['HTTP_PORT=-1', { HTTP_PORT: '-1' }, 'HTTP_PORT'],
    ['LOG_LEVEL=loud', { LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    ['TLS_CERT_FILE without TLS_KEY_FILE', { TLS_CERT_FILE: cert }, 'TLS_KEY_FILE'],
    ['TLS_KEY_FILE without TLS_CERT_FILE', { TLS_KEY_FILE: cert }, 'TLS_CERT_FILE'],
    ['TRUST_PROXY=maybe', { TRUST_PROXY: 'maybe' }, 'TRUST_PROXY'],
    ['DATABASE_URL=mysql://...', { DATABASE_URL: 'mysql://root@127.0.0.1/x' }, 'DATABASE_URL'],
    ['BASE_URL=ftp://...', { BASE_URL: 'ftp://pay.example.com' }, 'BASE_URL'],
  ]
  cases.forEach(([what, bad, variable], i) => {
    test(`${what}: names ${variable}, starts nothing`, async () => {
      const dataDir = join(root, `bad-config-${i}`)
      const proc = startProcess('src/main.ts', {
        env: { DATA_DIR: dataDir, PORT: '0', HTTP_PORT: '0', ...bad },
      })
      const exit = await proc.exited
      expect(exit.code).toBe(1)
      expect(proc.stderr()).toMatch(new RegExp(`^Configuration error: ${variable}: `, 'm'))
      expect(proc.stdout()).toBe('')
      // Configuration is checked before anything is created.
      expect(existsSync(dataDir)).toBe(false)
    })
  })

  for (const [i, [what, files]] of (
    [
      [
        'a TLS_CERT_FILE that does not exist',
        { TLS_CERT_FILE: join(root, 'missing.pem'), TLS_KEY_FILE: join(root, 'missing-key.pem') },
      ],
      ['a TLS_CERT_FILE that is not a certificate', { TLS_CERT_FILE: cert, TLS_KEY_FILE: cert }],
    ] as const
  ).entries()) {
    test(`${what}: names TLS_CERT_FILE`, async () => {
      const proc = startProcess('src/main.ts', {
        env: { DATA_DIR: join(root, `bad-tls-${i}`), PORT: '0', HTTP_PORT: '0', ...files },
      })
      expect((await proc.exited).code).toBe(1)
      expect(proc.stderr()).toContain('TLS_CERT_FILE')
    })
  }
})
