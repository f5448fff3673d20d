import { sql } from 'drizzle-orm'
import { REFUND_STATUSES } from '../../machines/refund.machine.ts'
import type { QuoteRates, RecordedRate } from '../../machines/transaction.machine.ts'
import {
  bigint,
  bigserial,
  boolean,
  date,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core'

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' })

export const projects = pgTable('projects', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  status: text('status', { enum: ['active', 'inactive'] })
    .notNull()
    .default('active'),
  rateLimitMinute: integer('rate_limit_minute').notNull().default(60),
  rateLimitHour: integer('rate_limit_hour').notNull().default(1000),
  rateLimitDay: integer('rate_limit_day').notNull().default(10000),
  /** CIDRs; empty means no restriction (docs/decisions/0022-api-keys-and-scopes.md). */
  ipAllowlist: text('ip_allowlist').array().notNull().default(sql`'{}'::text[]`),
  createdAt: ts('created_at').notNull().defaultNow(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
})

export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    /**
     * SHA-256 of the full key; the key itself is never stored
     * (docs/decisions/0022-api-keys-and-scopes.md).
     */
    hash: text('hash').notNull().unique(),
    /** What the dashboard shows, e.g. `sk_test_AbCd…wxyz`. */
    displayPrefix: text('display_prefix').notNull(),
    scopes: text('scopes').array().notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
    lastUsedAt: ts('last_used_at'),
    revokedAt: ts('revoked_at'),
  },
  (t) => [index('api_keys_project_idx').on(t.projectId)],
)

export const transactions = pgTable(
  'transactions',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    testingMode: boolean('testing_mode').notNull(),
    transactionNumber: text('transaction_number').notNull().unique(),
    status: text('status').notNull(),
    /**
     * The USD value at creation (docs/decisions/0064-priced-in-the-merchants-currency.md): the
     * amount itself for USD, else the amount at `usdRate`, to the nearest cent.
     */
    amountUsd: numeric('amount_usd', { precision: 12, scale: 2 }).notNull(),
    /** ISO 4217. */
    currency: text('currency').notNull().default('USD'),
    /** The amount charged, in `currency`, with at most its minor units' places. */
    amountInCurrency: numeric('amount_in_currency', { precision: 18, scale: 3 }).notNull(),
    /** The currency's USD rate `amountUsd` was computed with; null for USD. */
    usdRate: jsonb('usd_rate').$type<RecordedRate>(),
    /** The rates the locked quote was computed with; null until a token is chosen. */
    quoteRates: jsonb('quote_rates').$type<QuoteRates>(),
    orderId: text('order_id'),
    orderDescription: text('order_description'),
    customerEmail: text('customer_email'),
    customerName: text('customer_name'),
    customerIpAddress: text('customer_ip_address'),
    metadata: jsonb('metadata').$type<Record<string, string | number | boolean | null>>(),
    successUrl: text('success_url'),
    cancelUrl: text('cancel_url'),
    tokenSymbol: text('token_symbol'),
    /** Smallest token units, exact (numeric(78,0) holds any uint256). */
    tokenAmount: numeric('token_amount', { precision: 78, scale: 0 }),
    blockchainNetwork: text('blockchain_network'),
    depositAddress: text('deposit_address'),
    amountReceived: numeric('amount_received', { precision: 78, scale: 0 }),
    transactionHash: text('transaction_hash'),
    /**
     * What `transactionHash` is the hash of: the transaction that paid, or (native coin a contract
     * sent by an internal call, on a node that cannot trace) the block it arrived in. Null with it.
     */
    transactionHashNames: text('transaction_hash_names', { enum: ['transaction', 'block'] }),
    blockNumber: bigint('block_number', { mode: 'number' }),
    confirmations: integer('confirmations'),
    requiredConfirmations: integer('required_confirmations'),
    /**
     * confirmations, safe or finalized: what completes the payment on its network
     * (docs/decisions/0043-finality-per-network.md); null before a token is selected.
     */
    finality: text('finality', { enum: ['confirmations', 'safe', 'finalized'] }),
    /**
     * The native balance its deposit address already held when the native coin was first quoted on
     * `nativeBaselineNetwork`: not a payment (coin sent there before, e.g. under the same xpub in
     * another database). Arrivals by internal call are counted above it. Kept when the customer
     * chooses the native coin again on that network, so a payment that arrived meanwhile and is not
     * seen yet is not taken for coin held before. Null: never quoted in the native coin.
     */
    nativeBaseline: numeric('native_baseline', { precision: 78, scale: 0 }),
    /** The network `nativeBaseline` was read on (null for a baseline kept before this column). */
    nativeBaselineNetwork: text('native_baseline_network'),
    confirmedAt: ts('confirmed_at'),
    completedAt: ts('completed_at'),
    expiresAt: ts('expires_at').notNull(),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
    /** Optimistic concurrency: every transition bumps it. */
    version: integer('version').notNull().default(0),
    /**
     * Any amount pays it (docs/decisions/0065-coinbase-commerce-drop-in.md: a Commerce `no_price`
     * charge): its quote asks for one smallest unit, and the pay page names no amount.
     */
    anyAmount: boolean('any_amount').notNull().default(false),
    /**
     * What a charge made through the Commerce API carries beyond a transaction
     * (docs/decisions/0065-coinbase-commerce-drop-in.md); null for a transaction made otherwise.
     */
    commerce: jsonb('commerce').$type<CommerceFacts>(),
  },
  (t) => [
    index('transactions_list_idx').on(t.projectId, t.testingMode, t.createdAt.desc(), t.id.desc()),
    index('transactions_status_idx').on(t.projectId, t.testingMode, t.status, t.createdAt.desc()),
    // The deposit addresses a follower compares native balances of
    // (docs/decisions/0046-native-coin-by-internal-call.md): few, found without a scan.
    index('transactions_native_watch_idx')
      .on(t.blockchainNetwork, t.tokenSymbol)
      .where(sql`status in ('prepared', 'pending', 'processing', 'confirming')`),
  ],
)

