import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { Elysia } from 'elysia'
import { factsOf } from '../../http/context.ts'
import { ApiError, ERRORS } from '../../http/errors.ts'
import { html } from '../../lib/html.ts'
import { paramTextProblems } from '../../lib/storable-text.ts'
import type { Clock } from '../../lib/clock.ts'
import type { Denial } from '../../lib/outcome.ts'
import type { Mode } from '../../projects/mode.ts'
import type { KeyService } from '../../keys/key.service.ts'
import type { RateLimiter } from '../../limits/rate-limiter.ts'
import type { RateLimits } from '../../projects/project.service.ts'
import type { SessionService, SessionUser } from '../../users/session.service.ts'
import type { EndpointService } from '../../webhooks/endpoint.service.ts'
import type { WebhookService } from '../../webhooks/webhook.service.ts'
import type { TransactionService } from '../transactions/service.ts'
import type { RefundService } from '../refunds/service.ts'
import { decimalToUnits } from '../../lib/money.ts'
import { fundsPage, refundFilterOf, type NativeCoin } from './pages/funds.ts'
import {
  clearCookie,
  fromAnotherSite,
  readCookie,
  readForm,
  safeNext,
  setCookie,
  SESSION_COOKIE,
  SIGN_IN_COOKIE,
} from './access.ts'
import {
  alert,
  base,
  DASHBOARD_HEADERS,
  isNotice,
  layout,
  NOTICES,
  plainPage,
  type AssetUrl,
  type Frame,
  type Notice,
  type Section,
} from './layout.ts'
import { deliveriesPage, deliveryPage } from './pages/deliveries.ts'
import { endpointPage, endpointsPage } from './pages/endpoints.ts'
import { keysPage } from './pages/keys.ts'
import { overviewPage } from './pages/overview.ts'
import { settingsPage } from './pages/settings.ts'
import { signInPage } from './pages/sign-in.ts'
import {
  transactionPage,
  transactionsPage,
  type RefundForm,
  type TokenDecimals,
} from './pages/transactions.ts'
import {
  DEFAULT_RANGE_DAYS,
  DELIVERIES_PER_PAGE,
  type DashboardService,
  type Viewer,
} from './service.ts'

/** The dashboard's CSS and bundled scripts (built from ./client by scripts/build-assets.ts). */
export const DASHBOARD_ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url))

/** The status the API gives a denial (R4's one table). */
const statusOf = (code: Denial['code']) => ERRORS[code].status

export interface DashboardDeps {
  sessions: SessionService
  dashboard: DashboardService
  keys: KeyService
  endpoints: EndpointService
  webhooks: WebhookService
  transactions: TransactionService
  refunds: RefundService
  limiter: RateLimiter
  /** Sign-in attempts per client IP. */
  signInLimits: RateLimits
  asset: AssetUrl
  decimals: TokenDecimals
  /** Each network's native coin (the Funds page shows fees in it). */
  native: NativeCoin
  clock: Clock
}

/** A signed-in request to one project and mode, with its form when it posts one. */
interface Visit {
  frame: Frame
  viewer: Viewer
  user: SessionUser
  form: URLSearchParams
  url: URL
}

const page = (body: string, status = 200, extra: Record<string, string> = {}) =>
  new Response(body, { status, headers: { ...DASHBOARD_HEADERS, ...extra } })

function redirect(location: string, cookies: string[] = []): Response {
  const headers = new Headers({ location, 'cache-control': 'no-store' })
  for (const c of cookies) headers.append('set-cookie', c)
  return new Response(null, { status: 303, headers })
}

const DATE = /^\d{4}-\d{2}-\d{2}$/

const RECOVER_SINCE_MISSING = 'Choose the date and time (UTC) to recover failed deliveries from.'
/** The form's `recover_since` (a datetime-local, read as UTC): null when left empty. */
function recoverSince(raw: string | null): Date | null | 'invalid' {
  if (raw === null || raw.trim() === '') return null
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(:\d{2})?$/.exec(raw.trim())
  const at = m ? new Date(`${m[1]}T${m[2]}${m[3] ?? ':00'}Z`) : null
  return at && !Number.isNaN(at.getTime()) ? at : 'invalid'
}
const withNotice = (path: string, notice: Notice) =>
  `${path}${path.includes('?') ? '&' : '?'}notice=${notice}`
