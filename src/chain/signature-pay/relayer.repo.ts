/**
 * The relayer's records (table `relayed_authorizations`): every authorization it was asked to
 * send, with the signed transaction, recorded before it is broadcast, and what its receipt said.
 * The spend, failures and cool-downs of docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md
 * are read from these rows, so every instance and every restart sees the same.
 */
import { and, eq, inArray, isNull, sql } from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import { type RelayedStatus, relayedAuthorizations } from '../../db/schema.ts'

export type RelayedRow = typeof relayedAuthorizations.$inferSelect
export type NewRelayed = typeof relayedAuthorizations.$inferInsert
/** What a (re)submission writes: the signed transaction and its bounds. */
export type Submission = Pick<
  NewRelayed,
  'txNonce' | 'rawTransaction' | 'txHash' | 'maxCostWei' | 'status' | 'createdAt'
>

/** Where a relay stands against the limits, over the last hour (and the cool-down). */
export interface Exposure {
  /** Gas committed on the network: actual cost of resolved relays, gas limit x max fee of the rest. */
  networkSpent: bigint
  projectSpent: bigint
  payerSpent: bigint
  /** The project's relays on the network that reverted. */
  projectFailures: number
  /** The project's relays on the network sent and not resolved yet. */
  projectInFlight: number
  /** Which of the payer, the transaction and the client had a relay revert in the cool-down. */
  cooling: 'payer' | 'transaction' | 'client' | null
}

/** A relay whose outcome is not known yet. */
export type Unresolved = Pick<
  RelayedRow,
  'id' | 'network' | 'txHash' | 'rawTransaction' | 'status' | 'validBefore'
>