/** A Commerce charge's own facts (docs/decisions/0065-coinbase-commerce-drop-in.md). */
export interface CommerceFacts {
  name: string | null
  description: string | null
  pricingType: 'fixed_price' | 'no_price'
  /** The checkout it was opened from. */
  checkoutId: string | null
  /** When the merchant resolved it (an unresolved charge they accepted as it is). */
  resolvedAt?: string
}

export type TransactionRow = typeof transactions.$inferSelect
export type NewTransactionRow = typeof transactions.$inferInsert

/**
 * Running server instances: each renews its own lease while it lives, so the lease over all
 * its actors costs one row update however many transactions it runs.
 */
export const instances = pgTable('instances', {
  id: text('id').primaryKey(),
  leaseUntil: ts('lease_until').notNull(),
  startedAt: ts('started_at').notNull(),
})

/**
 * The persisted actor of each active transaction (docs/decisions/0027-transaction-actors.md): its
 * XState snapshot, the machine version that wrote it, and the instance that runs it (whose lease in
 * `instances` says until when). The row goes away when the transaction reaches a final status.
 */
export const transactionActors = pgTable(
  'transaction_actors',
  {
    transactionId: uuid('transaction_id')
      .primaryKey()
      .references(() => transactions.id, { onDelete: 'cascade' }),
    snapshot: jsonb('snapshot').notNull(),
    machineVersion: integer('machine_version').notNull(),
    owner: text('owner'),
  },
  (t) => [index('transaction_actors_owner_idx').on(t.owner)],
)

/**
 * The timeline: one row per applied transition, with its cause and details
 * (docs/decisions/0012-transaction-lifecycle.md).
 */
export const transactionEvents = pgTable(
  'transaction_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    transactionId: uuid('transaction_id')
      .notNull()
      .references(() => transactions.id, { onDelete: 'cascade' }),
    fromStatus: text('from_status'),
    toStatus: text('to_status').notNull(),
    cause: text('cause').notNull(),
    details: jsonb('details').$type<Record<string, unknown>>().notNull(),
    at: ts('at').notNull(),
  },
  (t) => [index('transaction_events_tx_idx').on(t.transactionId, t.id)],
)

/**
 * Domain events for merchants, written in the same database transaction as the state change
 * they announce (transactional outbox); the webhook dispatcher reads them in id order.
 */
