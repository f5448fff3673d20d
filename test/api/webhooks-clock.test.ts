import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { eq, inArray } from 'drizzle-orm'
import { outbox } from '../../src/db/schema.ts'
import { PAUSED_RECHECK_MS } from '../../machines/webhook-delivery.machine.ts'
import { OUTBOX_KEPT_MS } from '../../src/services.ts'
import { createDeliveryRepo } from '../../src/webhooks/delivery.repo.ts'
import { backends } from '../helpers/databases.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { startTestServer, type TestServer } from '../helpers/server.ts'
import { createTransaction } from '../helpers/webhook-cli.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'

/**
 * docs/decisions/0019-retry-schedule.md on a virtual clock: the default schedule (no
 * WEBHOOK_RETRY_SCHEDULE) retries 1 min, 5 min, 30 min, 2 h and 8 h after the previous failure, 6
 * attempts in all, never earlier; events older than 7 days are not retried automatically, yet a
 * manual redelivery still works. Each pass of the dispatcher is run by hand and waited for
 * (`dispatcher.runOnce()`).
 */
const MIN = 60_000
const HOUR = 60 * MIN
const DAY = 24 * HOUR
const DEFAULT_OFFSETS = [1 * MIN, 5 * MIN, 30 * MIN, 2 * HOUR, 8 * HOUR]

