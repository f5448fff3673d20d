import { eq, lt, sql } from 'drizzle-orm'
import type { Db } from '../db/client.ts'
import { instances } from '../db/schema.ts'

/**
 * The ids of instances whose lease has not ended at `now` (an ISO string or a placeholder), as a
 * subquery.
 */
export const liveInstances = (now: ReturnType<typeof sql.placeholder> | string) =>
  sql`SELECT ${instances.id} FROM ${instances} WHERE ${instances.leaseUntil} >= ${now}::timestamptz`

/** The `instances` rows: one lease per running server, covering every actor it runs. */
export function createInstanceRepo(db: Db) {
  const renew = db
    .insert(instances)
    .values({
      id: sql.placeholder('id'),
      leaseUntil: sql`${sql.placeholder('until')}::timestamptz`,
      startedAt: sql`${sql.placeholder('now')}::timestamptz`,
    })
    .onConflictDoUpdate({ target: instances.id, set: { leaseUntil: sql`excluded.lease_until` } })
    .prepare('instance_renew')
  return {
    /** Extends this instance's lease: one row, however many actors it runs. */
    async renew(id: string, until: Date, now: Date) {
      await renew.execute({ id, until: until.toISOString(), now: now.toISOString() })
    },
    /** Forgets instances whose lease ended long ago. */
    async prune(before: Date) {
      await db.delete(instances).where(lt(instances.leaseUntil, before))
    },
    async remove(id: string) {
      await db.delete(instances).where(eq(instances.id, id))
    },
  }
}

export type InstanceRepo = ReturnType<typeof createInstanceRepo>
