import { and, count, eq, like, lt, sql, type SQL } from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import { idempotencyKeys, transactions } from '../../db/schema.ts'
import type { LifecycleRepo } from '../../actors/lifecycle.repo.ts'
import type { Mode } from '../../keys/api-key.ts'
import { UUID_RE } from '../../lib/ids.ts'

export type TransactionRow = typeof transactions.$inferSelect
export type NewTransactionRow = typeof transactions.$inferInsert

export interface Scope {
  projectId: string
  testingMode: boolean
}

const inScope = (s: Scope, ...more: (SQL | undefined)[]) =>
  and(eq(transactions.projectId, s.projectId), eq(transactions.testingMode, s.testingMode), ...more)

/** Everything a new transaction writes, committed by one statement (see CREATE below). */
export interface NewTransaction {
  row: TransactionRow
  actor: { snapshot: unknown; machineVersion: number; owner: string }
  timelineDetails: Record<string, unknown>
  /** The `transaction.created` event's webhook data. */
  eventData: Record<string, unknown>
  /** With an Idempotency-Key: the response to record, and from when an old record may be reused. */
  idempotency?: { mode: Mode; key: string; requestHash: string; statusCode: number; response: string; expiredBefore: Date }
}

export interface TransactionRepo {
  /** Actor, timeline and outbox persistence after creation (the registry's own repo). */
  lifecycle: LifecycleRepo
  /**
   * Inserts a transaction with its actor, first timeline entry and outbox event, atomically.
   * With an idempotency key, only if the key is unused (or expired). Nothing is written unless
   * the answer is `created`.
   */
  insertCreated(n: NewTransaction): Promise<'created' | 'key_taken' | 'number_taken'>
  find(scope: Scope, id: string): Promise<TransactionRow | null>
  /** Newest first; `orderIdPrefix` finds the merchant's order ids starting with it. */
  page(scope: Scope, filter: { status?: string; orderIdPrefix?: string; limit: number; offset: number }): Promise<{ rows: TransactionRow[]; total: number }>
  idempotencyRecord(k: { projectId: string; mode: Mode; key: string }): Promise<typeof idempotencyKeys.$inferSelect | null>
  pruneIdempotencyKeys(before: Date): Promise<void>
}

const ph = (name: string) => sql.placeholder(name)

/*
 * Creation is one prepared statement of data-modifying CTEs, atomic like any statement: the
 * row, its actor, its first timeline entry and its outbox event (issue 3), and with an
 * Idempotency-Key the key's record holding the response (R6). The transaction rows are
 * inserted only if the key was claimed; a concurrent claim of the same key waits on the key's
 * unique index until the first commits, then claims nothing. Five unprepared statements in a
 * transaction measured ~3.4 ms per create; this is one round trip.
 */
const CREATE_ROWS = (guard: string) => `
t AS (
  INSERT INTO transactions (id, project_id, testing_mode, transaction_number, status, amount_usd, currency, order_id, order_description,
    customer_email, customer_name, customer_ip_address, metadata, success_url, cancel_url, expires_at, created_at, updated_at, version)
  SELECT $1::uuid, $2, $3::boolean, $4, $5, $6::numeric, $7, $8, $9, $10, $11, $12, $13::jsonb, $14, $15, $16::timestamptz, $17::timestamptz, $17::timestamptz, 0
  ${guard}
  RETURNING id
), a AS (
  INSERT INTO transaction_actors (transaction_id, snapshot, machine_version, owner)
  SELECT id, $18::jsonb, $19::int, $20 FROM t
), e AS (
  INSERT INTO transaction_events (transaction_id, from_status, to_status, cause, details, at)
  SELECT id, NULL, $5, 'transaction.created', $21::jsonb, $17::timestamptz FROM t
), o AS (
  INSERT INTO outbox (transaction_id, project_id, testing_mode, event_type, data, created_at)
  SELECT id, $2, $3::boolean, 'transaction.created', $22::jsonb, $17::timestamptz FROM t
)
SELECT count(*)::int AS created FROM t`
const CREATE = `WITH ${CREATE_ROWS('')}`
const CREATE_IDEMPOTENT = `WITH k AS (
  INSERT INTO idempotency_keys AS i (project_id, mode, key, request_hash, status_code, response, created_at)
  VALUES ($2, $23, $24, $25, $26::int, $27, $17::timestamptz)
  ON CONFLICT (project_id, mode, key) DO UPDATE
    SET request_hash = excluded.request_hash, status_code = excluded.status_code, response = excluded.response, created_at = excluded.created_at
    WHERE i.created_at < $28::timestamptz
  RETURNING 1
), ${CREATE_ROWS('WHERE EXISTS (SELECT 1 FROM k)')}`

