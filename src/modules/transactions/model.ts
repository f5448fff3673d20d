import { Type, type Static } from '@sinclair/typebox'
import { amountToMinor, isKnownCurrency, minorUnits } from '../../lib/currency.ts'
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

/** The largest `amount` the schema takes; the rule that binds is its USD value (1,000,000). */
const MAX_AMOUNT = 1_000_000_000_000
/** The most a transaction may be worth, in USD cents, at creation. */
export const MAX_USD_CENTS = 100_000_000n

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
      maximum: MAX_AMOUNT,
      description:
        "Amount in `currency`, > 0, with at most the currency's decimal places (2 for USD, EUR and GBP: 19.99 is taken, 19.999 refused; none for JPY: 10.5 refused), worth at most 1,000,000 USD at creation.",
      examples: [49.99],
    }),
    currency: Type.Optional(
      Type.Union([
        Type.String({
          pattern: '^[A-Za-z]{3}$',
          description:
            'ISO 4217 code of the currency `amount` is in (any case; USD when omitted or null). Which currencies a service offers depends on its configuration; one it does not offer is refused with 400 naming those it does.',
          examples: ['EUR'],
        }),
        Type.Null(),
      ]),
    ),
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

/** The currency a create request names (USD when it names none), upper case. */
export const currencyOf = (body: CreateTransactionInput) => (body.currency ?? 'USD').toUpperCase()

/** Rules JSON Schema cannot state (or states with floats): checked after the schema passes. */
export function createTransactionRules(body: CreateTransactionInput): FieldProblem[] {
  const problems: FieldProblem[] = []
  const currency = currencyOf(body)
  // An unknown or unoffered currency is the service's to refuse (it names those it offers).
  if (isKnownCurrency(currency) && amountToMinor(body.amount, currency) === null) {
    const places = minorUnits(currency)
    problems.push({
      path: 'amount',
      message:
        places === 0
          ? `must be a whole number of ${currency} (it has no minor units)`
          : `must have at most ${places} decimal places for ${currency}`,
    })
  }
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

/** A rate or price as read: USD per unit, and the feed round it came from. */
export const Rate = Type.Object(
  {
    usd: Type.String({
      pattern: '^[0-9]+(\\.[0-9]+)?$',
      description: 'Dollars per one unit (of the currency, or one whole token), exact.',
      examples: ['1.08340000'],
    }),
    source: Type.Union([Type.Literal('chainlink'), Type.Literal('fixed')], {
      description:
        '`chainlink`: a Chainlink feed on `network`; `fixed`: a fixed price of the configuration.',
    }),
    network: str('The network whose feed answered; null for a fixed price.'),
    feed: str('The feed contract (EIP-55); null for a fixed price.'),
    round_id: str(
      'The Chainlink round the answer came from (uint80, as a string); null for a fixed price.',
    ),
    updated_at: Type.String({
      format: 'date-time',
      description:
        "When the answer was set on-chain (the round's time); the time of reading for a fixed price.",
    }),
  },
  { ...closed, title: 'Rate' },
)

export const QuoteRatesObject = Type.Object(
  {
    quoted_at: Type.String({ format: 'date-time' }),
    method: Type.Union([Type.Literal('par'), Type.Literal('usd')]),
    token_usd: Type.Union([Rate, Type.Null()], {
      description: 'USD per whole token (null at par).',
    }),
    currency_usd: Type.Union([Rate, Type.Null()], {
      description: "USD per unit of the transaction's currency (null at par and for USD).",
    }),
  },
  { ...closed, title: 'QuoteRates' },
)

/**
 * docs/decisions/0007-full-transaction-object.md: create and get return this same object; unknown
 * values are null, never absent.
 */
export const TransactionObject = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    transaction_number: Type.String({ examples: ['TX-7K3M-Q9PD'] }),
    status: TransactionStatus,
    amount_usd: Type.Number({
      description:
        "The transaction's value in USD at creation: amount_in_currency itself for USD, else amount_in_currency at usd_rate, to the nearest cent. It does not move with later rates.",
    }),
    currency: Type.String({
      pattern: '^[A-Z]{3}$',
      description: 'ISO 4217 code of the currency the transaction is priced in.',
      examples: ['USD', 'EUR'],
    }),
    amount_in_currency: Type.Number({
      description: 'The amount charged, in `currency`, exactly as created (its decimal places).',
      examples: [49.99],
    }),
    usd_rate: Type.Union([Rate, Type.Null()], {
      description:
        "The currency's USD rate amount_usd was computed with at creation; null for USD.",
    }),
    quote_rates: Type.Union([QuoteRatesObject, Type.Null()], {
      description:
        "How token_amount was computed when the customer chose the token, so the payment can be priced again by anyone: `par` (a stablecoin of the transaction's own currency, one whole token per unit, no rate) or `usd` (the token's USD price and the currency's USD rate, null for USD). Null until a token is chosen.",
    }),
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
