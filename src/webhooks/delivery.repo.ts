import { and, eq, inArray, isNotNull, lt, or, sql, type SQL } from 'drizzle-orm'
import {
  DELIVERY_MACHINE_VERSION,
  type DeliveryStatus,
  type FailedBecause,
} from '../../machines/webhook-delivery.machine.ts'
import type { Database } from '../db/client.ts'
import { bare, param, prepare } from '../db/prepared.ts'
import { outbox, webhookAttempts, webhookDeliveries, webhookEndpoints } from '../db/schema.ts'
import { liveInstances } from '../instances/instance.repo.ts'
import { COMMERCE_OUTBOX_TYPES } from './commerce-format.ts'
import type { Mode, ProjectFilter } from '../projects/mode.ts'

/** A delivery to run as an actor here: what its attempts send, and where its actor starts from. */
export interface RunnableDelivery {
  id: string
  eventId: string
  endpointId: string
  mode: Mode
  eventType: string
  data: Record<string, unknown>
  test: boolean
  /** `x-service-sequence` (0 for an event not about a transaction's status). */
  sequence: number
  /** The persisted snapshot; null before the first step. */
  snapshot: unknown | null
  machineVersion: number
  /** Epoch ms. */
  eventAt: number
  nextAttemptAt: number | null
}

/** One attempt as the delivery log keeps it. */
export interface AttemptRecord {
  number: number
  trigger: 'scheduled' | 'manual'
  /** When it was due; null for none. */
  scheduledFor: Date | null
  startedAt: Date
  durationMs: number
  statusCode: number | null
  /** The exact bytes sent. */
  requestBody: string
  responseBody: string | null
  error: string | null
}

/**
 * One persisted step of a delivery actor: its snapshot and projection, and the attempt it made, if
 * any.
 */
export interface DeliveryStep {
  id: string
  status: DeliveryStatus
  attempts: number
  nextAttemptAt: number | null
  failedBecause: FailedBecause | null
  snapshot: unknown
  /** Succeeded or failed: the actor stops and the claim is given back. */
  finished: boolean
  attempt: AttemptRecord | null
}

/**
 * A new delivery not tied to the outbox: a manual retry
 * (docs/decisions/0020-manual-retry-completed-only.md) or a test event.
 */
export interface NewDelivery {
  eventId: string
  endpointId: string
  projectId: string
  mode: Mode
  transactionId: string | null
  eventType: string
  data: Record<string, unknown>
  test: boolean
  sequence: number
}

const d = webhookDeliveries
const w = webhookAttempts
const UNFINISHED = sql`${d.status} IN ('pending', 'retrying')`

/** The columns an actor runs from, named as RunnableDelivery (jsonb_agg keeps these keys). */
const RUNNABLE = sql`${d.id} AS id, ${d.eventId} AS "eventId", ${d.endpointId} AS "endpointId", ${d.mode} AS mode, ${d.eventType} AS "eventType",
  ${d.data} AS data, ${d.test} AS test, ${d.sequence} AS sequence, ${d.snapshot} AS snapshot, ${d.machineVersion} AS "machineVersion", ${d.eventAt} AS "eventAt",
  ${d.nextAttemptAt} AS "nextAttemptAt"`

/**
 * Whether an endpoint hears an event of type `eventType`: a standard endpoint the types it
 * selected, a Commerce-format one every type with a Commerce name
 * (docs/decisions/0065-coinbase-commerce-drop-in.md).
 */
const hears = (eventType: SQL) =>
  sql`CASE WHEN ${webhookEndpoints.format} = 'commerce' THEN ${eventType} = ANY(${sql.raw(`'{${COMMERCE_OUTBOX_TYPES.join(',')}}'::text[]`)})
      ELSE ${eventType} = ANY(${webhookEndpoints.eventTypes}) END`

/**
 * Fans outbox events out into deliveries, one per enabled endpoint of the event's project and
 * mode that selected its type, in the statement that marks the events dispatched. The
 * deliveries come back claimed by the caller, who runs their actors at once.
 */
