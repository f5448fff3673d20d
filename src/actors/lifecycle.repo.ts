import { and, eq, sql } from 'drizzle-orm'
import { MACHINE_VERSION } from '../../machines/transaction.machine.ts'
import type { Database } from '../db/client.ts'
import { createGroupCommit } from '../db/group-commit.ts'
import { isUniqueViolation } from '../db/errors.ts'
import { bare, param, prepare } from '../db/prepared.ts'
import {
  idempotencyKeys,
  outbox,
  transactionActors,
  transactionEvents,
  transactions,
  type TransactionRow,
} from '../db/schema.ts'
import type { Mode } from '../projects/mode.ts'
import { liveInstances } from '../instances/instance.repo.ts'
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
  /** The persisted snapshot, as XState made it. */
  snapshot: unknown
  machineVersion: number
  version: number
  owner: string | null
}

/** Everything a new transaction writes, committed by one statement. */
export interface NewTransaction {
  row: TransactionRow
  snapshot: unknown
  machineVersion: number
  /** The instance that will run its actor; null leaves it to whichever instance claims it. */
  owner: string | null
  timelineDetails: Record<string, unknown>
  /** The `transaction.created` event's webhook data. */
  eventData: Record<string, unknown>
  /** With an Idempotency-Key: the response to record, and from when an old record may be reused. */
  idempotency?: {
    mode: Mode
    key: string
    requestHash: string
    statusCode: number
    response: string
    expiredBefore: Date
  }
}

const t = transactions
const a = transactionActors
const e = transactionEvents
const o = outbox
const k = idempotencyKeys

/*
 * Creation is one statement of data-modifying CTEs, atomic like any statement: the row, its actor,
 * its first timeline entry and its outbox event
 * (docs/decisions/0028-commit-then-tell-the-actor.md), and with an Idempotency-Key the key's record
 * holding the response (docs/decisions/0006-idempotent-create.md). The transaction rows are
 * inserted only if the key was claimed; a concurrent claim of the same key waits on the key's
 * unique index until the first commits, then claims nothing.
 */
const createRows = (guard: ReturnType<typeof sql>) => sql`
t AS (
  INSERT INTO ${t} (${bare(t.id)}, ${bare(t.projectId)}, ${bare(t.testingMode)}, ${bare(t.transactionNumber)}, ${bare(t.status)}, ${bare(t.amountUsd)},
    ${bare(t.currency)}, ${bare(t.amountInCurrency)}, ${bare(t.usdRate)}, ${bare(t.orderId)}, ${bare(t.orderDescription)}, ${bare(t.customerEmail)}, ${bare(t.customerName)}, ${bare(t.customerIpAddress)},
    ${bare(t.metadata)}, ${bare(t.successUrl)}, ${bare(t.cancelUrl)}, ${bare(t.expiresAt)}, ${bare(t.createdAt)}, ${bare(t.updatedAt)}, ${bare(t.version)},
    ${bare(t.anyAmount)}, ${bare(t.commerce)})
  SELECT ${param('id', 'uuid')}, ${param('projectId')}, ${param('testingMode', 'boolean')}, ${param('transactionNumber')}, ${param('status')}, ${param('amountUsd', 'numeric')},
    ${param('currency')}, ${param('amountInCurrency', 'numeric')}, ${param('usdRate', 'jsonb')}, ${param('orderId')}, ${param('orderDescription')}, ${param('customerEmail')}, ${param('customerName')}, ${param('customerIpAddress')},
    ${param('metadata', 'jsonb')}, ${param('successUrl')}, ${param('cancelUrl')}, ${param('expiresAt', 'timestamptz')}, ${param('createdAt', 'timestamptz')},
    ${param('createdAt', 'timestamptz')}, 0, ${param('anyAmount', 'boolean')}, ${param('commerce', 'jsonb')}
  ${guard}
  RETURNING ${t.id}
), a AS (
  INSERT INTO ${a} (${bare(a.transactionId)}, ${bare(a.snapshot)}, ${bare(a.machineVersion)}, ${bare(a.owner)})
  SELECT id, ${param('snapshot', 'jsonb')}, ${param('machineVersion', 'int')}, ${param('owner')} FROM t
), e AS (
  INSERT INTO ${e} (${bare(e.transactionId)}, ${bare(e.fromStatus)}, ${bare(e.toStatus)}, ${bare(e.cause)}, ${bare(e.details)}, ${bare(e.at)})
  SELECT id, NULL, ${param('status')}, 'transaction.created', ${param('timelineDetails', 'jsonb')}, ${param('createdAt', 'timestamptz')} FROM t
), o AS (
  INSERT INTO ${o} (${bare(o.transactionId)}, ${bare(o.projectId)}, ${bare(o.testingMode)}, ${bare(o.eventType)}, ${bare(o.data)}, ${bare(o.createdAt)}, ${bare(o.sequence)})
  SELECT id, ${param('projectId')}, ${param('testingMode', 'boolean')}, 'transaction.created', ${param('eventData', 'jsonb')}, ${param('createdAt', 'timestamptz')}, 1 FROM t
)
SELECT count(*)::int AS created FROM t`

