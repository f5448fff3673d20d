import { sql } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { instances, settings } from '../db/schema.ts'

/** Which instance runs a database's devnet, and where another one finds it. */
export interface DevnetOwner {
  instanceId: string
  rpcUrl: string
  /** The devnet as a NETWORKS_CONFIG file (in the owner's DATA_DIR). */
  networksFile: string
}

const KEY = 'devnet_owner'

/**
 * The devnet of `npm start` is one instance's (docs/operating/instances.md): several instances on
 * one PostgreSQL without NETWORKS_CONFIG would each start a chain of their own, and a payment
 * through one would land on a chain the others never follow. The first claims it in the
 * database; another, while the owner's lease is live, is told where it is.
 */
export function createDevnetOwners(database: Database) {
  return {
    /**
     * The owner, if another instance whose lease is live (at `now`) runs this database's devnet;
     * null when `instanceId` may run it.
     */
    async liveOther(instanceId: string, now: Date): Promise<DevnetOwner | null> {
      const [row] = await database.rows<{ value: string }>(sql`
        SELECT ${settings.value} AS value FROM ${settings}
        WHERE ${settings.key} = ${KEY}
          AND EXISTS (
            SELECT 1 FROM ${instances}
            WHERE ${instances.id} = (${settings.value}::jsonb ->> 'instanceId')
              AND ${instances.id} <> ${instanceId}
              AND ${instances.leaseUntil} >= ${now.toISOString()}::timestamptz
          )`)
      return row ? (JSON.parse(row.value) as DevnetOwner) : null
    },
    /** Records `owner` as running this database's devnet. */
    async claim(owner: DevnetOwner): Promise<void> {
      await database.db
        .insert(settings)
        .values({ key: KEY, value: JSON.stringify(owner) })
        .onConflictDoUpdate({ target: settings.key, set: { value: JSON.stringify(owner) } })
    },
  }
}
