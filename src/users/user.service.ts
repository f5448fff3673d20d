import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto'
import { newId } from '../lib/ids.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { UsersRepo } from './users.repo.ts'

// scrypt is memory-hard (N=2^15, r=8: 32 MiB per hash) and built into Bun, Deno and Node.
const N = 2 ** 15
const R = 8
const P = 1
const KEYLEN = 32

function derive(password: string, salt: Buffer, n = N, r = R, p = P): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(
      password.normalize('NFKC'),
      salt,
      KEYLEN,
      { N: n, r, p, maxmem: 128 * n * r * 2 },
      (err, key) => (err ? reject(err) : resolve(key)),
    ),
  )
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16)
  const key = await derive(password, salt)
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, salt, hash] = stored.split('$')
  if (alg !== 'scrypt') return false
  const expected = Buffer.from(hash, 'base64')
  const actual = await derive(
    password,
    Buffer.from(salt, 'base64'),
    Number(n),
    Number(r),
    Number(p),
  )
  return actual.length === expected.length && timingSafeEqual(actual, expected)
}

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

/** Dashboard users (sign-in arrives with the dashboard issue); created by the operator's CLI. */
export function createUserService(deps: {
  repo: Pick<UsersRepo, 'projectExists' | 'userByEmail' | 'insertUser' | 'addMember'>
}) {
  const { repo } = deps
  return {
    /** Creates the user, or adds an existing one to another project when the password matches. */
    async create(input: {
      email: string
      password: string
      projectId: string
    }): Promise<Outcome<{ id: string; email: string; projectId: string }>> {
      const email = input.email?.trim().toLowerCase() ?? ''
      const problems = []
      if (!EMAIL_RE.test(email) || email.length > 254)
        problems.push({ path: 'email', message: 'must be a valid e-mail address' })
      if (!input.password || input.password.length < 12 || input.password.length > 256)
        problems.push({ path: 'password', message: 'must be 12 to 256 characters' })
      if (problems.length)
        return deny(
          'invalid_request',
          problems.map((p) => `${p.path} ${p.message}`).join('; '),
          problems,
        )
      if (!(await repo.projectExists(input.projectId)))
        return deny('not_found', `No project ${input.projectId}`)
      const existing = await repo.userByEmail(email)
      let userId: string
      if (existing) {
        if (!(await verifyPassword(input.password, existing.passwordHash)))
          return deny('conflict', `A user ${email} exists with another password`)
        userId = existing.id
      } else {
        userId = newId('usr')
        await repo.insertUser({
          id: userId,
          email,
          passwordHash: await hashPassword(input.password),
        })
      }
      await repo.addMember(userId, input.projectId)
      return ok({ id: userId, email, projectId: input.projectId })
    },
  }
}

export type UserService = ReturnType<typeof createUserService>