export const outbox = pgTable(
  'outbox',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    transactionId: uuid('transaction_id')
      .notNull()
      .references(() => transactions.id, { onDelete: 'cascade' }),
    projectId: text('project_id').notNull(),
    testingMode: boolean('testing_mode').notNull(),
    eventType: text('event_type').notNull(),
    /** The webhook payload's `data` as it was at the transition. */
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    createdAt: ts('created_at').notNull(),
    dispatchedAt: ts('dispatched_at'),
    /** `x-service-sequence`: the transaction's version after the change this event announces. */
    sequence: integer('sequence').notNull().default(0),
    /**
     * The event's id, the same in every delivery of it (`webhook-id`), given when it is fanned out;
     * the Commerce API's events are found by it.
     */
    eventId: text('event_id'),
  },
  (t) => [
    index('outbox_pending_idx').on(t.id).where(sql`dispatched_at is null`),
    uniqueIndex('outbox_event_id_idx').on(t.eventId),
    index('outbox_project_idx').on(t.projectId, t.testingMode, t.id.desc()),
    index('outbox_transaction_idx').on(t.transactionId, t.id),
  ],
)

/**
 * docs/decisions/0006-idempotent-create.md: first response of a create call, replayed for the same
 * key and body within 24 h.
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    key: text('key').notNull(),
    requestHash: text('request_hash').notNull(),
    statusCode: integer('status_code').notNull(),
    /** The exact bytes first sent, so a replay is byte-identical. */
    response: text('response').notNull(),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.mode, t.key] }),
    index('idempotency_created_idx').on(t.createdAt),
  ],
)

/**
 * docs/decisions/0023-rate-limits-exact.md: one row per subject (a project or a client IP) holding
 * its three fixed windows, so a grant is one row lock and one statement
 * (src/limits/rate-limit.repo.ts).
 */
export const rateLimits = pgTable(
  'rate_limits',
  {
    subject: text('subject').primaryKey(),
    minuteStart: ts('minute_start').notNull(),
    minuteUsed: integer('minute_used').notNull(),
    hourStart: ts('hour_start').notNull(),
    hourUsed: integer('hour_used').notNull(),
    dayStart: ts('day_start').notNull(),
    dayUsed: integer('day_used').notNull(),
    /** Units granted by the last statement, so its RETURNING can tell usage before and after. */
    lastGrant: integer('last_grant').notNull(),
  },
  (t) => [index('rate_limits_day_idx').on(t.dayStart)],
)

export const users = pgTable('users', {
  id: text('id').primaryKey(),
  email: text('email').notNull().unique(),
  passwordHash: text('password_hash').notNull(),
  createdAt: ts('created_at').notNull().defaultNow(),
  /**
   * Wrong passwords since the last right one: the account locks at a threshold
   * (docs/decisions/0036-dashboard-sign-in-and-sessions.md).
   */
  failedSignIns: integer('failed_sign_ins').notNull().default(0),
  lockedUntil: ts('locked_until'),
})

/**
 * Dashboard sign-in sessions, server-side: the cookie holds a random token, this table only its
 * SHA-256, so a leaked table opens no session. Idle expiry follows `last_seen_at`; `expires_at`
 * is the absolute end however active the session is.
 */
export const dashboardSessions = pgTable(
  'dashboard_sessions',
  {
    tokenHash: text('token_hash').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    createdAt: ts('created_at').notNull(),
    lastSeenAt: ts('last_seen_at').notNull(),
    expiresAt: ts('expires_at').notNull(),
  },
  (t) => [
    index('dashboard_sessions_user_idx').on(t.userId),
    index('dashboard_sessions_expires_idx').on(t.expiresAt),
  ],
)

export const projectMembers = pgTable(
  'project_members',
  {
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.projectId] })],
)

/**
 * Facts about this database the instances must agree on, such as which SECRET_KEY sealed its
 * secrets.
 */
export const settings = pgTable('settings', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
})

export const WEBHOOK_EVENT_TYPES = [
  'transaction.created',
  'transaction.payment_received',
  'transaction.confirming',
  'transaction.completed',
  'transaction.failed',
  'transaction.expired',
  'transaction.cancelled',
  'transaction.payment_reversed',
  'refund.completed',
  'refund.failed',
  'webhook_endpoint.disabled',
] as const
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number]

/**
 * Outbox events no standard endpoint subscribes to: only Commerce-format endpoints hear them, as
 * charge:delayed and charge:resolved (docs/decisions/0065-coinbase-commerce-drop-in.md). A payment
 * reached a transaction already in a final status; the merchant resolved an unresolved charge.
 */