/** Persistence of transactions and their idempotency records; no business rules here. */
export function createTransactionRepo(database: Database, lifecycle: LifecycleRepo): TransactionRepo {
  const db = database.db
  // The hot read runs as a prepared statement: built once, and on PostgreSQL parsed and planned once
  // per connection (drizzle's unprepared queries cost several times more; bench/RESULTS.md).
  const findOne = db
    .select()
    .from(transactions)
    .where(and(eq(transactions.id, ph('id')), eq(transactions.projectId, ph('projectId')), eq(transactions.testingMode, ph('testingMode'))))
    .prepare('transaction_find')

  return {
    lifecycle,

    async insertCreated(n) {
      const r = n.row
      const iso = (d: Date) => d.toISOString()
      const params: (string | number | boolean | null)[] = [
        r.id, r.projectId, r.testingMode, r.transactionNumber, r.status, r.amountUsd, r.currency, r.orderId, r.orderDescription,
        r.customerEmail, r.customerName, r.customerIpAddress, r.metadata === null ? null : JSON.stringify(r.metadata), r.successUrl, r.cancelUrl,
        iso(r.expiresAt), iso(r.createdAt), JSON.stringify(n.actor.snapshot), n.actor.machineVersion, n.actor.owner,
        JSON.stringify(n.timelineDetails), JSON.stringify(n.eventData),
      ]
      const i = n.idempotency
      if (i) params.push(i.mode, i.key, i.requestHash, i.statusCode, i.response, iso(i.expiredBefore))
      try {
        const [{ created }] = await database.query<{ created: number }>(i ? CREATE_IDEMPOTENT : CREATE, params)
        return Number(created) === 1 ? 'created' : 'key_taken'
      } catch (e) {
        // Human-readable numbers are short, so two can meet; the caller draws another.
        if (isUniqueViolation(e, 'transaction_number')) return 'number_taken'
        throw e
      }
    },

    async find(scope: Scope, id: string): Promise<TransactionRow | null> {
      // Not a UUID: no such transaction (the column would refuse the comparison).
      if (!UUID_RE.test(id)) return null
      const [row] = await findOne.execute({ id, projectId: scope.projectId, testingMode: scope.testingMode })
      return row ?? null
    },

    /** Newest first, ties broken by id (R8). */
    async page(scope, filter) {
      const where = inScope(scope,
        filter.status ? eq(transactions.status, filter.status) : undefined,
        filter.orderIdPrefix ? like(transactions.orderId, `${filter.orderIdPrefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`) : undefined)
      const [rows, [{ total }]] = await Promise.all([
        // Spelled as the indexes are (drizzle makes them DESC NULLS LAST): a plain DESC means NULLS
        // FIRST to the planner, which then sorts every row of the project instead of reading the index.
        db.select().from(transactions).where(where).orderBy(sql`${transactions.createdAt} DESC NULLS LAST`, sql`${transactions.id} DESC NULLS LAST`).limit(filter.limit).offset(filter.offset),
        db.select({ total: count() }).from(transactions).where(where),
      ])
      return { rows, total: Number(total) }
    },

    async idempotencyRecord(k) {
      const [row] = await db
        .select()
        .from(idempotencyKeys)
        .where(and(eq(idempotencyKeys.projectId, k.projectId), eq(idempotencyKeys.mode, k.mode), eq(idempotencyKeys.key, k.key)))
      return row ?? null
    },

    async pruneIdempotencyKeys(before: Date) {
      await db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, before))
    },
  }
}

/** A unique violation on a constraint whose name contains `column` (postgres.js or PGlite). */
function isUniqueViolation(e: unknown, column: string): boolean {
  const err = e as { code?: string; constraint_name?: string; constraint?: string; message?: string; cause?: unknown }
  if (err?.code !== '23505') return err?.cause !== undefined && isUniqueViolation(err.cause, column)
  return String(err.constraint_name ?? err.constraint ?? err.message ?? '').includes(column)
}
