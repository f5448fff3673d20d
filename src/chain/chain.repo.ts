import {
  and,
  asc,
  eq,
  gt,
  gte,
  isNotNull,
  isNull,
  not,
  notInArray,
  or,
  sql,
  type SQL,
} from 'drizzle-orm'
import type { PgColumn } from 'drizzle-orm/pg-core'
import { FINAL_STATUSES, type TxStatus } from '../../machines/transaction.machine.ts'
import type { Database } from '../db/client.ts'
import { bare, param, prepare } from '../db/prepared.ts'
import { liveInstances } from '../instances/instance.repo.ts'
import {
  chainCursors,
  chainFollowers,
  chainTransfers,
  depositAddresses,
  relayedAuthorizations,
  transactions,
  x402PayTo,
} from '../db/schema.ts'

const ph = (name: string) => sql.placeholder(name)

/** A transfer to a deposit address as a block follower found it; hex lowercase. */
export interface TransferFinding {
  /** The block's hash for native coin that arrived by an internal call. */
  txHash: string
  /** -1 for a native transfer, -2 for native coin that arrived by an internal call. */
  logIndex: number
  blockNumber: bigint
  blockHash: string
  tokenSymbol: string
  fromAddress: string
  toAddress: string
  amount: bigint
}

/**
 * A recorded transfer whose lifecycle event is not judged yet, with what its transaction expects.
 */
export interface UnappliedTransfer {
  id: number
  txHash: string
  /** -1 for a native transfer. */
  logIndex: number
  blockNumber: number
  tokenSymbol: string
  amount: string
  transactionId: string
  reorgedAt: Date | null
  kind: TransferKind
  status: TxStatus
  txTokenSymbol: string | null
  txNetwork: string | null
  /** Failed tries so far, and when the next is due (null: now). */
  attempts: number
  retryAt: Date | null
}

export type TransferKind = (typeof chainTransfers.$inferSelect)['kind']

/*
 * A block's findings go in as one JSON array unpacked by jsonb_to_recordset, joined to the
 * deposit addresses for their transaction: one statement however many transfers a block has. An
 * x402 address (docs/decisions/0063-x402.md) takes many payments, so a transfer to it is the
 * transaction's whose relayed authorization the transfer's transaction carried.
 * The query builder's INSERT ... SELECT insists on every column of the table, so this one is
 * written with `sql` over the schema; the record's fields are named and typed after the columns
 * they fill, so the JSON keys follow a rename too.
 */
const FOUND: Record<keyof TransferFinding, PgColumn> = {
  txHash: chainTransfers.txHash,
  logIndex: chainTransfers.logIndex,
  blockNumber: chainTransfers.blockNumber,
  blockHash: chainTransfers.blockHash,
  tokenSymbol: chainTransfers.tokenSymbol,
  fromAddress: chainTransfers.fromAddress,
  toAddress: chainTransfers.toAddress,
  amount: chainTransfers.amount,
}
const FOUND_ENTRIES = Object.entries(FOUND) as [keyof TransferFinding, PgColumn][]
const list = (parts: SQL[]) => sql.join(parts, sql`, `)
const ra = relayedAuthorizations
const RECORD = sql`
INSERT INTO ${chainTransfers} (${bare(chainTransfers.network)}, ${list(FOUND_ENTRIES.map(([, c]) => bare(c)))}, ${bare(chainTransfers.transactionId)}, ${bare(chainTransfers.seenAt)})
SELECT ${param('network', 'text')}, ${list(FOUND_ENTRIES.map(([, c]) => sql`f.${bare(c)}`))}, m.transaction_id, ${param('at', 'timestamptz')}
FROM jsonb_to_recordset(${param('findings', 'jsonb')}) AS f(${list(FOUND_ENTRIES.map(([, c]) => sql`${bare(c)} ${sql.raw(c.getSQLType())}`))})
JOIN LATERAL (
  SELECT ${depositAddresses.transactionId} AS transaction_id FROM ${depositAddresses} WHERE ${depositAddresses.address} = f.${bare(chainTransfers.toAddress)}
  UNION ALL
  SELECT ${ra.transactionId} FROM ${ra}
  WHERE ${ra.txHash} = f.${bare(chainTransfers.txHash)} AND ${ra.payTo} = f.${bare(chainTransfers.toAddress)} AND ${ra.transactionId} IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM ${depositAddresses} WHERE ${depositAddresses.address} = f.${bare(chainTransfers.toAddress)})
) m ON true
ON CONFLICT (${list([chainTransfers.network, chainTransfers.txHash, chainTransfers.logIndex, chainTransfers.blockHash].map(bare))}) DO NOTHING`

