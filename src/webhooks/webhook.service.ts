import { transition } from 'xstate'
import {
  webhookDeliveryMachine,
  type DeliveryStatus,
} from '../../machines/webhook-delivery.machine.ts'
import { CHANNELS, WEBHOOK_WORK_DELIVERIES } from '../db/channels.ts'
import type { Database } from '../db/client.ts'
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../db/schema.ts'
import type { Clock } from '../lib/clock.ts'
import { newEventId } from '../lib/ids.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { Mode, ProjectFilter, ProjectMode } from '../projects/mode.ts'
import type { TransactionRepo } from '../modules/transactions/transaction.repo.ts'
import type { AttemptRecord, DeliveryRepo, DeliveryRow } from './delivery.repo.ts'
import { deliveryActor, deliveryProjection, type DeliveryRunner } from './delivery-runner.ts'
import type { EndpointService } from './endpoint.service.ts'
import { webhookData } from './payload.ts'
import { testEventData } from './test-event.ts'

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
  /**
   * Why a failed delivery stopped: exhausted, too_old (the 7-day rule, no request made) or
   * manual_attempt_failed.
   */
  failedBecause: string | null
  createdAt: Date
}

export type AttemptView = AttemptRecord

const STATUSES: DeliveryStatus[] = ['pending', 'retrying', 'success', 'failed']
/** How long a redelivery waits for the instance running the delivery to take it. */
const REDELIVER_WAIT_MS = 3_000
const BUSY = 'An attempt of this delivery is in progress; try again in a moment'

const view = (r: DeliveryRow): DeliveryView => ({
  id: r.id,
  eventId: r.eventId,
  endpointId: r.endpointId,
  mode: r.mode,
  eventType: r.eventType,
  transactionId: r.transactionId,
  test: r.test,
  status: r.status,
  attempts: r.attempts,
  retryCount: Math.max(0, r.attempts - 1),
  nextAttemptAt: r.nextAttemptAt,
  lastAttemptAt: r.lastAttemptAt,
  lastStatusCode: r.lastStatusCode,
  failedBecause: r.status === 'failed' ? r.failedBecause : null,
  createdAt: r.createdAt,
})

/**
 * The merchant-facing side of webhooks: manual retry
 * (docs/decisions/0020-manual-retry-completed-only.md), test events, manual redelivery and the
 * delivery log. New deliveries are only rows for a running dispatcher to claim (NOTIFY wakes it),
 * so this works the same from the API, the dashboard and the CLI, with or without a server.
 */
