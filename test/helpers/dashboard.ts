import type { TestServer } from './server.ts'

/** The text of an attribute value or element content as a browser reads it. */
export const unescapeHtml = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')

/** The first CSRF token in a page's forms. */
export function csrfOf(page: string): string {
  const m = /name="csrf" value="([^"]*)"/.exec(page)
  if (!m) throw new Error('no CSRF field in the page')
  return unescapeHtml(m[1]!)
}

/** The value shown once after creating a key or endpoint, or revealing a secret. */
export function revealedValue(page: string): string | null {
  const m = /id="revealed-value">([^<]*)</.exec(page)
  return m ? unescapeHtml(m[1]!) : null
}

export interface DashboardResponse {
  status: number
  headers: Headers
  text: string
  /** Where a redirect points, relative to the server. */
  location: string | null
}

/**
 * A browser-like dashboard client over HTTP: keeps its cookies, follows nothing by itself, and
 * posts forms the way a page of the dashboard does (urlencoded, with the page's CSRF token).
 */
export function dashboardClient(t: Pick<TestServer, 'fetch' | 'url'>) {
  const jar = new Map<string, string>()
  const cookieHeader = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ')

  async function send(path: string, init: RequestInit = {}): Promise<DashboardResponse> {
    const headers = new Headers(init.headers)
    if (jar.size && !headers.has('cookie')) headers.set('cookie', cookieHeader())
    const res = await t.fetch(path, { ...init, headers })
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';')
      const eq = pair!.indexOf('=')
      const name = pair!.slice(0, eq)
      const value = pair!.slice(eq + 1)
      if (value === '' || /max-age=0/i.test(c)) jar.delete(name)
      else jar.set(name, value)
    }
    const location = res.headers.get('location')
    return {
      status: res.status,
      headers: res.headers,
      text: await res.text(),
      location: location ? location.replace(t.url, '') : null,
    }
  }

  const client = {
    jar,
    get: (path: string, headers: Record<string, string> = {}) => send(path, { headers }),
    /** Posts `fields` (and the CSRF token unless given) as a form. */
    post(
      path: string,
      fields: Record<string, string | string[]>,
      opts: { csrf?: string | null; headers?: Record<string, string> } = {},
    ) {
      const body = new URLSearchParams()
      for (const [k, v] of Object.entries(fields)) for (const one of [v].flat()) body.append(k, one)
      if (opts.csrf !== null && !('csrf' in fields))
        body.set('csrf', opts.csrf ?? client.csrf ?? '')
      return send(path, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...opts.headers },
        body,
      })
    },
    /** The CSRF token of the last signed-in page read with `page`. */
    csrf: null as string | null,
    /** GET that expects a page and remembers its CSRF token. */
    async page(path: string) {
      const r = await send(path)
      if (r.status === 200 && /name="csrf"/.test(r.text)) client.csrf = csrfOf(r.text)
      return r
    },
    async signIn(email: string, password: string): Promise<DashboardResponse> {
      const form = await send('/dashboard/sign-in')
      return client.post('/dashboard/sign-in', { email, password }, { csrf: csrfOf(form.text) })
    },
  }
  return client
}

/** A project member who can sign in: the project, its test key and the user's credentials. */
export async function memberOf(
  t: TestServer,
  opts: { email?: string; password?: string; projectName?: string } = {},
) {
  const project = await t.project({ name: opts.projectName ?? 'Dashboard shop' })
  const email = opts.email ?? `owner-${project.id.slice(-6).toLowerCase()}@example.com`
  const password = opts.password ?? 'correct horse battery staple'
  const user = await t.server.services.users.create({ email, password, projectId: project.id })
  if (!user.ok) throw new Error(user.message)
  return { project, email, password, userId: user.value.id }
}
