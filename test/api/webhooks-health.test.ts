/**
 * docs/decisions/0048-webhook-endpoint-health.md: webhook endpoint health, receivers' own wishes,
 * and what a receiver needs to verify and order deliveries.
 *  - On a virtual clock: an endpoint answering 410 Gone is disabled after one attempt; one whose
 *    every attempt fails for WEBHOOK_DISABLE_AFTER (5 days by default) is disabled, then enabled
 *    again with a recovery of what failed; either way the merchant sees why and since when
 *    (dashboard, CLI) and the project's other endpoints hear `webhook_endpoint.disabled`. A 429
 *    or 503 with Retry-After moves the next attempt, within the schedule's bounds.
 *  - On the real clock: the `standardwebhooks` package verifies a real delivery unmodified, and
 *    `x-service-sequence` grows with each status change while a manual retry repeats its number.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Webhook } from 'standardwebhooks'
import { runCommand } from '../../src/cli/commands.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { verifyStandardWebhook } from '../../src/webhooks/verify-webhook/index.mjs'
import { backends } from '../helpers/databases.ts'
import { dashboardClient, memberOf, unescapeHtml } from '../helpers/dashboard.ts'
import { expectStatus } from '../helpers/expect.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'
import { createTransaction } from '../helpers/webhook-cli.ts'
import { startWebhookSink, type Received, type WebhookSink } from '../helpers/webhook-sink.ts'

const MIN = 60_000
const HOUR = 60 * MIN
const DAY = 24 * HOUR
const eventOf = (r: Received) => JSON.parse(r.body) as { event: string; data: Record<string, any> }

for (const backend of backends()) {
  describe(`webhook endpoint health on a virtual clock [${backend}]`, () => {
    const clock = manualClock(Date.parse('2030-05-01T09:00:00.000Z'))
    let t: TestServer
    let sink: WebhookSink
    beforeAll(async () => {
      sink = await startWebhookSink()
      t = await startTestServer(backend, {}, { clock })
    })
    afterAll(async () => {
      await t?.stop()
      await sink?.stop()
    })

    const pass = () => t.server.services.dispatcher.runOnce()
    const endpoint = async (id: string) => {
      const e = await t.server.services.endpoints.get(id)
      if (!e.ok) throw new Error(e.message)
      return e.value
    }
    async function addEndpoint(
      projectId: string,
      path: string,
      events: string[],
      receiver: Parameters<WebhookSink['configure']>[1] extends infer O
        ? Omit<O & object, 'secret'>
        : never,
    ) {
      const ep = await t.server.services.endpoints.create({
        projectId,
        mode: 'test',
        url: sink.url(path),
        eventTypes: events,
      })
      if (!ep.ok) throw new Error(ep.message)
      await sink.configure(path, { secret: ep.value.secret, ...receiver })
      return ep.value.endpoint.id
    }
    const cli = async (...words: string[]) => {
      const flags: Record<string, string> = {}
      const plain = words.filter((w, i) => !(w.startsWith('--') || words[i - 1]?.startsWith('--')))
      words.forEach((w, i) => w.startsWith('--') && (flags[w.slice(2)] = words[i + 1]))
      const r = await runCommand(t.server.services, plain, flags)
      if (!r.ok) throw new Error(r.message)
      return r.result as Record<string, any>
    }

    test('an endpoint answering 410 Gone is disabled after one attempt, its project hears of it, and the dashboard and CLI say why and since when', async () => {
      const m = await memberOf(t, { projectName: `Gone shop ${backend}` })
      const gone = await addEndpoint(m.project.id, `/gone-${backend}`, ['transaction.created'], {
        mode: 'answer',
        status: 410,
      })
      await addEndpoint(m.project.id, `/watch-gone-${backend}`, ['webhook_endpoint.disabled'], {
        mode: 'ok',
      })
      const at = clock.now()
      await createTransaction(t.fetch, m.project.key)
      await pass()
      expect((await sink.received(`/gone-${backend}`)).length).toBe(1)
      expect(await endpoint(gone)).toMatchObject({
        enabled: false,
        disabledReason: 'gone',
        disabledAt: new Date(at),
      })

      await pass()
      const [notice] = await sink.waitFor(`/watch-gone-${backend}`, (r) => r.length === 1)
      expect(notice.verified).toBe(true)
      expect(eventOf(notice)).toMatchObject({
        event: 'webhook_endpoint.disabled',
        data: {
          endpoint_id: gone,
          mode: 'test',
          url: sink.url(`/gone-${backend}`),
          reason: 'gone',
          disabled_at: new Date(at).toISOString(),
        },
      })

      // Nothing more is sent to it: the next event is not even queued for it.
      await createTransaction(t.fetch, m.project.key)
      await pass()
      clock.advance(HOUR)
      await pass()
      expect((await sink.received(`/gone-${backend}`)).length).toBe(1)

      const listed = (await cli('endpoint', 'list', '--project', m.project.id)).endpoints.find(
        (e: any) => e.id === gone,
      )
      expect(listed).toMatchObject({
        enabled: false,
        disabled_reason: 'gone',
        disabled_at: new Date(at).toISOString(),
      })
      const c = dashboardClient(t)
      await c.signIn(m.email, m.password)
      const page = await c.page(`/dashboard/${m.project.id}/test/endpoints/${gone}`)
      expect(page.status).toBe(200)
      const text = unescapeHtml(page.text)
      expect(text).toContain('disabled: 410 Gone')
      expect(text).toContain('Disabled automatically')
      expect(text).toContain(new Date(at).toISOString().slice(0, 19).replace('T', ' '))
    })

    test('an endpoint whose every attempt fails for WEBHOOK_DISABLE_AFTER (5 days by default) is disabled; enabling it with a recovery sends the failed deliveries again', async () => {
      // A server of its own with one retry a minute after the first attempt, so each delivery's end
      // is known.
      const own = manualClock(Date.parse('2030-06-01T09:00:00.000Z'))
      const s = await startTestServer(backend, { WEBHOOK_RETRY_SCHEDULE: '1m' }, { clock: own })
      try {
        const run = () => s.server.services.dispatcher.runOnce()
        const m = await memberOf(s, { projectName: `Dead shop ${backend}` })
        const path = `/dead-${backend}`
        const ep = await s.server.services.endpoints.create({
          projectId: m.project.id,
          mode: 'test',
          url: sink.url(path),
          eventTypes: ['transaction.created'],
        })
        if (!ep.ok) throw new Error(ep.message)
        const dead = ep.value.endpoint.id
        await sink.configure(path, { secret: ep.value.secret, mode: 'fail' })
        const watcher = await s.server.services.endpoints.create({
          projectId: m.project.id,
          mode: 'test',
          url: sink.url(`/watch-dead-${backend}`),
          eventTypes: ['webhook_endpoint.disabled'],
        })
        if (!watcher.ok) throw new Error(watcher.message)
        await sink.configure(`/watch-dead-${backend}`, { secret: watcher.value.secret, mode: 'ok' })
        const view = async () => {
          const e = await s.server.services.endpoints.get(dead)
          if (!e.ok) throw new Error(e.message)
          return e.value
        }
        const deliveries = async () => {
          const l = await s.server.services.webhooks.listDeliveries(
            { projectId: m.project.id },
            { endpointId: dead },
          )
          if (!l.ok) throw new Error(l.message)
          return l.value
        }
        /** An event whose delivery fails its first attempt now and its one retry a minute later. */
        const failedEvent = async () => {
          await createTransaction(s.fetch, m.project.key)
          await run()
          own.advance(MIN)
          await run()
        }

        const t0 = own.now()
        await failedEvent()
        expect(await view()).toMatchObject({ enabled: true, failingSince: new Date(t0) })
        // Four days on, a new event fails too: still enabled (the streak is four days old).
        own.set(t0 + 4 * DAY)
        await failedEvent()
        expect(await view()).toMatchObject({ enabled: true, failingSince: new Date(t0) })
        // A day later the streak reaches five days at the next failed attempt.
        own.set(t0 + 5 * DAY)
        await createTransaction(s.fetch, m.project.key)
        await run()
        expect(await view()).toMatchObject({
          enabled: false,
          disabledReason: 'failing',
          disabledAt: new Date(t0 + 5 * DAY),
          failingSince: new Date(t0),
        })
        expect((await deliveries()).map((d) => d.status)).toEqual(['retrying', 'failed', 'failed'])
        await run()
        const [notice] = await sink.waitFor(`/watch-dead-${backend}`, (r) => r.length === 1)
        expect(eventOf(notice)).toMatchObject({
          event: 'webhook_endpoint.disabled',
          data: { endpoint_id: dead, reason: 'failing', failing_since: new Date(t0).toISOString() },
        })

        // While disabled nothing is sent: the waiting delivery's retry comes due and makes no
        // request.
        const sent = (await sink.received(path)).length
        own.advance(MIN)
        await run()
        expect((await sink.received(path)).length).toBe(sent)
        expect((await deliveries())[0]).toMatchObject({ status: 'retrying', attempts: 1 })

        const c = dashboardClient(s)
        await c.signIn(m.email, m.password)
        const shown = unescapeHtml(
          (await c.page(`/dashboard/${m.project.id}/test/endpoints/${dead}`)).text,
        )
        expect(shown).toContain('disabled: failing')
        expect(shown).toContain(
          `every delivery failed since <time datetime="${new Date(t0).toISOString()}">`,
        )

        // The receiver is fixed; the merchant enables the endpoint, recovering what failed since
        // just before the second event.
        await sink.configure(path, { secret: ep.value.secret, mode: 'ok' })
        const since = new Date(t0 + 4 * DAY - MIN).toISOString()
        // A time that is not one is refused, naming the flag, and enables nothing.
        expect(
          await runCommand(s.server.services, ['endpoint', 'enable'], {
            endpoint: dead,
            'recover-since': 'yesterday',
          }),
        ).toMatchObject({
          ok: false,
          message: expect.stringContaining('--recover-since must be an ISO 8601 date and time'),
        })
        expect(
          await runCommand(s.server.services, ['endpoint', 'recover'], {
            endpoint: dead,
            since: 'soon',
          }),
        ).toMatchObject({
          ok: false,
          message: expect.stringContaining('--since must be an ISO 8601 date and time'),
        })
        expect((await view()).enabled).toBe(false)
        const r = await runCommand(s.server.services, ['endpoint', 'enable'], {
          endpoint: dead,
          'recover-since': since,
        })
        if (!r.ok) throw new Error(r.message)
        expect(r.result).toMatchObject({
          enabled: true,
          disabled_reason: null,
          failing_since: null,
          recovered: { since, redelivered: 1, busy: 0 },
        })
        await run()
        // The waiting delivery looks again within a minute and goes out by itself.
        own.advance(MIN)
        await run()
        expect((await deliveries()).map((d) => d.status)).toEqual(['success', 'success', 'failed'])
        expect(await view()).toMatchObject({
          enabled: true,
          disabledReason: null,
          failingSince: null,
        })
      } finally {
        await s.stop()
      }
    })

    test("Retry-After on a 429 or 503 sets the next attempt, kept within the schedule's shortest (1 min) and longest (8 h) delays", async () => {
      for (const [answerNow, expected] of [
        [() => ({ status: 429, headers: { 'retry-after': '600' } }), 600_000],
        [() => ({ status: 503, headers: { 'retry-after': '5' } }), MIN],
        [() => ({ status: 429, headers: { 'retry-after': String(2 * 86_400) } }), 8 * HOUR],
        // An HTTP date, read against the service's clock.
        [
          () => ({
            status: 503,
            headers: { 'retry-after': new Date(clock.now() + 90 * MIN).toUTCString() },
          }),
          90 * MIN,
        ],
        // Only 429 and 503 say when to come back; any other failure keeps the schedule.
        [() => ({ status: 500, headers: { 'retry-after': '600' } }), MIN],
      ] as const) {
        const answer = answerNow()
        const p = await t.project()
        const path = `/busy-${backend}-${answer.status}-${expected}`
        await addEndpoint(p.id, path, ['transaction.created'], { mode: 'answer', ...answer })
        await createTransaction(t.fetch, p.key)
        const attemptAt = clock.now()
        await pass()
        const list = await t.server.services.webhooks.listDeliveries({ projectId: p.id })
        if (!list.ok) throw new Error(list.message)
        expect({ answer, next: list.value[0].nextAttemptAt!.getTime() - attemptAt }).toEqual({
          answer,
          next: expected,
        })
        clock.advance(expected - 1000)
        await pass()
        expect((await sink.received(path)).length).toBe(1)
        clock.advance(1000)
        await pass()
        expect((await sink.received(path)).length).toBe(2)
      }
    })
  })

  describe(`what receivers verify and order by [${backend}]`, () => {
    let t: TestServer
    let sink: WebhookSink
    beforeAll(async () => {
      sink = await startWebhookSink()
      t = await startTestServer(backend)
    })
    afterAll(async () => {
      await t?.stop()
      await sink?.stop()
    })

    test('the standardwebhooks package verifies a real delivery unmodified, and refuses a changed body or an old timestamp', async () => {
      const p = await t.project()
      const ep = await t.server.services.endpoints.create({
        projectId: p.id,
        mode: 'test',
        url: sink.url(`/std-${backend}`),
        eventTypes: ['transaction.created'],
      })
      if (!ep.ok) throw new Error(ep.message)
      const secret = ep.value.secret
      await sink.configure(`/std-${backend}`, { secret, mode: 'ok' })
      const id = await createTransaction(t.fetch, p.key)
      const [r] = await sink.waitFor(`/std-${backend}`, (x) => x.length === 1)
      expect(r.headers['webhook-id']).toBe(r.headers['x-service-event-id'])
      expect(Number(r.headers['webhook-timestamp'])).toBe(
        Math.floor(Date.parse(r.headers['x-service-timestamp']) / 1000),
      )

      const payload = new Webhook(secret).verify(r.body, r.headers) as {
        event: string
        data: { transaction_id: string }
      }
      expect(payload).toEqual(JSON.parse(r.body))
      expect(payload.data.transaction_id).toBe(id)
      expect(() =>
        new Webhook(secret).verify(
          r.body.replace('"amount_in_currency":25', '"amount_in_currency":2500'),
          r.headers,
        ),
      ).toThrow()
      const old = {
        ...r.headers,
        'webhook-timestamp': String(Number(r.headers['webhook-timestamp']) - 301),
      }
      expect(() => new Webhook(secret).verify(r.body, old)).toThrow()
      // Our own checker agrees with the package.
      expect(verifyStandardWebhook(r.body, r.headers, secret)).toBe(true)
      expect(verifyStandardWebhook(`${r.body} `, r.headers, secret)).toBe(false)
      expect(verifyStandardWebhook(r.body, old, secret)).toBe(false)
    })

    test('x-service-sequence grows with each status change of a transaction, and a manual retry repeats the number of the change it re-sends', async () => {
      const p = await t.project()
      const path = `/seq-${backend}`
      const ep = await t.server.services.endpoints.create({
        projectId: p.id,
        mode: 'test',
        url: sink.url(path),
        eventTypes: [
          'transaction.created',
          'transaction.payment_received',
          'transaction.confirming',
          'transaction.completed',
          'transaction.cancelled',
        ],
      })
      if (!ep.ok) throw new Error(ep.message)
      await sink.configure(path, { secret: ep.value.secret, mode: 'ok' })

      const cancelled = await createTransaction(t.fetch, p.key)
      await expectStatus(await api(t, p.key).post(`/api/transactions/${cancelled}/cancel`, {}), 200)
      const id = await createTransaction(t.fetch, p.key)
      for (const event of PATH_TO.completed) {
        const r = await t.server.services.driveTestTransaction(id, event)
        if (!r.ok) throw new Error(r.message)
      }
      const got = await sink.waitFor(path, (r) => r.length === 6)
      const sequences = (txId: string) =>
        got
          .filter((r) => eventOf(r).data.transaction_id === txId)
          .map((r) => [eventOf(r).event, Number(r.headers['x-service-sequence'])] as const)
      expect(sequences(cancelled)).toEqual([
        ['transaction.created', 1],
        ['transaction.cancelled', 2],
      ])
      // Deliveries of different events travel concurrently and may arrive in any order: ordered
      // by their sequence numbers, they must be the status changes in the order they happened.
      const walk = sequences(id).sort((a, b) => a[1] - b[1])
      expect(walk.map(([e]) => e)).toEqual([
        'transaction.created',
        'transaction.payment_received',
        'transaction.confirming',
        'transaction.completed',
      ])
      const numbers = walk.map(([, n]) => n)
      expect(new Set(numbers).size).toBe(numbers.length)

      await expectStatus(await api(t, p.key).post(`/api/transactions/${id}/retry-webhook`, {}), 200)
      const again = await sink.waitFor(path, (r) => r.length === 7)
      expect(eventOf(again[6]).event).toBe('transaction.completed')
      expect(Number(again[6].headers['x-service-sequence'])).toBe(numbers.at(-1)!)
    })
  })
}
