/**
 * One signed transaction is one record of money out (table `outgoing_transactions`): a sweep's, or
 * a refund's payment, never both. A deposit address's own transfer can look like either (it is a
 * plain transfer of its token either way), and recorded as both it would count the same money as
 * swept and as refunded. Each record claims its transaction before it is written; a claim by the
 * other kind is a refusal (docs/decisions/0040-the-service-records-only-what-it-verifies.md).
 */
import { and, eq } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { outgoingTransactions } from '../db/schema.ts'

export type OutgoingKind = (typeof outgoingTransactions.$inferSelect)['kind']

export function createOutgoingClaims(database: Database) {
  const t = outgoingTransactions
  return {
    /**
     * Claims `txHash` on `network` for a record of `kind`: null when it is this kind's (now or
     * already), else the record of the other kind that holds it.
     */
    async claim(
      network: string,
      txHash: string,
      kind: OutgoingKind,
      recordId: string,
    ): Promise<{ kind: OutgoingKind; recordId: string } | null> {
      const hash = txHash.toLowerCase()
      await database.db
        .insert(t)
        .values({ network, txHash: hash, kind, recordId })
        .onConflictDoNothing()
      const [held] = await database.db
        .select({ kind: t.kind, recordId: t.recordId })
        .from(t)
        .where(and(eq(t.network, network), eq(t.txHash, hash)))
      return held && held.kind !== kind ? held : null
    },
  }
}

export type OutgoingClaims = ReturnType<typeof createOutgoingClaims>
