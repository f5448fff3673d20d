import type { ChangeFeed } from '../db/change-feed.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { deliveryStatus, startDelivery, stepDelivery, type StoredDelivery } from '../../machines/webhook-delivery.machine.ts'
import type { ClaimedDelivery, DeliveryRepo, DeliveryResult } from './delivery.repo.ts'
import type { EndpointService } from './endpoint.service.ts'
import { webhookBody, webhookHeaders } from './payload.ts'
import { createSendQueue, DEFAULT_SEND_LIMITS, type SendQueueOptions } from './send-queue.ts'
import { postWebhook, SEND_TIMEOUT_MS } from './sender.ts'
import { checkDeliveryTarget, systemResolver, type Resolver } from './url-guard.ts'
import { signWebhookBody } from './verify-webhook.mjs'

/** Channel every writer of new webhook work notifies (the outbox trigger, manual retries, test events). */
export const WORK_CHANNEL = 'outbox'

export interface DispatcherDeps {
  database: Database
  repo: DeliveryRepo
  endpoints: EndpointService
  changes: ChangeFeed
  clock: Clock
  logger: Logger
  instanceId: string
  scheduleMs: readonly number[]
  resolver?: Resolver
  sendLimits?: SendQueueOptions
  /** How often an idle dispatcher looks for due attempts of other instances' deliveries. */
  pollMs?: number
  timeoutMs?: number
}

const BATCH = 500
/** Stop claiming while this much is queued locally, so claims do not lapse in our queue. */
const BACKLOG_LIMIT = 5_000

type EndpointInfo = { url: string; mode: 'test' | 'live'; secret: string; enabled: boolean }

/**
 * Runs webhook deliveries (issue 5). Outbox events become deliveries (fan-out) and are sent at
 * once by the instance that committed them; due retries are claimed with FOR UPDATE SKIP LOCKED
 * by whichever instance looks first, so each attempt is made by one instance. Results are
 * committed in batches (group commit): the delivery's snapshot and projection with its attempt
 * row, in one statement.
 *
 * Deadlines live in the database (`next_attempt_at`), so after a restart or on another instance
 * due attempts run and none is repeated or lost. Locally the dispatcher sleeps until its own
 * earliest deadline or `pollMs`, whichever is first, and wakes at once on NOTIFY.
 */
