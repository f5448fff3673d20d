import { Type, type TObject, type TSchema } from '@sinclair/typebox'
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../db/schema.ts'
import { StringEnum } from '../lib/string-enum.ts'
import { type STATUSES, TransactionStatus } from '../modules/transactions/model.ts'

/**
 * The webhook bodies the service sends, as schemas: the OpenAPI document's `webhooks` are built
 * from them, and the tests check every delivery they receive against them. `data` follows the stage
 * table of docs/integrating/webhooks.md#events exactly: every key is always present, and a value is
 * null where the table says it is (at `transaction.created` the token fields are always null, at
 * `transaction.completed` they never are).
 */
const nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])
const timestamp = (description: string) => Type.String({ format: 'date-time', description })

const Metadata = Type.Record(
  Type.String(),
  Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]),
  { description: 'The metadata given at creation.' },
)

/** The fields of `data` that have a value at every stage. */
const always = (status: TSchema) => ({
  transaction_id: Type.String({
    format: 'uuid',
    description:
      "The transaction's id (not named `id`); de-duplicate deliveries by it and the event.",
  }),
  transaction_number: Type.String({ examples: ['TX-7K3M-Q9PD'] }),
  status,
  amount_in_currency: Type.Number({
    examples: [25],
    description:
      "The amount charged, in `currency`, as the transaction was created (its USD value is the transaction's `amount_usd`).",
  }),
  currency: Type.String({
    pattern: '^[A-Z]{3}$',
    examples: ['USD', 'EUR'],
    description: 'ISO 4217 code of the currency the transaction is priced in.',
  }),
  created_at: timestamp('When the transaction was created.'),
  testing_mode: Type.Boolean({ description: 'True for a test-mode transaction.' }),
})

/** The fields the stage table makes nullable, as schemas for "set" and for "not yet". */
const FIELDS = {
  token_symbol: Type.String({
    examples: ['USDC'],
    description: 'The token the customer selected, as shown to them (e.g. USDC).',
  }),
  token_amount: Type.String({
    pattern: '^[0-9]+$',
    examples: ['25000000'],
    description: "The quoted amount in the token's smallest unit, as a decimal string.",
  }),
  blockchain_network: Type.String({
    examples: ['ethereum'],
    description: 'The network of the selected token.',
  }),
  transaction_hash: Type.String({
    pattern: '^0x[0-9a-fA-F]{64}$',
    examples: [`0x${'5e'.repeat(32)}`],
    description:
      "The payment's on-chain transaction hash; for native coin a contract sent by an internal call, on a node that cannot trace calls, the hash of the block it arrived in (the transaction object's transaction_hash_names says which).",
  }),
  block_number: Type.Integer({ minimum: 0, description: 'The block that holds the payment.' }),
  confirmed_at: timestamp('When the payment reached its required confirmations.'),
}
type Field = keyof typeof FIELDS
type Presence = 'set' | 'null' | 'nullable'

/** `data` with each stage-dependent field set, null or either (omitted fields are "either"). */
function stageData(
  status: TSchema,
  presence: Partial<Record<Field, Presence>>,
  extra: Record<string, TSchema> = {},
) {
  const fields = Object.fromEntries(
    (Object.keys(FIELDS) as Field[]).map((f) => {
      const p = presence[f] ?? 'nullable'
      return [
        f,
        p === 'set'
          ? FIELDS[f]
          : p === 'null'
            ? Type.Null({ description: `Always null at this stage. ${FIELDS[f].description}` })
            : nullable(FIELDS[f]),
      ]
    }),
  )
  return Type.Object({
    ...always(status),
    token_symbol: fields.token_symbol,
    token_amount: fields.token_amount,
    blockchain_network: fields.blockchain_network,
    transaction_hash: fields.transaction_hash,
    block_number: fields.block_number,
    customer_ip_address: nullable(
      Type.String({ description: "The paying customer's IP address; may be null at any stage." }),
    ),
    order_id: nullable(
      Type.String({ description: "The merchant's order reference given at creation." }),
    ),
    metadata: nullable(Metadata),
    confirmed_at: fields.confirmed_at,
    ...extra,
  })
}

