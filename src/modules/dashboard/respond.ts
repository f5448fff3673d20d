/**
 * How the dashboard answers: a page with its security headers, a redirect after a form, the
 * notice a redirect carries, and the pages for what is missing or refused.
 */
import { ERRORS } from '../../http/errors.ts'
import { html } from '../../lib/html.ts'
import type { Denial } from '../../lib/outcome.ts'
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

/** The status the API gives a denial (docs/decisions/0004-one-error-table.md's one table). */
export const statusOf = (code: Denial['code']) => ERRORS[code].status

export const page = (body: string, status = 200, extra: Record<string, string> = {}) =>
  new Response(body, { status, headers: { ...DASHBOARD_HEADERS, ...extra } })

export function redirect(location: string, cookies: string[] = []): Response {
  const headers = new Headers({ location, 'cache-control': 'no-store' })
  for (const c of cookies) headers.append('set-cookie', c)
  return new Response(null, { status: 303, headers })
}

export const withNotice = (path: string, notice: Notice) =>
  `${path}${path.includes('?') ? '&' : '?'}notice=${notice}`

/** The fixed text a redirect's `?notice=` names, or null. */
export const noticeOf = (search: URLSearchParams) => {
  const n = search.get('notice')
  return isNotice(n) ? NOTICES[n] : null
}

/** The 404 page of a dashboard path: for an unknown route, project, mode or record alike. */
export function dashboardNotFound(asset: AssetUrl): Response {
  const body = html`<p>There is nothing here. <a href="/dashboard">Go to the dashboard</a></p>`
  return page(plainPage(asset, 'Not found', body), 404)
}

/**
 * A request refused before any page could handle it (a form or query the database cannot
 * store, no Host).
 */
export function dashboardRefused(asset: AssetUrl, status: number, message: string): Response {
  const body = html`${alert('error', message)}<p><a href="/dashboard">Go to the dashboard</a></p>`
  return page(plainPage(asset, 'Request refused', body), status)
}

/** Not found inside a signed-in project and mode: the page keeps its frame. */
export function notFoundPage(f: Frame): Response {
  const back = html`<a href="${base(f)}">Back to the overview</a>`
  const body = html`<p>There is nothing here in ${f.mode} mode. ${back}</p>`
  return page(layout(f, 'overview', 'Not found', body), 404)
}

/** A denial as a page in the frame, with the status the API would give. */
export function denied(f: Frame, section: Section, d: Denial): Response {
  if (d.code === 'not_found') return notFoundPage(f)
  const body = html`<p><a href="${base(f)}">Back to the overview</a></p>`
  return page(
    layout(f, section, 'Something went wrong', body, { error: d.message }),
    statusOf(d.code),
  )
}