const CREATE = sql`WITH ${createRows(sql``)}`
const CREATE_IDEMPOTENT = sql`WITH k AS (
  INSERT INTO ${k} AS i (${bare(k.projectId)}, ${bare(k.mode)}, ${bare(k.key)}, ${bare(k.requestHash)}, ${bare(k.statusCode)}, ${bare(k.response)}, ${bare(k.createdAt)})
  VALUES (${param('projectId')}, ${param('mode')}, ${param('key')}, ${param('requestHash')}, ${param('statusCode', 'int')}, ${param('response')}, ${param('createdAt', 'timestamptz')})
  ON CONFLICT (${bare(k.projectId)}, ${bare(k.mode)}, ${bare(k.key)}) DO UPDATE
    SET ${bare(k.requestHash)} = excluded.${bare(k.requestHash)}, ${bare(k.statusCode)} = excluded.${bare(k.statusCode)},
        ${bare(k.response)} = excluded.${bare(k.response)}, ${bare(k.createdAt)} = excluded.${bare(k.createdAt)}
    WHERE i.${bare(k.createdAt)} < ${param('expiredBefore', 'timestamptz')}
  RETURNING 1
), ${createRows(sql`WHERE EXISTS (SELECT 1 FROM k)`)}`

/*
 * One transition, one statement: the machine's columns of the row (only at the expected
 * version), the snapshot (or, at a final status, the actor row's removal), the timeline entry
 * and the outbox event (none when `eventType` is null).
 */
const COMMIT = sql`WITH t AS (
  UPDATE ${t} SET ${bare(t.status)} = ${param('status')}, ${bare(t.tokenSymbol)} = ${param('tokenSymbol')},
    ${bare(t.tokenAmount)} = ${param('tokenAmount', 'numeric')}, ${bare(t.blockchainNetwork)} = ${param('blockchainNetwork')},
    ${bare(t.depositAddress)} = ${param('depositAddress')}, ${bare(t.requiredConfirmations)} = ${param('requiredConfirmations', 'int')},
    ${bare(t.finality)} = ${param('finality')}, ${bare(t.quoteRates)} = ${param('quoteRates', 'jsonb')},
    ${bare(t.amountReceived)} = ${param('amountReceived', 'numeric')}, ${bare(t.transactionHash)} = ${param('transactionHash')},
    ${bare(t.transactionHashNames)} = ${param('transactionHashNames')},
    ${bare(t.blockNumber)} = ${param('blockNumber', 'bigint')}, ${bare(t.confirmations)} = ${param('confirmations', 'int')},
    ${bare(t.confirmedAt)} = ${param('confirmedAt', 'timestamptz')}, ${bare(t.completedAt)} = ${param('completedAt', 'timestamptz')},
    ${bare(t.updatedAt)} = ${param('updatedAt', 'timestamptz')}, ${bare(t.version)} = ${t.version} + 1
  WHERE ${t.id} = ${param('id', 'uuid')} AND ${t.version} = ${param('expectedVersion', 'int')}
  RETURNING ${t.id}, ${t.version}
), a AS (
  UPDATE ${a} SET ${bare(a.snapshot)} = ${param('snapshot', 'jsonb')}, ${bare(a.machineVersion)} = ${param('machineVersion', 'int')}
  WHERE ${a.transactionId} IN (SELECT id FROM t) AND ${param('snapshot', 'jsonb')} IS NOT NULL
), d AS (
  DELETE FROM ${a} WHERE ${a.transactionId} IN (SELECT id FROM t) AND ${param('snapshot', 'jsonb')} IS NULL
), e AS (
  INSERT INTO ${e} (${bare(e.transactionId)}, ${bare(e.fromStatus)}, ${bare(e.toStatus)}, ${bare(e.cause)}, ${bare(e.details)}, ${bare(e.at)})
  SELECT id, ${param('fromStatus')}, ${param('status')}, ${param('cause')}, ${param('details', 'jsonb')}, ${param('updatedAt', 'timestamptz')} FROM t
), o AS (
  INSERT INTO ${o} (${bare(o.transactionId)}, ${bare(o.projectId)}, ${bare(o.testingMode)}, ${bare(o.eventType)}, ${bare(o.data)}, ${bare(o.createdAt)}, ${bare(o.sequence)})
  SELECT id, ${param('projectId')}, ${param('testingMode', 'boolean')}, ${param('eventType')}, ${param('eventData', 'jsonb')}, ${param('updatedAt', 'timestamptz')}, version + 1
  FROM t WHERE ${param('eventType')}::text IS NOT NULL
)
SELECT count(*)::int AS updated FROM t`