export const LATE_PAYMENT_EVENT = 'transaction.payment_late'
export const RESOLVED_EVENT = 'transaction.resolved'

/**
 * docs/decisions/0021-webhook-endpoints-and-private-addresses.md: where a project's events go, per
 * mode. The signing secret is sealed with SECRET_KEY.
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    url: text('url').notNull(),
    eventTypes: text('event_types').array().notNull(),
    /** AES-256-GCM under SECRET_KEY, bound to the endpoint id (src/lib/secret-box.ts). */
    secretSealed: text('secret_sealed').notNull(),
    enabled: boolean('enabled').notNull().default(true),
    /**
     * Why it is disabled (docs/decisions/0048-webhook-endpoint-health.md): by hand, answered 410
     * Gone, or every delivery failed for WEBHOOK_DISABLE_AFTER.
     */
    disabledReason: text('disabled_reason', { enum: ['manual', 'gone', 'failing'] }),
    disabledAt: ts('disabled_at'),
    /** The first failed attempt since the last success; null while it answers. */
    failingSince: ts('failing_since'),
    /**
     * What its requests look like: `standard` (docs/integrating/webhooks.md) or `commerce`, Coinbase
     * Commerce's envelope and signature (docs/decisions/0065-coinbase-commerce-drop-in.md).
     */
    format: text('format', { enum: ['standard', 'commerce'] })
      .notNull()
      .default('standard'),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [index('webhook_endpoints_project_idx').on(t.projectId, t.mode)],
)

/**
 * One event to one endpoint (docs/decisions/0032-webhook-delivery-actors.md): the persisted
 * webhook-delivery actor. `snapshot` is the machine's (null until its first step: the actor then
 * starts from the row's event time and first due time); `status`, `attempts`, `next_attempt_at` and
 * `failed_because` project it for the delivery log. An unfinished delivery runs as an actor on the
 * instance in `claimed_by`, whose lease in `instances` covers it; when that lease ends, another
 * instance claims it.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: text('id').primaryKey(),
    /** `x-service-event-id`: the same across retries and endpoints of one event. */
    eventId: text('event_id').notNull(),
    endpointId: text('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    projectId: text('project_id').notNull(),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    /** Null for a test event sent from the dashboard or CLI. */
    transactionId: uuid('transaction_id'),
    eventType: text('event_type').notNull(),
    /** The payload's `data`; the root's `timestamp` is the time each attempt is sent. */
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    /** A test event: the payload says so. */
    test: boolean('test').notNull().default(false),
    /**
     * `x-service-sequence`: the transaction's version after the change announced; 0 for an event
     * not about a transaction's status.
     */
    sequence: integer('sequence').notNull().default(0),
    status: text('status', { enum: ['pending', 'retrying', 'success', 'failed'] }).notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: ts('next_attempt_at'),
    lastAttemptAt: ts('last_attempt_at'),
    lastStatusCode: integer('last_status_code'),
    /** Why a failed delivery stopped: exhausted, too_old or manual_attempt_failed. */
    failedBecause: text('failed_because', {
      enum: ['exhausted', 'too_old', 'manual_attempt_failed'],
    }),
    snapshot: jsonb('snapshot'),
    machineVersion: integer('machine_version').notNull(),
    claimedBy: text('claimed_by'),
    eventAt: ts('event_at').notNull(),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [
    index('webhook_deliveries_unfinished_idx')
      .on(t.claimedBy)
      .where(sql`status in ('pending', 'retrying')`),
    index('webhook_deliveries_log_idx').on(t.projectId, t.mode, t.createdAt.desc()),
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.createdAt.desc()),
    index('webhook_deliveries_tx_idx').on(t.transactionId),
  ],
)

/** The delivery log: one row per attempt (Svix-style). */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    deliveryId: text('delivery_id')
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: 'cascade' }),
    number: integer('number').notNull(),
    trigger: text('trigger', { enum: ['scheduled', 'manual'] }).notNull(),
    /** When the attempt was due; `started_at` minus this is how late it ran. */
    scheduledFor: ts('scheduled_for'),
    startedAt: ts('started_at').notNull(),
    durationMs: integer('duration_ms').notNull(),
    statusCode: integer('status_code'),
    /** The exact bytes sent (the signature covers them). */
    requestBody: text('request_body').notNull(),
    /** At most 2 KiB of what the endpoint answered. */
    responseBody: text('response_body'),
    error: text('error'),
  },
  (t) => [index('webhook_attempts_delivery_idx').on(t.deliveryId, t.number)],
)