const status = (s: (typeof STATUSES)[number]) =>
  Type.Literal(s, { description: `Always \`${s}\` for this event.` })
const selected = { token_symbol: 'set', token_amount: 'set', blockchain_network: 'set' } as const

export const FAILURE_REASONS = ['underpaid', 'reverted', 'wrong_asset'] as const

/** The `data` of each transaction event, named for the document. */
const DATA = {
  'transaction.created': stageData(status('created'), {
    token_symbol: 'null',
    token_amount: 'null',
    blockchain_network: 'null',
    transaction_hash: 'null',
    block_number: 'null',
    confirmed_at: 'null',
  }),
  'transaction.payment_received': stageData(status('processing'), {
    ...selected,
    transaction_hash: 'set',
    block_number: 'nullable',
    confirmed_at: 'null',
  }),
  'transaction.confirming': stageData(status('confirming'), {
    ...selected,
    transaction_hash: 'set',
    block_number: 'set',
    confirmed_at: 'null',
  }),
  'transaction.completed': stageData(status('completed'), {
    ...selected,
    transaction_hash: 'set',
    block_number: 'set',
    confirmed_at: 'set',
  }),
  'transaction.failed': stageData(
    status('failed'),
    {},
    {
      failure_reason: StringEnum(FAILURE_REASONS, {
        description:
          'underpaid: less than the quote arrived before the deadline; reverted: the payment was reverted on-chain; wrong_asset: only another token or coin arrived.',
      }),
    },
  ),
  'transaction.expired': stageData(status('expired'), {}),
  'transaction.cancelled': stageData(status('cancelled'), {}),
  'transaction.payment_reversed': stageData(TransactionStatus, {}),
} satisfies Record<
  Exclude<WebhookEventType, 'webhook_endpoint.disabled' | `refund.${string}`>,
  TObject
>

/**
 * A refund event's `data` (docs/decisions/0038-refunds.md): the refunded transaction's fields as
 * every event carries them (it has finished, so its token fields are set; `status` is the
 * transaction's), and the refund under `refund`, whose status is the event's.
 */
const refundData = (refundStatus: 'completed' | 'failed') => {
  const completed = refundStatus === 'completed'
  const when = <T extends TSchema>(schema: T, description: string) =>
    completed ? { ...schema, description } : nullable(schema)
  return stageData(
    TransactionStatus,
    { ...selected },
    {
      refund: Type.Object(
        {
          id: Type.String({
            examples: ['rf_3kT9xPq2Vd8sLm4Na7Bc'],
            description: "The refund's id: de-duplicate refund events by it and the event.",
          }),
          status: Type.Literal(refundStatus, {
            description: `Always \`${refundStatus}\` for this event.`,
          }),
          amount: Type.String({
            pattern: '^[0-9]+$',
            description: "Refunded, in the token's smallest unit.",
          }),
          token_symbol: Type.String({
            description: "The token refunded (the payment's, or another asset that arrived).",
          }),
          blockchain_network: Type.String(),
          address: Type.String({
            pattern: '^0x[0-9a-fA-F]{40}$',
            description: 'Where the refund went (EIP-55).',
          }),
          reason: nullable(
            Type.String({ description: 'The reason given when the refund was made.' }),
          ),
          paid_from: completed
            ? Type.String({
                pattern: '^0x[0-9a-fA-F]{40}$',
                description:
                  'The account it was paid from: the deposit address, or the gas account.',
              })
            : nullable(
                Type.String({
                  pattern: '^0x[0-9a-fA-F]{40}$',
                  description: 'The account its payment spent from, when one was sent.',
                }),
              ),
          transaction_hash: when(
            Type.String({ pattern: '^0x[0-9a-f]{64}$' }),
            "The refund's on-chain transaction.",
          ),
          block_number: when(Type.Integer({ minimum: 0 }), 'The block that holds it.'),
          failure_reason: completed
            ? Type.Null()
            : StringEnum(['reverted', 'unpayable'] as const, {
                description:
                  'reverted: its payment was mined but reverted; unpayable: the treasury tool found the transfer would revert.',
              }),
          failure_detail: completed
            ? Type.Null()
            : Type.String({ description: 'What the chain or the treasury tool said.' }),
          created_at: timestamp('When the refund was made.'),
          completed_at: completed
            ? timestamp("When its payment reached the network's confirmations.")
            : Type.Null(),
        },
        { description: 'The refund this event is about.' },
      ),
    },
  )
}