const FAN_OUT = sql`
WITH ev AS (
  SELECT ${outbox.id} AS id, ${outbox.transactionId} AS transaction_id, ${outbox.projectId} AS project_id, ${outbox.testingMode} AS testing_mode,
    ${outbox.eventType} AS event_type, ${outbox.data} AS data, ${outbox.createdAt} AS created_at, ${outbox.sequence} AS sequence,
    'evt_' || replace(gen_random_uuid()::text, '-', '') AS event_id
  FROM ${outbox} WHERE ${outbox.dispatchedAt} IS NULL ORDER BY ${outbox.id} LIMIT ${param('limit', 'int')} FOR UPDATE SKIP LOCKED
), done AS (
  UPDATE ${outbox} SET ${bare(outbox.dispatchedAt)} = ${param('now', 'timestamptz')}, ${bare(outbox.eventId)} = ev.event_id FROM ev WHERE ${outbox.id} = ev.id
), ins AS (
  INSERT INTO ${d} (${bare(d.id)}, ${bare(d.eventId)}, ${bare(d.endpointId)}, ${bare(d.projectId)}, ${bare(d.mode)}, ${bare(d.transactionId)},
    ${bare(d.eventType)}, ${bare(d.data)}, ${bare(d.test)}, ${bare(d.status)}, ${bare(d.attempts)}, ${bare(d.nextAttemptAt)}, ${bare(d.machineVersion)},
    ${bare(d.claimedBy)}, ${bare(d.eventAt)}, ${bare(d.createdAt)}, ${bare(d.sequence)})
  SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), ev.event_id, ${webhookEndpoints.id}, ev.project_id, ${webhookEndpoints.mode}, ev.transaction_id,
    ev.event_type, ev.data, false, 'pending', 0, ${param('now', 'timestamptz')}, ${param('machineVersion', 'int')}, ${param('owner')}, ev.created_at, ${param('now', 'timestamptz')}, ev.sequence
  FROM ev JOIN ${webhookEndpoints} ON ${webhookEndpoints.projectId} = ev.project_id
    AND ${webhookEndpoints.mode} = CASE WHEN ev.testing_mode THEN 'test' ELSE 'live' END
    AND ${webhookEndpoints.enabled} AND ${hears(sql`ev.event_type`)}
  ORDER BY ev.id
  RETURNING ${RUNNABLE}
)
SELECT (SELECT count(*) FROM ev)::int AS events, coalesce((SELECT jsonb_agg(ins) FROM ins), '[]'::jsonb) AS deliveries`

/**
 * Unfinished deliveries nobody runs (no claimer, or one whose lease ended), claimed for the caller.
 */
const CLAIM_FREE = sql`
UPDATE ${d} SET ${bare(d.claimedBy)} = ${param('owner')}
WHERE ${d.id} IN (
  SELECT ${d.id} FROM ${d} WHERE ${UNFINISHED}
    AND (${d.claimedBy} IS NULL OR (${d.claimedBy} <> ${param('owner')} AND ${d.claimedBy} NOT IN (${liveInstances(sql.placeholder('now'))})))
  LIMIT ${param('limit', 'int')} FOR UPDATE SKIP LOCKED)
RETURNING ${RUNNABLE}`

/**
 * Every unfinished delivery not already the caller's (one instance on an embedded database: all
 * are).
 */
const CLAIM_ALL = sql`
UPDATE ${d} SET ${bare(d.claimedBy)} = ${param('owner')}
WHERE ${d.id} IN (SELECT ${d.id} FROM ${d} WHERE ${UNFINISHED} AND ${d.claimedBy} IS DISTINCT FROM ${param('owner')} LIMIT ${param('limit', 'int')} FOR UPDATE SKIP LOCKED)
RETURNING ${RUNNABLE}`

/**
 * Commits a batch of steps: each delivery's projection and snapshot (and, once finished, its
 * claim given back) with its attempt row, only where the caller still holds the claim (a step
 * of an actor that lost its claim is dropped; the new holder runs the delivery from its last
 * persisted step).
 */
