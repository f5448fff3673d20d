import type { ChangeFeed } from '../db/change-feed.ts'
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../db/schema.ts'
import type { Clock } from '../lib/clock.ts'
import { newId, randomString } from '../lib/ids.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { SecretBox } from '../lib/secret-box.ts'
import type { Mode, ProjectFilter } from '../projects/mode.ts'
import type { EndpointPatch, EndpointRepo, EndpointRow } from './endpoint.repo.ts'
import { checkEndpointUrl, type AddressRules } from './url-guard.ts'

/** An endpoint as the CLI and dashboard show it: never its secret. */
export interface EndpointView {
  id: string
  projectId: string
  mode: Mode
  url: string
  eventTypes: WebhookEventType[]
  enabled: boolean
  /**
   * Why it is disabled: by hand, answered 410 Gone, or every delivery failed for
   * WEBHOOK_DISABLE_AFTER; null while enabled.
   */
  disabledReason: DisabledReason | null
  disabledAt: Date | null
  /** The first failed attempt since its last success; null while it answers. */
  failingSince: Date | null
  format: EndpointFormat
  createdAt: Date
  updatedAt: Date
}

export type DisabledReason = 'manual' | 'gone' | 'failing'

/**
 * `standard`: this service's webhooks (docs/integrating/webhooks.md); `commerce`: Coinbase
 * Commerce's envelope and `X-CC-Webhook-Signature`, every charge event
 * (docs/decisions/0065-coinbase-commerce-drop-in.md).
 */
export const ENDPOINT_FORMATS = ['standard', 'commerce'] as const
export type EndpointFormat = (typeof ENDPOINT_FORMATS)[number]

/** What the sender needs of an endpoint. */
export interface SendingInfo {
  url: string
  mode: Mode
  /** The request's shape and signature (docs/decisions/0065-coinbase-commerce-drop-in.md). */
  format: EndpointFormat
  secret: string
  enabled: boolean
  failingSince: Date | null
}

/** `whsec_` and 40 base62 characters (238 bits). */
const newSecret = () => `whsec_${randomString(40)}`
const MAX_ENDPOINTS_PER_MODE = 20

function parseEventTypes(raw: readonly string[]): Outcome<WebhookEventType[]> {
  const unknown = raw.filter((e) => !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(e))
  if (raw.length === 0)
    return deny('invalid_request', 'Select at least one event type', [
      { path: 'events', message: `one or more of ${WEBHOOK_EVENT_TYPES.join(', ')}` },
    ])
  if (unknown.length)
    return deny('invalid_request', `Unknown event type ${unknown.join(', ')}`, [
      { path: 'events', message: `must be among ${WEBHOOK_EVENT_TYPES.join(', ')}` },
    ])
  return ok([...new Set(raw)] as WebhookEventType[])
}

const view = (r: EndpointRow): EndpointView => ({
  id: r.id,
  projectId: r.projectId,
  mode: r.mode,
  url: r.url,
  eventTypes: r.eventTypes as WebhookEventType[],
  enabled: r.enabled,
  disabledReason: r.enabled ? null : (r.disabledReason ?? 'manual'),
  disabledAt: r.enabled ? null : r.disabledAt,
  failingSince: r.failingSince,
  format: r.format,
  createdAt: r.createdAt,
  updatedAt: r.updatedAt,
})

/**
 * docs/decisions/0021-webhook-endpoints-and-private-addresses.md: webhook endpoints per project and
 * mode; secrets sealed at rest, shown at creation and on request.
 */
