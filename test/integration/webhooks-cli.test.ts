import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHmac } from 'node:crypto'
import { rmSync } from 'node:fs'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { killAllProcesses, spawnServer, type ServerProcess } from '../helpers/processes.ts'
import { cliWith, createTransaction, waitUntil, type Cli } from '../helpers/webhook-cli.ts'
import { startWebhookSink, type Received, type WebhookSink } from '../helpers/webhook-sink.ts'
import { verifyWebhookSignature } from '../../src/webhooks/verify-webhook/index.mjs'

/**
 * docs/decisions/0025-operator-cli.md / docs/decisions/0025-operator-cli.md: the endpoint and
 * delivery commands end to end, as an operator runs them (`bun src/cli/main.ts ... --json`) next to
 * a running server: on the embedded database the CLI goes through the server's admin socket (or
 * opens PGlite itself while no server runs); on PostgreSQL it opens the database directly and the
 * server learns of changes by NOTIFY. Webhooks land in a real receiver process that verifies every
 * signature.
 */
const body = (r: Received) =>
  JSON.parse(r.body) as {
    event: string
    timestamp: string
    data: Record<string, unknown>
    test?: boolean
  }
const STATUSES = ['success', 'failed', 'retrying', 'pending'] as const

for (const backend of backends()) {
  describe(`webhook endpoint and delivery CLI [${backend}]`, () => {
    let sink: WebhookSink
    let serverEnv: Record<string, string>
    let server: ServerProcess | null = null
    let cli: Cli
    const cleanups: (() => Promise<void> | void)[] = []
    /** Shared by the tests below, which run in order as one operator session. */
    const s = {} as {
      projectId: string
      key: string
      a: { id: string; secret: string }
      oldSecretA: string
      b: { id: string; secret: string }
      firstTest: string
    }

    beforeAll(async () => {
      sink = await startWebhookSink()
      const dataDir = await freshDataDir()
      cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
      const pg = backend === 'postgres' ? await freshPostgres() : null
      if (pg) cleanups.push(() => pg.drop())
      // debug: the most the server ever logs, for the check that no secret is among it.
      serverEnv = {
        DATA_DIR: dataDir,
        PORT: '0',
        HTTP_PORT: '0',
        LOG_LEVEL: 'debug',
        ...(pg ? pg.env : {}),
      }
      cli = cliWith(pg ? { ...pg.env, DATA_DIR: '/nonexistent' } : { DATA_DIR: dataDir })
    })
    afterAll(async () => {
      await server?.stop()
      await killAllProcesses()
      await sink?.stop()
      for (const c of cleanups.reverse()) await c()
    })

    const deliveries = async (...filter: string[]): Promise<any[]> =>
      (await cli.ok('delivery', 'list', '--project', s.projectId, ...filter)).deliveries

    test('with no server running: endpoint create prints { id, secret, ... } and endpoint test queues a pending test delivery', async () => {
      const project = await cli.ok('project', 'create', '--name', 'Webhook CLI')
      s.projectId = project.id
      s.key = (
        await cli.ok('key', 'create', '--project', s.projectId, '--mode', 'test', '--name', 'k')
      ).key
      const a = await cli.ok(
        'endpoint',
        'create',
        '--project',
        s.projectId,
        '--mode',
        'test',
        '--url',
        sink.url('/cli-a'),
        '--events',
        'transaction.created,transaction.completed',
      )
      expect(a).toEqual({
        id: expect.stringMatching(/^ep_/),
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9]{32,}$/),
        project: s.projectId,
        mode: 'test',
        url: sink.url('/cli-a'),
        format: 'standard',
        events: ['transaction.created', 'transaction.completed'],
        enabled: true,
        created_at: expect.any(String),
        disabled_reason: null,
        disabled_at: null,
        failing_since: null,
      })
      s.a = { id: a.id, secret: a.secret }
      await sink.configure('/cli-a', { secret: a.secret, mode: 'ok' })

      const queued = await cli.ok(
        'endpoint',
        'test',
        '--endpoint',
        s.a.id,
        '--event',
        'transaction.completed',
      )
      expect(queued).toMatchObject({
        endpoint: s.a.id,
        event: 'transaction.completed',
        test: true,
        status: 'pending',
        attempts: 0,
        transaction_id: null,
      })
      s.firstTest = queued.id
      expect((await deliveries('--status', 'pending')).map((d) => d.id)).toEqual([s.firstTest])
      expect(await deliveries('--status', 'success')).toEqual([])
      expect(await sink.received('/cli-a')).toEqual([])
    })

    test('once the server runs, the queued test event arrives signed with the secret from create and marked as a test', async () => {
      server = await spawnServer(serverEnv)
      const [got] = await sink.waitFor('/cli-a', (r) => r.length >= 1, 15_000)
      expect(got.verified).toBe(true)
      expect(verifyWebhookSignature(got.body, got.headers['x-service-signature'], s.a.secret)).toBe(
        true,
      )
      expect(got.headers['x-service-test']).toBe('true')
      expect(body(got)).toMatchObject({
        event: 'transaction.completed',
        test: true,
        data: { status: 'completed', testing_mode: true },
      })
      await waitUntil(async () => (await deliveries('--status', 'success')).length === 1, 10_000)
      expect((await deliveries('--status', 'success')).map((d) => [d.id, d.attempts])).toEqual([
        [s.firstTest, 1],
      ])
      expect(await deliveries('--status', 'pending')).toEqual([])
    })

    test('endpoint list shows the endpoints without any secret', async () => {
      const b = await cli.ok(
        'endpoint',
        'create',
        '--project',
        s.projectId,
        '--mode',
        'test',
        '--url',
        sink.url('/cli-b'),
        '--events',
        'transaction.created',
      )
      s.b = { id: b.id, secret: b.secret }
      await sink.configure('/cli-b', { secret: b.secret, mode: 'ok' })
      const r = await cli.run('endpoint', 'list', '--project', s.projectId)
      expect(r.code).toBe(0)
      expect(r.stdout).not.toContain('whsec_')
      expect(
        r.json.endpoints.map((e: Record<string, unknown>) => [
          e.id,
          e.enabled,
          Object.hasOwn(e, 'secret'),
        ]),
      ).toEqual([
        [s.a.id, true, false],
        [s.b.id, true, false],
      ])
      expect(
        (await cli.ok('endpoint', 'list', '--project', s.projectId, '--mode', 'live')).endpoints,
      ).toEqual([])
    })

    test('endpoint create --format commerce needs no --events; create and list show each format; its test event is Commerce-shaped, signed with X-CC-Webhook-Signature', async () => {
      // A project of its own, so the endpoints above stay the only ones that hear this project.
      const shop = await cli.ok('project', 'create', '--name', 'Moved from Commerce')
      const commerce = await cli.ok(
        'endpoint',
        'create',
        '--project',
        shop.id,
        '--mode',
        'test',
        '--url',
        sink.url('/cli-commerce'),
        '--format',
        'commerce',
      )
      expect(commerce).toEqual({
        id: expect.stringMatching(/^ep_/),
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9]{32,}$/),
        project: shop.id,
        mode: 'test',
        url: sink.url('/cli-commerce'),
        format: 'commerce',
        events: [],
        enabled: true,
        created_at: expect.any(String),
        disabled_reason: null,
        disabled_at: null,
        failing_since: null,
      })
      const standard = await cli.ok(
        'endpoint',
        'create',
        '--project',
        shop.id,
        '--mode',
        'test',
        '--url',
        sink.url('/cli-standard'),
        '--events',
        'transaction.completed',
        '--format',
        'standard',
      )
      expect(standard).toMatchObject({ format: 'standard', events: ['transaction.completed'] })
      const r = await cli.run('endpoint', 'list', '--project', shop.id)
      expect(r.code).toBe(0)
      expect(r.stdout).not.toContain('whsec_')
      expect(
        r.json.endpoints.map((e: Record<string, unknown>) => [e.id, e.format, e.events]),
      ).toEqual([
        [commerce.id, 'commerce', []],
        [standard.id, 'standard', ['transaction.completed']],
      ])

      await sink.configure('/cli-commerce', { secret: commerce.secret, mode: 'ok' })
      await cli.ok(
        'endpoint',
        'test',
        '--endpoint',
        commerce.id,
        '--event',
        'transaction.completed',
      )
      const [got] = await sink.waitFor('/cli-commerce', (x) => x.length >= 1, 15_000)
      expect(got!.headers['x-cc-webhook-signature']).toBe(
        createHmac('sha256', commerce.secret).update(got!.body).digest('hex'),
      )
      expect(got!.headers['x-service-signature']).toBeUndefined()
      expect(JSON.parse(got!.body)).toMatchObject({
        attempt_number: 1,
        event: { type: 'charge:created', data: { code: 'TEST', metadata: { test: true } } },
      })
    })

    test('endpoint rotate-secret: later deliveries, test and real, verify with the new secret only', async () => {
      const rotated = await cli.ok('endpoint', 'rotate-secret', '--endpoint', s.a.id)
      expect(rotated).toEqual({ id: s.a.id, secret: expect.stringMatching(/^whsec_/) })
      expect(rotated.secret).not.toBe(s.a.secret)
      s.oldSecretA = s.a.secret
      s.a.secret = rotated.secret
      await sink.configure('/cli-a', { secret: s.a.secret, mode: 'ok' })

      await cli.ok('endpoint', 'test', '--endpoint', s.a.id, '--event', 'transaction.created')
      const id = await createTransaction(server!.fetch, s.key)
      const got = (await sink.waitFor('/cli-a', (r) => r.length >= 3, 15_000)).slice(1)
      expect(got.map((r) => [body(r).event, body(r).test ?? false]).sort()).toEqual([
        ['transaction.created', false],
        ['transaction.created', true],
      ])
      expect(got.find((r) => !body(r).test)!.body).toContain(id)
      for (const r of got) {
        expect(r.verified).toBe(true)
        expect(verifyWebhookSignature(r.body, r.headers['x-service-signature'], s.a.secret)).toBe(
          true,
        )
        expect(verifyWebhookSignature(r.body, r.headers['x-service-signature'], s.oldSecretA)).toBe(
          false,
        )
      }
    })

    test('endpoint disable: no new deliveries to it, while an enabled endpoint of the same project still gets the event', async () => {
      const before = (await sink.received('/cli-a')).length
      const disabled = await cli.ok('endpoint', 'disable', '--endpoint', s.a.id)
      expect(disabled).toMatchObject({
        id: s.a.id,
        enabled: false,
        disabled_reason: 'manual',
        disabled_at: expect.any(String),
      })
      const id = await createTransaction(server!.fetch, s.key)
      await sink.waitFor('/cli-b', (r) => r.some((x) => x.body.includes(id)), 15_000)
      // Both endpoints selected transaction.created; the fan-out for this event is done once B has
      // it.
      expect(await deliveries('--transaction', id)).toEqual([
        expect.objectContaining({ endpoint: s.b.id, transaction_id: id }),
      ])
      expect((await sink.received('/cli-a')).length).toBe(before)
      const r = await cli.run(
        'endpoint',
        'test',
        '--endpoint',
        s.a.id,
        '--event',
        'transaction.created',
      )
      expect(r.code).toBe(1)
      expect(r.json.error.message).toContain('disabled')
      expect(
        (await cli.ok('endpoint', 'list', '--project', s.projectId)).endpoints.map(
          (e: { enabled: boolean }) => e.enabled,
        ),
      ).toEqual([false, true])
      expect((await sink.received('/cli-a')).length).toBe(before)
    })

    test('delivery list --status success|failed|retrying|pending returns exactly the deliveries in that status', async () => {
      // retrying: a test event to an always-failing endpoint (the default schedule's next try is a
      // minute away).
      const c = await cli.ok(
        'endpoint',
        'create',
        '--project',
        s.projectId,
        '--mode',
        'test',
        '--url',
        sink.url('/cli-c'),
        '--events',
        'transaction.expired',
      )
      await sink.configure('/cli-c', { secret: c.secret, mode: 'fail' })
      const retrying = await cli.ok(
        'endpoint',
        'test',
        '--endpoint',
        c.id,
        '--event',
        'transaction.failed',
      )
      // failed: B's successful delivery redelivered by hand while B fails (a failed manual attempt
      // ends it).
      const [toRedeliver] = await deliveries('--endpoint', s.b.id, '--status', 'success')
      await sink.configure('/cli-b', { secret: s.b.secret, mode: 'fail' })
      const redelivered = await cli.ok('delivery', 'redeliver', '--delivery', toRedeliver.id)
      expect(redelivered.id).toBe(toRedeliver.id)

      let all: any[] = []
      await waitUntil(
        async () => {
          all = await deliveries()
          const byId = new Map(all.map((d) => [d.id, d]))
          return (
            byId.get(retrying.id)?.status === 'retrying' &&
            byId.get(toRedeliver.id)?.status === 'failed'
          )
        },
        15_000,
        () => JSON.stringify(all.map((d) => [d.id, d.status, d.attempts])),
      )
      const shown = await cli.ok('delivery', 'show', '--delivery', toRedeliver.id)
      expect(shown.attempts.map((a: any) => [a.number, a.trigger, a.status_code])).toEqual([
        [1, 'scheduled', 200],
        [2, 'manual', 500],
      ])

      const expected = Object.fromEntries(
        STATUSES.map((st) => [st, all.filter((d) => d.status === st).map((d) => d.id)]),
      )
      expect(expected.failed).toEqual([toRedeliver.id])
      expect(expected.retrying).toEqual([retrying.id])
      expect(expected.success).toContain(s.firstTest)
      expect(expected.pending).toEqual([])
      for (const st of STATUSES) {
        const listed = await deliveries('--status', st)
        expect({ status: st, ids: listed.map((d) => d.id) }).toEqual({
          status: st,
          ids: expected[st],
        })
      }
    })

    describe('bad input: exit 2 for usage, 1 for refusals, the reason in { error }', () => {
      const cases: [string, () => string[], number, string][] = [
        [
          'endpoint create without --events',
          () => [
            'endpoint',
            'create',
            '--project',
            s.projectId,
            '--mode',
            'test',
            '--url',
            sink.url('/x'),
          ],
          2,
          '--events is required',
        ],
        [
          'endpoint create --format standard without --events',
          () => [
            'endpoint',
            'create',
            '--project',
            s.projectId,
            '--mode',
            'test',
            '--url',
            sink.url('/x'),
            '--format',
            'standard',
          ],
          2,
          '--events is required (unless --format commerce)',
        ],
        [
          'endpoint create with an unknown format',
          () => [
            'endpoint',
            'create',
            '--project',
            s.projectId,
            '--mode',
            'test',
            '--url',
            sink.url('/x'),
            '--format',
            'shopify',
          ],
          1,
          'format must be standard or commerce',
        ],
        [
          'endpoint test with --endpoint but no value',
          () => ['endpoint', 'test', '--endpoint', '--event', 'transaction.created'],
          2,
          '--endpoint needs a value',
        ],
        [
          'endpoint test without --event',
          () => ['endpoint', 'test', '--endpoint', s.b.id],
          2,
          '--event is required',
        ],
        [
          'endpoint rotate-secret without --endpoint',
          () => ['endpoint', 'rotate-secret'],
          2,
          '--endpoint is required',
        ],
        [
          'delivery list without --project',
          () => ['delivery', 'list', '--status', 'failed'],
          2,
          '--project is required',
        ],
        [
          'delivery show without --delivery',
          () => ['delivery', 'show'],
          2,
          '--delivery is required',
        ],
        [
          'an unknown endpoint command',
          () => ['endpoint', 'delete', '--endpoint', s.b.id],
          2,
          'Unknown command "endpoint delete"',
        ],
        [
          'endpoint test of an unknown endpoint',
          () => ['endpoint', 'test', '--endpoint', 'ep_nope', '--event', 'transaction.completed'],
          1,
          'No webhook endpoint ep_nope',
        ],
        [
          'endpoint disable of an unknown endpoint',
          () => ['endpoint', 'disable', '--endpoint', 'ep_nope'],
          1,
          'No webhook endpoint ep_nope',
        ],
        [
          'endpoint rotate-secret of an unknown endpoint',
          () => ['endpoint', 'rotate-secret', '--endpoint', 'ep_nope'],
          1,
          'No webhook endpoint ep_nope',
        ],
        [
          'endpoint create for an unknown project',
          () => [
            'endpoint',
            'create',
            '--project',
            'proj_nope',
            '--mode',
            'test',
            '--url',
            sink.url('/x'),
            '--events',
            'transaction.created',
          ],
          1,
          'No project proj_nope',
        ],
        [
          'delivery show of an unknown delivery',
          () => ['delivery', 'show', '--delivery', 'dlv_nope'],
          1,
          'No webhook delivery dlv_nope',
        ],
        [
          'delivery redeliver of an unknown delivery',
          () => ['delivery', 'redeliver', '--delivery', 'dlv_nope'],
          1,
          'No webhook delivery dlv_nope',
        ],
        [
          'endpoint test with an unknown event type',
          () => ['endpoint', 'test', '--endpoint', s.b.id, '--event', 'payout.completed'],
          1,
          'Unknown event type payout.completed',
        ],
        [
          'endpoint create with an unknown event type',
          () => [
            'endpoint',
            'create',
            '--project',
            s.projectId,
            '--mode',
            'test',
            '--url',
            sink.url('/x'),
            '--events',
            'transaction.created,transaction.refunded',
          ],
          1,
          'Unknown event type transaction.refunded',
        ],
        [
          'endpoint create with an invalid mode',
          () => [
            'endpoint',
            'create',
            '--project',
            s.projectId,
            '--mode',
            'prod',
            '--url',
            sink.url('/x'),
            '--events',
            'transaction.created',
          ],
          1,
          'mode must be test or live',
        ],
        [
          'delivery list with an unknown status',
          () => ['delivery', 'list', '--project', s.projectId, '--status', 'done'],
          1,
          'status must be one of pending, retrying, success, failed',
        ],
      ]
      for (const [what, args, code, text] of cases) {
        test(`${what}: exit ${code}, "${text}"`, async () => {
          const r = await cli.run(...args())
          expect({ code: r.code, stdout: r.stdout }).toEqual({ code, stdout: '' })
          expect(Object.keys(r.json)).toEqual(['error'])
          expect(r.json.error.message).toContain(text)
        })
      }

      test('nothing was created by the refused commands', async () => {
        expect((await cli.ok('endpoint', 'list', '--project', s.projectId)).endpoints).toHaveLength(
          3,
        )
      })
    })

    test("no webhook secret ever appears in the server's log output", async () => {
      const exit = await server!.stop()
      expect(exit.code).toBe(0)
      const log = server!.stdout() + server!.stderr()
      expect(log).toContain('"msg":"listening"')
      expect(log).not.toContain('whsec_')
      for (const secret of [s.a.secret, s.oldSecretA, s.b.secret])
        expect(log).not.toContain(secret.slice('whsec_'.length))
      server = null
    })
  })
}
