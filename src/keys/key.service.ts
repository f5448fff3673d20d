import { and, eq, isNull } from 'drizzle-orm'
import type { ChangeFeed } from '../db/change-feed.ts'
import type { Database } from '../db/client.ts'
import { apiKeys, projects } from '../db/schema.ts'
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

const inScope = (s: ProjectFilter) =>
  and(
    s.projectId ? eq(apiKeys.projectId, s.projectId) : undefined,
    s.mode ? eq(apiKeys.mode, s.mode) : undefined,
  )

const CACHE_MAX = 10_000
/**
 * A safety net only: revocation and project changes evict entries at once through the change feed.
 */
const CACHE_TTL_MS = 5 * 60_000
/** last_used_at is written at most this often per key, off the request path. */
const TOUCH_EVERY_MS = 60_000

export function createKeyService(deps: {
  database: Database
  changes: ChangeFeed
  clock: Clock
  onError?: (e: unknown) => void
}) {
  const { db } = deps.database
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
    const [row] = await db
      .select({ key: apiKeys, project: projects })
      .from(apiKeys)
      .innerJoin(projects, eq(projects.id, apiKeys.projectId))
      .where(and(eq(apiKeys.hash, hash), isNull(apiKeys.revokedAt)))
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
    db.update(apiKeys)
      .set({ lastUsedAt: new Date(now) })
      .where(eq(apiKeys.id, keyId))
      .then(() => {}, deps.onError)
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
      const [project] = await db
        .select({ id: projects.id })
        .from(projects)
        .where(eq(projects.id, input.projectId))
      if (!project) return deny('not_found', `No project ${input.projectId}`)
      const key = generateApiKey(input.mode as Mode)
      const [row] = await db
        .insert(apiKeys)
        .values({
          id: newId('key'),
          projectId: input.projectId,
          name,
          mode: input.mode as Mode,
          hash: hashApiKey(key),
          displayPrefix: displayPrefix(key),
          scopes: [...new Set(scopes)],
        })
        .returning()
      return ok({ record: toRecord(row), key })
    },

    /** Revoked keys answer 401 from the next request on, in every instance. */
    async revoke(keyId: string, scope: ProjectFilter = {}): Promise<Outcome<ApiKeyRecord>> {
      const [row] = await db
        .update(apiKeys)
        .set({ revokedAt: new Date(deps.clock.now()) })
        .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt), inScope(scope)))
        .returning()
      if (!row) {
        const [existing] = await db
          .select()
          .from(apiKeys)
          .where(and(eq(apiKeys.id, keyId), inScope(scope)))
        if (!existing) return deny('not_found', `No API key ${keyId}`)
        return ok(toRecord(existing))
      }
      await deps.changes.publish({ kind: 'key', id: keyId })
      return ok(toRecord(row))
    },

    /**
     * Gone for good (the contract's "delete", docs/integrating/api.md#keys): like a revoked key it
     * answers 401, and it leaves the list.
     */
    async delete(keyId: string, scope: ProjectFilter = {}): Promise<Outcome<{ id: string }>> {
      const [row] = await db
        .delete(apiKeys)
        .where(and(eq(apiKeys.id, keyId), inScope(scope)))
        .returning({ id: apiKeys.id })
      if (!row) return deny('not_found', `No API key ${keyId}`)
      await deps.changes.publish({ kind: 'key', id: keyId })
      return ok({ id: row.id })
    },

    async list(projectId: string, mode?: Mode): Promise<ApiKeyRecord[]> {
      const rows = await db
        .select()
        .from(apiKeys)
        .where(and(eq(apiKeys.projectId, projectId), mode ? eq(apiKeys.mode, mode) : undefined))
        .orderBy(apiKeys.createdAt, apiKeys.id)
      return rows.map(toRecord)
    },
  }
}

function toRecord(r: typeof apiKeys.$inferSelect): ApiKeyRecord {
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
