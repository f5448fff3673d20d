import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { loadConfig } from '../../src/config.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { startServer, type RunningServer } from '../../src/server/start.ts'
import { backends } from '../helpers/databases.ts'
import { csrfOf, dashboardClient, memberOf, unescapeHtml } from '../helpers/dashboard.ts'
import { killAllProcesses, NO_NETWORKS } from '../helpers/processes.ts'
import { startTestServer, type TestServer } from '../helpers/server.ts'
import {
  cliProject,
  cliWith,
  createTransaction,
  waitUntil,
  type Cli,
} from '../helpers/webhook-cli.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'
import type { Services } from '../../src/services.ts'
import { systemResolver, type Resolver } from '../../src/webhooks/url-guard.ts'

/**
 * docs/decisions/0021-webhook-endpoints-and-private-addresses.md: live endpoints are https and
 * never reach loopback, private, link-local or metadata addresses, checked when saved and again at
 * delivery time against what the name resolves to then; no redirect is followed
 * (docs/decisions/0021-webhook-endpoints-and-private-addresses.md). Test endpoints may use http,
 * and local addresses only while WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS allows it; what a private
 * address answers is never stored or shown, whichever the setting
 * (docs/decisions/0021-webhook-endpoints-and-private-addresses.md, item 4).
 */

/**
 * A public-looking name whose DNS answer is this machine, as a rebinding attacker would arrange.
 */
const REBOUND = 'hooks.shop.example'
/**
 * A public-looking name that resolves to a public address (the check lets it through; the request
 * then fails in DNS).
 */
const PUBLIC = 'hooks.public.example'
/** A public-looking name whose DNS answer is an address of the operator's private network. */
const LAN = 'hooks.lan.example'
const resolver: Resolver = async (host) => {
  if (host === REBOUND) return (await systemResolver('localhost')).filter((a) => a === '127.0.0.1')
  if (host === PUBLIC) return ['93.184.215.14']
  if (host === LAN) return ['10.1.2.3']
  return systemResolver(host)
}

const ALLOW = 'WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS'

/** What an internal service of the operator's network answers: nobody outside may read it. */
const INTERNAL_ANSWER = 'internal admin API: db password hunter2'

/**
 * An internal service on this machine: answers every request with INTERNAL_ANSWER (503 under
 * /fail), and keeps the paths it was asked for.
 */
function startInternalService() {
  const seen: string[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const path = new URL(req.url).pathname
      seen.push(path)
      await req.text()
      return new Response(INTERNAL_ANSWER, { status: path.startsWith('/fail') ? 503 : 200 })
    },
  })
  return {
    port: server.port,
    url: (path: string) => `http://127.0.0.1:${server.port}${path}`,
    seen,
    stop: () => server.stop(true),
  }
}

function must<T>(r: { ok: true; value: T } | { ok: false; message: string }): T {
  if (!r.ok) throw new Error(r.message)
  return r.value
}

/** The attempts of a delivery once it has made `n`. */
async function attemptsOf(services: Services, deliveryId: string, n = 1) {
  let attempts: Awaited<ReturnType<Services['webhooks']['getDelivery']>> | null = null
  await waitUntil(
    async () => {
      attempts = await services.webhooks.getDelivery(deliveryId)
      return attempts.ok && attempts.value.attempts.length >= n
    },
    20_000,
    () => JSON.stringify(attempts),
  )
  return must(attempts!).attempts
}

/** The dashboard page's error alert. */
const errorOf = (page: string) => {
  const m = /<div class="alert error" role="alert">([^<]*)<\/div>/.exec(page)
  return m ? unescapeHtml(m[1]!) : null
}

