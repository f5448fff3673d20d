import type { EndpointView } from './endpoint.service.ts'

/**
 * The `data` of a `webhook_endpoint.disabled` notice
 * (docs/decisions/0048-webhook-endpoint-health.md): which endpoint of the project stopped receiving
 * events, why and since when. Sent to the project's other endpoints of the same mode that selected
 * it; every key is always present.
 */
export function endpointDisabledData(
  e: Pick<EndpointView, 'id' | 'mode' | 'url' | 'disabledReason' | 'disabledAt' | 'failingSince'>,
) {
  return {
    endpoint_id: e.id,
    mode: e.mode,
    url: e.url,
    reason: e.disabledReason,
    disabled_at: e.disabledAt?.toISOString() ?? null,
    failing_since: e.failingSince?.toISOString() ?? null,
  }
}
