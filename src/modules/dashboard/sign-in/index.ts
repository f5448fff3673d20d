import { randomBytes } from 'node:crypto'
import { Elysia } from 'elysia'
import { factsOf } from '../../../http/context.ts'
import { html } from '../../../lib/html.ts'
import { dashboardAccess } from '../access/index.ts'
import {
  clearCookie,
  readCookie,
  safeNext,
  setCookie,
  SESSION_COOKIE,
  SIGN_IN_COOKIE,
} from '../access/cookies.ts'
import type { DashboardDeps } from '../deps.ts'
import { base, plainPage } from '../layout.ts'
import { noticeOf, page, redirect, statusOf, withNotice } from '../respond.ts'
import { signInPage } from './page.ts'

const hidden = { detail: { hide: true } }
/** A fresh pre-session token: the sign-in form's CSRF token is bound to it (login CSRF). */
const preSession = () => randomBytes(24).toString('base64url')

/** /dashboard itself, signing in and signing out. */
export function signInSection(
  deps: Pick<DashboardDeps, 'sessions' | 'asset' | 'limiter' | 'signInLimits'>,
) {
  const { sessions, asset } = deps
  return (
    new Elysia({ name: 'dashboard-sign-in' })
      .use(dashboardAccess(deps))
      // The first project the user belongs to, in test mode.
      .get(
        '',
        async ({ request }) => {
          const user = await sessions.authenticate(readCookie(request, SESSION_COOKIE))
          if (!user) return redirect('/dashboard/sign-in')
          const [first] = await sessions.projectsOf(user.userId)
          if (first) return redirect(base({ project: first, mode: 'test' }))
          const create = `npm run cli -- user create --email ${user.email} --password … --project …`
          const none = 'but you are not a member of any project.'
          const ask = html`Ask the operator to add you (<code>${create}</code>).`
          const body = html`<p>You are signed in as ${user.email}, ${none} ${ask}</p>`
          return page(plainPage(asset, 'No project yet', body))
        },
        hidden,
      )
      .get(
        '/sign-in',
        async ({ request }) => {
          const url = new URL(request.url)
          const next = safeNext(url.searchParams.get('next'))
          if (await sessions.authenticate(readCookie(request, SESSION_COOKIE)))
            return redirect(next)
          const pre = readCookie(request, SIGN_IN_COOKIE) ?? preSession()
          const form = { email: '', next, csrf: sessions.csrfToken(pre) }
          return page(signInPage(asset, form, { notice: noticeOf(url.searchParams) }), 200, {
            'set-cookie': setCookie(SIGN_IN_COOKIE, pre),
          })
        },
        hidden,
      )
      .post(
        '/sign-in',
        async ({ request, posted: { form, trusted } }) => {
          const ip = factsOf(request)?.clientIp ?? 'unknown'
          const next = safeNext(form?.get('next'))
          const fresh = preSession()
          const again = (status: number, error: string, extra: Record<string, string> = {}) =>
            page(
              signInPage(
                asset,
                { email: form?.get('email') ?? '', next, csrf: sessions.csrfToken(fresh) },
                { error },
              ),
              status,
              { 'set-cookie': setCookie(SIGN_IN_COOKIE, fresh), ...extra },
            )
          if (!form || !trusted)
            return again(
              403,
              'The sign-in form was too old or did not come from this site. Please try again.',
            )
          // Per client IP, before any password is checked.
          const decision = await deps.limiter.check(`sign-in:${ip}`, deps.signInLimits)
          if (!decision.allowed) {
            const wait = decision.retryAfter
            const error = `Too many sign-in attempts from your address. Try again in ${wait} seconds.`
            return again(429, error, { 'retry-after': String(wait) })
          }
          const r = await sessions.signIn(form.get('email') ?? '', form.get('password') ?? '')
          if (!r.ok) return again(statusOf(r.code), r.message)
          // A session this browser held before ends here rather than idling on.
          await sessions.signOut(readCookie(request, SESSION_COOKIE))
          return redirect(next, [
            setCookie(SESSION_COOKIE, r.value.token),
            clearCookie(SIGN_IN_COOKIE),
          ])
        },
        { postedForm: 'sign-in' },
      )
      .post(
        '/sign-out',
        async ({ request, posted }) => {
          if (!posted.trusted) {
            const back = html`<a href="/dashboard">Back to the dashboard</a>`
            const body = html`<p>Sign-out could not be confirmed. ${back}</p>`
            return page(plainPage(asset, 'Form refused', body), 403)
          }
          await sessions.signOut(readCookie(request, SESSION_COOKIE))
          return redirect(withNotice('/dashboard/sign-in', 'signed-out'), [
            clearCookie(SESSION_COOKIE),
          ])
        },
        { postedForm: 'session' },
      )
  )
}
