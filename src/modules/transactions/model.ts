import { Type, type Static } from '@sinclair/typebox'
import { isUsdAmount } from '../../lib/money.ts'
import { StringEnum } from '../../lib/string-enum.ts'
import type { FieldProblem } from '../../lib/outcome.ts'

export const STATUSES = [
  'created',
  'prepared',
  'pending',
  'processing',
  'confirming',
  'completed',
  'failed',
  'expired',
  'cancelled',
] as const
export type Status = (typeof STATUSES)[number]
export const TransactionStatus = StringEnum(STATUSES)

const nullable = <T extends ReturnType<typeof Type.String>>(s: T) =>
  Type.Optional(Type.Union([s, Type.Null()]))

/**
 * docs/decisions/0005-create-request-bounds.md. Plain TypeBox (not Elysia's coercing `t`), checked
 * strictly before anything else runs.
 */
export const CreateTransactionBody = Type.Object(
  {
    amount: Type.Number({
      exclusiveMinimum: 0,
      maximum: 1_000_000,
      description:
        'USD amount, > 0 and <= 1,000,000, at most 2 decimal places (19.99 is taken; 19.999 is refused with 400).',
      examples: [49.99],
    }),
    customer_email: nullable(Type.String({ format: 'email', maxLength: 254 })),
    customer_name: nullable(Type.String({ maxLength: 255 })),
    order_id: nullable(
      Type.String({ maxLength: 255, description: "Merchant's own order reference." }),
    ),
    order_description: nullable(Type.String({ maxLength: 1000 })),
    success_url: nullable(
      Type.String({ format: 'uri', maxLength: 2048, description: 'Absolute http(s) URL.' }),
    ),
    cancel_url: nullable(
      Type.String({ format: 'uri', maxLength: 2048, description: 'Absolute http(s) URL.' }),
    ),
    expires_in_minutes: Type.Optional(
      Type.Union([
        Type.Integer({
          minimum: 1,
          maximum: 10080,
          description: 'Lifetime in minutes; 60 when omitted or null.',
        }),
        Type.Null(),
      ]),
    ),
    metadata: Type.Optional(
      Type.Union([
        Type.Record(
          Type.String({ maxLength: 40 }),
          Type.Union([Type.String({ maxLength: 500 }), Type.Number(), Type.Boolean(), Type.Null()]),
          {
            maxProperties: 50,
            // Not checked by the schema (createTransactionRules does): stated for the document.
            propertyNames: { minLength: 1, maxLength: 40 },
            description:
              'Up to 50 keys of at most 40 characters; string values up to 500 characters.',
          },
        ),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: false },
)
export type CreateTransactionInput = Static<typeof CreateTransactionBody>

/**
 * What createTransactionRules checks, in the words of JSON Schema, for the OpenAPI document only
 * (TypeBox would report a failed pattern as the pattern itself, not as the rule). Not the two
 * decimal places of `amount`: JSON Schema's only word for it is `multipleOf: 0.01`, which the
 * validators integrators use (Ajv, and so Fastify and Prism) test with a binary floating-point
 * remainder and so refuse 19.99, 0.29 or 1234.56; the description states that rule instead.
 */
const HTTP_URL = { pattern: '^[Hh][Tt][Tt][Pp][Ss]?:' }
export const CREATE_TRANSACTION_DOCUMENTED: Record<string, Record<string, unknown>> = {
  success_url: HTTP_URL,
  cancel_url: HTTP_URL,
}

/** Rules JSON Schema cannot state (or states with floats): checked after the schema passes. */
export function createTransactionRules(body: CreateTransactionInput): FieldProblem[] {
  const problems: FieldProblem[] = []
  if (!isUsdAmount(body.amount))
    problems.push({ path: 'amount', message: 'must have at most 2 decimal places' })
  for (const field of ['success_url', 'cancel_url'] as const) {
    const v = body[field]
    if (v == null) continue
    let okUrl = false
    try {
      const u = new URL(v)
      okUrl = (u.protocol === 'http:' || u.protocol === 'https:') && !!u.hostname
    } catch {}
    if (!okUrl) problems.push({ path: field, message: 'must be an absolute http or https URL' })
  }
  for (const key of Object.keys(body.metadata ?? {})) {
    if (key.length > 40 || key.length === 0)
      problems.push({
        path: `metadata`,
        message: `key "${key.slice(0, 50)}" must be 1 to 40 characters`,
      })
  }
  return problems
}

const str = (description?: string) =>
  Type.Union([Type.String(), Type.Null()], description ? { description } : {})
const time = (description?: string) =>
  Type.Union(
    [Type.String({ format: 'date-time' }), Type.Null()],
    description ? { description } : {},
  )

/**
 * Response models state `additionalProperties: false` themselves: Elysia writes it into them
 * in place when it compiles a route's response check, and the OpenAPI document must not
 * change with traffic.
 */
export const closed = { additionalProperties: false } as const

/**
 * docs/decisions/0007-full-transaction-object.md: create and get return this same object; unknown
 * values are null, never absent.
 */
export const TransactionObject = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    transaction_number: Type.String({ examples: ['TX-7K3M-Q9PD'] }),
    status: TransactionStatus,
    amount_usd: Type.Number(),
    currency: Type.Literal('USD'),
    payment_url: Type.String({ format: 'uri' }),
    x402_url: Type.String({
      format: 'uri',
      description:
        "Where a program pays this transaction over x402 v2: a request without payment answers 402 with a `PAYMENT-REQUIRED` header listing one `exact` (EIP-3009) requirement per token that takes signatures; repeated with a `PAYMENT-SIGNATURE` header, the payment is settled by the service's relayer and the answer is 200 with `PAYMENT-RESPONSE`. Answers 409 when the service has no relayer or no such token.",
    }),
    testing_mode: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    order_id: str(),
    order_description: str(),
    customer_email: str(),
    customer_name: str(),
    metadata: Type.Union([
      Type.Record(
        Type.String(),
        Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]),
      ),
      Type.Null(),
    ]),
    success_url: str(),
    cancel_url: str(),
    token_symbol: str('Set when the customer selects a token.'),
    token_amount: str("Quoted amount in the token's smallest unit, as a string."),
    blockchain_network: str(),
    deposit_address: str(),
    amount_received: str("Received so far, in the token's smallest unit."),
    transaction_hash: str("The payment's on-chain transaction hash (see transaction_hash_names)."),
    transaction_hash_names: Type.Union(
      [Type.Literal('transaction'), Type.Literal('block'), Type.Null()],
      {
        description:
          "What transaction_hash is the hash of. `transaction`: the transaction that paid. `block`: native coin a contract sent by an internal call (a smart wallet, an exchange's payout), on a node that cannot trace calls: only the block it arrived in is known, and transaction_hash is that block's hash. Null while transaction_hash is.",
      },
    ),
    block_number: Type.Union([Type.Integer(), Type.Null()]),
    confirmations: Type.Union([Type.Integer(), Type.Null()]),
    required_confirmations: Type.Union([Type.Integer(), Type.Null()], {
      description:
        'Confirmations that complete the payment; null before a token is selected, and on a network that waits for finality instead.',
    }),
    finality: Type.Union(
      [Type.Literal('confirmations'), Type.Literal('safe'), Type.Literal('finalized'), Type.Null()],
      {
        description:
          "What completes the payment on its network: `confirmations` (counted up to required_confirmations), or the chain's `safe` / `finalized` block reaching block_number. Null before a token is selected.",
      },
    ),
    confirmed_at: time(),
    completed_at: time(),
  },
  closed,
)
export type TransactionView = Static<typeof TransactionObject>

