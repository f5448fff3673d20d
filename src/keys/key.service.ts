import type { ChangeFeed } from '../db/change-feed.ts'
import type { Clock } from '../lib/clock.ts'
import { newId } from '../lib/ids.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { ProjectStatus, RateLimits } from '../projects/project.service.ts'
import type { Mode, ProjectFilter } from '../projects/mode.ts'
import {
  DEFAULT_SCOPES,
  displayPrefix,
  generateApiKey,
  hashApiKey,
  looksLikeApiKey,
  SCOPES,
  type Scope,
} from './api-key.ts'
import type { ApiKeyRow, KeyRepo } from './key.repo.ts'

/** Who is calling: a live, unrevoked key and what its project allows. */
export interface Principal {
  keyId: string
  projectId: string
  mode: Mode
  scopes: readonly Scope[]
  project: { status: ProjectStatus; limits: RateLimits; ipAllowlist: readonly string[] }
}

export interface ApiKeyRecord {
  id: string
  projectId: string
  name: string
  mode: Mode
  displayPrefix: string
  scopes: Scope[]
  createdAt: Date
  lastUsedAt: Date | null
  revokedAt: Date | null
}

const CACHE_MAX = 10_000
/**
 * A safety net only: revocation and project changes evict entries at once through the change feed.
 */
const CACHE_TTL_MS = 5 * 60_000
/** last_used_at is written at most this often per key, off the request path. */
const TOUCH_EVERY_MS = 60_000

export function createKeyService(deps: {
  repo: KeyRepo
  changes: ChangeFeed
  clock: Clock
  onError?: (e: unknown) => void
}) {
  const { repo } = deps
  const cache = new Map<string, { principal: Principal; at: number }>()
  const touched = new Map<string, number>()
  // Bumped by every change: a lookup that was in flight across a change is not cached, so a
  // key revoked while it was being read cannot live on in the cache.
  let generation = 0

  deps.changes.subscribe((c) => {
    generation++
    if (c.kind === 'all') return cache.clear()
    for (const [hash, entry] of cache) {
      if (
        (c.kind === 'key' && entry.principal.keyId === c.id) ||
        (c.kind === 'project' && entry.principal.projectId === c.id)
      )
        cache.delete(hash)
    }
  })

  async function load(hash: string): Promise<Principal | null> {
    const row = await repo.withProject(hash)
    if (!row) return null
    return {
      keyId: row.key.id,
      projectId: row.key.projectId,
      mode: row.key.mode,
      scopes: row.key.scopes as Scope[],
      project: {
        status: row.project.status,
        limits: {
          minute: row.project.rateLimitMinute,
          hour: row.project.rateLimitHour,
          day: row.project.rateLimitDay,
        },
        ipAllowlist: row.project.ipAllowlist,
      },
    }
  }

  function touch(keyId: string) {
    const now = deps.clock.now()
    if (now - (touched.get(keyId) ?? 0) < TOUCH_EVERY_MS) return
    touched.set(keyId, now)
    repo.touch(keyId, new Date(now)).then(() => {}, deps.onError)
  }

  return {
    /** Resolves a bearer token to its principal; null for a malformed, unknown or revoked key. */
    async authenticate(token: string): Promise<Principal | null> {
      if (!looksLikeApiKey(token)) return null
      const hash = hashApiKey(token)
      const now = deps.clock.now()
      const hit = cache.get(hash)
      let principal = hit && now - hit.at < CACHE_TTL_MS ? hit.principal : null
      if (!principal) {
        const seen = generation
        principal = await load(hash)
        if (!principal) return null
        if (seen === generation) {
          if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!)
          cache.set(hash, { principal, at: now })
        }
      }
      touch(principal.keyId)
      return principal
    },

    /**
     * Creates a key; the plaintext is in the result and nowhere else, ever
     * (docs/decisions/0022-api-keys-and-scopes.md).
     */
    async create(input: {
      projectId: string
      mode: string
      name: string
      scopes?: string[]
    }): Promise<Outcome<{ record: ApiKeyRecord; key: string }>> {
      const problems = []
      if (input.mode !== 'test' && input.mode !== 'live')
        problems.push({ path: 'mode', message: 'must be test or live' })
      const name = input.name?.trim() ?? ''
      if (!name || name.length > 100)
        problems.push({ path: 'name', message: 'must be 1 to 100 characters' })
      const scopes = input.scopes ?? [...DEFAULT_SCOPES]
      const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s))
      if (unknown.length)
        problems.push({
          path: 'scopes',
          message: `unknown scope ${unknown.join(', ')}; known: ${SCOPES.join(', ')}`,
        })
      if (scopes.length === 0)
        problems.push({ path: 'scopes', message: 'must name at least one scope' })
      if (problems.length)
        return deny(
          'invalid_request',
          problems.map((p) => `${p.path} ${p.message}`).join('; '),
          problems,
        )
      const key = generateApiKey(input.mode as Mode)
      const row = await repo.insert({
        id: newId('key'),
        projectId: input.projectId,
        name,
        mode: input.mode as Mode,
        hash: hashApiKey(key),
        displayPrefix: displayPrefix(key),
        scopes: [...new Set(scopes)],
      })
      if (!row) return deny('not_found', `No project ${input.projectId}`)
      return ok({ record: toRecord(row), key })
    },

    /** Revoked keys answer 401 from the next request on, in every instance. */
    async revoke(keyId: string, scope: ProjectFilter = {}): Promise<Outcome<ApiKeyRecord>> {
      const r = await repo.revoke(keyId, scope, new Date(deps.clock.now()))
      if (!r) return deny('not_found', `No API key ${keyId}`)
      if (r.revoked) await deps.changes.publish({ kind: 'key', id: keyId })
      return ok(toRecord(r.row))
    },

    /**
     * Gone for good (the contract's "delete", docs/integrating/api.md#keys): like a revoked key it
     * answers 401, and it leaves the list.
     */
    async delete(keyId: string, scope: ProjectFilter = {}): Promise<Outcome<{ id: string }>> {
      if (!(await repo.delete(keyId, scope))) return deny('not_found', `No API key ${keyId}`)
      await deps.changes.publish({ kind: 'key', id: keyId })
      return ok({ id: keyId })
    },

    async list(projectId: string, mode?: Mode): Promise<ApiKeyRecord[]> {
      return (await repo.list(projectId, mode)).map(toRecord)
    },
  }
}

function toRecord(r: ApiKeyRow): ApiKeyRecord {
  return {
    id: r.id,
    projectId: r.projectId,
    name: r.name,
    mode: r.mode,
    displayPrefix: r.displayPrefix,
    scopes: r.scopes as Scope[],
    createdAt: r.createdAt,
    lastUsedAt: r.lastUsedAt,
    revokedAt: r.revokedAt,
  }
}

export type KeyService = ReturnType<typeof createKeyService>