for (const backend of backends()) {
  describe(`webhook SSRF guard [${backend}]`, () => {
    let t: TestServer
    let sink: WebhookSink
    let cli: Cli
    let project: { id: string; key: string }
    beforeAll(async () => {
      sink = await startWebhookSink()
      // The CLI reaches the server's database: through the admin socket (PGlite) or directly
      // (PostgreSQL, same SECRET_KEY).
      const secretKey = randomBytes(32).toString('hex')
      t = await startTestServer(backend, { SECRET_KEY: secretKey, [ALLOW]: '1' }, { resolver })
      cli = cliWith(
        t.databaseUrl
          ? {
              DATABASE_URL: t.databaseUrl,
              SECRET_KEY: secretKey,
              DATA_DIR: '/nonexistent',
              [ALLOW]: '1',
            }
          : { DATA_DIR: t.dataDir },
      )
      project = await cliProject(cli, 'SSRF')
    })
    afterAll(async () => {
      await t?.stop()
      await sink?.stop()
      await killAllProcesses()
    })

    const refused: [string, string][] = [
      ['http://hooks.example.com/webhooks', 'live endpoints must use https'],
      [
        'https://127.0.0.1/webhooks',
        'loopback, private, link-local or metadata address (127.0.0.1)',
      ],
      ['https://[::1]/webhooks', 'loopback, private, link-local or metadata address (::1)'],
      [
        'https://169.254.169.254/latest/meta-data',
        'loopback, private, link-local or metadata address (169.254.169.254)',
      ],
      ['https://10.1.2.3/webhooks', 'loopback, private, link-local or metadata address (10.1.2.3)'],
      ['https://localhost/webhooks', 'public host name (localhost)'],
    ]
    for (const [url, reason] of refused) {
      test(`a live endpoint to ${url} is refused at creation: exit 1, "${reason}"`, async () => {
        const r = await cli.run(
          'endpoint',
          'create',
          '--project',
          project.id,
          '--mode',
          'live',
          '--url',
          url,
          '--events',
          'transaction.created',
        )
        expect(r.code).toBe(1)
        expect(r.stdout).toBe('')
        expect(r.json.error.message).toContain(reason)
        expect(r.json.error.details).toEqual([
          { path: 'url', message: expect.stringContaining(reason) },
        ])
      })
    }

    test('refused live endpoints were not saved; a test endpoint may use http://127.0.0.1', async () => {
      const ep = await cli.ok(
        'endpoint',
        'create',
        '--project',
        project.id,
        '--mode',
        'test',
        '--url',
        'http://127.0.0.1:9/webhooks',
        '--events',
        'transaction.created',
      )
      expect(ep).toMatchObject({ mode: 'test', url: 'http://127.0.0.1:9/webhooks' })
      const { endpoints } = await cli.ok(
        'endpoint',
        'list',
        '--project',
        project.id,
        '--mode',
        'live',
      )
      expect(endpoints).toEqual([])
    })

    test(`a live endpoint whose name resolves to 127.0.0.1 at delivery time is accepted when saved, but no request is made`, async () => {
      const p = await cliProject(cli, 'SSRF rebinding', 'live')
      const path = `/ssrf-rebound-${backend}`
      const port = new URL(sink.url('/')).port
      const rebound = await cli.ok(
        'endpoint',
        'create',
        '--project',
        p.id,
        '--mode',
        'live',
        '--url',
        `https://${REBOUND}:${port}${path}`,
        '--events',
        'transaction.created',
      )
      await sink.configure(path, { secret: rebound.secret, mode: 'ok' })
      // Control: a name resolving to a public address passes the check (and then fails on its own,
      // in DNS).
      const control = await cli.ok(
        'endpoint',
        'create',
        '--project',
        p.id,
        '--mode',
        'live',
        '--url',
        `https://${PUBLIC}/hooks`,
        '--events',
        'transaction.created',
      )

      const id = await createTransaction(t.fetch, p.key)
      let deliveries: any[] = []
      await waitUntil(
        async () => {
          deliveries = (await cli.ok('delivery', 'list', '--project', p.id, '--mode', 'live'))
            .deliveries
          return deliveries.length === 2 && deliveries.every((d) => d.attempts === 1)
        },
        20_000,
        () => JSON.stringify(deliveries),
      )
      expect(
        deliveries.every(
          (d) => d.transaction_id === id && d.mode === 'live' && d.status === 'retrying',
        ),
      ).toBe(true)

      const show = async (endpointId: string) =>
        cli.ok(
          'delivery',
          'show',
          '--delivery',
          deliveries.find((d) => d.endpoint === endpointId).id,
        )
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
      const ep = await cli.ok(
        'endpoint',
        'create',
        '--project',
        p.id,
        '--mode',
        'test',
        '--url',
        sink.url(from),
        '--events',
        'transaction.created',
      )
      await sink.configure(from, {
        secret: ep.secret,
        mode: 'redirect',
        location: sink.url(target),
      })
      await sink.configure(target, { secret: ep.secret, mode: 'ok' })

      await createTransaction(t.fetch, p.key)
      await sink.waitFor(from, (r) => r.length >= 1, 15_000)
      let d: any
      await waitUntil(
        async () => {
          ;[d] = (await cli.ok('delivery', 'list', '--project', p.id)).deliveries
          return d?.attempts === 1
        },
        15_000,
        () => JSON.stringify(d),
      )
      expect(d).toMatchObject({ status: 'retrying', last_status_code: 302 })
      const [attempt] = (await cli.ok('delivery', 'show', '--delivery', d.id)).attempts
      expect(attempt.status_code).toBe(302)
      expect(attempt.error).toContain('redirect')
      expect(attempt.error).toContain(sink.url(target))
      expect(await sink.received(target)).toEqual([])
      expect(await sink.received(from)).toHaveLength(1)
    })

    test(`with ${ALLOW}=1 a test endpoint on a loopback address is delivered to, but only the status and timing of its answer are kept: no response body in the log, \`delivery show\` or the dashboard`, async () => {
      const internal = startInternalService()
      try {
        const m = await memberOf(t, { projectName: 'Private receiver' })
        const services = t.server.services
        const endpoint = async (path: string) =>
          must(
            await services.endpoints.create({
              projectId: m.project.id,
              mode: 'test',
              url: internal.url(path),
              eventTypes: ['transaction.completed'],
            }),
          )
        const ok = must(
          await services.webhooks.sendTest(
            (await endpoint('/ok')).endpoint.id,
            'transaction.completed',
          ),
        )
        const failing = must(
          await services.webhooks.sendTest(
            (await endpoint('/fail')).endpoint.id,
            'transaction.completed',
          ),
        )
        const [okAttempt] = await attemptsOf(services, ok.id)
        const [failedAttempt] = await attemptsOf(services, failing.id)
        // The requests were made and answered.
        expect(internal.seen.sort()).toEqual(['/fail', '/ok'])
        expect(okAttempt).toMatchObject({ statusCode: 200, error: null, responseBody: null })
        expect(failedAttempt).toMatchObject({
          statusCode: 503,
          error: 'HTTP 503',
          responseBody: null,
        })
        expect(okAttempt!.durationMs).toBeGreaterThanOrEqual(0)

        const [shown] = (await cli.ok('delivery', 'show', '--delivery', failing.id)).attempts
        expect(shown).toMatchObject({ status_code: 503, error: 'HTTP 503', response_body: null })
        expect(typeof shown.duration_ms).toBe('number')
        expect(JSON.stringify(shown)).not.toContain(INTERNAL_ANSWER)

        const c = dashboardClient(t)
        expect((await c.signIn(m.email, m.password)).status).toBe(303)
        for (const d of [ok, failing]) {
          const page = await c.get(`/dashboard/${m.project.id}/test/deliveries/${d.id}`)
          expect(page.status).toBe(200)
          expect(page.text).toContain(d === ok ? '>200<' : '>503<')
          expect(page.text).not.toContain(INTERNAL_ANSWER)
        }
      } finally {
        internal.stop()
      }
    })
  })

  describe(`private test endpoints not allowed (${ALLOW}=0) [${backend}]`, () => {
    let t: TestServer
    let cli: Cli
    let internal: ReturnType<typeof startInternalService>
    let project: { id: string }
    beforeAll(async () => {
      internal = startInternalService()
      t = await startTestServer(backend, { [ALLOW]: '0' }, { resolver })
      // On PostgreSQL the CLI opens the database itself, under its own environment.
      cli = cliWith({ ...t.cliEnv, [ALLOW]: '0' })
      project = must(await t.server.services.projects.create('Private endpoints off'))
    })
    afterAll(async () => {
      await t?.stop()
      internal?.stop()
      await killAllProcesses()
    })

    const refused: [string, string][] = [
      [
        'http://127.0.0.1:PORT/hooks',
        'loopback, private, link-local or metadata address (127.0.0.1)',
      ],
      ['http://[::1]:PORT/hooks', 'loopback, private, link-local or metadata address (::1)'],
      ['http://10.1.2.3/hooks', 'loopback, private, link-local or metadata address (10.1.2.3)'],
      [
        'http://169.254.169.254/latest/meta-data',
        'loopback, private, link-local or metadata address (169.254.169.254)',
      ],
      ['http://localhost:PORT/hooks', 'public host name (localhost)'],
    ]
    for (const [template, reason] of refused) {
      test(`a test endpoint to ${template} is refused at creation with the CLI: exit 1, "${reason}", naming ${ALLOW}`, async () => {
        const url = template.replace('PORT', String(internal.port))
        const r = await cli.run(
          'endpoint',
          'create',
          '--project',
          project.id,
          '--mode',
          'test',
          '--url',
          url,
          '--events',
          'transaction.created',
        )
        expect(r.code).toBe(1)
        expect(r.stdout).toBe('')
        expect(r.json.error.message).toStartWith('url test endpoints must')
        expect(r.json.error.message).toContain(reason)
        expect(r.json.error.message).toContain(ALLOW)
        expect(r.json.error.details).toEqual([
          { path: 'url', message: expect.stringContaining(reason) },
        ])
      })
    }

    test('the dashboard refuses a test endpoint on a loopback address with 400 and the message naming the variable; nothing is saved', async () => {
      const m = await memberOf(t, { projectName: 'Dashboard, private off' })
      const c = dashboardClient(t)
      expect((await c.signIn(m.email, m.password)).status).toBe(303)
      const form = await c.page(`/dashboard/${m.project.id}/test/endpoints`)
      expect(form.status).toBe(200)
      const res = await c.post(
        `/dashboard/${m.project.id}/test/endpoints`,
        { url: internal.url('/from-dashboard'), events: ['transaction.completed'] },
        { csrf: csrfOf(form.text) },
      )
      expect(res.status).toBe(400)
      expect(errorOf(res.text)).toBe(
        `url test endpoints must not target a loopback, private, link-local or metadata address (127.0.0.1) while ${ALLOW} is off`,
      )
      expect(await t.server.services.endpoints.list(m.project.id)).toEqual([])
    })

    test('a test endpoint may still use plain http to a public host', async () => {
      const ep = await cli.ok(
        'endpoint',
        'create',
        '--project',
        project.id,
        '--mode',
        'test',
        '--url',
        `http://${PUBLIC}/hooks`,
        '--events',
        'transaction.created',
      )
      expect(ep).toMatchObject({ mode: 'test', url: `http://${PUBLIC}/hooks` })
    })

    test(`a test endpoint whose name resolves to a private address (${LAN} -> 10.1.2.3) is refused before every delivery: the attempt logs the refusal and no request is made`, async () => {
      const ep = await cli.ok(
        'endpoint',
        'create',
        '--project',
        project.id,
        '--mode',
        'test',
        '--url',
        `http://${LAN}:${internal.port}/lan`,
        '--events',
        'transaction.created',
      )
      const d = must(await t.server.services.webhooks.sendTest(ep.id, 'transaction.completed'))
      const [attempt] = await attemptsOf(t.server.services, d.id)
      expect(attempt).toMatchObject({ statusCode: null, durationMs: 0, responseBody: null })
      expect(attempt!.error).toBe(
        `refused: url ${LAN} resolves to 10.1.2.3, a loopback, private, link-local or metadata address, while ${ALLOW} is off`,
      )
      const [shown] = (await cli.ok('delivery', 'show', '--delivery', d.id)).attempts
      expect(shown.error).toBe(attempt!.error)
      expect(internal.seen).toEqual([])
    })
  })

  describe(`private test endpoints saved while allowed, after a restart with ${ALLOW}=0 [${backend}]`, () => {
    let first: TestServer
    let server: RunningServer
    let cli: Cli
    let internal: ReturnType<typeof startInternalService>
    const stored: Record<string, string> = {}
    beforeAll(async () => {
      internal = startInternalService()
      first = await startTestServer(backend, { [ALLOW]: '1' }, { resolver })
      const project = must(await first.server.services.projects.create('Saved while allowed'))
      for (const [name, url] of [
        ['loopback', internal.url('/stored')],
        ['localhost', `http://localhost:${internal.port}/stored-name`],
        ['lan', `http://${LAN}:${internal.port}/stored-lan`],
      ]) {
        stored[name!] = must(
          await first.server.services.endpoints.create({
            projectId: project.id,
            mode: 'test',
            url: url!,
            eventTypes: ['transaction.completed'],
          }),
        ).endpoint.id
      }
      // The operator turns the setting off and restarts on the same data.
      await first.server.stop()
      const config = loadConfig({
        PORT: '0',
        HTTP_PORT: '0',
        LOG_LEVEL: 'silent',
        NETWORKS_CONFIG: NO_NETWORKS,
        ...first.cliEnv,
        [ALLOW]: '0',
      })
      server = await startServer(config, { logger: createLogger('silent'), resolver })
      cli = cliWith({ ...first.cliEnv, [ALLOW]: '0' })
    })
    afterAll(async () => {
      await server?.stop()
      await first?.stop()
      internal?.stop()
      await killAllProcesses()
    })

    for (const [name, why] of [
      ['loopback', 'loopback, private, link-local or metadata address (127.0.0.1)'],
      ['localhost', 'public host name (localhost)'],
      ['lan', `${LAN} resolves to 10.1.2.3`],
    ]) {
      test(`the stored ${name} endpoint is refused before delivery ("${why}"): the attempt is logged with the refusal and the receiver hears nothing`, async () => {
        const d = must(
          await server.services.webhooks.sendTest(stored[name!]!, 'transaction.completed'),
        )
        const [attempt] = await attemptsOf(server.services, d.id)
        expect(attempt).toMatchObject({ statusCode: null, durationMs: 0, responseBody: null })
        expect(attempt!.error).toStartWith('refused: url ')
        expect(attempt!.error).toContain(why!)
        expect(attempt!.error).toContain(ALLOW)
        const [shown] = (await cli.ok('delivery', 'show', '--delivery', d.id)).attempts
        expect(shown).toMatchObject({
          status_code: null,
          response_body: null,
          error: attempt!.error,
        })
        expect(internal.seen).toEqual([])
      })
    }
  })
}