export function createRelayerRepo(database: Database) {
  const { db } = database
  const t = relayedAuthorizations
  return {
    /** The record of an authorization (network, token, payer, nonce: lowercase), if any. */
    async find(a: { network: string; token: string; payer: string; nonce: string }) {
      const [row] = await db
        .select()
        .from(t)
        .where(
          and(
            eq(t.network, a.network),
            eq(t.token, a.token),
            eq(t.payer, a.payer),
            eq(t.nonce, a.nonce),
          ),
        )
      return row ?? null
    },

    /**
     * The relayer's transactions of other authorizations paying the same transaction on the same
     * network that the node took (or may have taken).
     */
    async otherPayments(transactionId: string, network: string, nonce: string) {
      const rows = await db
        .select({ txHash: t.txHash })
        .from(t)
        .where(
          and(
            eq(t.transactionId, transactionId),
            eq(t.network, network),
            sql`${t.status} not in ('refused', 'dropped')`,
            sql`${t.nonce} <> ${nonce}`,
          ),
        )
      return rows.map((r) => r.txHash)
    },

    /**
     * Spend, failures, relays in flight and cool-downs for a relay of `projectId` by `payer`
     * (lowercase) on `network`, paying `transactionId` for `client`, all in one statement.
     */
    async exposure(q: {
      network: string
      projectId: string
      payer: string
      transactionId: string | null
      client: string | null
      since: Date
      coolingSince: Date
    }): Promise<Exposure> {
      const cost = sql`coalesce(${t.costWei}, ${t.maxCostWei})`
      const counted = sql`${t.status} not in ('refused', 'dropped')`
      const recent = sql`${t.createdAt} >= ${q.since.toISOString()}`
      const reverted = sql`${t.status} = 'reverted' and ${t.createdAt} >= ${q.coolingSince.toISOString()}`
      const own = sql`${t.projectId} = ${q.projectId}`
      const rows = await database.rows<Record<string, string | number | boolean | null>>(sql`
        select
          coalesce(sum(${cost}) filter (where ${counted} and ${recent}), 0)::text as network_spent,
          coalesce(sum(${cost}) filter (where ${counted} and ${recent} and ${own}), 0)::text as project_spent,
          coalesce(sum(${cost}) filter (where ${counted} and ${recent} and ${t.payer} = ${q.payer}), 0)::text as payer_spent,
          count(*) filter (where ${t.status} = 'reverted' and ${recent} and ${own})::int as project_failures,
          count(*) filter (where ${t.status} in ('sending', 'sent') and ${own})::int as project_in_flight,
          bool_or(${reverted} and ${t.payer} = ${q.payer}) as payer_cooling,
          bool_or(${reverted} and ${t.transactionId} = ${q.transactionId}) as transaction_cooling,
          bool_or(${reverted} and ${t.client} = ${q.client}) as client_cooling
        from ${t}
        where ${t.network} = ${q.network}
          and (${t.createdAt} >= ${(q.since < q.coolingSince ? q.since : q.coolingSince).toISOString()}
               or ${t.status} in ('sending', 'sent'))
      `)
      const r = rows[0] ?? {}
      return {
        networkSpent: BigInt((r.network_spent as string) ?? '0'),
        projectSpent: BigInt((r.project_spent as string) ?? '0'),
        payerSpent: BigInt((r.payer_spent as string) ?? '0'),
        projectFailures: Number(r.project_failures ?? 0),
        projectInFlight: Number(r.project_in_flight ?? 0),
        cooling: r.payer_cooling
          ? 'payer'
          : r.transaction_cooling
            ? 'transaction'
            : r.client_cooling
              ? 'client'
              : null,
      }
    },

    /** Records a first submission; false when another instance recorded it a moment ago. */
    async insert(row: NewRelayed): Promise<boolean> {
      const inserted = await db
        .insert(t)
        .values(row)
        .onConflictDoNothing({ target: [t.network, t.token, t.payer, t.nonce] })
        .returning({ id: t.id })
      return inserted.length > 0
    },

    /** The same authorization sent again in a new transaction (its earlier one left the chain). */
    async resubmit(id: string, s: Submission) {
      await db
        .update(t)
        .set({ ...s, gasUsed: null, costWei: null, resolvedAt: null })
        .where(eq(t.id, id))
    },

    async setStatus(id: string, status: RelayedStatus) {
      await db.update(t).set({ status }).where(eq(t.id, id))
    },

    /**
     * Records the outcome of the relayer's transaction `txHash`, once: only while the row is
     * unresolved and still carries that transaction. Whether this call recorded it.
     */
    async resolve(
      id: string,
      txHash: string,
      o: {
        status: Extract<RelayedStatus, 'succeeded' | 'reverted' | 'dropped'>
        gasUsed: bigint | null
        costWei: bigint
        at: Date
      },
    ): Promise<boolean> {
      const done = await db
        .update(t)
        .set({
          status: o.status,
          gasUsed: o.gasUsed === null ? null : o.gasUsed.toString(),
          costWei: o.costWei.toString(),
          resolvedAt: o.at,
        })
        .where(and(eq(t.id, id), eq(t.txHash, txHash), inArray(t.status, ['sending', 'sent'])))
        .returning({ id: t.id })
      return done.length > 0
    },

    /**
     * Marks the relay as answered with success to a settle; false when it was already (the
     * settle asking now is a replay).
     */
    async markAnswered(id: string, at: Date): Promise<boolean> {
      const done = await db
        .update(t)
        .set({ answeredAt: at })
        .where(and(eq(t.id, id), isNull(t.answeredAt)))
        .returning({ id: t.id })
      return done.length > 0
    },

    /** The relay by id, as it stands now. */
    async get(id: string) {
      const [row] = await db.select().from(t).where(eq(t.id, id))
      return row ?? null
    },

    /** Relays whose outcome is not known yet (at start, and on each sweep of the watcher). */
    async unresolved(): Promise<Unresolved[]> {
      return db
        .select({
          id: t.id,
          network: t.network,
          txHash: t.txHash,
          rawTransaction: t.rawTransaction,
          status: t.status,
          validBefore: t.validBefore,
        })
        .from(t)
        .where(inArray(t.status, ['sending', 'sent']))
    },
  }
}

export type RelayerRepo = ReturnType<typeof createRelayerRepo>