export const CreateTransactionResponse = Type.Object(
  {
    success: Type.Literal(true),
    transaction: TransactionObject,
    payment_url: Type.String({ format: 'uri' }),
  },
  closed,
)

export const GetTransactionResponse = Type.Object(
  { success: Type.Literal(true), transaction: TransactionObject },
  closed,
)

export const Pagination = Type.Object(
  {
    limit: Type.Integer({ description: 'The page size asked for (50 when not given).' }),
    offset: Type.Integer({ description: 'Results skipped before this page.' }),
    total: Type.Integer({ description: 'Transactions matching the filter.' }),
    has_more: Type.Boolean({
      description: 'True when another page follows: ask again with offset + limit.',
    }),
  },
  closed,
)

export const ListTransactionsResponse = Type.Object(
  {
    success: Type.Literal(true),
    transactions: Type.Array(TransactionObject),
    pagination: Pagination,
  },
  closed,
)

export const TimelineEntry = Type.Object(
  {
    from_status: Type.Union([TransactionStatus, Type.Null()], {
      description: 'null for the creation entry.',
    }),
    to_status: TransactionStatus,
    cause: Type.String({
      description:
        'What moved it: transaction.created, token.selected, payment.detected, expiry.reached, cancel.requested, ...',
    }),
    details: Type.Record(Type.String(), Type.Unknown(), {
      description: 'Transaction hash, block, amounts, reason, as the cause has them.',
    }),
    at: Type.String({ format: 'date-time' }),
  },
  closed,
)

export const TimelineResponse = Type.Object(
  {
    success: Type.Literal(true),
    transaction_id: Type.String({ format: 'uuid' }),
    timeline: Type.Array(TimelineEntry),
  },
  closed,
)

export const RetryWebhookResponse = Type.Object(
  {
    success: Type.Literal(true),
    message: Type.String({
      description: 'What was queued, e.g. "transaction.completed queued for 2 endpoints".',
    }),
    transaction_id: Type.String({ format: 'uuid' }),
    event_type: Type.Literal('transaction.completed'),
  },
  closed,
)