/**
 * docs/decisions/0017-deposit-addresses-from-an-xpub.md: per project and mode, the extended public
 * key deposit addresses are derived from, and the next child index to hand out (taken by one UPDATE
 * ... RETURNING, so never twice).
 */
export const projectXpubs = pgTable(
  'project_xpubs',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    xpub: text('xpub').notNull(),
    nextIndex: integer('next_index').notNull().default(0),
    /**
     * true: generated by the service for test mode (nobody holds its keys); false: set by the
     * operator.
     */
    generated: boolean('generated').notNull().default(false),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.mode] })],
)

/**
 * Every deposit address handed out: one transaction each, never reused
 * (docs/decisions/0017-deposit-addresses-from-an-xpub.md). Lowercase hex.
 */
export const depositAddresses = pgTable(
  'deposit_addresses',
  {
    address: text('address').primaryKey(),
    transactionId: uuid('transaction_id')
      .notNull()
      .unique()
      .references(() => transactions.id, { onDelete: 'cascade' }),
    projectId: text('project_id').notNull(),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    xpub: text('xpub').notNull(),
    derivationIndex: integer('derivation_index').notNull(),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [
    // The treasury lists a project's addresses in derivation order
    // (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md).
    index('deposit_addresses_owner_idx').on(t.projectId, t.mode, t.xpub, t.derivationIndex),
  ],
)

/**
 * Which instance follows each network (docs/decisions/0045-one-follower-per-network.md): one
 * follower per network across instances, under that instance's lease, so transfers are recorded and
 * judged by one instance at a time.
 */
export const chainFollowers = pgTable('chain_followers', {
  network: text('network').primaryKey(),
  owner: text('owner'),
})

/** Each network's block follower cursor: last processed height and the recent hash window. */
export const chainCursors = pgTable('chain_cursors', {
  network: text('network').primaryKey(),
  cursor: text('cursor').notNull(),
  updatedAt: ts('updated_at').notNull(),
})

/**
 * Every transfer seen to a deposit address (docs/decisions/0031-transfers-recorded-then-judged.md):
 * payments, wrong assets and late payments (docs/decisions/0014-amounts-add-up.md), per block it
 * was seen in. `applied` turns true once its lifecycle event was judged, so a follower redelivering
 * a block after a crash applies what was not applied, once.
 */
export const chainTransfers = pgTable(
  'chain_transfers',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    network: text('network').notNull(),
    txHash: text('tx_hash').notNull(),
    /** -1 for a native transfer. */
    logIndex: integer('log_index').notNull(),
    blockNumber: bigint('block_number', { mode: 'number' }).notNull(),
    blockHash: text('block_hash').notNull(),
    tokenSymbol: text('token_symbol').notNull(),
    fromAddress: text('from_address').notNull(),
    toAddress: text('to_address').notNull(),
    amount: numeric('amount', { precision: 78, scale: 0 }).notNull(),
    transactionId: uuid('transaction_id')
      .notNull()
      .references(() => transactions.id, { onDelete: 'cascade' }),
    /** payment, wrong_asset or late (after a final status); decided when applied. */
    kind: text('kind', { enum: ['pending', 'payment', 'wrong_asset', 'late'] })
      .notNull()
      .default('pending'),
    applied: boolean('applied').notNull().default(false),
    /** Set when its block left the canonical chain. */
    reorgedAt: ts('reorged_at'),
    seenAt: ts('seen_at').notNull(),
    /**
     * Failed tries to judge it (docs/decisions/0054-one-bad-transfer-never-halts-a-network.md): one
     * bad transfer waits and is retried, the rest of the chain goes on.
     */
    attempts: integer('attempts').notNull().default(0),
    /** When a failed transfer is tried again. */
    retryAt: ts('retry_at'),
    lastError: text('last_error'),
  },
  (t) => [
    uniqueIndex('chain_transfers_seen_idx').on(t.network, t.txHash, t.logIndex, t.blockHash),
    index('chain_transfers_block_idx').on(t.network, t.blockHash),
    index('chain_transfers_tx_idx').on(t.transactionId),
  ],
)

