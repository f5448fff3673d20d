import { and, eq, isNull } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { apiKeys, projects } from '../db/schema.ts'
import type { ProjectFilter } from '../projects/mode.ts'

export type ApiKeyRow = typeof apiKeys.$inferSelect
export type NewApiKey = Pick<
  typeof apiKeys.$inferInsert,
  'id' | 'projectId' | 'name' | 'mode' | 'hash' | 'displayPrefix' | 'scopes'
>

const inScope = (s: ProjectFilter) =>
  and(
    s.projectId ? eq(apiKeys.projectId, s.projectId) : undefined,
    s.mode ? eq(apiKeys.mode, s.mode) : undefined,
  )

/** The `api_keys` rows: hashed keys, their project, mode and scopes. */
export function createKeyRepo(database: Pick<Database, 'db'>) {
  const { db } = database
  return {
    /** An unrevoked key by its hash, with its project; null for none. */
    async withProject(hash: string) {
      const [row] = await db
        .select({ key: apiKeys, project: projects })
        .from(apiKeys)
        .innerJoin(projects, eq(projects.id, apiKeys.projectId))
        .where(and(eq(apiKeys.hash, hash), isNull(apiKeys.revokedAt)))
      return row ?? null
    },

    async touch(keyId: string, at: Date): Promise<void> {
      await db.update(apiKeys).set({ lastUsedAt: at }).where(eq(apiKeys.id, keyId))
    },

    /** Inserts the key; null when its project does not exist. */
    async insert(key: NewApiKey): Promise<ApiKeyRow | null> {
      const [project] = await db
        .select({ id: projects.id })
        .from(projects)
        .where(eq(projects.id, key.projectId))
      if (!project) return null
      const [row] = await db.insert(apiKeys).values(key).returning()
      return row
    },

    /**
     * Revokes an unrevoked key in scope: the row and whether this call revoked it (false: it was
     * revoked before); null when there is no such key in scope.
     */
    async revoke(
      keyId: string,
      scope: ProjectFilter,
      at: Date,
    ): Promise<{ row: ApiKeyRow; revoked: boolean } | null> {
      const [row] = await db
        .update(apiKeys)
        .set({ revokedAt: at })
        .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt), inScope(scope)))
        .returning()
      if (row) return { row, revoked: true }
      const [existing] = await db
        .select()
        .from(apiKeys)
        .where(and(eq(apiKeys.id, keyId), inScope(scope)))
      return existing ? { row: existing, revoked: false } : null
    },

    /** Deletes a key in scope; false when there is none. */
    async delete(keyId: string, scope: ProjectFilter): Promise<boolean> {
      const rows = await db
        .delete(apiKeys)
        .where(and(eq(apiKeys.id, keyId), inScope(scope)))
        .returning({ id: apiKeys.id })
      return rows.length > 0
    },

    list(projectId: string, mode?: ApiKeyRow['mode']): Promise<ApiKeyRow[]> {
      return db
        .select()
        .from(apiKeys)
        .where(and(eq(apiKeys.projectId, projectId), mode ? eq(apiKeys.mode, mode) : undefined))
        .orderBy(apiKeys.createdAt, apiKeys.id)
    },
  }
}

export type KeyRepo = ReturnType<typeof createKeyRepo>
