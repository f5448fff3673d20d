/**
 * Who is asking, and may they: the dashboard's sign-in state and CSRF checks as Elysia macros.
 *
 * - `signedIn: true` ends the request unless a session is signed in and is a member of the
 *   path's project (and the mode is test or live); otherwise it gives the handler `user`,
 *   `frame` (what every page draws around itself), `viewer` (the project and mode the
 *   services are asked about) and `search` (the query string).
 * - `postedForm: 'session' | 'sign-in'` reads the posted form and judges it: sent from this site
 *   (Fetch Metadata) with the CSRF token of the session or of the sign-in form's pre-session
 *   token. The handler gets `posted: { form, trusted }` and says itself what a refusal means.
 * - `csrf: true` is both for a member's form: an untrusted one ends in a 403 page, a trusted
 *   one gives the handler `form`.
 */
import { Elysia, status } from 'elysia'
import { ApiError } from '../../../http/errors.ts'
import { html } from '../../../lib/html.ts'
import { paramTextProblems } from '../../../lib/storable-text.ts'
import type { Mode } from '../../../projects/mode.ts'
import type { SessionUser } from '../../../users/session.service.ts'
import type { DashboardDeps } from '../deps.ts'
import { base, plainPage, type Frame } from '../layout.ts'
import { dashboardNotFound, page, redirect, withNotice } from '../respond.ts'
import type { Viewer } from '../service.ts'
import {
  clearCookie,
  fromAnotherSite,
  readCookie,
  readForm,
  SESSION_COOKIE,
  SIGN_IN_COOKIE,
} from './cookies.ts'

/** A signed-in request to one project and mode: what `signedIn` gives a handler. */
export interface Visit {
  user: SessionUser
  frame: Frame
  viewer: Viewer
  search: URLSearchParams
}

/** A posted form, and whether to act on it. */
export interface PostedForm {
  form: URLSearchParams | null
  trusted: boolean
}

/** Which cookie's token a form's CSRF token is bound to. */
const TOKEN_COOKIE = { session: SESSION_COOKIE, 'sign-in': SIGN_IN_COOKIE } as const

/** A resolve ends the request only when it returns a status: the page rides in it. */
const early = (response: Response) => status(response.status as 200, response)

export function dashboardAccess({ sessions, asset }: Pick<DashboardDeps, 'sessions' | 'asset'>) {
  /**
   * A trusted form with text the database cannot store (U+0000) is refused here, before any
   * handler reads it: 400, a page naming the field (the app's onError renders it).
   */
  async function judge(request: Request, token: string | undefined): Promise<PostedForm> {
    const form = fromAnotherSite(request) ? null : await readForm(request)
    const trusted = form !== null && sessions.checkCsrf(token, form.get('csrf') ?? undefined)
    const problems = trusted ? paramTextProblems(form) : []
    if (problems.length) {
      const said = problems.map((p) => `${p.path} ${p.message}`).join('; ')
      throw new ApiError('invalid_request', `Invalid form: ${said}`, problems)
    }
    return { form, trusted }
  }

  const formRefused = (f: Frame) =>
    page(
      plainPage(
        asset,
        'Form refused',
        html`<p>${[
          'This form could not be accepted: it did not come from a page of this dashboard, ',
          'or that page is too old. Go back, reload the page and try again.',
        ]}</p><p><a href="${base(f)}">Back to the dashboard</a></p>`,
      ),
      403,
    )

  return new Elysia({ name: 'dashboard-access' })
    .macro('signedIn', {
      detail: { hide: true },
      async resolve({ request, params }) {
        const url = new URL(request.url)
        const token = readCookie(request, SESSION_COOKIE)
        const user = await sessions.authenticate(token)
        if (!user) {
          // A form posted after the session ended would be lost anyway: say so instead.
          const to =
            request.method === 'POST'
              ? withNotice('/dashboard/sign-in', 'session-ended')
              : `/dashboard/sign-in?next=${encodeURIComponent(url.pathname + url.search)}`
          return early(redirect(to, token ? [clearCookie(SESSION_COOKIE)] : []))
        }
        const { project: projectId, mode } = params as { project: string; mode: Mode }
        // The header lists the user's projects anyway: membership is being in that list.
        const projects =
          mode === 'test' || mode === 'live' ? await sessions.projectsOf(user.userId) : []
        const project = projects.find((p) => p.id === projectId)
        if (!project) return early(dashboardNotFound(asset))
        const frame: Frame = {
          asset,
          email: user.email,
          project,
          projects,
          mode,
          csrf: sessions.csrfToken(token!),
        }
        return {
          user,
          frame,
          viewer: { projectId: project.id, mode },
          search: url.searchParams,
        } satisfies Visit
      },
    })
    .macro('postedForm', (cookie: keyof typeof TOKEN_COOKIE) => ({
      detail: { hide: true },
      // The body stays unread for readForm's own type and size checks. Elysia takes 'none' here
      // as on a route, though its macro types list parser functions only.
      parse: 'none' as never,
      async resolve({ request }) {
        return { posted: await judge(request, readCookie(request, TOKEN_COOKIE[cookie])) }
      },
    }))
    .macro('csrf', {
      signedIn: true,
      postedForm: 'session',
      resolve({ posted, frame }) {
        return posted.trusted ? { form: posted.form! } : early(formRefused(frame))
      },
    })
}