/**
 * Refunds (docs/decisions/0038-refunds.md): money sent back to a customer from the transaction's
 * deposit address (or the merchant's gas account once that was swept), paid by the merchant's
 * treasury tool and confirmed on-chain by the service. `snapshot` is the refund machine's
 * (machines/refund.machine.ts); the columns after it project it. The transaction the tool recorded
 * before sending it (`tx_hash`, `raw_transaction`) is the one the service watches.
 */
export const refunds = pgTable(
  'refunds',
  {
    id: text('id').primaryKey(),
    transactionId: uuid('transaction_id')
      .notNull()
      .references(() => transactions.id, { onDelete: 'cascade' }),
    projectId: text('project_id').notNull(),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    network: text('network').notNull(),
    tokenSymbol: text('token_symbol').notNull(),
    /** Smallest token units. */
    amount: numeric('amount', { precision: 78, scale: 0 }).notNull(),
    /** Where it goes, EIP-55 checksummed. */
    address: text('address').notNull(),
    reason: text('reason'),
    /** The transaction's deposit address (lowercase): paid from there while it holds enough. */
    depositAddress: text('deposit_address').notNull(),
    status: text('status', { enum: REFUND_STATUSES }).notNull(),
    snapshot: jsonb('snapshot').notNull(),
    machineVersion: integer('machine_version').notNull(),
    /**
     * The account the recorded payment spends from: the deposit address or the gas account
     * (lowercase).
     */
    paidFrom: text('paid_from'),
    /** The gas account that sends the payment (lowercase). */
    sender: text('sender'),
    txHash: text('tx_hash'),
    /**
     * The signed transaction as recorded before it was sent, so it can be sent again as it is (its
     * nonce keeps it from paying twice).
     */
    rawTransaction: text('raw_transaction'),
    txNonce: bigint('tx_nonce', { mode: 'number' }),
    blockNumber: bigint('block_number', { mode: 'number' }),
    blockHash: text('block_hash'),
    confirmations: integer('confirmations'),
    failureReason: text('failure_reason', { enum: ['reverted', 'unpayable'] }),
    failureDetail: text('failure_detail'),
    version: integer('version').notNull().default(0),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
    submittedAt: ts('submitted_at'),
    completedAt: ts('completed_at'),
  },
  (t) => [
    index('refunds_list_idx').on(t.projectId, t.mode, t.createdAt.desc(), t.id.desc()),
    index('refunds_tx_idx').on(t.transactionId),
    // One on-chain payment pays one refund.
    uniqueIndex('refunds_payment_idx').on(t.network, t.txHash).where(sql`tx_hash is not null`),
    // What a network's follower watches on every head: few rows, found without a scan.
    index('refunds_in_flight_idx').on(t.network).where(sql`status in ('submitted', 'confirming')`),
  ],
)

export type RefundRow = typeof refunds.$inferSelect

export const SWEEP_STATUSES = ['submitted', 'confirming', 'confirmed', 'failed', 'dropped'] as const
export type SweepStatus = (typeof SWEEP_STATUSES)[number]

/**
 * Sweeps (docs/decisions/0039-sweeps-by-eip-7702-or-top-up.md): one batch transaction of the
 * treasury tool moving deposit addresses' balances to the merchant's treasury, recorded before it
 * was sent and confirmed by the service from its receipt: `confirmed` once it has the network's
 * confirmations (what each address gave is then read from its Swept events), `failed` when it
 * reverted, `dropped` when its nonce went to another transaction of the gas account, so it can
 * never be mined.
 */
export const sweeps = pgTable(
  'sweeps',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    network: text('network').notNull(),
    /** Where the funds go, EIP-55 checksummed. */
    treasury: text('treasury').notNull(),
    /** The gas account that sends and pays for it (lowercase). */
    sender: text('sender').notNull(),
    txHash: text('tx_hash').notNull(),
    rawTransaction: text('raw_transaction').notNull(),
    txNonce: bigint('tx_nonce', { mode: 'number' }).notNull(),
    status: text('status', { enum: SWEEP_STATUSES }).notNull(),
    blockNumber: bigint('block_number', { mode: 'number' }),
    blockHash: text('block_hash'),
    confirmations: integer('confirmations'),
    gasUsed: numeric('gas_used', { precision: 78, scale: 0 }),
    /** What the gas account paid, in the native coin's smallest unit. */
    fee: numeric('fee', { precision: 78, scale: 0 }),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
    confirmedAt: ts('confirmed_at'),
  },
  (t) => [
    uniqueIndex('sweeps_tx_idx').on(t.network, t.txHash),
    index('sweeps_list_idx').on(t.projectId, t.mode, t.createdAt.desc(), t.id.desc()),
    index('sweeps_in_flight_idx').on(t.network).where(sql`status in ('submitted', 'confirming')`),
  ],
)

