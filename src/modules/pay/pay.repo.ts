import { and, desc, eq, isNull, sql } from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import { param } from '../../db/prepared.ts'
import { projects, transactionActors, transactionEvents, transactions } from '../../db/schema.ts'
import type { TransactionRow } from '../transactions/transaction.repo.ts'

const ph = (name: string) => sql.placeholder(name)

/**
 * What the customer's pay page reads and writes directly; its transitions go through the
 * lifecycle. Every pay route reads the transaction first, so these run as prepared statements
 * (several times cheaper than building the query per request; bench/RESULTS.md "Pay page").
 * Ids must be UUIDs: the caller checks.
 */
export function createPayRepo(database: Database) {
  const { db } = database

  // Whether another token than the quoted one arrived
  // (docs/decisions/0012-transaction-lifecycle.md) rides along: the page tells the customer. Read
  // from the actor's committed snapshot (the wrong assets it holds, taken back on a reorg), so the
  // state pushed right after that commit already says so. The chain's own record of the transfer is
  // marked after the commit. A final transaction has no actor row, and its page does not show the
  // notice.
  const wrongAsset = sql<boolean>`coalesce(jsonb_array_length(${transactionActors.snapshot}->'context'->'wrongAssets') > 0, false)`
  const loadOne = db
    .select({ tx: transactions, projectName: projects.name, wrongAsset })
    .from(transactions)
    .innerJoin(projects, eq(projects.id, transactions.projectId))
    .leftJoin(transactionActors, eq(transactionActors.transactionId, transactions.id))
    .where(eq(transactions.id, ph('id')))
    .prepare('pay_load')

  const lastFailure = db
    .select({ reason: sql<string | null>`${transactionEvents.details}->>'reason'` })
    .from(transactionEvents)
    .where(
      and(eq(transactionEvents.transactionId, ph('id')), eq(transactionEvents.toStatus, 'failed')),
    )
    .orderBy(desc(transactionEvents.id))
    .limit(1)
    .prepare('pay_failure_reason')

  const setIp = db
    .update(transactions)
    .set({ customerIpAddress: param('ip') })
    .where(and(eq(transactions.id, ph('id')), isNull(transactions.customerIpAddress)))
    .prepare('pay_customer_ip')

  return {
    /**
     * A transaction with its project's name, and whether another asset than the quoted one arrived
     * for it.
     */
    async load(
      id: string,
    ): Promise<{ tx: TransactionRow; projectName: string; wrongAsset: boolean } | null> {
      const [r] = await loadOne.execute({ id })
      return r ?? null
    },

    /** The reason recorded with the transaction's latest move to `failed`, if any. */
    async failureReason(id: string): Promise<string | null> {
      const [r] = await lastFailure.execute({ id })
      return r?.reason ?? null
    },

    /**
     * The native balance the deposit address held when the native coin was first quoted on
     * `network` (see the column).
     */
    async setNativeBaseline(id: string, network: string, balance: bigint): Promise<void> {
      await db
        .update(transactions)
        .set({ nativeBaseline: balance.toString(), nativeBaselineNetwork: network })
        .where(eq(transactions.id, id))
    },

    /** Records the customer's IP address unless one is recorded already. */
    async recordCustomerIp(id: string, ip: string): Promise<void> {
      await setIp.execute({ id, ip })
    },
  }
}

export type PayRepo = ReturnType<typeof createPayRepo>
