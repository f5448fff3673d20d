import { and, asc, count, eq, inArray, sql } from 'drizzle-orm'
import type { Database } from '../../db/client.ts'
import {
  chainTransfers,
  depositAddresses,
  refunds,
  sweepItems,
  sweeps,
  transactions,
  type SweepRow,
  type SweepStatus,
} from '../../db/schema.ts'
import type { ProjectMode } from '../../projects/mode.ts'

export type { SweepRow } from '../../db/schema.ts'
export type SweepItemRow = typeof sweepItems.$inferSelect

/**
 * A deposit address handed out, with its transaction and whether a confirmed sweep emptied it since
 * anything last arrived.
 */
export interface DepositAddressRecord {
  address: string
  derivationIndex: number
  transactionId: string
  transactionStatus: string
  network: string | null
  tokenSymbol: string | null
  amountReceived: string | null
  createdAt: Date
  lastSweptAt: Date | null
  /** Something arrived, and a confirmed sweep moved on each arrival's token after it. */
  swept: boolean
}

const s = sweeps
const newestFirst = [sql`${s.createdAt} DESC NULLS LAST`, sql`${s.id} DESC NULLS LAST`]
const ts = (v: unknown): Date | null =>
  v === null || v === undefined ? null : v instanceof Date ? v : new Date(String(v))

/**
 * Persistence of the treasury's view
 * (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md): deposit addresses handed out,
 * sweeps and their items, what waits where.
 */