for (const backend of backends()) {
  describe(`webhook retry schedule on a virtual clock [${backend}]`, () => {
    const clock = manualClock(Date.parse('2030-03-01T12:00:00.000Z'))
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
    const received = async (path: string) =>
      (await sink.received(path)).map((r) => Number(r.headers['x-service-attempt']))

    /**
     * A project whose only endpoint always answers 500 to transaction.created, and one such event:
     * its delivery after attempt 1.
     */
    async function failingDelivery(path: string) {
      const p = await t.project()
      const ep = await t.server.services.endpoints.create({
        projectId: p.id,
        mode: 'test',
        url: sink.url(path),
        eventTypes: ['transaction.created'],
      })
      if (!ep.ok) throw new Error(ep.message)
      await sink.configure(path, { secret: ep.value.secret, mode: 'fail' })
      const createdAt = clock.now()
      await createTransaction(t.fetch, p.key)
      await pass()
      expect(await received(path)).toEqual([1])
      const list = await t.server.services.webhooks.listDeliveries({ projectId: p.id })
      if (!list.ok) throw new Error(list.message)
      expect(list.value).toHaveLength(1)
      return { id: list.value[0].id, createdAt }
    }
    async function delivery(id: string) {
      const d = await t.server.services.webhooks.getDelivery(id)
      if (!d.ok) throw new Error(d.message)
      return d.value
    }

    test('an always-failing receiver gets exactly 6 attempts, at exactly +1 min, +5 min, +30 min, +2 h and +8 h after each failure, and none a second early', async () => {
      const path = `/clock-schedule-${backend}`
      const { id, createdAt } = await failingDelivery(path)
      for (const [i, offset] of DEFAULT_OFFSETS.entries()) {
        clock.advance(offset - 1000)
        await pass()
        expect({ offset, received: await received(path) }).toEqual({
          offset,
          received: [1, 2, 3, 4, 5, 6].slice(0, i + 1),
        })
        expect((await delivery(id)).delivery).toMatchObject({ status: 'retrying', attempts: i + 1 })
        clock.advance(1000)
        await pass()
        expect({ offset, received: await received(path) }).toEqual({
          offset,
          received: [1, 2, 3, 4, 5, 6].slice(0, i + 2),
        })
      }

      const d = await delivery(id)
      expect(d.delivery).toMatchObject({
        status: 'failed',
        attempts: 6,
        retryCount: 5,
        nextAttemptAt: null,
      })
      const a = d.attempts
      expect(a.map((x) => [x.number, x.trigger, x.statusCode])).toEqual(
        [1, 2, 3, 4, 5, 6].map((n) => [n, 'scheduled', 500]),
      )
      expect(a[0].scheduledFor!.getTime()).toBe(createdAt)
      for (let i = 1; i < a.length; i++) {
        expect(a[i].scheduledFor!.getTime() - a[i - 1].startedAt.getTime()).toBe(
          DEFAULT_OFFSETS[i - 1],
        )
        expect(a[i].startedAt.getTime()).toBe(a[i].scheduledFor!.getTime())
      }

      // Exhausted: nothing more, however long we wait.
      for (const later of [HOUR, DAY, 3 * DAY]) {
        clock.advance(later)
        await pass()
      }
      expect(await received(path)).toEqual([1, 2, 3, 4, 5, 6])
      expect((await delivery(id)).delivery).toMatchObject({ status: 'failed', attempts: 6 })
    })

    test('the outbox is pruned a week after its events were fanned out; events not fanned out yet stay, and delivery logs keep everything', async () => {
      const path = `/clock-prune-${backend}`
      const p = await t.project()
      const ep = await t.server.services.endpoints.create({
        projectId: p.id,
        mode: 'test',
        url: sink.url(path),
        eventTypes: ['transaction.created'],
      })
      if (!ep.ok) throw new Error(ep.message)
      await sink.configure(path, { secret: ep.value.secret, mode: 'ok' })
      const id = await createTransaction(t.fetch, p.key)
      await pass()
      const db = t.server.services.database.db
      const rows = async () =>
        db
          .select({ id: outbox.id, dispatchedAt: outbox.dispatchedAt })
          .from(outbox)
          .where(eq(outbox.transactionId, id))
      expect((await rows()).every((r) => r.dispatchedAt !== null)).toBe(true)
      await t.server.services.prune()
      expect((await rows()).length).toBe(1)
      clock.advance(OUTBOX_KEPT_MS - 1000)
      await t.server.services.prune()
      expect((await rows()).length).toBe(1)
      clock.advance(2000)
      await t.server.services.prune()
      expect(await rows()).toEqual([])
      // An event not fanned out yet is never pruned, however old (checked on the repository: a
      // running dispatcher fans out at once).
      const [waiting] = await db
        .insert(outbox)
        .values({
          transactionId: id,
          projectId: p.id,
          testingMode: true,
          eventType: 'transaction.created',
          data: {},
          createdAt: new Date(clock.now() - 30 * DAY),
        })
        .returning({ id: outbox.id })
      const [dispatched] = await db
        .insert(outbox)
        .values({
          transactionId: id,
          projectId: p.id,
          testingMode: true,
          eventType: 'transaction.created',
          data: {},
          createdAt: new Date(clock.now() - 30 * DAY),
          dispatchedAt: new Date(clock.now() - 8 * DAY),
        })
        .returning({ id: outbox.id })
      const repo = createDeliveryRepo(t.server.services.database)
      await db.update(outbox).set({ dispatchedAt: null }).where(eq(outbox.id, waiting.id))
      await repo.pruneOutbox(new Date(clock.now() - OUTBOX_KEPT_MS))
      const left = (
        await db
          .select({ id: outbox.id })
          .from(outbox)
          .where(inArray(outbox.id, [waiting.id, dispatched.id]))
      ).map((r) => r.id)
      expect(left).not.toContain(dispatched.id)
      // Unless the dispatcher fanned it out in the meantime (then it was dispatched just now, and
      // is kept too).
      expect(left).toContain(waiting.id)
      const log = await t.server.services.webhooks.listDeliveries({ projectId: p.id })
      if (!log.ok) throw new Error(log.message)
      // The made-up old events above were fanned out too (and failed the 7-day rule); the real one
      // is logged whole.
      const delivered = log.value.filter((d) => d.status === 'success')
      expect(delivered.map((d) => d.eventType)).toEqual(['transaction.created'])
      const shown = await t.server.services.webhooks.getDelivery(delivered[0].id)
      if (!shown.ok) throw new Error(shown.message)
      expect(shown.value.data).toMatchObject({ transaction_id: id })
    })

    test('a disabled endpoint uses up none of its retries: nothing is sent while it is off, and every remaining attempt is made once it is on again', async () => {
      const path = `/clock-disabled-${backend}`
      const { id } = await failingDelivery(path)
      const endpointId = (await delivery(id)).delivery.endpointId
      const off = await t.server.services.endpoints.setEnabled(endpointId, false)
      if (!off.ok) throw new Error(off.message)
      // Longer than the whole schedule (11 h), well inside the 7-day window.
      for (let i = 0; i < 14; i++) {
        clock.advance(HOUR)
        await pass()
      }
      expect(await received(path)).toEqual([1])
      const paused = await delivery(id)
      expect(paused.delivery).toMatchObject({ status: 'retrying', attempts: 1 })
      expect(paused.attempts).toHaveLength(1)
      const on = await t.server.services.endpoints.setEnabled(endpointId, true)
      if (!on.ok) throw new Error(on.message)
      clock.advance(PAUSED_RECHECK_MS)
      await pass()
      expect(await received(path)).toEqual([1, 2])
      for (const offset of DEFAULT_OFFSETS.slice(1)) {
        clock.advance(offset)
        await pass()
      }
      expect(await received(path)).toEqual([1, 2, 3, 4, 5, 6])
      expect((await delivery(id)).delivery).toMatchObject({
        status: 'failed',
        attempts: 6,
        failedBecause: 'exhausted',
      })
    })

    test('7-day rule: a retry that falls due after 8 days of downtime ends the delivery as failed without a request; a manual redelivery then makes exactly one attempt', async () => {
      const path = `/clock-seven-days-${backend}`
      const { id } = await failingDelivery(path)
      // The service was "down" for 8 days: attempt 2 (due after 1 min) is now older than 7 days.
      clock.advance(8 * DAY)
      await pass()
      expect(await received(path)).toEqual([1])
      const d = await delivery(id)
      expect(d.delivery).toMatchObject({ status: 'failed', attempts: 1, nextAttemptAt: null })
      expect(d.attempts).toHaveLength(1)
      clock.advance(DAY)
      await pass()
      expect(await received(path)).toEqual([1])

      // Manual redelivery stays possible at any age: one attempt, marked manual, and no automatic
      // ones after it.
      const r = await t.server.services.webhooks.redeliver(id)
      expect(r.ok).toBe(true)
      await pass()
      expect(await received(path)).toEqual([1, 2])
      clock.advance(DAY)
      await pass()
      expect(await received(path)).toEqual([1, 2])
      const after = await delivery(id)
      expect(after.delivery).toMatchObject({ status: 'failed', attempts: 2, nextAttemptAt: null })
      expect(after.attempts.map((x) => [x.number, x.trigger, x.statusCode])).toEqual([
        [1, 'scheduled', 500],
        [2, 'manual', 500],
      ])
      const got = await sink.received(path)
      expect(got[1].headers['x-service-event-id']).toBe(got[0].headers['x-service-event-id'])
    })
  })
}
