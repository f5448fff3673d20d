/**
 * The dashboard's HTTP plumbing: cookies, form bodies and where a sign-in may send someone.
 * Cookies carry the `__Host-` prefix, so browsers keep them only when they are Secure, for the
 * whole origin and no other domain; SameSite=Strict keeps them off every cross-site request.
 */
export const SESSION_COOKIE = '__Host-cp_session'
/** The sign-in form's pre-session token: its CSRF token is bound to it (login CSRF). */
export const SIGN_IN_COOKIE = '__Host-cp_signin'

/** Form bodies are small; anything larger is refused before it is read. */
const MAX_FORM_BYTES = 16 * 1024

const ATTRIBUTES = 'Path=/; HttpOnly; Secure; SameSite=Strict'

export const setCookie = (name: string, value: string) => `${name}=${value}; ${ATTRIBUTES}`
export const clearCookie = (name: string) => `${name}=; ${ATTRIBUTES}; Max-Age=0`

export function readCookie(request: Request, name: string): string | undefined {
  const header = request.headers.get('cookie')
  if (!header) return undefined
  for (const part of header.split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim() || undefined
  }
  return undefined
}

/** An `application/x-www-form-urlencoded` body, or null for any other kind or size. */
export async function readForm(request: Request): Promise<URLSearchParams | null> {
  const type = request.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase()
  if (type !== 'application/x-www-form-urlencoded') return null
  const declared = Number(request.headers.get('content-length') ?? '0')
  if (declared > MAX_FORM_BYTES) return null
  const text = await request.text()
  if (text.length > MAX_FORM_BYTES) return null
  return new URLSearchParams(text)
}

/**
 * Browsers say where a request comes from (Fetch Metadata); a form posted from another site
 * is refused before its token is even looked at. Clients that send no header are judged by
 * the token alone.
 */
export function fromAnotherSite(request: Request): boolean {
  const site = request.headers.get('sec-fetch-site')
  return site === 'cross-site' || site === 'same-site'
}

/** Where to go after signing in: a dashboard path on this origin, never anywhere else. */
export function safeNext(raw: string | null | undefined): string {
  if (!raw || raw.length > 2000 || !raw.startsWith('/') || /[\\\s]/.test(raw)) return '/dashboard'
  // The browser resolves dot segments (`/dashboard/../x`, `%2e%2e`) and `//host`: only a path
  // that stays exactly what it says is kept.
  const resolved = new URL(raw, 'https://dashboard.invalid')
  if (
    resolved.origin !== 'https://dashboard.invalid' ||
    resolved.pathname + resolved.search !== raw
  )
    return '/dashboard'
  if (resolved.pathname !== '/dashboard' && !resolved.pathname.startsWith('/dashboard/'))
    return '/dashboard'
  if (/\/\/|%2f|%5c|%2e/i.test(raw)) return '/dashboard'
  return raw
}