const EndpointDisabledData = Type.Object({
  endpoint_id: Type.String({ description: 'The endpoint that stopped receiving events.' }),
  mode: StringEnum(['test', 'live'] as const),
  url: Type.String({ format: 'uri' }),
  reason: StringEnum(['manual', 'gone', 'failing'] as const, {
    description:
      'manual: disabled in the dashboard or CLI; gone: it answered 410 Gone; failing: every delivery failed for WEBHOOK_DISABLE_AFTER.',
  }),
  disabled_at: nullable(timestamp('When it was disabled.')),
  failing_since: nullable(
    timestamp(
      'The first failure of the streak that disabled it; null when not disabled for failing.',
    ),
  ),
})

/** One line per event for the document: when it is sent. */
export const EVENT_DESCRIPTIONS: Record<WebhookEventType, string> = {
  'transaction.created': 'A transaction was created through the API.',
  'transaction.payment_received':
    'A payment to the deposit address was seen on-chain (status `processing`). Do not ship yet: wait for `transaction.completed`.',
  'transaction.confirming': 'The payment is in a block and collecting confirmations.',
  'transaction.completed':
    'The payment has its required confirmations: the order is paid. Also sent again by `POST /api/transactions/{id}/retry-webhook`.',
  'transaction.failed': 'The transaction ended unpaid; `failure_reason` says why.',
  'transaction.expired': "The transaction's lifetime ended without a payment.",
  'transaction.cancelled':
    'The merchant (API, dashboard or CLI) or the customer cancelled the transaction.',
  'transaction.payment_reversed':
    'A chain reorganisation took back a payment already announced by `transaction.payment_received`; the transaction is back to awaiting payment with the status in `data.status`.',
  'refund.completed':
    "A refund's payment has the network's confirmations: the customer has the money back. `data` is the refunded transaction, with the refund under `refund`.",
  'refund.failed':
    'A refund cannot be paid: its payment was mined but reverted, or the treasury tool found it would revert (`data.refund.failure_reason`). Make a new refund, to another address if need be.',
  'webhook_endpoint.disabled':
    'Another endpoint of the project in the same mode was disabled (it answered 410, or failed for WEBHOOK_DISABLE_AFTER): sent to the endpoints that selected this event.',
}

/** The name of each event's body and data in the document. */
const NAMES: Record<WebhookEventType, string> = {
  'transaction.created': 'TransactionCreated',
  'transaction.payment_received': 'TransactionPaymentReceived',
  'transaction.confirming': 'TransactionConfirming',
  'transaction.completed': 'TransactionCompleted',
  'transaction.failed': 'TransactionFailed',
  'transaction.expired': 'TransactionExpired',
  'transaction.cancelled': 'TransactionCancelled',
  'transaction.payment_reversed': 'TransactionPaymentReversed',
  'refund.completed': 'RefundCompleted',
  'refund.failed': 'RefundFailed',
  'webhook_endpoint.disabled': 'WebhookEndpointDisabled',
}
export const eventSchemaName = (event: WebhookEventType) => `${NAMES[event]}Event`
/** The operationId of the event's entry under the document's `webhooks`. */
export const webhookOperationId = (event: WebhookEventType) =>
  `${NAMES[event][0].toLowerCase()}${NAMES[event].slice(1)}Webhook`