export function createWebhookDispatcher(deps: DispatcherDeps) {
  const pollMs = deps.pollMs ?? 1000
  const claimMs = Math.max(60_000, 3 * (deps.timeoutMs ?? SEND_TIMEOUT_MS))
  const resolver = deps.resolver ?? systemResolver
  const queue = createSendQueue(deps.sendLimits ?? DEFAULT_SEND_LIMITS)
  const initial = startDelivery({ eventAt: 0, firstAttemptAt: 0, scheduleMs: deps.scheduleMs })
  const endpointCache = new Map<string, Promise<EndpointInfo | null>>()
  const unsubscribe = deps.changes.subscribe((c) => {
    if (c.kind === 'all') endpointCache.clear()
    else if (c.kind === 'endpoint') endpointCache.delete(c.id)
  })

  let stopped = true
  let running: Promise<void> | null = null
  let again = false
  let timer: ReturnType<typeof setTimeout> | null = null
  let unlisten: (() => Promise<void>) | null = null
  /** Earliest known deadline of a delivery this instance attempted last. */
  let localNext: number | null = null

  const now = () => new Date(deps.clock.now())
  const claimUntil = () => new Date(deps.clock.now() + claimMs)

  function endpoint(id: string): Promise<EndpointInfo | null> {
    let p = endpointCache.get(id)
    if (!p) {
      p = deps.endpoints.forSending(id)
      p.catch(() => endpointCache.delete(id))
      endpointCache.set(id, p)
    }
    return p
  }

  // Group commit: results arriving while a commit runs go together in the next one.
  let pending: { result: DeliveryResult; done: (recorded: boolean) => void; fail: (e: unknown) => void }[] = []
  let committing: Promise<void> | null = null
  function commit(result: DeliveryResult): Promise<boolean> {
    return new Promise((done, fail) => {
      pending.push({ result, done, fail })
      if (!committing) committing = flushLoop()
    })
  }
  async function flushLoop() {
    while (pending.length > 0) {
      const batch = pending
      pending = []
      try {
        const recorded = await deps.repo.commitResults(deps.instanceId, batch.map((b) => b.result))
        for (const b of batch) b.done(recorded.has(b.result.id))
      } catch (e) {
        for (const b of batch) b.fail(e)
      }
    }
    committing = null
  }

  /** Makes the attempt a claimed delivery is due for, and commits its outcome. Resolves true on success. */
  async function attempt(d: ClaimedDelivery): Promise<boolean> {
    const scheduledFor = d.stored.context.nextAttemptAt
    let stored: StoredDelivery | null = stepDelivery(d.stored, { type: 'attempt.due', at: deps.clock.now() })
    if (!stored) {
      deps.logger.warn('webhook delivery in an unexpected state; released', { deliveryId: d.id, state: d.stored.state })
      await deps.repo.release(deps.instanceId, [d.id])
      return false
    }
    if (stored.state !== 'attempting') {
      // Too old to try (the 7-day rule): recorded as failed without a request.
      await commit({ id: d.id, status: deliveryStatus(stored.state, stored.context), stored, attempt: null })
      return false
    }
    const info = await endpoint(d.endpointId)
    const sentAt = now()
    const body = webhookBody(d.eventType, d.data, sentAt, d.test)
    const number = stored.context.attempts + 1
    let outcome: Awaited<ReturnType<typeof postWebhook>>
    if (!info || !info.enabled) {
      outcome = { ok: false, statusCode: null, responseBody: null, error: info ? 'endpoint disabled' : 'endpoint deleted', durationMs: 0 }
    } else {
      const target = await checkDeliveryTarget(info.url, info.mode, resolver)
      if (!target.ok) {
        outcome = { ok: false, statusCode: null, responseBody: null, error: `refused: url ${target.reason}`, durationMs: 0 }
      } else {
        const headers = webhookHeaders({ signature: signWebhookBody(body, info.secret), eventId: d.eventId, sentAt, attempt: number, test: d.test })
        outcome = await postWebhook(info.url, body, headers, deps.timeoutMs)
      }
    }
    const trigger = stored.context.trigger
    stored = stepDelivery(stored, { type: outcome.ok ? 'attempt.succeeded' : 'attempt.failed', at: deps.clock.now() })!
    const result: DeliveryResult = {
      id: d.id,
      status: deliveryStatus(stored.state, stored.context),
      stored,
      attempt: {
        number, trigger, scheduledFor: scheduledFor === null ? null : new Date(scheduledFor), startedAt: sentAt,
        durationMs: outcome.durationMs, statusCode: outcome.statusCode, requestBody: body, responseBody: outcome.responseBody, error: outcome.error,
      },
    }
    const recorded = await commit(result)
    if (!recorded) deps.logger.warn('webhook attempt made after its claim lapsed; another instance repeats it', { deliveryId: d.id })
    const next = stored.context.nextAttemptAt
    if (recorded && next !== null) {
      localNext = localNext === null ? next : Math.min(localNext, next)
      if (!stopped) arm()
    }
    return outcome.ok
  }

  function enqueue(ds: ClaimedDelivery[]) {
    for (const d of ds) {
      queue.push(d.endpointId, d.id, () =>
        attempt(d)
          .catch((e) => {
            deps.logger.error('webhook attempt failed unexpectedly; the claim lapses and it is retried', { deliveryId: d.id, error: String(e) })
            return false
          }),
      )
    }
  }

  async function runPass() {
    for (;;) {
      const r = await deps.repo.fanOut({ limit: BATCH, now: now(), initial, instanceId: deps.instanceId, claimUntil: claimUntil() })
      enqueue(r.deliveries)
      if (r.events < BATCH) break
    }
    const at = deps.clock.now()
    if (localNext !== null && localNext <= at) localNext = null
    while (queue.queued < BACKLOG_LIMIT) {
      const due = await deps.repo.claimDue({ instanceId: deps.instanceId, now: now(), limit: BATCH, claimUntil: claimUntil() })
      enqueue(due)
      if (due.length < BATCH) break
    }
  }

  /** Runs a pass now, or right after the one in progress. */
  function wake(): Promise<void> {
    if (running) {
      again = true
      return running
    }
    running = (async () => {
      do {
        again = false
        try {
          await runPass()
        } catch (e) {
          deps.logger.warn('webhook dispatch pass failed; retrying', { error: String(e) })
        }
      } while (again && !stopped)
    })().finally(() => {
      running = null
      if (!stopped) arm()
    })
    return running
  }

  function arm() {
    if (timer) clearTimeout(timer)
    const delay = localNext === null ? pollMs : Math.max(0, Math.min(pollMs, localNext - deps.clock.now()))
    timer = setTimeout(() => {
      timer = null
      void wake()
    }, delay)
    ;(timer as any).unref?.()
  }

  return {
    async start() {
      stopped = false
      unlisten = await deps.database.listen(WORK_CHANNEL, () => void wake(), () => void wake())
      await wake()
    },
    wake,
    /** Tests: one pass, then every attempt it started, committed. */
    async runOnce() {
      await wake()
      await queue.idle()
      await committing
    },
    /** Stops claiming; attempts in flight finish (at most the send time-out); queued ones are given back. */
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      await unlisten?.()
      unsubscribe()
      await running
      const dropped = queue.clear()
      await queue.idle()
      await committing
      await deps.repo.release(deps.instanceId, dropped).catch(() => {})
    },
  }
}

export type WebhookDispatcher = ReturnType<typeof createWebhookDispatcher>
