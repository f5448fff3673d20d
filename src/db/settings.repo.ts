import { eq } from 'drizzle-orm'
import type { Database } from './client.ts'
import { settings } from './schema.ts'

/** The database's own facts, kept in `settings` (one row per key). */
export function createSettingsRepo(database: Pick<Database, 'db'>) {
  const { db } = database
  return {
    /**
     * The value stored under `key`, storing `value` first when there is none yet (the first
     * writer's value stays).
     */
    async firstOf(key: string, value: string): Promise<string> {
      await db.insert(settings).values({ key, value }).onConflictDoNothing()
      const [row] = await db.select().from(settings).where(eq(settings.key, key))
      return row.value
    },
  }
}