const envelope = (event: WebhookEventType, data: TObject) =>
  Type.Object(
    {
      event: Type.Literal(event),
      timestamp: timestamp(
        'When this delivery was sent (ISO 8601 with milliseconds); a retry carries a later one.',
      ),
      data,
      test: Type.Optional(
        Type.Literal(true, {
          description:
            'Present, and true, only on a test event sent from the dashboard or CLI: never a real payment.',
        }),
      ),
    },
    { description: EVENT_DESCRIPTIONS[event] },
  )

const DATA_SCHEMAS: Record<WebhookEventType, TObject> = {
  ...DATA,
  'refund.completed': refundData('completed'),
  'refund.failed': refundData('failed'),
  'webhook_endpoint.disabled': EndpointDisabledData,
}

/** Each event's whole body, by event type. */
const EVENT_SCHEMAS = Object.fromEntries(
  WEBHOOK_EVENT_TYPES.map((e) => [e, envelope(e, DATA_SCHEMAS[e])]),
) as unknown as Record<WebhookEventType, TObject>

/**
 * The document's names for the webhook schemas: each event's body and data. Their union,
 * `WebhookEvent`, is the document's own (a oneOf with a discriminator, src/http/openapi-shape.ts).
 */
export const WEBHOOK_SCHEMAS: Record<string, TSchema> = Object.fromEntries(
  WEBHOOK_EVENT_TYPES.flatMap((event) => [
    [eventSchemaName(event), EVENT_SCHEMAS[event]],
    [`${NAMES[event]}Data`, DATA_SCHEMAS[event]],
  ]),
)

/**
 * The headers of every delivery (src/webhooks/payload.ts sets them): the contract's signature, the
 * service's `x-service-*` extensions, and the Standard Webhooks trio.
 */
export const DELIVERY_HEADERS: {
  name: string
  required: boolean
  description: string
  schema: Record<string, unknown>
}[] = [
  {
    name: 'x-service-signature',
    required: true,
    schema: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    description:
      "Lowercase hex HMAC-SHA-256 of the raw request body under the endpoint's secret. Verify it over the bytes as received, in constant time; answer 401 when it does not match.",
  },
  {
    name: 'x-service-event-id',
    required: true,
    schema: { type: 'string' },
    description: "The event's id, the same on every retry of it: de-duplicate by it.",
  },
  {
    name: 'x-service-timestamp',
    required: true,
    schema: { type: 'string', format: 'date-time' },
    description: 'When this attempt was sent.',
  },
  {
    name: 'x-service-attempt',
    required: true,
    schema: { type: 'string', pattern: '^[1-9][0-9]*$' },
    description: 'The attempt number of this delivery, from 1.',
  },
  {
    name: 'x-service-sequence',
    required: true,
    schema: { type: 'string', pattern: '^[0-9]+$' },
    description:
      'Grows with each status change of the transaction: a delivery with a lower number than one already processed is older news. 0 for test events and endpoint notices; a manual retry repeats the number of the change it re-sends.',
  },
  {
    name: 'x-service-test',
    required: false,
    schema: { type: 'string', enum: ['true'] },
    description: 'Present, as `true`, only on test events.',
  },
  {
    name: 'webhook-id',
    required: true,
    schema: { type: 'string' },
    description: 'Standard Webhooks: the event id (the same as x-service-event-id).',
  },
  {
    name: 'webhook-timestamp',
    required: true,
    schema: { type: 'string', pattern: '^[0-9]+$' },
    description:
      'Standard Webhooks: seconds since the epoch when this attempt was sent; refuse a delivery more than five minutes from your clock.',
  },
  {
    name: 'webhook-signature',
    required: true,
    schema: { type: 'string' },
    description:
      "Standard Webhooks: `v1,` and the base64 HMAC-SHA-256 of `{webhook-id}.{webhook-timestamp}.{body}` under the secret's key (the base64 after `whsec_`).",
  },
]