export function createEndpointService(deps: {
  repo: EndpointRepo
  changes: ChangeFeed
  clock: Clock
  secrets: SecretBox
  addressRules: AddressRules
}) {
  const { repo } = deps
  const now = () => new Date(deps.clock.now())
  const row = (id: string, scope: ProjectFilter) => repo.find(id, scope)

  async function update(
    id: string,
    scope: ProjectFilter,
    patch: EndpointPatch,
  ): Promise<Outcome<EndpointView>> {
    const r = await repo.update(id, scope, { ...patch, updatedAt: now() })
    if (!r) return deny('not_found', `No webhook endpoint ${id}`)
    await deps.changes.publish({ kind: 'endpoint', id })
    return ok(view(r))
  }

  return {
    async create(input: {
      projectId: string
      mode: string
      url: string
      eventTypes: readonly string[]
      /** `standard` when absent. A Commerce-format endpoint hears every charge event. */
      format?: string
    }): Promise<Outcome<{ endpoint: EndpointView; secret: string }>> {
      const format = input.format ?? 'standard'
      if (!(ENDPOINT_FORMATS as readonly string[]).includes(format))
        return deny('invalid_request', `format must be ${ENDPOINT_FORMATS.join(' or ')}`, [
          { path: 'format', message: ENDPOINT_FORMATS.join(' or ') },
        ])
      if (input.mode !== 'test' && input.mode !== 'live')
        return deny('invalid_request', 'mode must be test or live', [
          { path: 'mode', message: 'test or live' },
        ])
      const url = checkEndpointUrl(input.url, input.mode, deps.addressRules)
      if (!url.ok)
        return deny('invalid_request', `url ${url.reason}`, [{ path: 'url', message: url.reason }])
      const events: Outcome<WebhookEventType[]> =
        format === 'commerce' ? ok([]) : parseEventTypes(input.eventTypes)
      if (!events.ok) return events
      if (!(await repo.projectExists(input.projectId)))
        return deny('not_found', `No project ${input.projectId}`)
      const existing = await repo.count(input.projectId, input.mode)
      if (existing >= MAX_ENDPOINTS_PER_MODE)
        return deny(
          'conflict',
          `A project has at most ${MAX_ENDPOINTS_PER_MODE} ${input.mode} endpoints`,
        )
      const id = newId('ep')
      const secret = newSecret()
      const at = now()
      const r = await repo.insert({
        id,
        projectId: input.projectId,
        mode: input.mode,
        url: url.url.toString(),
        eventTypes: events.value,
        format: format as EndpointFormat,
        secretSealed: deps.secrets.seal(secret, id),
        enabled: true,
        createdAt: at,
        updatedAt: at,
      })
      return ok({ endpoint: view(r), secret })
    },

    async list(projectId: string, mode?: Mode): Promise<EndpointView[]> {
      return (await repo.list(projectId, mode)).map(view)
    },

    async get(id: string, scope: ProjectFilter = {}): Promise<Outcome<EndpointView>> {
      const r = await row(id, scope)
      return r ? ok(view(r)) : deny('not_found', `No webhook endpoint ${id}`)
    },

    /** The signing secret in clear (the dashboard asks for the password first). */
    async revealSecret(
      id: string,
      scope: ProjectFilter = {},
    ): Promise<Outcome<{ id: string; secret: string }>> {
      const r = await row(id, scope)
      if (!r) return deny('not_found', `No webhook endpoint ${id}`)
      return ok({ id, secret: deps.secrets.open(r.secretSealed, id) })
    },

    /** A new secret replaces the old one at once; deliveries from then on are signed with it. */
    async rotateSecret(
      id: string,
      scope: ProjectFilter = {},
    ): Promise<Outcome<{ endpoint: EndpointView; secret: string }>> {
      const secret = newSecret()
      const r = await update(id, scope, { secretSealed: deps.secrets.seal(secret, id) })
      return r.ok ? ok({ endpoint: r.value, secret }) : r
    },

    /**
     * By hand: disabling records why and when; enabling clears that and the failure streak, so it
     * starts afresh.
     */
    setEnabled: (id: string, enabled: boolean, scope: ProjectFilter = {}) =>
      update(
        id,
        scope,
        enabled
          ? { enabled, disabledReason: null, disabledAt: null, failingSince: null }
          : { enabled, disabledReason: 'manual', disabledAt: now() },
      ),

    /**
     * What the sender needs: URL, mode, secret in clear, whether it may send and since when it
     * fails; null once deleted.
     */
    async forSending(id: string): Promise<SendingInfo | null> {
      const r = await repo.forSending(id)
      return r
        ? {
            url: r.url,
            mode: r.mode,
            format: r.format,
            secret: deps.secrets.open(r.secretSealed, id),
            enabled: r.enabled,
            failingSince: r.failingSince,
          }
        : null
    },

    /** A failed attempt: the streak starts now unless it already runs. */
    async markFailing(id: string, at: Date): Promise<void> {
      if (await repo.markFailing(id, at)) await deps.changes.publish({ kind: 'endpoint', id })
    },

    /** A successful attempt ends the streak. */
    async markAnswering(id: string): Promise<void> {
      if (await repo.markAnswering(id)) await deps.changes.publish({ kind: 'endpoint', id })
    },

    /**
     * Disables an enabled endpoint on the service's own judgement; null when it was not enabled
     * (nothing changed).
     */
    async disableAutomatically(
      id: string,
      reason: 'gone' | 'failing',
      at: Date,
    ): Promise<EndpointView | null> {
      const r = await repo.disableEnabled(id, reason, at)
      if (!r) return null
      await deps.changes.publish({ kind: 'endpoint', id })
      return view(r)
    },
  }
}

export type EndpointService = ReturnType<typeof createEndpointService>
