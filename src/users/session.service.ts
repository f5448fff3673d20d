import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Clock } from '../lib/clock.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { UserRow, UsersRepo } from './users.repo.ts'
import { hashPassword, verifyPassword } from './user.service.ts'

/** A session ends after this long without a request... */
export const SESSION_IDLE_MS = 30 * 60_000
/** ...and this long after sign-in, however active it is. */
export const SESSION_ABSOLUTE_MS = 12 * 3_600_000
/** Wrong passwords in a row that lock an account, and for how long. */
export const MAX_FAILED_SIGN_INS = 5
export const LOCK_MS = 15 * 60_000
/** last_seen_at is written at most this often, so idle expiry is exact to within it. */
const TOUCH_EVERY_MS = 60_000

export interface SessionUser {
  userId: string
  email: string
  /** When the session ends unless used again (idle), never later than its absolute end. */
  expiresAt: Date
}

export interface Membership {
  id: string
  name: string
  status: 'active' | 'inactive'
}

/** The one answer to a failed sign-in, whatever the reason. */
const WRONG = deny(
  'unauthenticated',
  `The e-mail address or the password is wrong. After ${MAX_FAILED_SIGN_INS} wrong passwords in a row an account is locked for ${LOCK_MS / 60_000} minutes.`,
)

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex')

/**
 * Dashboard sign-in (docs/decisions/0036-dashboard-sign-in-and-sessions.md): password check with
 * account lock-out, server-side sessions with idle and absolute expiry, CSRF tokens bound to the
 * session, and project membership. Nothing here knows about cookies or forms: the dashboard
 * controller carries the tokens.
 */
export function createSessionService(deps: { repo: UsersRepo; clock: Clock; secretKey: Buffer }) {
  const { repo } = deps
  const now = () => new Date(deps.clock.now())
  const csrfKey = createHmac('sha256', deps.secretKey).update('dashboard csrf').digest()
  // The hash unknown e-mails and locked accounts are checked against. Made on first need: the
  // CLI builds these services too and never signs anyone in.
  let decoy: Promise<string> | null = null

  /**
   * The password check every sign-in and re-entry goes through: a locked account is refused
   * whatever the password, wrong passwords count towards the lock, a right one clears the count.
   */
  async function checkPassword(
    user: UserRow | undefined,
    password: string,
  ): Promise<Outcome<UserRow>> {
    const at = now()
    // Unknown e-mails and locked accounts cost a hash too and get the same answer as a wrong
    // password: neither the time taken nor the reply tells which accounts exist or are locked.
    if (!user || (user.lockedUntil && user.lockedUntil > at)) {
      await verifyPassword(
        password,
        await (decoy ??= hashPassword(randomBytes(16).toString('hex'))),
      )
      return WRONG
    }
    if (await verifyPassword(password, user.passwordHash)) {
      if (user.failedSignIns > 0 || user.lockedUntil) await repo.clearFailedSignIns(user.id)
      return ok(user)
    }
    await repo.countFailedSignIn(user.id, MAX_FAILED_SIGN_INS, new Date(at.getTime() + LOCK_MS))
    return WRONG
  }

  const csrfFor = (token: string) => createHmac('sha256', csrfKey).update(token).digest('base64url')

  return {
    /** A new session for the right e-mail and password; the token is for the cookie only. */
    async signIn(
      email: string,
      password: string,
    ): Promise<Outcome<{ token: string; user: SessionUser }>> {
      const normalized = email.trim().toLowerCase()
      if (!normalized || !password || password.length > 256 || normalized.length > 254) return WRONG
      const checked = await checkPassword(await repo.userByEmail(normalized), password)
      if (!checked.ok) return checked
      const token = randomBytes(32).toString('base64url')
      const at = now()
      const expiresAt = new Date(at.getTime() + SESSION_ABSOLUTE_MS)
      await repo.insertSession({
        tokenHash: sha256(token),
        userId: checked.value.id,
        createdAt: at,
        lastSeenAt: at,
        expiresAt,
      })
      // Sessions nobody can use any more go when someone signs in, so the table stays small.
      await repo.deleteExpiredSessions(at, new Date(at.getTime() - SESSION_IDLE_MS))
      return ok({
        token,
        user: {
          userId: checked.value.id,
          email: checked.value.email,
          expiresAt: new Date(Math.min(expiresAt.getTime(), at.getTime() + SESSION_IDLE_MS)),
        },
      })
    },

    /**
     * The signed-in user of a session token; null once it is unknown, idle too long or past its
     * end.
     */
    async authenticate(token: string | undefined): Promise<SessionUser | null> {
      if (!token || token.length > 100) return null
      const at = now()
      const row = await repo.sessionByTokenHash(sha256(token))
      if (!row) return null
      const idleEnd = row.s.lastSeenAt.getTime() + SESSION_IDLE_MS
      if (at.getTime() >= idleEnd || at >= row.s.expiresAt) {
        await repo.deleteSession(row.s.tokenHash)
        return null
      }
      if (at.getTime() - row.s.lastSeenAt.getTime() >= TOUCH_EVERY_MS) {
        await repo.touchSession(row.s.tokenHash, at)
      }
      return {
        userId: row.s.userId,
        email: row.email,
        expiresAt: new Date(Math.min(row.s.expiresAt.getTime(), at.getTime() + SESSION_IDLE_MS)),
      }
    },

    async signOut(token: string | undefined): Promise<void> {
      if (token) await repo.deleteSession(sha256(token))
    },

    /**
     * Re-entering the password before something sensitive (revealing a secret); counts towards the
     * lock.
     */
    async confirmPassword(userId: string, password: string): Promise<Outcome<true>> {
      const checked = await checkPassword(await repo.userById(userId), password ?? '')
      if (!checked.ok)
        return deny(
          'unauthenticated',
          `The password is wrong, or this account is locked after ${MAX_FAILED_SIGN_INS} wrong passwords in a row (for ${LOCK_MS / 60_000} minutes)`,
        )
      return ok(true)
    },

    /**
     * The CSRF token of a session (or of a sign-in form's pre-session token): an HMAC of it, so
     * nothing is stored, and a page of one session is useless to another.
     */
    csrfToken: csrfFor,

    checkCsrf(token: string | undefined, given: string | undefined): boolean {
      if (!token || !given) return false
      const expected = Buffer.from(csrfFor(token))
      const actual = Buffer.from(given)
      return expected.length === actual.length && timingSafeEqual(expected, actual)
    },

    /** The projects a user belongs to, by name. */
    projectsOf: (userId: string): Promise<Membership[]> => repo.projectsOf(userId),
  }
}

export type SessionService = ReturnType<typeof createSessionService>