export type SweepRow = typeof sweeps.$inferSelect

/**
 * What one sweep takes from one deposit address in one token: planned by the tool, swept as its
 * Swept event says.
 */
export const sweepItems = pgTable(
  'sweep_items',
  {
    sweepId: text('sweep_id')
      .notNull()
      .references(() => sweeps.id, { onDelete: 'cascade' }),
    /** Lowercase, like deposit_addresses.address. */
    address: text('address').notNull(),
    tokenSymbol: text('token_symbol').notNull(),
    planned: numeric('planned', { precision: 78, scale: 0 }).notNull(),
    /**
     * Set once the sweep is confirmed: what the Swept event moved (0 when the address's call
     * failed).
     */
    swept: numeric('swept', { precision: 78, scale: 0 }),
  },
  (t) => [
    primaryKey({ columns: [t.sweepId, t.address, t.tokenSymbol] }),
    index('sweep_items_address_idx').on(t.address),
  ],
)

/**
 * `sending`: recorded, perhaps not broadcast yet; `sent`: the node took it; `refused`: the node
 * did not (no gas spent); then, from its receipt, `succeeded` or `reverted`, or `dropped` once it
 * can no longer be mined and no node holds it (no gas spent).
 */
/**
 * Every signed transaction the service records as money out, whichever record holds it
 * (src/chain/outgoing-claims.repo.ts): a sweep's, or a refund's payment. One transaction is one
 * or the other, so money that left a deposit address is never counted twice (as swept and as
 * refunded).
 */
export const outgoingTransactions = pgTable(
  'outgoing_transactions',
  {
    network: text('network').notNull(),
    /** Lowercase hex. */
    txHash: text('tx_hash').notNull(),
    kind: text('kind', { enum: ['sweep', 'refund'] }).notNull(),
    /** The sweep's or the refund's id. */
    recordId: text('record_id').notNull(),
  },
  (t) => [primaryKey({ columns: [t.network, t.txHash] })],
)

export const RELAYED_STATUSES = [
  'sending',
  'sent',
  'refused',
  'succeeded',
  'reverted',
  'dropped',
] as const
export type RelayedStatus = (typeof RELAYED_STATUSES)[number]

/**
 * EIP-3009 authorizations the relayer submits (src/chain/signature-pay/relayer.ts): recorded before the
 * transaction is sent, with the signed transaction, so a crash between the two sends the same
 * bytes again (its nonce keeps it from being mined twice; the token's nonce keeps the payment from
 * moving twice). The payment itself is found by the follower like any transfer: these rows only
 * account for the relayer's gas and refuse a reused authorization before any gas is spent.
 */