/**
 * A timeline entry that moves nothing, on a transaction in whatever status it is (a reorg after
 * completion, a payment after a final status), with the outbox event that announces it, if any
 * (its data: the transaction's id).
 */
const NOTE = sql`WITH n AS (
  INSERT INTO ${e} (${bare(e.transactionId)}, ${bare(e.fromStatus)}, ${bare(e.toStatus)}, ${bare(e.cause)}, ${bare(e.details)}, ${bare(e.at)})
  SELECT ${t.id}, ${t.status}, ${t.status}, ${param('cause')}, ${param('details', 'jsonb')}, ${param('at', 'timestamptz')} FROM ${t} WHERE ${t.id} = ${param('id', 'uuid')}
), o AS (
  INSERT INTO ${o} (${bare(o.transactionId)}, ${bare(o.projectId)}, ${bare(o.testingMode)}, ${bare(o.eventType)}, ${bare(o.data)}, ${bare(o.createdAt)}, ${bare(o.sequence)})
  SELECT ${t.id}, ${t.projectId}, ${t.testingMode}, ${param('eventType')}, jsonb_build_object('transaction_id', ${t.id}), ${param('at', 'timestamptz')}, ${t.version}
  FROM ${t} WHERE ${t.id} = ${param('id', 'uuid')} AND ${param('eventType')}::text IS NOT NULL
)
SELECT ${t.version} AS version FROM ${t} WHERE ${t.id} = ${param('id', 'uuid')}`

const iso = (d: Date | null) => (d ? d.toISOString() : null)
const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v))

/**
 * On the embedded database, a create waits at most this long for others to share its commit
 * (none when the last write began longer ago): ~25% more creates/s at 32 connections
 * (bench/RESULTS.md, docs/decisions/0052-the-embedded-database-in-one-process.md).
 */
export const EMBEDDED_CREATE_GATHER_MS = 2

/**
 * Persistence of transactions' actors, timeline and outbox; every write that changes a status is
 * atomic.
 */
