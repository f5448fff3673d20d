import { and, eq, sql } from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import { projects, x402PayTo } from '../../db/schema.ts'
import type { Mode, ProjectMode } from '../../projects/mode.ts'

/** Each project's x402 address per mode (docs/decisions/0063-x402.md); lowercase hex. */
export function createPayToRepo(database: Database) {
  const { db } = database
  return {
    async get(scope: ProjectMode): Promise<string | null> {
      const [row] = await db
        .select({ address: x402PayTo.address })
        .from(x402PayTo)
        .where(and(eq(x402PayTo.projectId, scope.projectId), eq(x402PayTo.mode, scope.mode)))
      return row?.address ?? null
    },

    /** Sets it; false when there is no such project. */
    async set(projectId: string, mode: Mode, address: string, at: Date): Promise<boolean> {
      const [project] = await db
        .select({ id: projects.id })
        .from(projects)
        .where(eq(projects.id, projectId))
      if (!project) return false
      await db
        .insert(x402PayTo)
        .values({ projectId, mode, address, updatedAt: at })
        .onConflictDoUpdate({
          target: [x402PayTo.projectId, x402PayTo.mode],
          set: { address: sql`excluded.address`, updatedAt: sql`excluded.updated_at` },
        })
      return true
    },
  }
}