const COMMIT_STEPS = sql`
WITH r AS (
  SELECT * FROM jsonb_to_recordset(${param('steps', 'jsonb')}) AS r(id text, status text, attempts int, next_attempt_at timestamptz, failed_because text,
    snapshot jsonb, finished boolean, number int, trigger text, scheduled_for timestamptz, started_at timestamptz, duration_ms int, status_code int,
    request_body text, response_body text, error text)
), u AS (
  UPDATE ${d} SET ${bare(d.status)} = r.status, ${bare(d.attempts)} = r.attempts, ${bare(d.nextAttemptAt)} = r.next_attempt_at,
    ${bare(d.failedBecause)} = r.failed_because, ${bare(d.snapshot)} = r.snapshot, ${bare(d.machineVersion)} = ${param('machineVersion', 'int')},
    ${bare(d.lastAttemptAt)} = coalesce(r.started_at, ${d.lastAttemptAt}),
    ${bare(d.lastStatusCode)} = CASE WHEN r.started_at IS NULL THEN ${d.lastStatusCode} ELSE r.status_code END,
    ${bare(d.claimedBy)} = CASE WHEN r.finished THEN NULL ELSE ${d.claimedBy} END
  FROM r WHERE ${d.id} = r.id AND ${d.claimedBy} = ${param('owner')}
  RETURNING ${d.id}
), a AS (
  INSERT INTO ${w} (${bare(w.deliveryId)}, ${bare(w.number)}, ${bare(w.trigger)}, ${bare(w.scheduledFor)}, ${bare(w.startedAt)}, ${bare(w.durationMs)},
    ${bare(w.statusCode)}, ${bare(w.requestBody)}, ${bare(w.responseBody)}, ${bare(w.error)})
  SELECT r.id, r.number, r.trigger, r.scheduled_for, r.started_at, r.duration_ms, r.status_code, r.request_body, r.response_body, r.error
  FROM r JOIN u ON u.id = r.id WHERE r.started_at IS NOT NULL
)
SELECT id FROM u`

/** Deliveries made outside the outbox, due at once and unclaimed. */
const INSERT_NEW = sql`
INSERT INTO ${d} (${bare(d.id)}, ${bare(d.eventId)}, ${bare(d.endpointId)}, ${bare(d.projectId)}, ${bare(d.mode)}, ${bare(d.transactionId)},
  ${bare(d.eventType)}, ${bare(d.data)}, ${bare(d.test)}, ${bare(d.status)}, ${bare(d.attempts)}, ${bare(d.nextAttemptAt)}, ${bare(d.machineVersion)},
  ${bare(d.eventAt)}, ${bare(d.createdAt)}, ${bare(d.sequence)})
SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), r.event_id, r.endpoint_id, r.project_id, r.mode, r.transaction_id,
  r.event_type, r.data, r.test, 'pending', 0, ${param('now', 'timestamptz')}, ${param('machineVersion', 'int')}, ${param('now', 'timestamptz')}, ${param('now', 'timestamptz')}, r.sequence
FROM jsonb_to_recordset(${param('rows', 'jsonb')}) AS r(event_id text, endpoint_id text, project_id text, mode text, transaction_id uuid,
  event_type text, data jsonb, test boolean, sequence int)
RETURNING ${d.id} AS id`

type RunnableRow = Omit<RunnableDelivery, 'eventAt' | 'nextAttemptAt' | 'data'> & {
  eventAt: string
  nextAttemptAt: string | null
  data: Record<string, unknown> | string
}

const parsed = <T>(v: T | string): T => (typeof v === 'string' ? JSON.parse(v) : v)
const runnable = (r: RunnableRow): RunnableDelivery => ({
  ...r,
  data: parsed(r.data),
  snapshot: r.snapshot === null ? null : parsed(r.snapshot),
  eventAt: Date.parse(r.eventAt),
  nextAttemptAt: r.nextAttemptAt === null ? null : Date.parse(r.nextAttemptAt),
})
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/**
 * The webhook deliveries: the dispatcher's hot statements (each one prepared round trip) and the
 * delivery log's reads.
 */
