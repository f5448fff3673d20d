import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { backends } from '../helpers/databases.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'
import { startWebhookSink, type Received, type WebhookSink } from '../helpers/webhook-sink.ts'
import { verifyWebhookSignature } from '../../src/webhooks/verify-webhook/index.mjs'
import { waitUntil } from '../helpers/webhook-cli.ts'

const ALL_EVENTS =
  'transaction.created,transaction.payment_received,transaction.confirming,transaction.completed,transaction.failed,transaction.expired,transaction.cancelled'
const NULLABLE = [
  'token_symbol',
  'token_amount',
  'blockchain_network',
  'transaction_hash',
  'block_number',
  'customer_ip_address',
  'order_id',
  'metadata',
  'confirmed_at',
]
const ALWAYS = [
  'transaction_id',
  'transaction_number',
  'status',
  'amount_in_currency',
  'currency',
  'created_at',
  'testing_mode',
]
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

const payload = (r: Received) =>
  JSON.parse(r.body) as { event: string; timestamp: string; data: Record<string, unknown> }

for (const backend of backends()) {
  describe(`webhooks [${backend}]`, () => {
    let t: TestServer
    let sink: WebhookSink
    beforeAll(async () => {
      sink = await startWebhookSink()
      t = await startTestServer(backend, { WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s' })
    })
    afterAll(async () => {
      await t?.stop()
      await sink?.stop()
    })

    async function endpoint(
      path: string,
      mode: 'ok' | 'fail' | 'fail-then-ok' | 'hang',
      projectId: string,
      events = ALL_EVENTS,
      failures?: number,
    ) {
      const r = await t.server.services.endpoints.create({
        projectId,
        mode: 'test',
        url: sink.url(path),
        eventTypes: events.split(','),
      })
      if (!r.ok) throw new Error(r.message)
      await sink.configure(path, { secret: r.value.secret, mode, failures })
      return r.value
    }
    async function completedTransaction(
      key: string,
      body: Record<string, unknown> = {
        amount: 25,
        order_id: 'order-77',
        metadata: { cart: 'c-1' },
      },
    ) {
      const created = (await (await api(t, key).create(body)).json()) as {
        transaction: { id: string }
      }
      const id = created.transaction.id
      for (const e of PATH_TO.completed) {
        const r = await t.server.services.lifecycle.apply(id, e)
        if (!r.ok) throw new Error(r.message)
      }
      return id
    }

    test('a completed payment produces the four signed webhooks of the spec, each matching the stage table', async () => {
      const p = await t.project()
      const ep = await endpoint('/stages', 'ok', p.id)
      const id = await completedTransaction(p.key)
      const got = await sink.waitFor('/stages', (r) => r.length >= 4)
      expect(got.every((r) => r.verified)).toBe(true)
      const events = got.map(payload)
      expect(events.map((e) => e.event).sort()).toEqual([
        'transaction.completed',
        'transaction.confirming',
        'transaction.created',
        'transaction.payment_received',
      ])
      for (const r of got) {
        const e = payload(r)
        expect(Object.keys(e)).toEqual(['event', 'timestamp', 'data'])
        expect(e.timestamp).toMatch(ISO_MS)
        expect(r.headers['x-service-signature']).toMatch(/^[0-9a-f]{64}$/)
        expect(
          verifyWebhookSignature(
            r.body,
            r.headers['x-service-signature'],
            ((await t.server.services.endpoints.revealSecret(ep.endpoint.id)) as any).value.secret,
          ),
        ).toBe(true)
        expect(r.headers['x-service-event-id']).toMatch(/^evt_/)
        expect(r.headers['x-service-attempt']).toBe('1')
        expect(r.headers['x-service-timestamp']).toBe(e.timestamp)
        expect(r.headers['x-service-test']).toBeUndefined()
        for (const k of [...ALWAYS, ...NULLABLE]) expect(Object.hasOwn(e.data, k)).toBe(true)
        expect(e.data).not.toHaveProperty('id')
        expect(e.data.transaction_id).toBe(id)
        expect(e.data.testing_mode).toBe(true)
        expect(e.data.order_id).toBe('order-77')
        expect(e.data.metadata).toEqual({ cart: 'c-1' })
        expect(e.data.amount_in_currency).toBe(25)
      }
      const by = Object.fromEntries(events.map((e) => [e.event, e.data]))
      const nonNull = (d: Record<string, unknown>, keys: string[]) =>
        keys.forEach((k) => expect(d[k]).not.toBeNull())
      const isNull = (d: Record<string, unknown>, keys: string[]) =>
        keys.forEach((k) => expect(d[k]).toBeNull())
      // Stage 1
      expect(by['transaction.created'].status).toBe('created')
      isNull(by['transaction.created'], [
        'token_symbol',
        'token_amount',
        'blockchain_network',
        'transaction_hash',
        'block_number',
        'confirmed_at',
      ])
      // Stage 2: block_number may still be null
      expect(by['transaction.payment_received'].status).toBe('processing')
      nonNull(by['transaction.payment_received'], [
        'token_symbol',
        'token_amount',
        'blockchain_network',
        'transaction_hash',
      ])
      isNull(by['transaction.payment_received'], ['confirmed_at'])
      expect(typeof by['transaction.payment_received'].token_amount).toBe('string')
      // Stage 3
      expect(by['transaction.confirming'].status).toBe('confirming')
      nonNull(by['transaction.confirming'], [
        'token_symbol',
        'token_amount',
        'blockchain_network',
        'transaction_hash',
        'block_number',
      ])
      isNull(by['transaction.confirming'], ['confirmed_at'])
      // Stage 4: all critical fields
      expect(by['transaction.completed'].status).toBe('completed')
      nonNull(by['transaction.completed'], [
        'token_symbol',
        'token_amount',
        'blockchain_network',
        'transaction_hash',
        'block_number',
        'confirmed_at',
      ])
      expect(by['transaction.completed'].token_amount).toBe('25000000')
      // Each event has its own id; every delivery is logged as success (recorded once the
      // receiver's answer is back, so a moment after the receiver saw the request).
      expect(new Set(got.map((r) => r.headers['x-service-event-id'])).size).toBe(4)
      const statuses = async () => {
        const log = await t.server.services.webhooks.listDeliveries(
          { projectId: p.id },
          { endpointId: ep.endpoint.id },
        )
        return log.ok ? log.value.map((d) => d.status) : []
      }
      await waitUntil(async () => (await statuses()).every((s) => s === 'success'), 10_000)
      expect(await statuses()).toEqual(['success', 'success', 'success', 'success'])
    })

    test('only selected event types are delivered, only to endpoints of the same mode', async () => {
      const p = await t.project()
      await endpoint('/selected', 'ok', p.id, 'transaction.completed')
      const live = await t.server.services.endpoints.create({
        projectId: p.id,
        mode: 'live',
        url: 'https://hooks.example.com/x',
        eventTypes: ['transaction.completed'],
      })
      expect(live.ok).toBe(true)
      await completedTransaction(p.key)
      const got = await sink.waitFor('/selected', (r) => r.length >= 1)
      // Give any stray event a chance to arrive by waiting for the log to settle: every delivery of
      // the project is final.
      await waitUntil(async () => {
        const l = await t.server.services.webhooks.listDeliveries({ projectId: p.id })
        return l.ok && l.value.every((d) => d.status === 'success')
      })
      const log = await t.server.services.webhooks.listDeliveries({ projectId: p.id })
      expect(log.ok && log.value.map((d) => [d.eventType, d.mode])).toEqual([
        ['transaction.completed', 'test'],
      ])
      expect((await sink.received('/selected')).map((r) => payload(r).event)).toEqual([
        'transaction.completed',
      ])
      expect(got.length).toBe(1)
    })

    test('a receiver failing twice then succeeding: three attempts, the same event id, logged as success', async () => {
      const p = await t.project()
      const ep = await endpoint('/twice', 'fail-then-ok', p.id, 'transaction.created', 2)
      await api(t, p.key).create({ amount: 5 })
      const got = await sink.waitFor('/twice', (r) => r.length >= 3)
      expect(got.map((r) => r.headers['x-service-attempt'])).toEqual(['1', '2', '3'])
      expect(new Set(got.map((r) => r.headers['x-service-event-id'])).size).toBe(1)
      // Each attempt is signed afresh over its own bytes (the timestamp is the time of sending).
      expect(new Set(got.map((r) => payload(r).timestamp)).size).toBe(3)
      const d = await waitForDelivery(ep.endpoint.id, (d) => d.status === 'success')
      expect(d.attempts).toBe(3)
      expect(d.retryCount).toBe(2)
      expect(d.nextAttemptAt).toBeNull()
      const detail = await t.server.services.webhooks.getDelivery(d.id)
      if (!detail.ok) throw new Error(detail.message)
      expect(detail.value.attempts.map((a) => [a.number, a.statusCode, a.trigger])).toEqual([
        [1, 500, 'scheduled'],
        [2, 500, 'scheduled'],
        [3, 200, 'scheduled'],
      ])
      // The receiver is on this machine: its status is kept, what it said is not
      // (docs/decisions/0021-webhook-endpoints-and-private-addresses.md).
      expect(detail.value.attempts[0].responseBody).toBeNull()
      expect(detail.value.attempts[0].error).toBe('HTTP 500')
      expect(detail.value.attempts.map((a) => a.requestBody)).toEqual(got.map((r) => r.body))
    })

    test('a receiver always failing gets exactly 6 attempts, each no earlier than its scheduled offset; then manual retry (docs/decisions/0020-manual-retry-completed-only.md) still delivers', async () => {
      const p = await t.project()
      const ep = await endpoint('/always', 'fail', p.id, 'transaction.completed')
      const id = await completedTransaction(p.key)
      const d = await waitForDelivery(ep.endpoint.id, (d) => d.status === 'failed', 30_000)
      expect(d.attempts).toBe(6)
      expect(d.nextAttemptAt).toBeNull()
      const got = await sink.received('/always')
      expect(got.map((r) => r.headers['x-service-attempt'])).toEqual(['1', '2', '3', '4', '5', '6'])
      const detail = await t.server.services.webhooks.getDelivery(d.id)
      if (!detail.ok) throw new Error(detail.message)
      const a = detail.value.attempts
      for (let i = 1; i < a.length; i++) {
        // Due 1 s after the previous failure (WEBHOOK_RETRY_SCHEDULE), and not made before it was
        // due.
        expect(a[i].scheduledFor!.getTime() - a[i - 1].startedAt.getTime()).toBeGreaterThanOrEqual(
          1000,
        )
        expect(a[i].startedAt.getTime()).toBeGreaterThanOrEqual(a[i].scheduledFor!.getTime())
      }
      // docs/decisions/0020-manual-retry-completed-only.md: the manual retry works after exhaustion
      // and sends a fresh transaction.completed.
      await sink.configure('/always', {
        secret: ((await t.server.services.endpoints.revealSecret(ep.endpoint.id)) as any).value
          .secret,
        mode: 'ok',
      })
      const r = await api(t, p.key).post(`/api/transactions/${id}/retry-webhook`, '')
      expect(r.status).toBe(200)
      expect(await r.json()).toEqual({
        success: true,
        message: 'transaction.completed queued for 1 endpoint',
        transaction_id: id,
        event_type: 'transaction.completed',
      })
      const after = await sink.waitFor('/always', (x) => x.length === 7)
      const last = payload(after[6])
      expect(last.event).toBe('transaction.completed')
      expect(last.data.transaction_id).toBe(id)
      expect(after[6].headers['x-service-event-id']).not.toBe(
        after[0].headers['x-service-event-id'],
      )
    })

    test('retry-webhook: 409 unless completed, 404 for another project, 403 without webhooks:write', async () => {
      const p = await t.project()
      const created = (await (await api(t, p.key).create({ amount: 3 })).json()) as {
        transaction: { id: string }
      }
      const r = await api(t, p.key).post(
        `/api/transactions/${created.transaction.id}/retry-webhook`,
        '',
      )
      expect(r.status).toBe(409)
      expect((await r.json()).error.type).toBe('conflict_error')
      const other = await t.project()
      expect(
        (
          await api(t, other.key).post(
            `/api/transactions/${created.transaction.id}/retry-webhook`,
            '',
          )
        ).status,
      ).toBe(404)
      const readOnly = await t.key(p.id, 'test', ['transactions:read'])
      expect(
        (
          await api(t, readOnly.key).post(
            `/api/transactions/${created.transaction.id}/retry-webhook`,
            '',
          )
        ).status,
      ).toBe(403)
      expect(
        (await api(t, p.key).post('/api/transactions/not-a-uuid/retry-webhook', '')).status,
      ).toBe(400)
    })

    test('a hanging endpoint does not delay deliveries to a healthy one', async () => {
      const p = await t.project()
      await endpoint('/hang', 'hang', p.id, 'transaction.created')
      await endpoint('/healthy', 'ok', p.id, 'transaction.created')
      const n = 40
      for (let i = 0; i < n; i++) await api(t, p.key).create({ amount: 1 + i })
      await sink.waitFor('/healthy', (r) => r.length >= n)
      // Every healthy delivery landed while the hanging endpoint still holds requests open.
      expect(await sink.hanging()).toBeGreaterThan(0)
      expect((await sink.received('/hang')).length).toBeLessThan(n)
    })

    test('a test event is signed like any other and marked as a test', async () => {
      const p = await t.project()
      const ep = await endpoint('/test-event', 'ok', p.id, 'transaction.created')
      const r = await t.server.services.webhooks.sendTest(ep.endpoint.id, 'transaction.completed')
      expect(r.ok).toBe(true)
      const [got] = await sink.waitFor('/test-event', (x) => x.length === 1)
      expect(got.verified).toBe(true)
      expect(got.headers['x-service-test']).toBe('true')
      const body = JSON.parse(got.body)
      expect(body.test).toBe(true)
      expect(body.event).toBe('transaction.completed')
      expect(body.data.status).toBe('completed')
      for (const k of [
        'token_symbol',
        'token_amount',
        'blockchain_network',
        'transaction_hash',
        'block_number',
        'confirmed_at',
      ])
        expect(body.data[k]).not.toBeNull()
      expect(
        (await t.server.services.webhooks.sendTest(ep.endpoint.id, 'payout.completed')).ok,
      ).toBe(false)
    })

    async function waitForDelivery(
      endpointId: string,
      pred: (d: import('../../src/webhooks/webhook.service.ts').DeliveryView) => boolean,
      timeoutMs = 20_000,
    ) {
      let last: unknown
      await waitUntil(
        async () => {
          const l = await t.server.services.webhooks.listDeliveries({}, { endpointId })
          last = l.ok ? l.value : l
          return l.ok && l.value.length > 0 && pred(l.value[0])
        },
        timeoutMs,
        () => JSON.stringify(last),
      )
      const l = await t.server.services.webhooks.listDeliveries({}, { endpointId })
      if (!l.ok) throw new Error(l.message)
      return l.value[0]
    }
  })
}
