import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { backends } from '../helpers/databases.ts'
import { killAllProcesses } from '../helpers/processes.ts'
import { startTestServer, type TestServer } from '../helpers/server.ts'
import { cliProject, cliWith, createTransaction, waitUntil, type Cli } from '../helpers/webhook-cli.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'
import { systemResolver, type Resolver } from '../../src/webhooks/url-guard.ts'

/**
 * R21: live endpoints are https and never reach loopback, private, link-local or metadata
 * addresses, checked when saved and again at delivery time against what the name resolves
 * to then; no redirect is followed (issue 5).
 */

/** A public-looking name whose DNS answer is this machine, as a rebinding attacker would arrange. */
const REBOUND = 'hooks.shop.example'
/** A public-looking name that resolves to a public address (the check lets it through; the request then fails in DNS). */
const PUBLIC = 'hooks.public.example'
const resolver: Resolver = async (host) => {
  if (host === REBOUND) return (await systemResolver('localhost')).filter((a) => a === '127.0.0.1')
  if (host === PUBLIC) return ['93.184.215.14']
  return systemResolver(host)
}

for (const backend of backends()) {
  describe(`webhook SSRF guard [${backend}]`, () => {
    let t: TestServer
    let sink: WebhookSink
    let cli: Cli
    let project: { id: string; key: string }
    beforeAll(async () => {
      sink = await startWebhookSink()
      // The CLI reaches the server's database: through the admin socket (PGlite) or directly (PostgreSQL, same SECRET_KEY).
      const secretKey = randomBytes(32).toString('hex')
      t = await startTestServer(backend, { SECRET_KEY: secretKey }, { resolver })
      cli = cliWith(t.databaseUrl ? { DATABASE_URL: t.databaseUrl, SECRET_KEY: secretKey, DATA_DIR: '/nonexistent' } : { DATA_DIR: t.dataDir })
      project = await cliProject(cli, 'SSRF')
    })
    afterAll(async () => {
      await t?.stop()
      await sink?.stop()
      await killAllProcesses()
    })

    const refused: [string, string][] = [
      ['http://hooks.example.com/webhooks', 'live endpoints must use https'],
      ['https://127.0.0.1/webhooks', 'loopback, private, link-local or metadata address (127.0.0.1)'],
      ['https://[::1]/webhooks', 'loopback, private, link-local or metadata address (::1)'],
      ['https://169.254.169.254/latest/meta-data', 'loopback, private, link-local or metadata address (169.254.169.254)'],
      ['https://10.1.2.3/webhooks', 'loopback, private, link-local or metadata address (10.1.2.3)'],
      ['https://localhost/webhooks', 'public host name (localhost)'],
    ]
    for (const [url, reason] of refused) {
      test(`a live endpoint to ${url} is refused at creation: exit 1, "${reason}"`, async () => {
        const r = await cli.run('endpoint', 'create', '--project', project.id, '--mode', 'live', '--url', url, '--events', 'transaction.created')
        expect(r.code).toBe(1)
        expect(r.stdout).toBe('')
        expect(r.json.error.message).toContain(reason)
        expect(r.json.error.details).toEqual([{ path: 'url', message: expect.stringContaining(reason) }])
      })
    }

    test('refused live endpoints were not saved; a test endpoint may use http://127.0.0.1', async () => {
      const ep = await cli.ok('endpoint', 'create', '--project', project.id, '--mode', 'test', '--url', 'http://127.0.0.1:9/webhooks', '--events', 'transaction.created')
      expect(ep).toMatchObject({ mode: 'test', url: 'http://127.0.0.1:9/webhooks' })
      const { endpoints } = await cli.ok('endpoint', 'list', '--project', project.id, '--mode', 'live')
      expect(endpoints).toEqual([])
    })

    test(`a live endpoint whose name resolves to 127.0.0.1 at delivery time is accepted when saved, but no request is made`, async () => {
      const p = await cliProject(cli, 'SSRF rebinding', 'live')
      const path = `/ssrf-rebound-${backend}`
      const port = new URL(sink.url('/')).port
      const rebound = await cli.ok('endpoint', 'create', '--project', p.id, '--mode', 'live', '--url', `https://${REBOUND}:${port}${path}`, '--events', 'transaction.created')
      await sink.configure(path, { secret: rebound.secret, mode: 'ok' })
      // Control: a name resolving to a public address passes the check (and then fails on its own, in DNS).
      const control = await cli.ok('endpoint', 'create', '--project', p.id, '--mode', 'live', '--url', `https://${PUBLIC}/hooks`, '--events', 'transaction.created')

      const id = await createTransaction(t.fetch, p.key)
      let deliveries: any[] = []
      await waitUntil(async () => {
        deliveries = (await cli.ok('delivery', 'list', '--project', p.id, '--mode', 'live')).deliveries
        return deliveries.length === 2 && deliveries.every((d) => d.attempts === 1)
      }, 20_000, () => JSON.stringify(deliveries))
      expect(deliveries.every((d) => d.transaction_id === id && d.mode === 'live' && d.status === 'retrying')).toBe(true)

      const show = async (endpointId: string) => cli.ok('delivery', 'show', '--delivery', deliveries.find((d) => d.endpoint === endpointId).id)
      const [attempt] = (await show(rebound.id)).attempts
      expect(attempt.error).toContain('refused')
      expect(attempt.error).toContain(`${REBOUND} resolves to 127.0.0.1`)
      expect(attempt.status_code).toBeNull()
      expect(attempt.duration_ms).toBe(0)
      expect(await sink.received(path)).toEqual([])

      // The control got past the check: whatever became of its request, it was not refused.
      const [other] = (await show(control.id)).attempts
      expect(other.error).not.toContain('refused')
    })

    test('a test endpoint answering 302 is a failed attempt that names the redirect, and the redirect target receives nothing', async () => {
      const p = await cliProject(cli, 'SSRF redirect')
      const from = `/redirect-from-${backend}`
      const target = `/redirect-target-${backend}`
      const ep = await cli.ok('endpoint', 'create', '--project', p.id, '--mode', 'test', '--url', sink.url(from), '--events', 'transaction.created')
      await sink.configure(from, { secret: ep.secret, mode: 'redirect', location: sink.url(target) })
      await sink.configure(target, { secret: ep.secret, mode: 'ok' })

      await createTransaction(t.fetch, p.key)
      await sink.waitFor(from, (r) => r.length >= 1, 15_000)
      let d: any
      await waitUntil(async () => {
        ;[d] = (await cli.ok('delivery', 'list', '--project', p.id)).deliveries
        return d?.attempts === 1
      }, 15_000, () => JSON.stringify(d))
      expect(d).toMatchObject({ status: 'retrying', last_status_code: 302 })
      const [attempt] = (await cli.ok('delivery', 'show', '--delivery', d.id)).attempts
      expect(attempt.status_code).toBe(302)
      expect(attempt.error).toContain('redirect')
      expect(attempt.error).toContain(sink.url(target))
      expect(await sink.received(target)).toEqual([])
      expect(await sink.received(from)).toHaveLength(1)
    })
  })
}
