import type { Database } from '../db/client.ts'
import { DELIVERY_MACHINE_VERSION, type DeliveryStatus, type StoredDelivery } from '../../machines/webhook-delivery.machine.ts'

/** A delivery claimed by this instance: everything needed to make its next attempt. */
export interface ClaimedDelivery {
  id: string
  eventId: string
  endpointId: string
  mode: 'test' | 'live'
  eventType: string
  data: Record<string, unknown>
  test: boolean
  stored: StoredDelivery
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

/** The outcome of one step of a delivery: its new snapshot and, when a request was made or refused, the attempt. */
export interface DeliveryResult {
  id: string
  status: DeliveryStatus
  stored: StoredDelivery
  attempt: AttemptRecord | null
}

/** A new delivery not tied to the outbox: a manual retry (R20) or a test event. */
export interface NewDelivery {
  endpointId: string
  projectId: string
  mode: 'test' | 'live'
  transactionId: string | null
  eventType: string
  data: Record<string, unknown>
  test: boolean
  stored: StoredDelivery
  eventAt: Date
}

const iso = (d: Date) => d.toISOString()
const CLAIMED_COLUMNS = 'd.id, d.event_id, d.endpoint_id, d.mode, d.event_type, d.data, d.test, d.snapshot'

/**
 * Fans outbox events out into deliveries, one per enabled endpoint of the event's project and
 * mode that selected its type, in the statement that marks the events dispatched. The
 * deliveries come back claimed by the caller, who sends them at once.
 * $1 batch size, $2 now, $3 initial snapshot (eventAt and nextAttemptAt filled in per event), $4 machine
 * version, $5 instance, $6 claim end.
 */
const FAN_OUT = `
WITH ev AS (
  SELECT id, transaction_id, project_id, testing_mode, event_type, data, created_at,
         'evt_' || replace(gen_random_uuid()::text, '-', '') AS event_id
  FROM outbox WHERE dispatched_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
), done AS (
  UPDATE outbox o SET dispatched_at = $2::timestamptz FROM ev WHERE o.id = ev.id
), ins AS (
  INSERT INTO webhook_deliveries AS d (id, event_id, endpoint_id, project_id, mode, transaction_id, event_type, data, test, status,
    attempts, next_attempt_at, snapshot, machine_version, claimed_by, claim_until, event_at, created_at)
  SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), ev.event_id, e.id, ev.project_id, e.mode, ev.transaction_id,
    ev.event_type, ev.data, false, 'pending', 0, $2::timestamptz,
    jsonb_set(jsonb_set($3::jsonb, '{context,eventAt}', to_jsonb(floor(extract(epoch from ev.created_at) * 1000)::bigint)),
      '{context,nextAttemptAt}', to_jsonb(floor(extract(epoch from $2::timestamptz) * 1000)::bigint)),
    $4::int, $5, $6::timestamptz, ev.created_at, $2::timestamptz
  FROM ev JOIN webhook_endpoints e ON e.project_id = ev.project_id
    AND e.mode = CASE WHEN ev.testing_mode THEN 'test' ELSE 'live' END
    AND e.enabled AND ev.event_type = ANY(e.event_types)
  ORDER BY ev.id
  RETURNING ${CLAIMED_COLUMNS}
)
SELECT (SELECT count(*) FROM ev)::int AS events, coalesce((SELECT jsonb_agg(ins) FROM ins), '[]'::jsonb) AS deliveries`

/** Due attempts nobody holds: $1 instance, $2 now, $3 batch size, $4 claim end. */
const CLAIM_DUE = `
WITH due AS (
  SELECT id FROM webhook_deliveries
  WHERE status IN ('pending', 'retrying') AND next_attempt_at <= $2::timestamptz
    AND (claim_until IS NULL OR claim_until < $2::timestamptz)
  ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED
)
UPDATE webhook_deliveries d SET claimed_by = $1, claim_until = $4::timestamptz FROM due WHERE d.id = due.id
RETURNING ${CLAIMED_COLUMNS}`

/**
 * Commits a batch of results: each delivery's projection and snapshot, and its attempt row,
 * only where this instance still holds the claim (a lapsed claim's result is dropped; the
 * new holder makes the attempt again). $1 instance, $2 the results as JSON.
 */
const COMMIT_RESULTS = `
WITH r AS (
  SELECT * FROM jsonb_to_recordset($2::jsonb) AS r(id text, status text, attempts int, next_attempt_at timestamptz, snapshot jsonb,
    number int, trigger text, scheduled_for timestamptz, started_at timestamptz, duration_ms int, status_code int,
    request_body text, response_body text, error text)
), u AS (
  UPDATE webhook_deliveries d SET status = r.status, attempts = r.attempts, next_attempt_at = r.next_attempt_at, snapshot = r.snapshot,
    last_attempt_at = coalesce(r.started_at, d.last_attempt_at),
    last_status_code = CASE WHEN r.started_at IS NULL THEN d.last_status_code ELSE r.status_code END,
    claimed_by = NULL, claim_until = NULL
  FROM r WHERE d.id = r.id AND d.claimed_by = $1
  RETURNING d.id
), a AS (
  INSERT INTO webhook_attempts (delivery_id, number, trigger, scheduled_for, started_at, duration_ms, status_code, request_body, response_body, error)
  SELECT r.id, r.number, r.trigger, r.scheduled_for, r.started_at, r.duration_ms, r.status_code, r.request_body, r.response_body, r.error
  FROM r JOIN u ON u.id = r.id WHERE r.started_at IS NOT NULL
)
SELECT id FROM u`

/** Inserts deliveries made outside the outbox, due at once and unclaimed: $1 rows as JSON, $2 machine version, $3 now. */
const INSERT_DELIVERIES = `
INSERT INTO webhook_deliveries (id, event_id, endpoint_id, project_id, mode, transaction_id, event_type, data, test, status,
  attempts, next_attempt_at, snapshot, machine_version, event_at, created_at)
SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), r.event_id, r.endpoint_id, r.project_id, r.mode, r.transaction_id,
  r.event_type, r.data, r.test, 'pending', 0, $3::timestamptz, r.snapshot, $2::int, r.event_at, $3::timestamptz
FROM jsonb_to_recordset($1::jsonb) AS r(event_id text, endpoint_id text, project_id text, mode text, transaction_id uuid,
  event_type text, data jsonb, test boolean, snapshot jsonb, event_at timestamptz)
RETURNING id, endpoint_id`

interface ClaimedRow {
  id: string
  event_id: string
  endpoint_id: string
  mode: 'test' | 'live'
  event_type: string
  data: Record<string, unknown> | string
  test: boolean
  snapshot: StoredDelivery | string
}

const json = <T>(v: T | string): T => (typeof v === 'string' ? JSON.parse(v) : v)
const claimed = (r: ClaimedRow): ClaimedDelivery => ({
  id: r.id, eventId: r.event_id, endpointId: r.endpoint_id, mode: r.mode, eventType: r.event_type, data: json(r.data), test: r.test, stored: json(r.snapshot),
})

/** The webhook dispatcher's statements; every hot one is a single prepared statement. */
export function createDeliveryRepo(database: Database) {
  return {
    async fanOut(opts: { limit: number; now: Date; initial: StoredDelivery; instanceId: string; claimUntil: Date }) {
      const [r] = await database.query<{ events: number; deliveries: ClaimedRow[] | string }>(FAN_OUT, [
        opts.limit, iso(opts.now), JSON.stringify(opts.initial), DELIVERY_MACHINE_VERSION, opts.instanceId, iso(opts.claimUntil),
      ])
      return { events: r.events, deliveries: json<ClaimedRow[]>(r.deliveries).map(claimed) }
    },

    async claimDue(opts: { instanceId: string; now: Date; limit: number; claimUntil: Date }): Promise<ClaimedDelivery[]> {
      const rows = await database.query<ClaimedRow>(CLAIM_DUE, [opts.instanceId, iso(opts.now), opts.limit, iso(opts.claimUntil)])
      return rows.map(claimed)
    },

    /** Returns the ids whose result was recorded (the others had lost their claim). */
    async commitResults(instanceId: string, results: DeliveryResult[]): Promise<Set<string>> {
      const payload = results.map((r) => ({
        id: r.id,
        status: r.status,
        attempts: r.stored.context.attempts,
        next_attempt_at: r.stored.context.nextAttemptAt === null ? null : iso(new Date(r.stored.context.nextAttemptAt)),
        snapshot: r.stored,
        number: r.attempt?.number ?? null,
        trigger: r.attempt?.trigger ?? null,
        scheduled_for: r.attempt?.scheduledFor ? iso(r.attempt.scheduledFor) : null,
        started_at: r.attempt ? iso(r.attempt.startedAt) : null,
        duration_ms: r.attempt?.durationMs ?? null,
        status_code: r.attempt?.statusCode ?? null,
        request_body: r.attempt?.requestBody ?? null,
        response_body: r.attempt?.responseBody ?? null,
        error: r.attempt?.error ?? null,
      }))
      const rows = await database.query<{ id: string }>(COMMIT_RESULTS, [instanceId, JSON.stringify(payload)])
      return new Set(rows.map((r) => r.id))
    },

    async insert(rows: (NewDelivery & { eventId: string })[], now: Date): Promise<{ id: string; endpointId: string }[]> {
      if (rows.length === 0) return []
      const payload = rows.map((r) => ({
        event_id: r.eventId, endpoint_id: r.endpointId, project_id: r.projectId, mode: r.mode, transaction_id: r.transactionId,
        event_type: r.eventType, data: r.data, test: r.test, snapshot: r.stored, event_at: iso(r.eventAt),
      }))
      const out = await database.query<{ id: string; endpoint_id: string }>(INSERT_DELIVERIES, [JSON.stringify(payload), DELIVERY_MACHINE_VERSION, iso(now)])
      return out.map((r) => ({ id: r.id, endpointId: r.endpoint_id }))
    },

    /**
     * Writes a delivery's new snapshot if it is still `expected` and no instance holds it (an
     * optimistic update: a manual redelivery changes only the deadline). $1 id, $2 expected, $3 next, $4 status, $5 next_attempt_at, $6 now.
     */
    async replaceSnapshot(id: string, expected: StoredDelivery, next: StoredDelivery, status: DeliveryStatus, now: Date): Promise<boolean> {
      const nextAt = next.context.nextAttemptAt === null ? null : iso(new Date(next.context.nextAttemptAt))
      const rows = await database.query(
        `UPDATE webhook_deliveries SET snapshot = $3::jsonb, status = $4, next_attempt_at = $5::timestamptz
         WHERE id = $1 AND snapshot = $2::jsonb AND (claim_until IS NULL OR claim_until < $6::timestamptz) RETURNING id`,
        [id, JSON.stringify(expected), JSON.stringify(next), status, nextAt, iso(now)])
      return rows.length === 1
    },

    /** Gives claims back (shutdown), so another instance takes the work at once. */
    async release(instanceId: string, ids: string[]) {
      if (ids.length === 0) return
      await database.query(`UPDATE webhook_deliveries SET claimed_by = NULL, claim_until = NULL WHERE claimed_by = $1 AND id = ANY(string_to_array($2, ','))`, [instanceId, ids.join(',')])
    },
  }
}

export type DeliveryRepo = ReturnType<typeof createDeliveryRepo>