export function createLifecycleRepo(database: Database) {
  const db = database.db
  // On the embedded database, creates under load share their commits
  // (docs/decisions/0052-the-embedded-database-in-one-process.md).
  const creating =
    database.kind === 'pglite' ? createGroupCommit(database, EMBEDDED_CREATE_GATHER_MS) : database
  const create = prepare<{ created: number }, Record<string, string | number | boolean | null>>(
    creating,
    CREATE,
  )
  const createIdempotent = prepare<
    { created: number },
    Record<string, string | number | boolean | null>
  >(creating, CREATE_IDEMPOTENT)
  const commit = prepare<{ updated: number }, Record<string, string | number | boolean | null>>(
    database,
    COMMIT,
  )
  const note = prepare<
    { version: number },
    { id: string; cause: string; details: string; at: string; eventType: string | null }
  >(database, NOTE)
  const byId = db
    .select()
    .from(t)
    .where(eq(t.id, sql.placeholder('id')))
    .prepare('transaction_by_id')
  const loadOne = db
    .select({ row: t, snapshot: a.snapshot, machineVersion: a.machineVersion, owner: a.owner })
    .from(a)
    .innerJoin(t, eq(t.id, a.transactionId))
    .where(eq(a.transactionId, sql.placeholder('id')))
    .prepare('actor_load')
  const storedColumns = {
    transactionId: a.transactionId,
    snapshot: a.snapshot,
    machineVersion: a.machineVersion,
    version: t.version,
    owner: a.owner,
  }

  /**
   * Sets `owner` on up to `limit` actor rows chosen by `which` (skipping rows another claimer
   * holds), returning them with their transaction's version: one prepared round trip.
   */
  const claim = (which: ReturnType<typeof sql>) => {
    const statement = prepare<
      StoredActor & { snapshot: unknown },
      { owner: string; now?: string; limit: number }
    >(
      database,
      sql`
      UPDATE ${a} SET ${bare(a.owner)} = ${param('owner')} FROM ${t}
      WHERE ${t.id} = ${a.transactionId} AND ${a.transactionId} IN (
        SELECT ${a.transactionId} FROM ${a} WHERE ${which} LIMIT ${param('limit', 'int')} FOR UPDATE OF ${a} SKIP LOCKED)
      RETURNING ${a.transactionId} AS "transactionId", ${a.snapshot} AS snapshot, ${a.machineVersion} AS "machineVersion", ${t.version} AS version, ${a.owner} AS owner`,
    )
    return async (params: { owner: string; now?: string; limit: number }): Promise<StoredActor[]> =>
      (await statement.execute(params)).map((r) => ({
        ...r,
        snapshot: typeof r.snapshot === 'string' ? JSON.parse(r.snapshot) : r.snapshot,
      }))
  }
  // Only actors this version can run are claimed: one of another machine version stays free for an
  // instance that can.
  const runnable = sql`${a.machineVersion} = ${sql.raw(String(MACHINE_VERSION))}`
  const claimFree = claim(
    sql`${runnable} AND (${a.owner} IS NULL OR (${a.owner} <> ${param('owner')} AND ${a.owner} NOT IN (${liveInstances(sql.placeholder('now'))})))`,
  )
  const claimAll = claim(sql`${runnable} AND ${a.owner} IS DISTINCT FROM ${param('owner')}`)

  return {
    /**
     * Inserts a transaction with its actor, first timeline entry and outbox event, atomically.
     * With an idempotency key, only if the key is unused (or expired). Nothing is written
     * unless the answer is `created`.
     */
    async insertCreated(n: NewTransaction): Promise<'created' | 'key_taken' | 'number_taken'> {
      const r = n.row
      const i = n.idempotency
      const values: Record<string, string | number | boolean | null> = {
        id: r.id,
        projectId: r.projectId,
        testingMode: r.testingMode,
        transactionNumber: r.transactionNumber,
        status: r.status,
        amountUsd: r.amountUsd,
        currency: r.currency,
        amountInCurrency: r.amountInCurrency,
        usdRate: json(r.usdRate),
        orderId: r.orderId,
        orderDescription: r.orderDescription,
        customerEmail: r.customerEmail,
        customerName: r.customerName,
        customerIpAddress: r.customerIpAddress,
        metadata: json(r.metadata),
        successUrl: r.successUrl,
        cancelUrl: r.cancelUrl,
        expiresAt: iso(r.expiresAt),
        createdAt: iso(r.createdAt),
        anyAmount: r.anyAmount,
        commerce: json(r.commerce),
        snapshot: json(n.snapshot),
        machineVersion: n.machineVersion,
        owner: n.owner,
        timelineDetails: json(n.timelineDetails),
        eventData: json(n.eventData),
        ...(i
          ? {
              mode: i.mode,
              key: i.key,
              requestHash: i.requestHash,
              statusCode: i.statusCode,
              response: i.response,
              expiredBefore: iso(i.expiredBefore),
            }
          : {}),
      }
      try {
        const [{ created }] = await (i ? createIdempotent : create).execute(values)
        return Number(created) === 1 ? 'created' : 'key_taken'
      } catch (err) {
        // Human-readable numbers are short, so two can meet; the caller draws another.
        if (isUniqueViolation(err, 'transaction_number')) return 'number_taken'
        throw err
      }
    },

    /**
     * Commits one transition: the machine's columns of the row (only if the row is still at
     * `expectedVersion`, so a transition judged on a stale snapshot is never applied), the
     * snapshot (or its removal at a final status), the timeline entry and the outbox event. The
     * row is read first so the outbox payload is built from the row as it will be; everything
     * is then written by one statement. Returns null when another writer got there first.
     */
    async commitTransition(c: {
      transactionId: string
      expectedVersion: number
      patch: MachineColumns
      snapshot: unknown | null
      machineVersion: number
      entry: TimelineEntry
      outbox: (row: TransactionRow) => OutboxEntry | null
      /** The row as just read, when the caller has it (saves reading it again). */
      current?: TransactionRow
    }): Promise<TransactionRow | null> {
      const current = c.current ?? (await byId.execute({ id: c.transactionId }))[0]
      if (!current || current.version !== c.expectedVersion) return null
      const next: TransactionRow = { ...current, ...c.patch, version: current.version + 1 }
      const out = c.outbox(next)
      const p = c.patch
      const [{ updated }] = await commit.execute({
        id: c.transactionId,
        expectedVersion: c.expectedVersion,
        status: p.status,
        tokenSymbol: p.tokenSymbol,
        tokenAmount: p.tokenAmount,
        blockchainNetwork: p.blockchainNetwork,
        depositAddress: p.depositAddress,
        requiredConfirmations: p.requiredConfirmations,
        finality: p.finality,
        quoteRates: json(p.quoteRates),
        amountReceived: p.amountReceived,
        transactionHash: p.transactionHash,
        transactionHashNames: p.transactionHashNames,
        blockNumber: p.blockNumber,
        confirmations: p.confirmations,
        confirmedAt: iso(p.confirmedAt),
        completedAt: iso(p.completedAt),
        updatedAt: iso(p.updatedAt),
        snapshot: json(c.snapshot),
        machineVersion: c.machineVersion,
        fromStatus: c.entry.fromStatus,
        cause: c.entry.cause,
        details: json(c.entry.details),
        projectId: current.projectId,
        testingMode: current.testingMode,
        eventType: out?.eventType ?? null,
        eventData: out ? json(out.data) : null,
      })
      return Number(updated) === 1 ? next : null
    },

    /**
     * Records on the timeline something that happened to a transaction without moving it, and the
     * outbox event that announces it when `eventType` is given. Returns the transaction's version,
     * which a note leaves as it was.
     */
    async appendNote(
      transactionId: string,
      cause: string,
      details: Record<string, unknown>,
      at: Date,
      eventType: string | null = null,
    ): Promise<number> {
      const [r] = await note.execute({
        id: transactionId,
        cause,
        details: JSON.stringify(details),
        at: at.toISOString(),
        eventType,
      })
      return Number(r?.version ?? 0)
    },

    /** The stored actor of an active transaction with its row, or null once it is final. */
    async load(transactionId: string): Promise<(StoredActor & { row: TransactionRow }) | null> {
      const [r] = await loadOne.execute({ id: transactionId })
      return r
        ? {
            transactionId,
            snapshot: r.snapshot,
            machineVersion: r.machineVersion,
            owner: r.owner,
            version: r.row.version,
            row: r.row,
          }
        : null
    },

    /**
     * The actors recorded as this instance's, with their versions (to notice any moved on or taken
     * over meanwhile).
     */
    async owned(owner: string): Promise<Map<string, number>> {
      const rows = await db
        .select({ id: a.transactionId, version: t.version })
        .from(a)
        .innerJoin(t, eq(t.id, a.transactionId))
        .where(eq(a.owner, owner))
      return new Map(rows.map((r) => [r.id, r.version]))
    },

    /** Takes over up to `limit` actors nobody runs: no owner, or an owner whose lease ended. */
    claimFree: (owner: string, now: Date, limit: number) =>
      claimFree({ owner, now: now.toISOString(), limit }),

    /**
     * Takes every actor not already ours (one instance on an embedded database: all of them are).
     */
    claimAll: (owner: string, limit: number) => claimAll({ owner, limit }),

    /** The actors still recorded as ours, for resuming after the lease was lost and regained. */
    async ownedActors(owner: string): Promise<StoredActor[]> {
      return db
        .select(storedColumns)
        .from(a)
        .innerJoin(t, eq(t.id, a.transactionId))
        .where(eq(a.owner, owner))
    },

    /**
     * Active transactions whose actor was stored by another machine version than this one runs (at
     * most `limit`).
     */
    async otherVersions(
      limit: number,
    ): Promise<{ transactionId: string; machineVersion: number }[]> {
      return db
        .select({ transactionId: a.transactionId, machineVersion: a.machineVersion })
        .from(a)
        .where(sql`${a.machineVersion} <> ${sql.raw(String(MACHINE_VERSION))}`)
        .limit(limit)
    },

    /** Gives one actor up (this version cannot run it), so an instance that can takes it. */
    async releaseOne(transactionId: string, owner: string) {
      await db
        .update(a)
        .set({ owner: null })
        .where(and(eq(a.transactionId, transactionId), eq(a.owner, owner)))
    },

    /** Lets other instances take this instance's actors at once (graceful shutdown). */
    async release(owner: string) {
      await db.update(a).set({ owner: null }).where(eq(a.owner, owner))
    },
  }
}

export type LifecycleRepo = ReturnType<typeof createLifecycleRepo>