export function createTreasuryRepo(database: Database) {
  const { db } = database

  return {
    /**
     * A project's deposit addresses of one xpub in derivation order, after `after` (an index), at
     * most `limit`. `network`: only those quoted on it or that received anything seen on it.
     */
    async depositAddresses(
      scope: ProjectMode,
      q: { xpub: string; after: number; limit: number; network?: string; address?: string },
    ): Promise<DepositAddressRecord[]> {
      const da = depositAddresses
      const t = transactions
      const onNetwork = q.network
        ? sql`AND (${t.blockchainNetwork} = ${q.network} OR EXISTS (SELECT 1 FROM ${chainTransfers} WHERE ${chainTransfers.transactionId} = ${da.transactionId} AND ${chainTransfers.network} = ${q.network}))`
        : sql``
      const one = q.address ? sql`AND ${da.address} = ${q.address.toLowerCase()}` : sql``
      const rows = await database.rows<Record<string, unknown>>(sql`
        SELECT ${da.address} AS address, ${da.derivationIndex} AS "derivationIndex", ${da.transactionId} AS "transactionId", ${da.createdAt} AS "createdAt",
          ${t.status} AS "transactionStatus", ${t.blockchainNetwork} AS network, ${t.tokenSymbol} AS "tokenSymbol", ${t.amountReceived}::text AS "amountReceived",
          (SELECT max(${s.confirmedAt}) FROM ${sweepItems} JOIN ${s} ON ${s.id} = ${sweepItems.sweepId}
            WHERE ${sweepItems.address} = ${da.address} AND ${s.status} = 'confirmed' AND ${sweepItems.swept} > 0) AS "lastSweptAt",
          -- Swept: something arrived, and every arrival (its network and token) was moved on by a confirmed sweep after it.
          (EXISTS (SELECT 1 FROM ${chainTransfers} a WHERE a.transaction_id = ${da.transactionId} AND a.reorged_at IS NULL)
            AND NOT EXISTS (SELECT 1 FROM ${chainTransfers} a WHERE a.transaction_id = ${da.transactionId} AND a.reorged_at IS NULL
              AND NOT EXISTS (SELECT 1 FROM ${sweepItems} i JOIN ${s} w ON w.id = i.sweep_id
                WHERE i.address = ${da.address} AND w.network = a.network AND i.token_symbol = a.token_symbol AND w.status = 'confirmed' AND i.swept > 0 AND w.confirmed_at >= a.seen_at))) AS swept
        FROM ${da} JOIN ${t} ON ${t.id} = ${da.transactionId}
        WHERE ${da.projectId} = ${scope.projectId} AND ${da.mode} = ${scope.mode} AND ${da.xpub} = ${q.xpub} AND ${da.derivationIndex} > ${q.after} ${onNetwork} ${one}
        ORDER BY ${da.derivationIndex} LIMIT ${q.limit}`)
      return rows.map((r) => ({
        address: String(r.address),
        derivationIndex: Number(r.derivationIndex),
        transactionId: String(r.transactionId),
        transactionStatus: String(r.transactionStatus),
        network: (r.network as string | null) ?? null,
        tokenSymbol: (r.tokenSymbol as string | null) ?? null,
        amountReceived: (r.amountReceived as string | null) ?? null,
        createdAt: ts(r.createdAt)!,
        lastSweptAt: ts(r.lastSweptAt),
        swept: r.swept === true || r.swept === 't',
      }))
    },

    /** Which of `addresses` (lowercase) are deposit addresses of this project and mode. */
    async ownDepositAddresses(
      scope: ProjectMode,
      addresses: readonly string[],
    ): Promise<Set<string>> {
      if (addresses.length === 0) return new Set()
      const rows = await db
        .select({ address: depositAddresses.address })
        .from(depositAddresses)
        .where(
          and(
            eq(depositAddresses.projectId, scope.projectId),
            eq(depositAddresses.mode, scope.mode),
            inArray(depositAddresses.address, [...addresses]),
          ),
        )
      return new Set(rows.map((r) => r.address))
    },

    /**
     * Records a sweep and its items; an existing record of the same transaction is returned instead
     * (the tool recorded it before a crash).
     */
    async insertSweep(
      row: typeof sweeps.$inferInsert,
      items: Omit<SweepItemRow, 'sweepId' | 'swept'>[],
    ): Promise<{ row: SweepRow; created: boolean }> {
      return db.transaction(async (tx) => {
        const [inserted] = await tx.insert(s).values(row).onConflictDoNothing().returning()
        if (!inserted) {
          const [existing] = await tx
            .select()
            .from(s)
            .where(and(eq(s.network, row.network), eq(s.txHash, row.txHash)))
          return { row: existing!, created: false }
        }
        if (items.length)
          await tx.insert(sweepItems).values(items.map((i) => ({ ...i, sweepId: inserted.id })))
        return { row: inserted, created: true }
      })
    },

    /** The sweep recorded for this transaction on this network, if any. */
    async sweepByTxHash(network: string, txHash: string): Promise<SweepRow | null> {
      const [row] = await db
        .select()
        .from(s)
        .where(and(eq(s.network, network), eq(s.txHash, txHash)))
      return row ?? null
    },

    async sweep(id: string): Promise<SweepRow | null> {
      const [row] = await db.select().from(s).where(eq(s.id, id))
      return row ?? null
    },

    async sweepItems(ids: readonly string[]): Promise<SweepItemRow[]> {
      if (ids.length === 0) return []
      return db
        .select()
        .from(sweepItems)
        .where(inArray(sweepItems.sweepId, [...ids]))
        .orderBy(asc(sweepItems.address), asc(sweepItems.tokenSymbol))
    },

    async sweepPage(
      scope: ProjectMode,
      filter: { network?: string; status?: SweepStatus; limit: number; offset: number },
    ): Promise<{ rows: SweepRow[]; total: number }> {
      const where = and(
        eq(s.projectId, scope.projectId),
        eq(s.mode, scope.mode),
        filter.network ? eq(s.network, filter.network) : undefined,
        filter.status ? eq(s.status, filter.status) : undefined,
      )
      const [rows, [{ total }]] = await Promise.all([
        db
          .select()
          .from(s)
          .where(where)
          .orderBy(...newestFirst)
          .limit(filter.limit)
          .offset(filter.offset),
        db.select({ total: count() }).from(s).where(where),
      ])
      return { rows, total: Number(total) }
    },

    /** A network's sweeps sent and not settled yet. */
    inFlight: (network: string): Promise<SweepRow[]> =>
      db
        .select()
        .from(s)
        .where(and(eq(s.network, network), inArray(s.status, ['submitted', 'confirming'])))
        .orderBy(asc(s.id)),

    /**
     * Moves a sweep on, only from the status it was read in (one follower per network writes
     * these).
     */
    async updateSweep(
      id: string,
      from: SweepStatus,
      patch: Partial<typeof sweeps.$inferInsert>,
      swept?: { address: string; tokenSymbol: string; amount: bigint }[],
    ): Promise<boolean> {
      return db.transaction(async (tx) => {
        const [row] = await tx
          .update(s)
          .set(patch)
          .where(and(eq(s.id, id), eq(s.status, from)))
          .returning({ id: s.id })
        if (!row) return false
        if (swept) {
          await tx.update(sweepItems).set({ swept: '0' }).where(eq(sweepItems.sweepId, id))
          for (const i of swept) {
            await tx
              .insert(sweepItems)
              .values({
                sweepId: id,
                address: i.address,
                tokenSymbol: i.tokenSymbol,
                planned: '0',
                swept: i.amount.toString(),
              })
              .onConflictDoUpdate({
                target: [sweepItems.sweepId, sweepItems.address, sweepItems.tokenSymbol],
                set: { swept: i.amount.toString() },
              })
          }
        }
        return true
      })
    },

    /**
     * What waits at a project's deposit addresses per network and token, as far as the service has
     * seen: arrivals (payments, late payments, other assets; not taken back by a reorg), less what
     * confirmed sweeps took and completed refunds paid from the deposit addresses.
     */
    async waiting(scope: ProjectMode): Promise<
      {
        network: string
        tokenSymbol: string
        arrived: bigint
        swept: bigint
        refunded: bigint
        addresses: number
      }[]
    > {
      const [arrived, swept, refunded] = await Promise.all([
        db
          .select({
            network: chainTransfers.network,
            tokenSymbol: chainTransfers.tokenSymbol,
            amount: sql<string>`sum(${chainTransfers.amount})::text`,
            addresses: sql<string>`count(DISTINCT ${chainTransfers.toAddress})::text`,
          })
          .from(chainTransfers)
          .innerJoin(
            depositAddresses,
            eq(depositAddresses.transactionId, chainTransfers.transactionId),
          )
          .where(
            and(
              eq(depositAddresses.projectId, scope.projectId),
              eq(depositAddresses.mode, scope.mode),
              sql`${chainTransfers.reorgedAt} IS NULL`,
              inArray(chainTransfers.kind, ['payment', 'wrong_asset', 'late']),
            ),
          )
          .groupBy(chainTransfers.network, chainTransfers.tokenSymbol),
        db
          .select({
            network: s.network,
            tokenSymbol: sweepItems.tokenSymbol,
            amount: sql<string>`coalesce(sum(${sweepItems.swept}), 0)::text`,
          })
          .from(sweepItems)
          .innerJoin(s, eq(s.id, sweepItems.sweepId))
          .where(
            and(
              eq(s.projectId, scope.projectId),
              eq(s.mode, scope.mode),
              eq(s.status, 'confirmed'),
            ),
          )
          .groupBy(s.network, sweepItems.tokenSymbol),
        db
          .select({
            network: refunds.network,
            tokenSymbol: refunds.tokenSymbol,
            amount: sql<string>`sum(${refunds.amount})::text`,
          })
          .from(refunds)
          .where(
            and(
              eq(refunds.projectId, scope.projectId),
              eq(refunds.mode, scope.mode),
              eq(refunds.status, 'completed'),
              sql`${refunds.paidFrom} = ${refunds.depositAddress}`,
            ),
          )
          .groupBy(refunds.network, refunds.tokenSymbol),
      ])
      const key = (n: string, t: string) => `${n}\u0000${t}`
      const out = new Map<
        string,
        {
          network: string
          tokenSymbol: string
          arrived: bigint
          swept: bigint
          refunded: bigint
          addresses: number
        }
      >()
      const at = (n: string, t: string) => {
        let v = out.get(key(n, t))
        if (!v)
          out.set(
            key(n, t),
            (v = {
              network: n,
              tokenSymbol: t,
              arrived: 0n,
              swept: 0n,
              refunded: 0n,
              addresses: 0,
            }),
          )
        return v
      }
      for (const a of arrived)
        Object.assign(at(a.network, a.tokenSymbol), {
          arrived: BigInt(a.amount),
          addresses: Number(a.addresses),
        })
      for (const w of swept) at(w.network, w.tokenSymbol).swept = BigInt(w.amount)
      for (const r of refunded) at(r.network, r.tokenSymbol).refunded = BigInt(r.amount)
      return [...out.values()].sort(
        (a, b) => a.network.localeCompare(b.network) || a.tokenSymbol.localeCompare(b.tokenSymbol),
      )
    },
  }
}

export type TreasuryRepo = ReturnType<typeof createTreasuryRepo>
