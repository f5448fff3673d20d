import { eq } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { projects } from '../db/schema.ts'

export type ProjectRow = typeof projects.$inferSelect

/** The `projects` rows: each merchant's project, its status, limits and IP allow-list. */
export function createProjectRepo(database: Pick<Database, 'db'>) {
  const { db } = database
  return {
    async insert(id: string, name: string): Promise<ProjectRow> {
      const [row] = await db.insert(projects).values({ id, name }).returning()
      return row
    },

    async find(id: string): Promise<ProjectRow | null> {
      const [row] = await db.select().from(projects).where(eq(projects.id, id))
      return row ?? null
    },

    /** Changes the given columns; null when there is no such project. */
    async update(id: string, values: Partial<ProjectRow>, at: Date): Promise<ProjectRow | null> {
      const [row] = await db
        .update(projects)
        .set({ ...values, updatedAt: at })
        .where(eq(projects.id, id))
        .returning()
      return row ?? null
    },

    /** The id of the project created first; null when there is none. */
    async first(): Promise<string | null> {
      const [row] = await db
        .select({ id: projects.id })
        .from(projects)
        .orderBy(projects.createdAt)
        .limit(1)
      return row?.id ?? null
    },
  }
}

export type ProjectRepo = ReturnType<typeof createProjectRepo>
