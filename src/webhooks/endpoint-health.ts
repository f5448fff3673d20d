import { CHANNELS, WEBHOOK_WORK_DELIVERIES } from '../db/channels.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import { newEventId } from '../lib/ids.ts'
import type { Logger } from '../lib/logger.ts'
import type { Metrics } from '../metrics/metrics.ts'
import type { DeliveryRepo } from './delivery.repo.ts'
import { endpointDisabledData } from './endpoint-notice.ts'
import type { EndpointService, SendingInfo } from './endpoint.service.ts'

/** WEBHOOK_DISABLE_AFTER's default: five days of failures, as Svix and Stripe allow. */
export const DEFAULT_DISABLE_AFTER_MS = 5 * 86_400_000

/**
 * Endpoint health (docs/decisions/0048-webhook-endpoint-health.md), judged after every attempt: a
 * success ends the failure streak, the first failure starts it, and an endpoint is disabled at once
 * when it answers 410 Gone, or when every attempt has failed for `disableAfterMs`. A disabled
 * endpoint's deliveries wait (nothing is used up), and the project's other endpoints of that mode
 * that selected `webhook_endpoint.disabled` hear of it. Writes happen only when the state changes.
 */
export function createEndpointHealth(deps: {
  endpoints: Pick<EndpointService, 'markFailing' | 'markAnswering' | 'disableAutomatically'>
  deliveries: Pick<DeliveryRepo, 'insert' | 'subscribers'>
  database: Pick<Database, 'notify'>
  clock: Clock
  logger: Logger
  metrics: Pick<Metrics, 'endpointDisabled'>
  disableAfterMs: number
}) {
  async function disable(endpointId: string, reason: 'gone' | 'failing', at: Date) {
    const e = await deps.endpoints.disableAutomatically(endpointId, reason, at)
    if (!e) return
    deps.metrics.endpointDisabled(reason)
    deps.logger.warn('webhook endpoint disabled', {
      endpointId,
      projectId: e.projectId,
      mode: e.mode,
      reason,
      failingSince: e.failingSince?.toISOString() ?? null,
    })
    const eventType = 'webhook_endpoint.disabled'
    const targets = (await deps.deliveries.subscribers(e.projectId, e.mode, eventType)).filter(
      (id) => id !== endpointId,
    )
    const eventId = newEventId()
    const data = endpointDisabledData(e)
    await deps.deliveries.insert(
      targets.map((id) => ({
        eventId,
        endpointId: id,
        projectId: e.projectId,
        mode: e.mode,
        transactionId: null,
        eventType,
        data,
        test: false,
        sequence: 0,
      })),
      at,
    )
    if (targets.length) await deps.database.notify(CHANNELS.webhookWork, WEBHOOK_WORK_DELIVERIES)
  }

  return {
    /** After an attempt to `endpointId` (as `info` was when it was sent). Never throws. */
    async attempted(
      endpointId: string,
      info: SendingInfo,
      outcome: { ok: boolean; statusCode: number | null },
    ): Promise<void> {
      const at = new Date(deps.clock.now())
      try {
        if (outcome.ok) {
          if (info.failingSince) await deps.endpoints.markAnswering(endpointId)
        } else if (outcome.statusCode === 410) {
          await disable(endpointId, 'gone', at)
        } else if (!info.failingSince) {
          await deps.endpoints.markFailing(endpointId, at)
        } else if (at.getTime() - info.failingSince.getTime() >= deps.disableAfterMs) {
          await disable(endpointId, 'failing', at)
        }
      } catch (e) {
        // The next attempt judges again: a streak is never lost, only noticed one attempt later.
        deps.logger.warn('webhook endpoint health not recorded', { endpointId, error: String(e) })
      }
    },
  }
}

export type EndpointHealth = ReturnType<typeof createEndpointHealth>