/**
 * Block follower persistence (docs/decisions/0030-block-follower-finds-reorgs-itself.md): each
 * network's cursor, the transfers seen to deposit addresses and the addresses to watch. Every
 * statement a follower runs per block or head is prepared once here.
 */
export function createChainRepo(database: Database) {
  const { db } = database

  const record = prepare<unknown, { network: string; findings: string; at: string }>(
    database,
    RECORD,
  )

  const unapplied = db
    .select({
      id: chainTransfers.id,
      txHash: chainTransfers.txHash,
      logIndex: chainTransfers.logIndex,
      blockNumber: chainTransfers.blockNumber,
      tokenSymbol: chainTransfers.tokenSymbol,
      amount: chainTransfers.amount,
      transactionId: chainTransfers.transactionId,
      reorgedAt: chainTransfers.reorgedAt,
      kind: chainTransfers.kind,
      status: transactions.status,
      txTokenSymbol: transactions.tokenSymbol,
      txNetwork: transactions.blockchainNetwork,
      attempts: chainTransfers.attempts,
      retryAt: chainTransfers.retryAt,
    })
    .from(chainTransfers)
    .innerJoin(transactions, eq(transactions.id, chainTransfers.transactionId))
    .where(and(eq(chainTransfers.network, ph('network')), not(chainTransfers.applied)))
    .orderBy(asc(chainTransfers.blockNumber), asc(chainTransfers.logIndex), asc(chainTransfers.id))
    .prepare('chain_unapplied')

  const markApplied = db
    .update(chainTransfers)
    .set({ applied: true, kind: param('kind'), retryAt: null, lastError: null })
    .where(eq(chainTransfers.id, ph('id')))
    .prepare('chain_mark_applied')

  const markFailed = db
    .update(chainTransfers)
    .set({
      attempts: sql`${chainTransfers.attempts} + 1`,
      retryAt: param('retryAt', 'timestamptz'),
      lastError: sql`${ph('error')}`,
    })
    .where(eq(chainTransfers.id, ph('id')))
    .returning({ attempts: chainTransfers.attempts })
    .prepare('chain_mark_failed')

  const claimNetwork = prepare<{ owner: string }, { network: string; owner: string; now: string }>(
    database,
    sql`
    INSERT INTO ${chainFollowers} (${bare(chainFollowers.network)}, ${bare(chainFollowers.owner)}) VALUES (${param('network')}, ${param('owner')})
    ON CONFLICT (${bare(chainFollowers.network)}) DO UPDATE SET ${bare(chainFollowers.owner)} = excluded.${bare(chainFollowers.owner)}
    WHERE ${chainFollowers.owner} IS NULL OR ${chainFollowers.owner} = excluded.${bare(chainFollowers.owner)}
      OR ${chainFollowers.owner} NOT IN (${liveInstances(sql.placeholder('now'))})
    RETURNING ${chainFollowers.owner} AS owner`,
  )

  // The removed blocks' hashes travel as one comma-separated parameter, so the statement keeps
  // one shape (and one prepared plan) however many blocks a reorg removes.
  const takeBack = db
    .update(chainTransfers)
    .set({ reorgedAt: param('at', 'timestamptz'), applied: false })
    .where(
      and(
        eq(chainTransfers.network, ph('network')),
        sql`${chainTransfers.blockHash} = ANY(string_to_array(${ph('hashes')}, ','))`,
        isNull(chainTransfers.reorgedAt),
      ),
    )
    .returning({ id: chainTransfers.id })
    .prepare('chain_take_back')

  const confirming = db
    .select({
      id: transactions.id,
      blockNumber: transactions.blockNumber,
      confirmations: transactions.confirmations,
    })
    .from(transactions)
    .where(
      and(
        eq(transactions.status, 'confirming'),
        eq(transactions.blockchainNetwork, ph('network')),
        isNotNull(transactions.blockNumber),
      ),
    )
    .prepare('chain_confirming')

  // Each open native-quoted deposit address with what its balance is accounted for by: what it held
  // when quoted, and the native coin recorded as arriving there since (not taken back by a reorg):
  // listed transfers (log index -1) and internal arrivals (-2). One address per transaction, so the
  // transfers are found by the transaction's index.
  const nativeWatch = prepare<
    { address: string; credited: string },
    { network: string; symbol: string }
  >(
    database,
    sql`
    SELECT lower(${transactions.depositAddress}) AS address, (coalesce(${transactions.nativeBaseline}, 0) + coalesce((
      SELECT sum(${chainTransfers.amount}) FROM ${chainTransfers}
      WHERE ${chainTransfers.transactionId} = ${transactions.id} AND ${chainTransfers.network} = ${param('network')}
        AND ${chainTransfers.logIndex} < 0 AND ${chainTransfers.tokenSymbol} = ${param('symbol')} AND ${chainTransfers.reorgedAt} IS NULL
    ), 0))::text AS credited
    FROM ${transactions}
    WHERE ${transactions.blockchainNetwork} = ${param('network')} AND ${transactions.tokenSymbol} = ${param('symbol')}
      AND ${transactions.status} IN ('prepared', 'pending', 'processing', 'confirming') AND ${transactions.depositAddress} IS NOT NULL`,
  )

  const cursorOf = db
    .select({ cursor: chainCursors.cursor })
    .from(chainCursors)
    .where(eq(chainCursors.network, ph('network')))
    .prepare('chain_cursor_load')

  const saveCursor = db
    .insert(chainCursors)
    .values({ network: ph('network'), cursor: ph('cursor'), updatedAt: ph('at') })
    .onConflictDoUpdate({
      target: chainCursors.network,
      set: {
        cursor: sql`excluded.${bare(chainCursors.cursor)}`,
        updatedAt: sql`excluded.${bare(chainCursors.updatedAt)}`,
      },
    })
    .prepare('chain_cursor_save')

  const watched = db
    .select({ address: depositAddresses.address })
    .from(depositAddresses)
    .innerJoin(transactions, eq(transactions.id, depositAddresses.transactionId))
    .where(
      or(
        notInArray(transactions.status, [...FINAL_STATUSES]),
        gt(transactions.updatedAt, ph('since')),
      ),
    )
    .prepare('chain_watched')

  return {
    /**
     * Records a block's findings to deposit addresses, once per transfer and block; findings to
     * unknown addresses are dropped.
     */
    async recordFindings(
      network: string,
      findings: readonly TransferFinding[],
      at: Date,
    ): Promise<void> {
      const json = findings.map((f) =>
        Object.fromEntries(
          FOUND_ENTRIES.map(([key, column]) => {
            const v = f[key]
            // Block numbers and amounts as decimal strings: JSON numbers would round above 2^53.
            return [column.name, typeof v === 'bigint' ? v.toString() : v]
          }),
        ),
      )
      await record.execute({ network, findings: JSON.stringify(json), at: at.toISOString() })
    },

    /** The network's transfers whose lifecycle event is not judged yet, in chain order. */
    async unappliedTransfers(network: string): Promise<UnappliedTransfer[]> {
      const rows = await unapplied.execute({ network })
      return rows.map((r) => ({ ...r, status: r.status as TxStatus }))
    },

    /** The transfer's lifecycle event was judged: it counts as `kind` and is not judged again. */
    async markApplied(id: number, kind: TransferKind): Promise<void> {
      await markApplied.execute({ id, kind })
    },

    /**
     * Judging the transfer failed: it is tried again from `retryAt`; returns the failed tries so
     * far.
     */
    async markFailed(id: number, retryAt: Date, error: string): Promise<number> {
      const [r] = await markFailed.execute({
        id,
        retryAt: retryAt.toISOString(),
        error: error.slice(0, 1000),
      })
      return r?.attempts ?? 0
    },

    /**
     * Takes (or keeps) the following of a network for `owner`, unless a live instance follows it;
     * true when it is `owner`'s.
     */
    async claimNetwork(network: string, owner: string, now: Date): Promise<boolean> {
      return (await claimNetwork.execute({ network, owner, now: now.toISOString() })).length === 1
    },

    /**
     * Forgets a network's position (the chain behind its RPC was really reset): its follower starts
     * again at the head.
     */
    async forgetCursor(network: string): Promise<boolean> {
      const rows = await db
        .delete(chainCursors)
        .where(eq(chainCursors.network, network))
        .returning({ network: chainCursors.network })
      return rows.length === 1
    },

    /**
     * Which instance follows each network, whether its lease is live, and the halt its cursor
     * records (the `halted` member of the cursor's JSON, as text; null when it follows on).
     */
    async followers(
      now: Date,
    ): Promise<{ network: string; owner: string | null; live: boolean; halted: string | null }[]> {
      const rows = await db
        .select({
          network: chainFollowers.network,
          owner: chainFollowers.owner,
          live: sql<boolean>`${chainFollowers.owner} IN (${liveInstances(now.toISOString())})`,
          halted: sql<string | null>`(${chainCursors.cursor}::json -> 'halted')::text`,
        })
        .from(chainFollowers)
        .leftJoin(chainCursors, eq(chainCursors.network, chainFollowers.network))
      return rows.map((r) => ({
        network: r.network,
        owner: r.owner,
        live: r.live === true,
        halted: r.halted ?? null,
      }))
    },

    /**
     * Replaces a network's cursor only if it is still `expected` (an operator's change must not
     * undo the follower's, nor the reverse).
     */
    async replaceCursor(
      network: string,
      expected: string,
      cursor: string,
      at: Date,
    ): Promise<boolean> {
      const rows = await db
        .update(chainCursors)
        .set({ cursor, updatedAt: at })
        .where(and(eq(chainCursors.network, network), eq(chainCursors.cursor, expected)))
        .returning({ network: chainCursors.network })
      return rows.length === 1
    },

    /**
     * The blocks (number, lowercase hash) at or above `from` in which transfers were recorded and
     * not taken back: what a resumed network re-checks.
     */
    async recordedBlocks(
      network: string,
      from: bigint,
    ): Promise<{ number: bigint; hash: string }[]> {
      const rows = await db
        .selectDistinct({ number: chainTransfers.blockNumber, hash: chainTransfers.blockHash })
        .from(chainTransfers)
        .where(
          and(
            eq(chainTransfers.network, network),
            gte(chainTransfers.blockNumber, Number(from)),
            isNull(chainTransfers.reorgedAt),
          ),
        )
      return rows.map((r) => ({ number: BigInt(r.number), hash: r.hash.toLowerCase() }))
    },

    /**
     * Gives up the networks `owner` follows (shutdown, or its lease was lost), so another instance
     * takes them at once.
     */
    async releaseNetworks(owner: string): Promise<void> {
      await db.update(chainFollowers).set({ owner: null }).where(eq(chainFollowers.owner, owner))
    },

    /**
     * Transfers seen in blocks that left the canonical chain are judged again as taken back;
     * returns how many.
     */
    async takeBackBlocks(
      network: string,
      blockHashes: readonly string[],
      at: Date,
    ): Promise<number> {
      const taken = await takeBack.execute({
        network,
        hashes: blockHashes.join(','),
        at: at.toISOString(),
      })
      return taken.length
    },

    /** The network's confirming transactions with the block their payment is in. */
    async confirmingTransactions(
      network: string,
    ): Promise<{ id: string; blockNumber: number; confirmations: number | null }[]> {
      const rows = await confirming.execute({ network })
      return rows.map((r) => ({
        id: r.id,
        blockNumber: r.blockNumber!,
        confirmations: r.confirmations,
      }))
    },

    /** The follower cursor of a network, as stored (src/chain/follower/cursor.ts encodes it). */
    async loadCursor(network: string): Promise<string | null> {
      const [r] = await cursorOf.execute({ network })
      return r?.cursor ?? null
    },

    async saveCursor(network: string, cursor: string, at: Date): Promise<void> {
      await saveCursor.execute({ network, cursor, at })
    },

    /**
     * Deposit addresses (lowercase) of the network's open transactions quoted in its native coin
     * `symbol`, with what each one's balance is accounted for by (see nativeWatch).
     */
    async nativeQuotedAddresses(
      network: string,
      symbol: string,
    ): Promise<{ address: string; credited: bigint }[]> {
      return (await nativeWatch.execute({ network, symbol })).map((r) => ({
        address: r.address,
        credited: BigInt(r.credited),
      }))
    },

    /**
     * Deposit addresses of transactions still open, or finished after `since`; and every x402
     * address (docs/decisions/0063-x402.md), which may be paid at any time.
     */
    async watchedAddresses(since: Date): Promise<string[]> {
      const [rows, x402] = await Promise.all([
        watched.execute({ since: since.toISOString() }),
        db.selectDistinct({ address: x402PayTo.address }).from(x402PayTo),
      ])
      return [...rows, ...x402].map((r) => r.address)
    },
  }
}

export type ChainRepo = ReturnType<typeof createChainRepo>