const noticeOf = (url: URL) => {
  const n = url.searchParams.get('notice')
  return isNotice(n) ? NOTICES[n] : null
}

/** The 404 page of a dashboard path: for an unknown route, project, mode or record alike. */
export function dashboardNotFound(asset: AssetUrl): Response {
  return page(
    plainPage(
      asset,
      'Not found',
      html`<p>There is nothing here. <a href="/dashboard">Go to the dashboard</a></p>`,
    ),
    404,
  )
}

/** A request refused before any page could handle it (a form or query the database cannot store, no Host). */
export function dashboardRefused(asset: AssetUrl, status: number, message: string): Response {
  return page(
    plainPage(
      asset,
      'Request refused',
      html`${alert('error', message)}<p><a href="/dashboard">Go to the dashboard</a></p>`,
    ),
    status,
  )
}

/**
 * The merchant dashboard at /dashboard (issue 7): server-rendered pages over the same services
 * the API and the CLI use. Every page under `/dashboard/{project}/{mode}` checks the session,
 * the membership and the mode first; every form post also checks its CSRF token.
 */
export function dashboardController(deps: DashboardDeps) {
  const { sessions, dashboard } = deps

  const notFoundPage = (f?: Frame) =>
    f
      ? page(
          layout(
            f,
            'overview',
            'Not found',
            html`<p>There is nothing here in ${f.mode} mode. <a href="${base(f)}">Back to the overview</a></p>`,
          ),
          404,
        )
      : dashboardNotFound(deps.asset)

  /** A denial as a page in the frame, with the status the API would give. */
  const denied = (f: Frame, section: Section, d: Denial) =>
    d.code === 'not_found'
      ? notFoundPage(f)
      : page(
          layout(
            f,
            section,
            'Something went wrong',
            html`<p><a href="${base(f)}">Back to the overview</a></p>`,
            { error: d.message },
          ),
          statusOf(d.code),
        )

  /**
   * A posted form and whether to trust it: sent from this site (Fetch Metadata) with the CSRF
   * token of `token` (the session's, or the sign-in form's pre-session one). A trusted form
   * with text the database cannot store (U+0000) is refused here, before any handler reads it:
   * 400, a page naming the field (the app's onError renders it).
   */
  async function postedForm(
    request: Request,
    token: string | undefined,
  ): Promise<{ form: URLSearchParams | null; trusted: boolean }> {
    const form = fromAnotherSite(request) ? null : await readForm(request)
    const trusted = form !== null && sessions.checkCsrf(token, form.get('csrf') ?? undefined)
    const problems = trusted ? paramTextProblems(form) : []
    if (problems.length)
      throw new ApiError(
        'invalid_request',
        `Invalid form: ${problems.map((p) => `${p.path} ${p.message}`).join('; ')}`,
        problems,
      )
    return { form, trusted }
  }

  /** Session, membership, mode and (for posts) origin and CSRF token; a response when any fails. */
  async function enter(
    request: Request,
    params: { project: string; mode: string },
  ): Promise<Visit | Response> {
    const url = new URL(request.url)
    const post = request.method === 'POST'
    const token = readCookie(request, SESSION_COOKIE)
    const user = await sessions.authenticate(token)
    if (!user) {
      const to = post
        ? withNotice('/dashboard/sign-in', 'session-ended')
        : `/dashboard/sign-in?next=${encodeURIComponent(url.pathname + url.search)}`
      return redirect(to, token ? [clearCookie(SESSION_COOKIE)] : [])
    }
    const mode = params.mode
    // The header lists the user's projects anyway: membership is being in that list.
    const projects =
      mode === 'test' || mode === 'live' ? await sessions.projectsOf(user.userId) : []
    const project = projects.find((p) => p.id === params.project)
    if (!project) return notFoundPage()
    let form = new URLSearchParams()
    if (post) {
      const posted = await postedForm(request, token)
      if (!posted.trusted) {
        return page(
          plainPage(
            deps.asset,
            'Form refused',
            html`<p>This form could not be accepted: it did not come from a page of this dashboard, or that page is too old. Go back, reload the page and try again.</p><p><a href="${base({ project, mode: mode as Mode })}">Back to the dashboard</a></p>`,
          ),
          403,
        )
      }
      form = posted.form!
    }
    const frame: Frame = {
      asset: deps.asset,
      email: user.email,
      project,
      projects,
      mode: mode as Mode,
      csrf: sessions.csrfToken(token!),
    }
    return { frame, viewer: { projectId: project.id, mode: mode as Mode }, user, form, url }
  }

  type Handler = (v: Visit, params: Record<string, string>) => Promise<Response> | Response
  /** Runs `handler` for a signed-in member only. */
  const member =
    (handler: Handler) =>
    async ({ request, params }: { request: Request; params: Record<string, string> }) => {
      const v = await enter(request, params as { project: string; mode: string })
      return v instanceof Response ? v : handler(v, params)
    }
  const hidden = { detail: { hide: true } }
  const form = { parse: 'none' as const, detail: { hide: true } }

  return (
    new Elysia({ name: 'dashboard', prefix: '/dashboard' })
      .get(
        '',
        async ({ request }) => {
          const user = await sessions.authenticate(readCookie(request, SESSION_COOKIE))
          if (!user) return redirect('/dashboard/sign-in')
          const [first] = await sessions.projectsOf(user.userId)
          if (!first)
            return page(
              plainPage(
                deps.asset,
                'No project yet',
                html`<p>You are signed in as ${user.email}, but you are not a member of any project. Ask the operator to add you (<code>npm run cli -- user create --email ${user.email} --password … --project …</code>).</p>`,
              ),
            )
          return redirect(base({ project: first, mode: 'test' }))
        },
        hidden,
      )

      // --- Sign-in and sign-out ---
      .get(
        '/sign-in',
        async ({ request }) => {
          const url = new URL(request.url)
          const next = safeNext(url.searchParams.get('next'))
          if (await sessions.authenticate(readCookie(request, SESSION_COOKIE)))
            return redirect(next)
          const pre = readCookie(request, SIGN_IN_COOKIE) ?? randomBytes(24).toString('base64url')
          return page(
            signInPage(
              deps.asset,
              { email: '', next, csrf: sessions.csrfToken(pre) },
              { notice: noticeOf(url) },
            ),
            200,
            { 'set-cookie': setCookie(SIGN_IN_COOKIE, pre) },
          )
        },
        hidden,
      )
      .post(
        '/sign-in',
        async ({ request }) => {
          const ip = factsOf(request)?.clientIp ?? 'unknown'
          const { form: body, trusted } = await postedForm(
            request,
            readCookie(request, SIGN_IN_COOKIE),
          )
          const next = safeNext(body?.get('next'))
          const fresh = randomBytes(24).toString('base64url')
          const again = (status: number, error: string, extra: Record<string, string> = {}) =>
            page(
              signInPage(
                deps.asset,
                { email: body?.get('email') ?? '', next, csrf: sessions.csrfToken(fresh) },
                { error },
              ),
              status,
              { 'set-cookie': setCookie(SIGN_IN_COOKIE, fresh), ...extra },
            )
          if (!body || !trusted)
            return again(
              403,
              'The sign-in form was too old or did not come from this site. Please try again.',
            )
          // Per client IP, before any password is checked.
          const decision = await deps.limiter.check(`sign-in:${ip}`, deps.signInLimits)
          if (!decision.allowed)
            return again(
              429,
              `Too many sign-in attempts from your address. Try again in ${decision.retryAfter} seconds.`,
              { 'retry-after': String(decision.retryAfter) },
            )
          const r = await sessions.signIn(body.get('email') ?? '', body.get('password') ?? '')
          if (!r.ok) return again(statusOf(r.code), r.message)
          // A session this browser held before ends here rather than idling on.
          await sessions.signOut(readCookie(request, SESSION_COOKIE))
          return redirect(next, [
            setCookie(SESSION_COOKIE, r.value.token),
            clearCookie(SIGN_IN_COOKIE),
          ])
        },
        form,
      )
      .post(
        '/sign-out',
        async ({ request }) => {
          const token = readCookie(request, SESSION_COOKIE)
          if (!(await postedForm(request, token)).trusted)
            return page(
              plainPage(
                deps.asset,
                'Form refused',
                html`<p>Sign-out could not be confirmed. <a href="/dashboard">Back to the dashboard</a></p>`,
              ),
              403,
            )
          await sessions.signOut(token)
          return redirect(withNotice('/dashboard/sign-in', 'signed-out'), [
            clearCookie(SESSION_COOKIE),
          ])
        },
        form,
      )

      // --- Overview ---
      .get(
        '/:project/:mode',
        member(async (v) => {
          const today = new Date(deps.clock.now()).toISOString().slice(0, 10)
          const start =
            v.url.searchParams.get('start_date') ||
            new Date(deps.clock.now() - (DEFAULT_RANGE_DAYS - 1) * 86_400_000)
              .toISOString()
              .slice(0, 10)
          const end = v.url.searchParams.get('end_date') || today
          const range = { start, end }
          // Checked before anything is read: the chart has a point per day.
          if (!DATE.test(start) || !DATE.test(end))
            return page(overviewPage(v.frame, range, null, 'Dates must be YYYY-MM-DD'), 400)
          if (Date.parse(end) - Date.parse(start) > 3660 * 86_400_000)
            return page(
              overviewPage(v.frame, range, null, 'Choose a range of at most ten years'),
              400,
            )
          const r = await dashboard.overview(v.viewer, { start_date: start, end_date: end })
          if (!r.ok) return page(overviewPage(v.frame, range, null, r.message), statusOf(r.code))
          return page(overviewPage(v.frame, range, r.value, null))
        }),
        hidden,
      )

      // --- Transactions ---
      .get(
        '/:project/:mode/transactions',
        member(async (v) => {
          const q = {
            status: v.url.searchParams.get('status') ?? '',
            orderId: (v.url.searchParams.get('order_id') ?? '').slice(0, 255),
          }
          const r = await dashboard.transactions(v.viewer, {
            ...q,
            page: Number(v.url.searchParams.get('page') ?? '1'),
          })
          if (!r.ok)
            return page(transactionsPage(v.frame, q, null, { error: r.message }), statusOf(r.code))
          return page(transactionsPage(v.frame, q, r.value, {}))
        }),
        hidden,
      )
      .get(
        '/:project/:mode/transactions/:id',
        member(async (v, p) => {
          const r = await dashboard.transaction(v.viewer, p.id)
          return r.ok
            ? page(transactionPage(v.frame, r.value, deps.decimals, { notice: noticeOf(v.url) }))
            : denied(v.frame, 'transactions', r)
        }),
        hidden,
      )
      .post(
        '/:project/:mode/transactions/:id/cancel',
        member(async (v, p) => {
          const r = await deps.transactions.cancel(v.viewer, p.id)
          return r.ok
            ? redirect(withNotice(base(v.frame, `/transactions/${p.id}`), 'cancelled'))
            : transactionWithError(v, p.id, r)
        }),
        form,
      )
      .post(
        '/:project/:mode/transactions/:id/retry-webhook',
        member(async (v, p) => {
          const r = await deps.webhooks.retryCompleted(v.viewer, p.id)
          return r.ok
            ? redirect(withNotice(base(v.frame, `/transactions/${p.id}`), 'webhook-retried'))
            : transactionWithError(v, p.id, r)
        }),
        form,
      )

      .post(
        '/:project/:mode/transactions/:id/refunds',
        member(async (v, p) => {
          const form: RefundForm = {
            asset: v.form.get('asset') ?? '',
            amount: (v.form.get('amount') ?? '').trim(),
            address: (v.form.get('address') ?? '').trim(),
            reason: (v.form.get('reason') ?? '').trim(),
          }
          const [network = '', symbol = ''] = form.asset.split('|')
          const decimals = deps.decimals(network, symbol)
          // People type token amounts ("12.5 TUSD"); the API takes smallest units: converted exactly, never rounded.
          const amount =
            form.amount === ''
              ? null
              : decimals === null
                ? null
                : decimalToUnits(form.amount, decimals)
          if (form.amount !== '' && amount === null) {
            return transactionWithError(
              v,
              p.id,
              {
                ok: false,
                code: 'invalid_request',
                message: `Amount must be a number of ${symbol || 'tokens'} with at most ${decimals ?? 0} decimal places, such as 12.5`,
              },
              form,
            )
          }
          const r = await deps.refunds.create(v.viewer, p.id, {
            address: form.address,
            amount: amount?.toString() ?? null,
            reason: form.reason || null,
            token_symbol: symbol || null,
            blockchain_network: network || null,
          })
          return r.ok
            ? redirect(
                `${withNotice(base(v.frame, `/transactions/${p.id}`), 'refund-created')}#refunds`,
              )
            : transactionWithError(v, p.id, r, form)
        }),
        form,
      )
      .post(
        '/:project/:mode/refunds/:id/cancel',
        member(async (v, p) => {
          const r = await deps.refunds.cancel(v.viewer, p.id)
          if (!r.ok) return denied(v.frame, 'funds', r)
          return redirect(
            `${withNotice(
              base(v.frame, `/transactions/${r.value.transaction_id}`),
              'refund-cancelled',
            )}#refunds`,
          )
        }),
        form,
      )
      .post(
        '/:project/:mode/refunds/:id/abandon',
        member(async (v, p) => {
          const r = await deps.refunds.abandon(v.viewer, p.id)
          if (!r.ok) {
            // Still mineable (or not in flight): its transaction's page, saying why.
            const known = r.code === 'conflict' ? await deps.refunds.get(v.viewer, p.id) : null
            return known?.ok
              ? transactionWithError(v, known.value.transaction_id, r)
              : denied(v.frame, 'funds', r)
          }
          return redirect(
            `${withNotice(
              base(v.frame, `/transactions/${r.value.transaction_id}`),
              'refund-abandoned',
            )}#refunds`,
          )
        }),
        form,
      )

      // --- Funds ---
      .get(
        '/:project/:mode/funds',
        member(async (v) => {
          const d = await dashboard.funds(
            v.viewer,
            refundFilterOf(v.url.searchParams.get('refunds')),
          )
          return page(
            fundsPage(
              v.frame,
              d,
              { decimals: deps.decimals, native: deps.native },
              { notice: noticeOf(v.url) },
            ),
          )
        }),
        hidden,
      )

      // --- API keys ---
      .get(
        '/:project/:mode/keys',
        member(async (v) =>
          page(keysPage(v.frame, await dashboard.keys(v.viewer), { notice: noticeOf(v.url) })),
        ),
        hidden,
      )
      .post(
        '/:project/:mode/keys',
        member(async (v) => {
          const input = { name: v.form.get('name') ?? '', scopes: v.form.getAll('scopes') }
          const r = await deps.keys.create({
            projectId: v.viewer.projectId,
            mode: v.viewer.mode,
            name: input.name,
            scopes: input.scopes,
          })
          const keys = await dashboard.keys(v.viewer)
          if (!r.ok)
            return page(
              keysPage(v.frame, keys, { form: input, error: r.message }),
              statusOf(r.code),
            )
          return page(
            keysPage(v.frame, keys, { created: { key: r.value.key, name: r.value.record.name } }),
            201,
          )
        }),
        form,
      )
      .post(
        '/:project/:mode/keys/:id/revoke',
        member(async (v, p) => {
          const r = await deps.keys.revoke(p.id, v.viewer)
          return r.ok
            ? redirect(withNotice(base(v.frame, '/keys'), 'key-revoked'))
            : denied(v.frame, 'keys', r)
        }),
        form,
      )
      .post(
        '/:project/:mode/keys/:id/delete',
        member(async (v, p) => {
          const r = await deps.keys.delete(p.id, v.viewer)
          return r.ok
            ? redirect(withNotice(base(v.frame, '/keys'), 'key-deleted'))
            : denied(v.frame, 'keys', r)
        }),
        form,
      )

      // --- Webhook endpoints ---
      .get(
        '/:project/:mode/endpoints',
        member(async (v) =>
          page(
            endpointsPage(
              v.frame,
              await dashboard.endpoints(v.viewer),
              { url: '', events: [] },
              {},
            ),
          ),
        ),
        hidden,
      )
      .post(
        '/:project/:mode/endpoints',
        member(async (v) => {
          const input = { url: (v.form.get('url') ?? '').trim(), events: v.form.getAll('events') }
          const r = await deps.endpoints.create({
            projectId: v.viewer.projectId,
            mode: v.viewer.mode,
            url: input.url,
            eventTypes: input.events,
          })
          if (!r.ok)
            return page(
              endpointsPage(v.frame, await dashboard.endpoints(v.viewer), input, {
                error: r.message,
              }),
              statusOf(r.code),
            )
          return endpointView(v, r.value.endpoint.id, 201, {
            secret: { value: r.value.secret, why: 'created' },
          })
        }),
        form,
      )
      .get(
        '/:project/:mode/endpoints/:id',
        member((v, p) => endpointView(v, p.id, 200, { notice: noticeOf(v.url) })),
        hidden,
      )
      .post(
        '/:project/:mode/endpoints/:id/reveal',
        member(async (v, p) => {
          const confirmed = await sessions.confirmPassword(
            v.user.userId,
            v.form.get('password') ?? '',
          )
          if (!confirmed.ok)
            return endpointView(v, p.id, statusOf(confirmed.code), { error: confirmed.message })
          const r = await deps.endpoints.revealSecret(p.id, v.viewer)
          return r.ok
            ? endpointView(v, p.id, 200, { secret: { value: r.value.secret, why: 'revealed' } })
            : denied(v.frame, 'endpoints', r)
        }),
        form,
      )
      .post(
        '/:project/:mode/endpoints/:id/rotate',
        member(async (v, p) => {
          // As for reveal: whoever holds the new secret can sign as the service, so the password is asked again.
          const confirmed = await sessions.confirmPassword(
            v.user.userId,
            v.form.get('password') ?? '',
          )
          if (!confirmed.ok)
            return endpointView(v, p.id, statusOf(confirmed.code), { error: confirmed.message })
          const r = await deps.endpoints.rotateSecret(p.id, v.viewer)
          return r.ok
            ? endpointView(v, p.id, 200, { secret: { value: r.value.secret, why: 'rotated' } })
            : denied(v.frame, 'endpoints', r)
        }),
        form,
      )
      .post(
        '/:project/:mode/endpoints/:id/enable',
        member(async (v, p) => {
          // Enabling may recover at once: every failed delivery since the chosen time is sent again.
          const since = recoverSince(v.form.get('recover_since'))
          if (since === 'invalid')
            return endpointView(v, p.id, 400, { error: RECOVER_SINCE_MISSING })
          const r = await deps.endpoints.setEnabled(p.id, true, v.viewer)
          if (!r.ok) return denied(v.frame, 'endpoints', r)
          return since
            ? recovered(v, p.id, since)
            : redirect(withNotice(base(v.frame, `/endpoints/${p.id}`), 'endpoint-enabled'))
        }),
        form,
      )
      .post(
        '/:project/:mode/endpoints/:id/recover',
        member(async (v, p) => {
          const since = recoverSince(v.form.get('recover_since'))
          if (since === null || since === 'invalid')
            return endpointView(v, p.id, 400, { error: RECOVER_SINCE_MISSING })
          return recovered(v, p.id, since)
        }),
        form,
      )
      .post(
        '/:project/:mode/endpoints/:id/disable',
        member(async (v, p) => {
          const r = await deps.endpoints.setEnabled(p.id, false, v.viewer)
          return r.ok
            ? redirect(withNotice(base(v.frame, `/endpoints/${p.id}`), 'endpoint-disabled'))
            : denied(v.frame, 'endpoints', r)
        }),
        form,
      )
      .post(
        '/:project/:mode/endpoints/:id/test',
        member(async (v, p) => {
          const r = await deps.webhooks.sendTest(p.id, v.form.get('event') ?? '', v.viewer)
          if (!r.ok)
            return r.code === 'not_found'
              ? denied(v.frame, 'endpoints', r)
              : endpointView(v, p.id, statusOf(r.code), { error: r.message })
          return redirect(withNotice(base(v.frame, `/endpoints/${p.id}`), 'test-sent'))
        }),
        form,
      )

      // --- Delivery logs ---
      .get(
        '/:project/:mode/deliveries',
        member(async (v) => {
          const q = {
            status: v.url.searchParams.get('status') ?? '',
            endpointId: v.url.searchParams.get('endpoint') ?? '',
          }
          const r = await dashboard.deliveries(v.viewer, {
            ...q,
            before: v.url.searchParams.get('before') ?? undefined,
          })
          if (!r.ok)
            return page(
              deliveriesPage(v.frame, q, null, DELIVERIES_PER_PAGE, { error: r.message }),
              statusOf(r.code),
            )
          return page(deliveriesPage(v.frame, q, r.value, DELIVERIES_PER_PAGE, {}))
        }),
        hidden,
      )
      .get(
        '/:project/:mode/deliveries/:id',
        member(async (v, p) => {
          const r = await dashboard.delivery(v.viewer, p.id)
          return r.ok
            ? page(deliveryPage(v.frame, r.value, { notice: noticeOf(v.url) }))
            : denied(v.frame, 'deliveries', r)
        }),
        hidden,
      )
      .post(
        '/:project/:mode/deliveries/:id/redeliver',
        member(async (v, p) => {
          const r = await deps.webhooks.redeliver(p.id, v.viewer)
          if (r.ok) return redirect(withNotice(base(v.frame, `/deliveries/${p.id}`), 'redelivered'))
          if (r.code === 'not_found') return denied(v.frame, 'deliveries', r)
          const d = await dashboard.delivery(v.viewer, p.id)
          return d.ok
            ? page(deliveryPage(v.frame, d.value, { error: r.message }), statusOf(r.code))
            : denied(v.frame, 'deliveries', d)
        }),
        form,
      )

      // --- Settings ---
      .get(
        '/:project/:mode/settings',
        member(async (v) => {
          const r = await dashboard.settings(v.viewer)
          return r.ok ? page(settingsPage(v.frame, r.value)) : denied(v.frame, 'settings', r)
        }),
        hidden,
      )
  )

  async function endpointView(
    v: Visit,
    id: string,
    status: number,
    opts: Parameters<typeof endpointPage>[4],
  ) {
    const q = { status: v.url.searchParams.get('status') ?? '' }
    const r = await dashboard.endpoint(v.viewer, id, {
      ...q,
      before: v.url.searchParams.get('before') ?? undefined,
    })
    if (!r.ok)
      return r.code === 'not_found'
        ? notFoundPage(v.frame)
        : page(
            layout(v.frame, 'endpoints', 'Webhook endpoint', html``, { error: r.message }),
            statusOf(r.code),
          )
    return page(endpointPage(v.frame, r.value, q, DELIVERIES_PER_PAGE, opts), status)
  }

  async function recovered(v: Visit, id: string, since: Date) {
    const r = await deps.webhooks.recover(id, since, v.viewer)
    if (!r.ok)
      return r.code === 'not_found'
        ? denied(v.frame, 'endpoints', r)
        : endpointView(v, id, statusOf(r.code), { error: r.message })
    const { redelivered, busy } = r.value
    const notice = `${redelivered === 1 ? '1 failed delivery is' : `${redelivered} failed deliveries are`} being sent again${busy ? ` (${busy} could not be, try again in a moment)` : ''}.`
    return endpointView(v, id, 200, { notice })
  }

  async function transactionWithError(v: Visit, id: string, d: Denial, refundForm?: RefundForm) {
    const r = await dashboard.transaction(v.viewer, id)
    return r.ok
      ? page(
          transactionPage(v.frame, r.value, deps.decimals, { error: d.message, refundForm }),
          statusOf(d.code),
        )
      : denied(v.frame, 'transactions', r)
  }
}
