import { asc, eq, gte, inArray, isNull, lt, notInArray, or, sql } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { instances, transactionActors, transactionEvents, transactions } from '../db/schema.ts'
import type { TransactionRow } from '../modules/transactions/transaction.repo.ts'
import type { MachineColumns } from './projection.ts'

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

/*
 * One transition, one statement. $1 id, $2 expected version, $3-$15 the machine's columns,
 * $16 snapshot (null at a final status: the actor row goes), $17 machine version, $18-$20 the
 * timeline entry, $21-$24 the outbox event (none when $23 is null).
 */
const COMMIT = `WITH t AS (
  UPDATE transactions SET status = $3, token_symbol = $4, token_amount = $5::numeric, blockchain_network = $6, deposit_address = $7,
    required_confirmations = $8::int, amount_received = $9::numeric, transaction_hash = $10, block_number = $11::bigint,
    confirmations = $12::int, confirmed_at = $13::timestamptz, completed_at = $14::timestamptz, updated_at = $15::timestamptz,
    version = version + 1
  WHERE id = $1::uuid AND version = $2::int
  RETURNING id
), a AS (
  UPDATE transaction_actors SET snapshot = $16::jsonb, machine_version = $17::int
  WHERE transaction_id IN (SELECT id FROM t) AND $16::jsonb IS NOT NULL
), d AS (
  DELETE FROM transaction_actors WHERE transaction_id IN (SELECT id FROM t) AND $16::jsonb IS NULL
), e AS (
  INSERT INTO transaction_events (transaction_id, from_status, to_status, cause, details, at)
  SELECT id, $18, $3, $19, $20::jsonb, $15::timestamptz FROM t
), o AS (
  INSERT INTO outbox (transaction_id, project_id, testing_mode, event_type, data, created_at)
  SELECT id, $21, $22::boolean, $23, $24::jsonb, $15::timestamptz FROM t WHERE $23::text IS NOT NULL
)
SELECT count(*)::int AS updated FROM t`

/** Persistence of actors, timeline and outbox; every write that changes a status is atomic. */
export function createLifecycleRepo(database: Database) {
  const db = database.db
  const prepareById = () => db.select().from(transactions).where(eq(transactions.id, sql.placeholder('id'))).prepare('transaction_by_id')
  let byId: ReturnType<typeof prepareById> | null = null

  return {
    /**
     * Commits one transition: the machine's columns of the row (only if the row is still at
     * `expectedVersion`, so a transition computed from a stale snapshot is never applied), the
     * snapshot (or its removal at a final status), the timeline entry and the outbox event.
     * The row is read first (prepared) so the outbox payload is built from the row as it will
     * be; everything is then written by one prepared statement, atomic like any statement.
     * Returns null when another writer got there first.
     */
    async commitTransition(t: {
      transactionId: string
      expectedVersion: number
      patch: MachineColumns
      snapshot: unknown | null
      machineVersion: number
      entry: TimelineEntry
      outbox: (row: TransactionRow) => OutboxEntry | null
    }): Promise<TransactionRow | null> {
      const [current] = await (byId ??= prepareById()).execute({ id: t.transactionId })
      if (!current || current.version !== t.expectedVersion) return null
      const next: TransactionRow = { ...current, ...t.patch, version: current.version + 1 }
      const out = t.outbox(next)
      const iso = (d: Date | null) => (d ? d.toISOString() : null)
      const p = t.patch
      const [{ updated }] = await database.query<{ updated: number }>(COMMIT, [
        t.transactionId, t.expectedVersion, p.status, p.tokenSymbol, p.tokenAmount, p.blockchainNetwork, p.depositAddress, p.requiredConfirmations,
        p.amountReceived, p.transactionHash, p.blockNumber, p.confirmations, iso(p.confirmedAt), iso(p.completedAt), iso(p.updatedAt),
        t.snapshot === null ? null : JSON.stringify(t.snapshot), t.machineVersion, t.entry.fromStatus, t.entry.cause, JSON.stringify(t.entry.details),
        current.projectId, current.testingMode, out?.eventType ?? null, out ? JSON.stringify(out.data) : null,
      ])
      return Number(updated) === 1 ? next : null
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
