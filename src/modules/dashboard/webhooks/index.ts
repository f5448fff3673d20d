import { Elysia } from 'elysia'
import { dashboardAccess, type Visit } from '../access/index.ts'
import type { DashboardDeps } from '../deps.ts'
import { base, layout, type Frame, type Notice } from '../layout.ts'
import { denied, noticeOf, notFoundPage, page, redirect, statusOf, withNotice } from '../respond.ts'
import { DELIVERIES_PER_PAGE } from '../service.ts'
import { deliveriesPage, deliveryPage } from './deliveries-page.ts'
import { endpointPage, endpointsPage } from './endpoints-page.ts'
import { html } from '../../../lib/html.ts'

type Deps = Pick<DashboardDeps, 'sessions' | 'asset' | 'dashboard' | 'endpoints' | 'webhooks'>

const RECOVER_SINCE_MISSING = 'Choose the date and time (UTC) to recover failed deliveries from.'

/** The form's `recover_since` (a datetime-local, read as UTC): null when left empty. */
function recoverSince(raw: string | null): Date | null | 'invalid' {
  if (raw === null || raw.trim() === '') return null
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(:\d{2})?$/.exec(raw.trim())
  const at = m ? new Date(`${m[1]}T${m[2]}${m[3] ?? ':00'}Z`) : null
  return at && !Number.isNaN(at.getTime()) ? at : 'invalid'
}

const toEndpoint = (f: Frame, id: string, notice: Notice) =>
  redirect(withNotice(base(f, `/endpoints/${id}`), notice))

/**
 * Webhooks: endpoints (created, their secret revealed or rotated after the password is asked
 * again, enabled, disabled, tested, failed deliveries recovered) and the delivery logs.
 */
