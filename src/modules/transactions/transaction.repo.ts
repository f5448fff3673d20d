import { and, count, desc, eq, lt, sql, type SQL } from 'drizzle-orm'
import type { Db } from '../../db/client.ts'
import { idempotencyKeys, transactions } from '../../db/schema.ts'
import { createLifecycleRepo, type LifecycleRepo } from '../../actors/lifecycle.repo.ts'
import type { Mode } from '../../keys/api-key.ts'

export type TransactionRow = typeof transactions.$inferSelect
export type NewTransactionRow = typeof transactions.$inferInsert

export interface Scope {
  projectId: string
  testingMode: boolean
}

const inScope = (s: Scope, ...more: (SQL | undefined)[]) =>
  and(eq(transactions.projectId, s.projectId), eq(transactions.testingMode, s.testingMode), ...more)

export interface TransactionRepo {
  atomically<T>(fn: (repo: TransactionRepo) => Promise<T>): Promise<T>
  /** Actor, timeline and outbox persistence on the same connection or database transaction. */
  lifecycle: LifecycleRepo
  insert(row: NewTransactionRow): Promise<TransactionRow>
  find(scope: Scope, id: string): Promise<TransactionRow | null>
  page(scope: Scope, filter: { status?: string; limit: number; offset: number }): Promise<{ rows: TransactionRow[]; total: number }>
  claimIdempotencyKey(k: { projectId: string; mode: Mode; key: string; requestHash: string; now: Date; expiredBefore: Date }): Promise<typeof idempotencyKeys.$inferSelect | null>
  recordIdempotentResponse(k: { projectId: string; mode: Mode; key: string; statusCode: number; response: string }): Promise<void>
  pruneIdempotencyKeys(before: Date): Promise<void>
}

const ph = (name: string) => sql.placeholder(name)

/** Persistence of transactions and their idempotency records; no business rules here. */
export function createTransactionRepo(db: Db): TransactionRepo {
  // The hot read runs as a prepared statement: built once, and on PostgreSQL parsed and planned once
  // per connection (drizzle's unprepared queries cost several times more; bench/RESULTS.md).
  const findOne = db
    .select()
    .from(transactions)
    .where(and(eq(transactions.id, ph('id')), eq(transactions.projectId, ph('projectId')), eq(transactions.testingMode, ph('testingMode'))))
    .prepare('transaction_find')

  return {
    lifecycle: createLifecycleRepo(db),

    /** Runs `fn` in one database transaction with a repo bound to it. */
    atomically<T>(fn: (repo: TransactionRepo) => Promise<T>): Promise<T> {
      return db.transaction((tx) => fn(createTransactionRepo(tx as unknown as Db)))
    },

    async insert(row: NewTransactionRow): Promise<TransactionRow> {
      const [created] = await db.insert(transactions).values(row).returning()
      return created
    },

    async find(scope: Scope, id: string): Promise<TransactionRow | null> {
      const [row] = await findOne.execute({ id, projectId: scope.projectId, testingMode: scope.testingMode })
      return row ?? null
    },

    /** Newest first, ties broken by id (R8). */
    async page(scope: Scope, filter: { status?: string; limit: number; offset: number }) {
      const where = inScope(scope, filter.status ? eq(transactions.status, filter.status) : undefined)
      const [rows, [{ total }]] = await Promise.all([
        db.select().from(transactions).where(where).orderBy(desc(transactions.createdAt), desc(transactions.id)).limit(filter.limit).offset(filter.offset),
        db.select({ total: count() }).from(transactions).where(where),
      ])
      return { rows, total: Number(total) }
    },

    /**
     * Claims an idempotency key for this request. Returns null when claimed (the caller then
     * records the response in the same database transaction), or the earlier record. A record
     * older than `expiredBefore` is taken over. A concurrent claim of the same key waits on the
     * unique index until the first commits, then sees its record.
     */
    async claimIdempotencyKey(k: { projectId: string; mode: Mode; key: string; requestHash: string; now: Date; expiredBefore: Date }) {
      const claimed = await db
        .insert(idempotencyKeys)
        .values({ projectId: k.projectId, mode: k.mode, key: k.key, requestHash: k.requestHash, statusCode: 0, response: '', createdAt: k.now })
        .onConflictDoUpdate({
          target: [idempotencyKeys.projectId, idempotencyKeys.mode, idempotencyKeys.key],
          set: { requestHash: k.requestHash, statusCode: 0, response: '', createdAt: k.now },
          where: lt(idempotencyKeys.createdAt, k.expiredBefore),
        })
        .returning({ key: idempotencyKeys.key })
      if (claimed.length) return null
      const [prior] = await db
        .select()
        .from(idempotencyKeys)
        .where(and(eq(idempotencyKeys.projectId, k.projectId), eq(idempotencyKeys.mode, k.mode), eq(idempotencyKeys.key, k.key)))
      return prior ?? null
    },

    async recordIdempotentResponse(k: { projectId: string; mode: Mode; key: string; statusCode: number; response: string }) {
      await db
        .update(idempotencyKeys)
        .set({ statusCode: k.statusCode, response: k.response })
        .where(and(eq(idempotencyKeys.projectId, k.projectId), eq(idempotencyKeys.mode, k.mode), eq(idempotencyKeys.key, k.key)))
    },

    async pruneIdempotencyKeys(before: Date) {
      await db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, before))
    },
  }
}