export const relayedAuthorizations = pgTable(
  'relayed_authorizations',
  {
    id: text('id').primaryKey(),
    transactionId: uuid('transaction_id').references(() => transactions.id, {
      onDelete: 'cascade',
    }),
    projectId: text('project_id').notNull(),
    network: text('network').notNull(),
    /** The token contract (lowercase). */
    token: text('token').notNull(),
    /** The payer who signed (lowercase). */
    payer: text('payer').notNull(),
    /** Where the tokens go: a deposit address (lowercase). */
    payTo: text('pay_to').notNull(),
    value: numeric('value', { precision: 78, scale: 0 }).notNull(),
    validBefore: bigint('valid_before', { mode: 'bigint' }).notNull(),
    /** The authorization's 32-byte nonce (lowercase hex). */
    nonce: text('nonce').notNull(),
    /** The relayer's own account that sends it (lowercase). */
    sender: text('sender').notNull(),
    txNonce: bigint('tx_nonce', { mode: 'number' }).notNull(),
    rawTransaction: text('raw_transaction').notNull(),
    txHash: text('tx_hash').notNull(),
    /** The most the relayer can pay in gas for it (gas limit x max fee), in wei. */
    maxCostWei: numeric('max_cost_wei', { precision: 78, scale: 0 }).notNull(),
    status: text('status', { enum: RELAYED_STATUSES }).notNull(),
    /**
     * Who asked for it, for the cool-down after a revert (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md):
     * `ip:<address>` (an IPv6 address by its /64) for the pay page and a transaction's x402_url;
     * null for the facilitator, whose caller is the merchant's own server.
     */
    client: text('client'),
    /** From the receipt: gas used and what it cost (gas used x effective price, plus any L1 fee). */
    gasUsed: numeric('gas_used', { precision: 78, scale: 0 }),
    costWei: numeric('cost_wei', { precision: 78, scale: 0 }),
    resolvedAt: ts('resolved_at'),
    /**
     * When the facilitator first answered a settle of it with success: a settle of the same
     * authorization after that is a replay, refused (docs/decisions/0063-x402.md).
     */
    answeredAt: ts('answered_at'),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [
    // One authorization is relayed once: the token refuses a nonce used before, and so do we.
    uniqueIndex('relayed_authorizations_nonce_idx').on(t.network, t.token, t.payer, t.nonce),
    // The spend, failures and cool-downs of the last hour, per network.
    index('relayed_authorizations_spend_idx').on(t.network, t.createdAt),
    // Relays whose outcome is not known yet, watched until it is.
    index('relayed_authorizations_unresolved_idx')
      .on(t.status)
      .where(sql`${t.status} in ('sending', 'sent')`),
    // A transfer to an x402 address is its transaction's by the relayer's transaction hash.
    index('relayed_authorizations_tx_idx').on(t.txHash),
    // A transaction's earlier signed payments, so a second does not charge twice.
    index('relayed_authorizations_transaction_idx').on(t.transactionId),
  ],
)

/**
 * Where a project's own resources are paid over x402 through this service's facilitator
 * (docs/decisions/0063-x402.md): the merchant's treasury address per mode, set by the operator
 * (`project set-x402-pay-to`), never by an API key. A settle whose `payTo` is not it is refused.
 * Lowercase hex.
 */
export const x402PayTo = pgTable(
  'x402_pay_to',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    address: text('address').notNull(),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.mode] })],
)

/**
 * Commerce checkouts (docs/decisions/0065-coinbase-commerce-drop-in.md): a reusable payment page of
 * a project in one mode; each opening makes a charge (a transaction) from it.
 */
export const commerceCheckouts = pgTable(
  'commerce_checkouts',
  {
    id: uuid('id').primaryKey(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    mode: text('mode', { enum: ['test', 'live'] }).notNull(),
    name: text('name').notNull(),
    description: text('description'),
    pricingType: text('pricing_type', { enum: ['fixed_price', 'no_price'] }).notNull(),
    /** With `fixed_price`: the amount, with the currency's places, and the currency (ISO 4217). */
    amount: numeric('amount', { precision: 18, scale: 3 }),
    currency: text('currency'),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [
    index('commerce_checkouts_project_idx').on(
      t.projectId,
      t.mode,
      t.createdAt.desc(),
      t.id.desc(),
    ),
  ],
)

/**
 * Stats rollups (docs/decisions/0066-stats-from-settled-days.md): per project, mode, UTC day of
 * creation, status and currency, the count and sums of the transactions created that day, written
 * once every transaction of the day is in a final status (a final status never changes, nor does an
 * amount), so a rolled-up day never changes again. `transaction_rollup_marks` says through which
 * day each project and mode is rolled up.
 */
export const transactionRollups = pgTable(
  'transaction_rollups',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    testingMode: boolean('testing_mode').notNull(),
    day: date('day', { mode: 'string' }).notNull(),
    status: text('status').notNull(),
    currency: text('currency').notNull(),
    n: integer('n').notNull(),
    amountUsd: numeric('amount_usd', { precision: 20, scale: 2 }).notNull(),
    amountInCurrency: numeric('amount_in_currency', { precision: 26, scale: 3 }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.testingMode, t.day, t.status, t.currency] })],
)

export const transactionRollupMarks = pgTable(
  'transaction_rollup_marks',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    testingMode: boolean('testing_mode').notNull(),
    /** The last UTC day rolled up (every day up to it, inclusive). */
    throughDay: date('through_day', { mode: 'string' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.testingMode] })],
)
