import { and, eq, lt, or, sql, type SQL } from 'drizzle-orm'
import { startDelivery, stepDelivery, deliveryStatus, type DeliveryStatus, type StoredDelivery } from '../../machines/webhook-delivery.machine.ts'
import { webhookData } from '../actors/projection.ts'
import type { Database } from '../db/client.ts'
import { WEBHOOK_EVENT_TYPES, webhookAttempts, webhookDeliveries, webhookEndpoints, type WebhookEventType } from '../db/schema.ts'
import type { Clock } from '../lib/clock.ts'
import { randomString } from '../lib/ids.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { AttemptRecord, DeliveryRepo } from './delivery.repo.ts'
import { WORK_CHANNEL } from './dispatcher.ts'
import type { Mode } from './endpoint.service.ts'
import { testEventData } from './test-event.ts'
import type { TransactionRepo } from '../modules/transactions/transaction.repo.ts'

/** Who may see or act on deliveries: a project in one mode (API key, dashboard); the operator passes neither. */
export interface DeliveryScope {
  projectId?: string
  mode?: Mode
}

export interface DeliveryView {
  id: string
  eventId: string
  endpointId: string
  mode: Mode
  eventType: string
  transactionId: string | null
  test: boolean
  status: DeliveryStatus
  attempts: number
  /** The dashboard's "retry count": attempts after the first. */
  retryCount: number
  nextAttemptAt: Date | null
  lastAttemptAt: Date | null
  lastStatusCode: number | null
  /** Why a failed delivery stopped: exhausted, too_old (the 7-day rule, no request made) or manual_attempt_failed. */
  failedBecause: string | null
  createdAt: Date
}

export type AttemptView = AttemptRecord

const STATUSES: DeliveryStatus[] = ['pending', 'retrying', 'success', 'failed']
const newEventId = () => `evt_${randomString(24)}`

const view = (r: typeof webhookDeliveries.$inferSelect): DeliveryView => ({
  id: r.id, eventId: r.eventId, endpointId: r.endpointId, mode: r.mode, eventType: r.eventType, transactionId: r.transactionId, test: r.test,
  status: r.status, attempts: r.attempts, retryCount: Math.max(0, r.attempts - 1), nextAttemptAt: r.nextAttemptAt, lastAttemptAt: r.lastAttemptAt,
  lastStatusCode: r.lastStatusCode, failedBecause: r.status === 'failed' ? ((r.snapshot as StoredDelivery).context.failedBecause ?? null) : null, createdAt: r.createdAt,
})

const scoped = (s: DeliveryScope, ...more: (SQL | undefined)[]) =>
  and(s.projectId ? eq(webhookDeliveries.projectId, s.projectId) : undefined, s.mode ? eq(webhookDeliveries.mode, s.mode) : undefined, ...more)

/**
 * The merchant-facing side of webhooks: manual retry (R20), test events, manual redelivery and
 * the delivery log. Everything here only writes rows and wakes the dispatchers (NOTIFY), so it
 * works the same from the API, the dashboard and the CLI, with or without a server running.
 */
