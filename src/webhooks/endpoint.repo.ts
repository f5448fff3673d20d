import { and, asc, eq, isNotNull, isNull } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { projects, webhookEndpoints } from '../db/schema.ts'
import type { Mode, ProjectFilter } from '../projects/mode.ts'

export type EndpointRow = typeof webhookEndpoints.$inferSelect
export type EndpointPatch = Partial<typeof webhookEndpoints.$inferInsert>

const inScope = (id: string, s: ProjectFilter) =>
  and(
    eq(webhookEndpoints.id, id),
    s.projectId ? eq(webhookEndpoints.projectId, s.projectId) : undefined,
    s.mode ? eq(webhookEndpoints.mode, s.mode) : undefined,
  )

/** The `webhook_endpoints` rows: where a project's webhooks go, their sealed secrets and health. */
export function createEndpointRepo(database: Pick<Database, 'db'>) {
  const { db } = database
  return {
    async find(id: string, scope: ProjectFilter): Promise<EndpointRow | null> {
      const [r] = await db.select().from(webhookEndpoints).where(inScope(id, scope))
      return r ?? null
    },

    /** Changes the given columns of an endpoint in scope; null when there is none. */
    async update(
      id: string,
      scope: ProjectFilter,
      patch: EndpointPatch,
    ): Promise<EndpointRow | null> {
      const [r] = await db.update(webhookEndpoints).set(patch).where(inScope(id, scope)).returning()
      return r ?? null
    },

    async projectExists(id: string): Promise<boolean> {
      const [row] = await db.select({ id: projects.id }).from(projects).where(eq(projects.id, id))
      return row !== undefined
    },

    /** How many endpoints a project has in a mode. */
    count: (projectId: string, mode: Mode): Promise<number> =>
      db.$count(
        webhookEndpoints,
        and(eq(webhookEndpoints.projectId, projectId), eq(webhookEndpoints.mode, mode)),
      ),

    async insert(row: typeof webhookEndpoints.$inferInsert): Promise<EndpointRow> {
      const [r] = await db.insert(webhookEndpoints).values(row).returning()
      return r
    },

    list: (projectId: string, mode?: Mode): Promise<EndpointRow[]> =>
      db
        .select()
        .from(webhookEndpoints)
        .where(
          and(
            eq(webhookEndpoints.projectId, projectId),
            mode ? eq(webhookEndpoints.mode, mode) : undefined,
          ),
        )
        .orderBy(asc(webhookEndpoints.createdAt), asc(webhookEndpoints.id)),

    /** What the sender reads of an endpoint (its secret still sealed); null once deleted. */
    async forSending(id: string) {
      const [r] = await db
        .select({
          url: webhookEndpoints.url,
          mode: webhookEndpoints.mode,
          format: webhookEndpoints.format,
          secretSealed: webhookEndpoints.secretSealed,
          enabled: webhookEndpoints.enabled,
          failingSince: webhookEndpoints.failingSince,
        })
        .from(webhookEndpoints)
        .where(eq(webhookEndpoints.id, id))
      return r ?? null
    },

    /** Starts the failure streak unless it runs; whether it started now. */
    async markFailing(id: string, at: Date): Promise<boolean> {
      const rows = await db
        .update(webhookEndpoints)
        .set({ failingSince: at })
        .where(and(eq(webhookEndpoints.id, id), isNull(webhookEndpoints.failingSince)))
        .returning({ id: webhookEndpoints.id })
      return rows.length > 0
    },

    /** Ends the failure streak; whether one ran. */
    async markAnswering(id: string): Promise<boolean> {
      const rows = await db
        .update(webhookEndpoints)
        .set({ failingSince: null })
        .where(and(eq(webhookEndpoints.id, id), isNotNull(webhookEndpoints.failingSince)))
        .returning({ id: webhookEndpoints.id })
      return rows.length > 0
    },

    /** Disables an enabled endpoint; null when it was not enabled. */
    async disableEnabled(
      id: string,
      reason: 'gone' | 'failing',
      at: Date,
    ): Promise<EndpointRow | null> {
      const [r] = await db
        .update(webhookEndpoints)
        .set({ enabled: false, disabledReason: reason, disabledAt: at, updatedAt: at })
        .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.enabled, true)))
        .returning()
      return r ?? null
    },
  }
}

export type EndpointRepo = ReturnType<typeof createEndpointRepo>