export function createDeliveryRepo(database: Database) {
  const { db } = database
  const fanOut = prepare<
    { events: number; deliveries: RunnableRow[] | string },
    { limit: number; now: string; machineVersion: number; owner: string }
  >(database, FAN_OUT)
  const claimFree = prepare<RunnableRow, { owner: string; now: string; limit: number }>(
    database,
    CLAIM_FREE,
  )
  const claimAll = prepare<RunnableRow, { owner: string; limit: number }>(database, CLAIM_ALL)
  const commitSteps = prepare<
    { id: string },
    { steps: string; machineVersion: number; owner: string }
  >(database, COMMIT_STEPS)
  const insertNew = prepare<{ id: string }, { rows: string; now: string; machineVersion: number }>(
    database,
    INSERT_NEW,
  )
  const scoped = (s: ProjectFilter, ...more: (SQL | undefined)[]) =>
    and(
      s.projectId ? eq(d.projectId, s.projectId) : undefined,
      s.mode ? eq(d.mode, s.mode) : undefined,
      ...more,
    )

  return {
    async fanOut(o: {
      limit: number
      now: Date
      owner: string
    }): Promise<{ events: number; deliveries: RunnableDelivery[] }> {
      const [r] = await fanOut.execute({
        limit: o.limit,
        now: o.now.toISOString(),
        machineVersion: DELIVERY_MACHINE_VERSION,
        owner: o.owner,
      })
      return {
        events: Number(r.events),
        deliveries: parsed<RunnableRow[]>(r.deliveries).map(runnable),
      }
    },

    async claimFree(o: { owner: string; now: Date; limit: number }): Promise<RunnableDelivery[]> {
      return (
        await claimFree.execute({ owner: o.owner, now: o.now.toISOString(), limit: o.limit })
      ).map(runnable)
    },

    async claimAll(o: { owner: string; limit: number }): Promise<RunnableDelivery[]> {
      return (await claimAll.execute(o)).map(runnable)
    },

    /**
     * Those of `ids` still unfinished and recorded as the caller's, to run again what does not run.
     */
    async owned(owner: string, ids: readonly string[]): Promise<RunnableDelivery[]> {
      if (ids.length === 0) return []
      const rows = await db
        .select({
          id: d.id,
          eventId: d.eventId,
          endpointId: d.endpointId,
          mode: d.mode,
          eventType: d.eventType,
          data: d.data,
          test: d.test,
          sequence: d.sequence,
          snapshot: d.snapshot,
          machineVersion: d.machineVersion,
          eventAt: d.eventAt,
          nextAttemptAt: d.nextAttemptAt,
        })
        .from(d)
        .where(and(eq(d.claimedBy, owner), UNFINISHED, inArray(d.id, [...ids])))
      return rows.map((r) => ({
        ...r,
        eventAt: r.eventAt.getTime(),
        nextAttemptAt: r.nextAttemptAt?.getTime() ?? null,
      }))
    },

    /** The ids of the unfinished deliveries recorded as the caller's. */
    async ownedIds(owner: string): Promise<string[]> {
      return (
        await db
          .select({ id: d.id })
          .from(d)
          .where(and(eq(d.claimedBy, owner), UNFINISHED))
      ).map((r) => r.id)
    },

    /**
     * Gives one delivery's claim back (it could not be run here), so any instance takes it again.
     */
    async releaseOne(id: string, owner: string) {
      await db
        .update(d)
        .set({ claimedBy: null })
        .where(and(eq(d.id, id), eq(d.claimedBy, owner)))
    },

    /** Returns the ids whose step was recorded (the others had lost their claim). */
    async commitSteps(owner: string, steps: DeliveryStep[]): Promise<Set<string>> {
      const payload = steps.map((s) => ({
        id: s.id,
        status: s.status,
        attempts: s.attempts,
        next_attempt_at: iso(s.nextAttemptAt),
        failed_because: s.failedBecause,
        snapshot: s.snapshot,
        finished: s.finished,
        number: s.attempt?.number ?? null,
        trigger: s.attempt?.trigger ?? null,
        scheduled_for: s.attempt?.scheduledFor?.toISOString() ?? null,
        started_at: s.attempt?.startedAt.toISOString() ?? null,
        duration_ms: s.attempt?.durationMs ?? null,
        status_code: s.attempt?.statusCode ?? null,
        request_body: s.attempt?.requestBody ?? null,
        response_body: s.attempt?.responseBody ?? null,
        error: s.attempt?.error ?? null,
      }))
      const rows = await commitSteps.execute({
        steps: JSON.stringify(payload),
        machineVersion: DELIVERY_MACHINE_VERSION,
        owner,
      })
      return new Set(rows.map((r) => r.id))
    },

    /** Inserts deliveries due at once, unclaimed (any running instance picks them up). */
    async insert(rows: NewDelivery[], now: Date): Promise<string[]> {
      if (rows.length === 0) return []
      const payload = rows.map((r) => ({
        event_id: r.eventId,
        endpoint_id: r.endpointId,
        project_id: r.projectId,
        mode: r.mode,
        transaction_id: r.transactionId,
        event_type: r.eventType,
        data: r.data,
        test: r.test,
        sequence: r.sequence,
      }))
      return (
        await insertNew.execute({
          rows: JSON.stringify(payload),
          now: now.toISOString(),
          machineVersion: DELIVERY_MACHINE_VERSION,
        })
      ).map((r) => r.id)
    },

    /** One delivery, and whether an instance with a live lease runs its actor. */
    async find(id: string, scope: ProjectFilter, now: Date) {
      const [row] = await db
        .select({
          delivery: d,
          claimerLive: sql<boolean>`${d.claimedBy} IN (${liveInstances(now.toISOString())})`,
        })
        .from(d)
        .where(scoped(scope, eq(d.id, id)))
      return row ? { ...row.delivery, claimerLive: row.claimerLive === true } : null
    },

    /**
     * Writes a step judged outside any actor (a redelivery of a finished delivery, or of one whose
     * instance died), if the row is still as read and no live instance runs it; the claim is left
     * free so a running dispatcher picks it up.
     */
    async replaceUnclaimed(
      id: string,
      expected: unknown,
      step: Omit<DeliveryStep, 'id' | 'attempt' | 'finished'>,
      now: Date,
    ): Promise<boolean> {
      const rows = await db
        .update(d)
        .set({
          snapshot: step.snapshot,
          status: step.status,
          attempts: step.attempts,
          failedBecause: step.failedBecause,
          machineVersion: DELIVERY_MACHINE_VERSION,
          nextAttemptAt:
            step.nextAttemptAt === null
              ? null
              : sql`${new Date(step.nextAttemptAt).toISOString()}::timestamptz`,
          claimedBy: null,
        })
        .where(
          and(
            eq(d.id, id),
            expected === null
              ? sql`${d.snapshot} IS NULL`
              : sql`${d.snapshot} = ${JSON.stringify(expected)}::jsonb`,
            or(
              sql`${d.claimedBy} IS NULL`,
              sql`${d.claimedBy} NOT IN (${liveInstances(now.toISOString())})`,
            ),
          ),
        )
        .returning({ id: d.id })
      return rows.length === 1
    },

    /**
     * Deletes outbox events fanned out before `before`; events not fanned out yet are never pruned.
     */
    async pruneOutbox(before: Date): Promise<number> {
      const rows = await db
        .delete(outbox)
        .where(and(isNotNull(outbox.dispatchedAt), lt(outbox.dispatchedAt, before)))
        .returning({ id: outbox.id })
      return rows.length
    },

    /** Gives this instance's claims back (shutdown), so another instance takes the work at once. */
    async release(owner: string) {
      await db.update(d).set({ claimedBy: null }).where(eq(d.claimedBy, owner))
    },

    async attempts(id: string) {
      return db.select().from(w).where(eq(w.deliveryId, id)).orderBy(w.number, w.id)
    },

    /** The delivery log, newest first (as the log indexes are spelled, so they serve the sort). */
    async list(
      scope: ProjectFilter,
      f: {
        status?: DeliveryStatus
        endpointId?: string
        transactionId?: string
        limit: number
        before?: { id: string; createdAt: Date }
      },
    ) {
      const cursor = f.before
        ? or(
            lt(d.createdAt, f.before.createdAt),
            and(eq(d.createdAt, f.before.createdAt), lt(d.id, f.before.id)),
          )
        : undefined
      return db
        .select()
        .from(d)
        .where(
          scoped(
            scope,
            f.status ? eq(d.status, f.status) : undefined,
            f.endpointId ? eq(d.endpointId, f.endpointId) : undefined,
            f.transactionId ? eq(d.transactionId, f.transactionId) : undefined,
            cursor,
          ),
        )
        .orderBy(sql`${d.createdAt} DESC NULLS LAST`, sql`${d.id} DESC NULLS LAST`)
        .limit(f.limit)
    },

    /** When a delivery was made, for paging from it. */
    async createdAt(id: string, scope: ProjectFilter): Promise<Date | null> {
      const [b] = await db
        .select({ createdAt: d.createdAt })
        .from(d)
        .where(scoped(scope, eq(d.id, id)))
      return b?.createdAt ?? null
    },

    /** The enabled endpoints of a project and mode that selected an event type. */
    async subscribers(projectId: string, mode: Mode, eventType: string): Promise<string[]> {
      const rows = await db
        .select({ id: webhookEndpoints.id })
        .from(webhookEndpoints)
        .where(
          and(
            eq(webhookEndpoints.projectId, projectId),
            eq(webhookEndpoints.mode, mode),
            eq(webhookEndpoints.enabled, true),
            hears(sql`${eventType}::text`),
          ),
        )
      return rows.map((r) => r.id)
    },
  }
}

export type DeliveryRepo = ReturnType<typeof createDeliveryRepo>
export type DeliveryRow = typeof webhookDeliveries.$inferSelect