export function createWebhookService(deps: { database: Database; repo: DeliveryRepo; transactions: Pick<TransactionRepo, 'find'>; clock: Clock; scheduleMs: readonly number[] }) {
  const { db } = deps.database
  const now = () => new Date(deps.clock.now())
  const fresh = (at: Date): StoredDelivery => startDelivery({ eventAt: at.getTime(), firstAttemptAt: at.getTime(), scheduleMs: deps.scheduleMs })
  const wake = () => deps.database.notify(WORK_CHANNEL, '')

  /** One delivery with every attempt, oldest first (request sent, response received). */
  async function getDelivery(id: string, scope: DeliveryScope = {}): Promise<Outcome<{ delivery: DeliveryView; data: Record<string, unknown>; attempts: AttemptView[] }>> {
    const [row] = await db.select().from(webhookDeliveries).where(scoped(scope, eq(webhookDeliveries.id, id)))
    if (!row) return deny('not_found', `No webhook delivery ${id}`)
    const attempts = await db.select().from(webhookAttempts).where(eq(webhookAttempts.deliveryId, id)).orderBy(webhookAttempts.number, webhookAttempts.id)
    return ok({
      delivery: view(row),
      data: row.data,
      attempts: attempts.map((a) => ({
        number: a.number, trigger: a.trigger, scheduledFor: a.scheduledFor, startedAt: a.startedAt, durationMs: a.durationMs,
        statusCode: a.statusCode, requestBody: a.requestBody, responseBody: a.responseBody, error: a.error,
      })),
    })
  }

  return {
    /**
     * R20: a fresh `transaction.completed` delivery of the transaction's current data to every
     * enabled endpoint of its project and mode that selected the event. 409 unless completed.
     */
    async retryCompleted(caller: { projectId: string; mode: Mode }, transactionId: string): Promise<Outcome<{ transactionId: string; eventType: string; endpoints: number }>> {
      // Another project's or mode's transaction is indistinguishable from none (R9).
      const row = await deps.transactions.find({ projectId: caller.projectId, testingMode: caller.mode === 'test' }, transactionId)
      if (!row) return deny('not_found', `No transaction ${transactionId}`)
      if (row.status !== 'completed') return deny('conflict', `Only a completed transaction's webhook can be retried; this one is ${row.status}`)
      const eventType: WebhookEventType = 'transaction.completed'
      const targets = await db.select({ id: webhookEndpoints.id }).from(webhookEndpoints).where(and(
        eq(webhookEndpoints.projectId, caller.projectId), eq(webhookEndpoints.mode, caller.mode), eq(webhookEndpoints.enabled, true),
        sql`${eventType} = ANY(${webhookEndpoints.eventTypes})`))
      const at = now()
      const eventId = newEventId()
      await deps.repo.insert(targets.map((e) => ({
        eventId, endpointId: e.id, projectId: caller.projectId, mode: caller.mode, transactionId, eventType, data: webhookData(row), test: false, stored: fresh(at), eventAt: at,
      })), at)
      if (targets.length) await wake()
      return ok({ transactionId, eventType, endpoints: targets.length })
    },

    /** A test event of a chosen type to one endpoint, signed like any other and marked as a test. */
    async sendTest(endpointId: string, eventType: string, scope: DeliveryScope = {}): Promise<Outcome<DeliveryView>> {
      if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(eventType)) {
        return deny('invalid_request', `Unknown event type ${eventType}`, [{ path: 'event', message: `one of ${WEBHOOK_EVENT_TYPES.join(', ')}` }])
      }
      const [endpoint] = await db.select().from(webhookEndpoints)
        .where(and(eq(webhookEndpoints.id, endpointId), scope.projectId ? eq(webhookEndpoints.projectId, scope.projectId) : undefined, scope.mode ? eq(webhookEndpoints.mode, scope.mode) : undefined))
      if (!endpoint) return deny('not_found', `No webhook endpoint ${endpointId}`)
      if (!endpoint.enabled) return deny('conflict', `Webhook endpoint ${endpointId} is disabled; enable it first`)
      const at = now()
      const [inserted] = await deps.repo.insert([{
        eventId: newEventId(), endpointId, projectId: endpoint.projectId, mode: endpoint.mode, transactionId: null,
        eventType, data: testEventData(eventType as WebhookEventType, at), test: true, stored: fresh(at), eventAt: at,
      }], at)
      await wake()
      return getDelivery(inserted.id).then((r) => (r.ok ? ok(r.value.delivery) : r))
    },

    /** Sends a delivery again now: a new attempt for a finished one, or the next retry brought forward. */
    async redeliver(id: string, scope: DeliveryScope = {}): Promise<Outcome<DeliveryView>> {
      for (let i = 0; i < 3; i++) {
        const [row] = await db.select().from(webhookDeliveries).where(scoped(scope, eq(webhookDeliveries.id, id)))
        if (!row) return deny('not_found', `No webhook delivery ${id}`)
        const stored = row.snapshot as StoredDelivery
        const at = now()
        const next = stepDelivery(stored, { type: 'redeliver.requested', at: at.getTime() })
        if (!next) return deny('conflict', 'An attempt of this delivery is in progress; try again in a moment')
        if (await deps.repo.replaceSnapshot(id, stored, next, deliveryStatus(next.state, next.context), at)) {
          await wake()
          return ok(view({ ...row, status: deliveryStatus(next.state, next.context), nextAttemptAt: new Date(next.context.nextAttemptAt!) }))
        }
      }
      return deny('conflict', 'An attempt of this delivery is in progress; try again in a moment')
    },

    /** The delivery log, newest first, with a status filter (spec: success, failed, retrying). */
    async listDeliveries(scope: DeliveryScope, filter: { status?: string; endpointId?: string; transactionId?: string; limit?: number; before?: string } = {}): Promise<Outcome<DeliveryView[]>> {
      if (filter.status !== undefined && !STATUSES.includes(filter.status as DeliveryStatus)) {
        return deny('invalid_request', `status must be one of ${STATUSES.join(', ')}`, [{ path: 'status', message: `one of ${STATUSES.join(', ')}` }])
      }
      const limit = filter.limit ?? 50
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) return deny('invalid_request', 'limit must be 1 to 100', [{ path: 'limit', message: '1 to 100' }])
      let cursor: SQL | undefined
      if (filter.before) {
        const [b] = await db.select({ createdAt: webhookDeliveries.createdAt }).from(webhookDeliveries).where(scoped(scope, eq(webhookDeliveries.id, filter.before)))
        if (!b) return deny('invalid_request', `No delivery ${filter.before} to page from`)
        cursor = or(lt(webhookDeliveries.createdAt, b.createdAt), and(eq(webhookDeliveries.createdAt, b.createdAt), lt(webhookDeliveries.id, filter.before)))
      }
      const rows = await db.select().from(webhookDeliveries)
        .where(scoped(scope,
          filter.status ? eq(webhookDeliveries.status, filter.status as DeliveryStatus) : undefined,
          filter.endpointId ? eq(webhookDeliveries.endpointId, filter.endpointId) : undefined,
          filter.transactionId ? eq(webhookDeliveries.transactionId, filter.transactionId) : undefined,
          cursor))
        // As the log indexes are spelled (see transaction.repo.ts page()), so they serve the sort.
        .orderBy(sql`${webhookDeliveries.createdAt} DESC NULLS LAST`, sql`${webhookDeliveries.id} DESC NULLS LAST`)
        .limit(limit)
      return ok(rows.map(view))
    },

    getDelivery,
  }
}

export type WebhookService = ReturnType<typeof createWebhookService>