export function createWebhookService(deps: {
  database: Pick<Database, 'notify'>
  repo: DeliveryRepo
  runner: Pick<DeliveryRunner, 'redeliver'>
  endpoints: Pick<EndpointService, 'get'>
  transactions: Pick<TransactionRepo, 'find'>
  clock: Clock
  instanceId: string
  scheduleMs: readonly number[]
}) {
  const now = () => new Date(deps.clock.now())
  const wake = () => deps.database.notify(CHANNELS.webhookWork, WEBHOOK_WORK_DELIVERIES)

  async function getDelivery(
    id: string,
    scope: ProjectFilter = {},
  ): Promise<
    Outcome<{
      delivery: DeliveryView
      data: Record<string, unknown>
      attempts: AttemptView[]
      /** Its endpoint's format (`standard` when the endpoint is gone). */
      format: string
    }>
  > {
    const row = await deps.repo.find(id, scope, now())
    if (!row) return deny('not_found', `No webhook delivery ${id}`)
    const [attempts, endpoint] = await Promise.all([
      deps.repo.attempts(id),
      deps.endpoints.get(row.endpointId),
    ])
    return ok({
      delivery: view(row),
      data: row.data,
      format: endpoint.ok ? endpoint.value.format : 'standard',
      attempts: attempts.map((a) => ({
        number: a.number,
        trigger: a.trigger,
        scheduledFor: a.scheduledFor,
        startedAt: a.startedAt,
        durationMs: a.durationMs,
        statusCode: a.statusCode,
        requestBody: a.requestBody,
        responseBody: a.responseBody,
        error: a.error,
      })),
    })
  }

  /**
   * Asks the instance running a delivery's actor to attempt it now, and waits until its step is
   * committed.
   */
  async function redeliverRunning(
    row: DeliveryRow & { claimerLive: boolean },
    scope: ProjectFilter,
  ): Promise<Outcome<DeliveryView>> {
    if (row.claimedBy === deps.instanceId) {
      const answer = await deps.runner.redeliver(row.id)
      if (answer === 'busy') return deny('conflict', BUSY)
      if (answer === 'accepted')
        return getDelivery(row.id, scope).then((r) => (r.ok ? ok(r.value.delivery) : r))
    }
    await deps.database.notify(CHANNELS.deliveryRequest, row.id)
    const before = JSON.stringify(row.snapshot)
    // Real time, not the injected clock: this waits for another process to answer.
    for (const until = Date.now() + REDELIVER_WAIT_MS; Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 50))
      const after = await deps.repo.find(row.id, scope, now())
      if (!after || JSON.stringify(after.snapshot) !== before)
        return after ? ok(view(after)) : deny('not_found', `No webhook delivery ${row.id}`)
    }
    return deny('conflict', `${BUSY} (or the instance sending it did not answer)`)
  }

  /**
   * Sends a delivery again now: a new attempt for a finished one, or the next retry brought
   * forward.
   */
  async function redeliver(id: string, scope: ProjectFilter = {}): Promise<Outcome<DeliveryView>> {
    for (let i = 0; i < 3; i++) {
      const row = await deps.repo.find(id, scope, now())
      if (!row) return deny('not_found', `No webhook delivery ${id}`)
      if ((row.status === 'pending' || row.status === 'retrying') && row.claimerLive)
        return redeliverRunning(row, scope)
      // Nobody runs it: judged here on its stored snapshot, then left for a running dispatcher to
      // claim.
      const stored = {
        ...row,
        eventAt: row.eventAt.getTime(),
        nextAttemptAt: row.nextAttemptAt?.getTime() ?? null,
      }
      const before = deliveryActor(webhookDeliveryMachine, stored, deps.scheduleMs).getSnapshot()
      const event = { type: 'redeliver.requested' as const, at: deps.clock.now() }
      if (!before.can(event)) return deny('conflict', BUSY)
      const [after] = transition(webhookDeliveryMachine, before, event)
      const step = {
        ...deliveryProjection(after),
        snapshot: webhookDeliveryMachine.getPersistedSnapshot(after),
      }
      if (await deps.repo.replaceUnclaimed(id, row.snapshot, step, now())) {
        await wake()
        return ok(
          view({
            ...row,
            status: step.status,
            nextAttemptAt: new Date(step.nextAttemptAt!),
            failedBecause: null,
          }),
        )
      }
    }
    return deny('conflict', BUSY)
  }

  return {
    /**
     * docs/decisions/0020-manual-retry-completed-only.md: a fresh `transaction.completed` delivery
     * of the transaction's current data to every enabled endpoint of its project and mode that
     * selected the event. 409 unless completed.
     */
    async retryCompleted(
      caller: ProjectMode,
      transactionId: string,
    ): Promise<Outcome<{ transactionId: string; eventType: string; endpoints: number }>> {
      // Another project's or mode's transaction is indistinguishable from none
      // (docs/decisions/0009-keys-see-their-own-mode.md).
      const row = await deps.transactions.find(caller, transactionId)
      if (!row) return deny('not_found', `No transaction ${transactionId}`)
      if (row.status !== 'completed')
        return deny(
          'conflict',
          `Only a completed transaction's webhook can be retried; this one is ${row.status}`,
        )
      const eventType: WebhookEventType = 'transaction.completed'
      const targets = await deps.repo.subscribers(caller.projectId, caller.mode, eventType)
      const eventId = newEventId()
      await deps.repo.insert(
        targets.map((endpointId) => ({
          // The sequence of the change it re-sends: completion is final, so the row is still at
          // that version.
          eventId,
          endpointId,
          projectId: caller.projectId,
          mode: caller.mode,
          transactionId,
          eventType,
          data: webhookData(row),
          test: false,
          sequence: row.version + 1,
        })),
        now(),
      )
      if (targets.length) await wake()
      return ok({ transactionId, eventType, endpoints: targets.length })
    },

    /**
     * A test event of a chosen type to one endpoint, signed like any other and marked as a test.
     */
    async sendTest(
      endpointId: string,
      eventType: string,
      scope: ProjectFilter = {},
    ): Promise<Outcome<DeliveryView>> {
      if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(eventType)) {
        return deny('invalid_request', `Unknown event type ${eventType}`, [
          { path: 'event', message: `one of ${WEBHOOK_EVENT_TYPES.join(', ')}` },
        ])
      }
      const endpoint = await deps.endpoints.get(endpointId, scope)
      if (!endpoint.ok) return endpoint
      if (!endpoint.value.enabled)
        return deny('conflict', `Webhook endpoint ${endpointId} is disabled; enable it first`)
      const at = now()
      const [id] = await deps.repo.insert(
        [
          {
            eventId: newEventId(),
            endpointId,
            projectId: endpoint.value.projectId,
            mode: endpoint.value.mode,
            transactionId: null,
            eventType,
            data: testEventData(eventType as WebhookEventType, at),
            test: true,
            sequence: 0,
          },
        ],
        at,
      )
      await wake()
      return getDelivery(id).then((r) => (r.ok ? ok(r.value.delivery) : r))
    },

    redeliver,

    /**
     * Recovery after an endpoint was down (docs/decisions/0048-webhook-endpoint-health.md): every
     * failed delivery to it created since `since` is sent again now, as a manual redelivery. The
     * endpoint must be enabled.
     */
    async recover(
      endpointId: string,
      since: Date,
      scope: ProjectFilter = {},
    ): Promise<Outcome<{ endpointId: string; since: Date; redelivered: number; busy: number }>> {
      if (Number.isNaN(since.getTime()))
        return deny('invalid_request', 'since must be a date and time', [
          { path: 'since', message: 'an ISO 8601 date and time' },
        ])
      const endpoint = await deps.endpoints.get(endpointId, scope)
      if (!endpoint.ok) return endpoint
      if (!endpoint.value.enabled)
        return deny('conflict', `Webhook endpoint ${endpointId} is disabled; enable it first`)
      const inScope = { projectId: endpoint.value.projectId, mode: endpoint.value.mode }
      let redelivered = 0
      let busy = 0
      let before: { id: string; createdAt: Date } | undefined
      for (;;) {
        const page = await deps.repo.list(inScope, {
          status: 'failed',
          endpointId,
          limit: 100,
          before,
        })
        for (const row of page) {
          if (row.createdAt < since) continue
          const r = await redeliver(row.id, inScope)
          if (r.ok) redelivered++
          else busy++
        }
        const last = page.at(-1)
        if (page.length < 100 || !last || last.createdAt < since) break
        before = { id: last.id, createdAt: last.createdAt }
      }
      return ok({ endpointId, since, redelivered, busy })
    },

    /** The delivery log, newest first, with a status filter (spec: success, failed, retrying). */
    async listDeliveries(
      scope: ProjectFilter,
      filter: {
        status?: string
        endpointId?: string
        transactionId?: string
        limit?: number
        before?: string
      } = {},
    ): Promise<Outcome<DeliveryView[]>> {
      if (filter.status !== undefined && !STATUSES.includes(filter.status as DeliveryStatus)) {
        return deny('invalid_request', `status must be one of ${STATUSES.join(', ')}`, [
          { path: 'status', message: `one of ${STATUSES.join(', ')}` },
        ])
      }
      const limit = filter.limit ?? 50
      if (!Number.isInteger(limit) || limit < 1 || limit > 100)
        return deny('invalid_request', 'limit must be 1 to 100', [
          { path: 'limit', message: '1 to 100' },
        ])
      let before: { id: string; createdAt: Date } | undefined
      if (filter.before) {
        const createdAt = await deps.repo.createdAt(filter.before, scope)
        if (!createdAt) return deny('invalid_request', `No delivery ${filter.before} to page from`)
        before = { id: filter.before, createdAt }
      }
      const rows = await deps.repo.list(scope, {
        status: filter.status as DeliveryStatus | undefined,
        endpointId: filter.endpointId,
        transactionId: filter.transactionId,
        limit,
        before,
      })
      return ok(rows.map(view))
    },

    getDelivery,
  }
}

export type WebhookService = ReturnType<typeof createWebhookService>
