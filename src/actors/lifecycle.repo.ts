import { and, asc, eq, gte, inArray, isNull, lt, notInArray, or, sql } from 'drizzle-orm'
import type { Db } from '../db/client.ts'
import { instances, outbox, transactionActors, transactionEvents, transactions } from '../db/schema.ts'
import type { NewTransactionRow, TransactionRow } from '../modules/transactions/transaction.repo.ts'

export interface TimelineEntry {
  fromStatus: string | null
  toStatus: string
  cause: string
  details: Record<string, unknown>
  at: Date
}

export interface OutboxEntry {
  eventType: string
  data: Record<string, unknown>
}

export interface StoredActor {
  transactionId: string
  /** The persisted snapshot, parsed or as JSON text. */
  snapshot: unknown
  machineVersion: number
  version: number
  owner: string | null
}

/** Persistence of actors, timeline and outbox; every write that changes a status is atomic. */
export function createLifecycleRepo(db: Db) {
  async function writeEffects(tx: Db, row: TransactionRow, entry: TimelineEntry, out: OutboxEntry | null) {
    await tx.insert(transactionEvents).values({ transactionId: row.id, ...entry })
    if (out) await tx.insert(outbox).values({ transactionId: row.id, projectId: row.projectId, testingMode: row.testingMode, eventType: out.eventType, data: out.data, createdAt: entry.at })
  }

  return {
    /** The actor, timeline and outbox rows of a new transaction, in the caller's database transaction. */
    async recordCreated(row: TransactionRow, a: { snapshot: unknown; machineVersion: number; owner: string }, entry: TimelineEntry, out: OutboxEntry) {
      await db.insert(transactionActors).values({ transactionId: row.id, snapshot: a.snapshot, machineVersion: a.machineVersion, expiresAt: row.expiresAt, owner: a.owner })
      await writeEffects(db, row, entry, out)
    },

    /**
     * Commits one transition: the row (only if it is still at `expectedVersion`, so a transition
     * computed from a stale snapshot is never applied), the snapshot (or its removal at a final
     * status), the timeline entry and the outbox event, in one database transaction.
     * Returns null when another writer got there first.
     */
    commitTransition(t: {
      transactionId: string
      expectedVersion: number
      patch: Partial<NewTransactionRow>
      snapshot: unknown | null
      machineVersion: number
      entry: TimelineEntry
      outbox: (row: TransactionRow) => OutboxEntry | null
    }): Promise<TransactionRow | null> {
      return db.transaction(async (txRaw) => {
        const tx = txRaw as unknown as Db
        const [row] = await tx
          .update(transactions)
          .set({ ...t.patch, version: sql`${transactions.version} + 1` })
          .where(and(eq(transactions.id, t.transactionId), eq(transactions.version, t.expectedVersion)))
          .returning()
        if (!row) return null
        if (t.snapshot === null) await tx.delete(transactionActors).where(eq(transactionActors.transactionId, t.transactionId))
        else await tx.update(transactionActors).set({ snapshot: t.snapshot, machineVersion: t.machineVersion }).where(eq(transactionActors.transactionId, t.transactionId))
        await writeEffects(tx, row, t.entry, t.outbox(row))
        return row
      })
    },

    /** The stored actor of an active transaction, or null once it is final. */
    async load(transactionId: string): Promise<StoredActor | null> {
      const [r] = await db
        .select({ transactionId: transactionActors.transactionId, snapshot: transactionActors.snapshot, machineVersion: transactionActors.machineVersion, version: transactions.version, owner: transactionActors.owner })
        .from(transactionActors)
        .innerJoin(transactions, eq(transactions.id, transactionActors.transactionId))
        .where(eq(transactionActors.transactionId, transactionId))
      return r ?? null
    },

    async timeline(transactionId: string) {
      return db.select().from(transactionEvents).where(eq(transactionEvents.transactionId, transactionId)).orderBy(asc(transactionEvents.id))
    },

    /** Extends this instance's lease, which covers every actor it runs: one row, however many. */
    async renew(owner: string, until: Date, now: Date) {
      await db.insert(instances).values({ id: owner, leaseUntil: until, startedAt: now }).onConflictDoUpdate({ target: instances.id, set: { leaseUntil: until } })
    },

    /** The actors this instance is recorded as running (to notice any taken over meanwhile). */
    async owned(owner: string): Promise<Set<string>> {
      const rows = await db.select({ id: transactionActors.transactionId }).from(transactionActors).where(eq(transactionActors.owner, owner))
      return new Set(rows.map((r) => r.id))
    },

    /**
     * Takes over up to `limit` actors whose instance's lease has ended (it died) or that nobody
     * runs; `all` takes every actor not already ours (a single-instance embedded database).
     */
    async claim(owner: string, now: Date, limit: number, all = false): Promise<StoredActor[]> {
      const live = db.select({ id: instances.id }).from(instances).where(gte(instances.leaseUntil, now))
      const free = all ? sql`${transactionActors.owner} is distinct from ${owner}` : or(isNull(transactionActors.owner), notInArray(transactionActors.owner, live))
      const candidates = db.select({ id: transactionActors.transactionId }).from(transactionActors).where(free).limit(limit).for('update', { skipLocked: true })
      const claimed = await db.update(transactionActors).set({ owner }).where(inArray(transactionActors.transactionId, candidates)).returning({ id: transactionActors.transactionId })
      if (!claimed.length) return []
      // The snapshot as text: resident copies are kept as JSON text, so no parse and re-stringify.
      return db
        .select({ transactionId: transactionActors.transactionId, snapshot: sql<string>`${transactionActors.snapshot}::text`, machineVersion: transactionActors.machineVersion, version: transactions.version, owner: transactionActors.owner })
        .from(transactionActors)
        .innerJoin(transactions, eq(transactions.id, transactionActors.transactionId))
        .where(inArray(transactionActors.transactionId, claimed.map((c) => c.id)))
    },

    /** Forgets instances whose lease ended long ago. */
    async pruneInstances(before: Date) {
      await db.delete(instances).where(lt(instances.leaseUntil, before))
    },

    /** Lets other instances take this instance's actors at once (graceful shutdown). */
    async release(owner: string) {
      await db.update(transactionActors).set({ owner: null }).where(eq(transactionActors.owner, owner))
      await db.delete(instances).where(eq(instances.id, owner))
    },
  }
}

export type LifecycleRepo = ReturnType<typeof createLifecycleRepo>