export function webhooksSection(deps: Deps) {
  /** An endpoint's page, with its deliveries filtered as the query says. */
  async function endpointView(
    v: Pick<Visit, 'frame' | 'viewer' | 'search'>,
    id: string,
    status: number,
    opts: Parameters<typeof endpointPage>[4],
  ) {
    const q = { status: v.search.get('status') ?? '' }
    const before = v.search.get('before') ?? undefined
    const r = await deps.dashboard.endpoint(v.viewer, id, { ...q, before })
    if (r.ok) return page(endpointPage(v.frame, r.value, q, DELIVERIES_PER_PAGE, opts), status)
    if (r.code === 'not_found') return notFoundPage(v.frame)
    const empty = layout(v.frame, 'endpoints', 'Webhook endpoint', html``, { error: r.message })
    return page(empty, statusOf(r.code))
  }

  /** Every failed delivery to the endpoint since `since` sent again; its page says how many. */
  async function recovered(v: Pick<Visit, 'frame' | 'viewer' | 'search'>, id: string, since: Date) {
    const r = await deps.webhooks.recover(id, since, v.viewer)
    if (!r.ok)
      return r.code === 'not_found'
        ? denied(v.frame, 'endpoints', r)
        : endpointView(v, id, statusOf(r.code), { error: r.message })
    const { redelivered, busy } = r.value
    const count =
      redelivered === 1 ? '1 failed delivery is' : `${redelivered} failed deliveries are`
    const notYet = busy ? ` (${busy} could not be, try again in a moment)` : ''
    return endpointView(v, id, 200, { notice: `${count} being sent again${notYet}.` })
  }

  /**
   * Whoever holds an endpoint's secret can sign as the service: revealing or rotating it asks
   * for the password again.
   */
  async function withSecret(
    v: Visit & { form: URLSearchParams },
    id: string,
    why: 'revealed' | 'rotated',
  ) {
    const confirmed = await deps.sessions.confirmPassword(
      v.user.userId,
      v.form.get('password') ?? '',
    )
    if (!confirmed.ok)
      return endpointView(v, id, statusOf(confirmed.code), { error: confirmed.message })
    const r =
      why === 'revealed'
        ? await deps.endpoints.revealSecret(id, v.viewer)
        : await deps.endpoints.rotateSecret(id, v.viewer)
    return r.ok
      ? endpointView(v, id, 200, { secret: { value: r.value.secret, why } })
      : denied(v.frame, 'endpoints', r)
  }

  return (
    new Elysia({ name: 'dashboard-webhooks', prefix: '/:project/:mode' })
      .use(dashboardAccess(deps))
      // --- Endpoints ---
      .get(
        '/endpoints',
        async ({ frame, viewer }) => {
          const list = await deps.dashboard.endpoints(viewer)
          return page(endpointsPage(frame, list, { url: '', events: [], format: 'standard' }, {}))
        },
        { signedIn: true },
      )
      .post(
        '/endpoints',
        async (v) => {
          // No format given (a form from before formats existed): standard, as the service says.
          const format = v.form.get('format') ?? undefined
          const input = {
            url: (v.form.get('url') ?? '').trim(),
            events: v.form.getAll('events'),
            format: format ?? 'standard',
          }
          const r = await deps.endpoints.create({
            projectId: v.viewer.projectId,
            mode: v.viewer.mode,
            url: input.url,
            eventTypes: input.events,
            format,
          })
          if (r.ok) {
            const secret = { value: r.value.secret, why: 'created' as const }
            return endpointView(v, r.value.endpoint.id, 201, { secret })
          }
          const list = await deps.dashboard.endpoints(v.viewer)
          return page(endpointsPage(v.frame, list, input, { error: r.message }), statusOf(r.code))
        },
        { csrf: true },
      )
      .get(
        '/endpoints/:id',
        (v) => endpointView(v, v.params.id, 200, { notice: noticeOf(v.search) }),
        { signedIn: true },
      )
      .post('/endpoints/:id/reveal', (v) => withSecret(v, v.params.id, 'revealed'), {
        csrf: true,
      })
      .post('/endpoints/:id/rotate', (v) => withSecret(v, v.params.id, 'rotated'), {
        csrf: true,
      })
      .post(
        '/endpoints/:id/enable',
        async (v) => {
          // Enabling may recover at once: every failed delivery since the chosen time is sent
          // again.
          const id = v.params.id
          const since = recoverSince(v.form.get('recover_since'))
          if (since === 'invalid') return endpointView(v, id, 400, { error: RECOVER_SINCE_MISSING })
          const r = await deps.endpoints.setEnabled(id, true, v.viewer)
          if (!r.ok) return denied(v.frame, 'endpoints', r)
          return since ? recovered(v, id, since) : toEndpoint(v.frame, id, 'endpoint-enabled')
        },
        { csrf: true },
      )
      .post(
        '/endpoints/:id/recover',
        async (v) => {
          const since = recoverSince(v.form.get('recover_since'))
          if (since === null || since === 'invalid')
            return endpointView(v, v.params.id, 400, { error: RECOVER_SINCE_MISSING })
          return recovered(v, v.params.id, since)
        },
        { csrf: true },
      )
      .post(
        '/endpoints/:id/disable',
        async ({ frame, viewer, params }) => {
          const r = await deps.endpoints.setEnabled(params.id, false, viewer)
          if (!r.ok) return denied(frame, 'endpoints', r)
          return toEndpoint(frame, params.id, 'endpoint-disabled')
        },
        { csrf: true },
      )
      .post(
        '/endpoints/:id/test',
        async (v) => {
          const id = v.params.id
          const r = await deps.webhooks.sendTest(id, v.form.get('event') ?? '', v.viewer)
          if (r.ok) return toEndpoint(v.frame, id, 'test-sent')
          return r.code === 'not_found'
            ? denied(v.frame, 'endpoints', r)
            : endpointView(v, id, statusOf(r.code), { error: r.message })
        },
        { csrf: true },
      )

      // --- Delivery logs ---
      .get(
        '/deliveries',
        async ({ frame, viewer, search }) => {
          const q = { status: search.get('status') ?? '', endpointId: search.get('endpoint') ?? '' }
          const before = search.get('before') ?? undefined
          const r = await deps.dashboard.deliveries(viewer, { ...q, before })
          if (r.ok) return page(deliveriesPage(frame, q, r.value, DELIVERIES_PER_PAGE, {}))
          return page(
            deliveriesPage(frame, q, null, DELIVERIES_PER_PAGE, { error: r.message }),
            statusOf(r.code),
          )
        },
        { signedIn: true },
      )
      .get(
        '/deliveries/:id',
        async ({ frame, viewer, search, params }) => {
          const r = await deps.dashboard.delivery(viewer, params.id)
          if (!r.ok) return denied(frame, 'deliveries', r)
          return page(deliveryPage(frame, r.value, { notice: noticeOf(search) }))
        },
        { signedIn: true },
      )
      .post(
        '/deliveries/:id/redeliver',
        async ({ frame, viewer, params }) => {
          const r = await deps.webhooks.redeliver(params.id, viewer)
          if (r.ok)
            return redirect(withNotice(base(frame, `/deliveries/${params.id}`), 'redelivered'))
          if (r.code === 'not_found') return denied(frame, 'deliveries', r)
          const d = await deps.dashboard.delivery(viewer, params.id)
          if (!d.ok) return denied(frame, 'deliveries', d)
          return page(deliveryPage(frame, d.value, { error: r.message }), statusOf(r.code))
        },
        { csrf: true },
      )
  )
}
