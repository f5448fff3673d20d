import { Type, type Static, type TSchema } from '@sinclair/typebox'

/**
 * The Coinbase Commerce API, version 2018-03-22, as this service answers it
 * (docs/decisions/0065-coinbase-commerce-drop-in.md, docs/integrating/coinbase-commerce.md): the
 * requests it takes and the shapes it returns, for the OpenAPI document and the strict body check.
 */

export const COMMERCE_API_VERSION = '2018-03-22'

const nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()])
const LocalAmount = Type.String({
  pattern: '^[0-9]{1,13}(\\.[0-9]{1,3})?$',
  description:
    'A decimal string in the currency, with at most its places (2 for USD and EUR, 0 for JPY), > 0, worth at most 1,000,000 USD.',
  examples: ['49.99'],
})
const CurrencyCode = Type.String({
  pattern: '^[A-Za-z]{3}$',
  description: "ISO 4217 code; one the service offers in the key's mode.",
  examples: ['EUR'],
})
export const Money = Type.Object(
  { amount: Type.String({ examples: ['49.99'] }), currency: Type.String({ examples: ['EUR'] }) },
  { title: 'CommerceMoney' },
)
const HttpUrl = Type.String({ maxLength: 2048, description: 'Absolute http(s) URL.' })
const Metadata = Type.Record(
  Type.String({ minLength: 1, maxLength: 40 }),
  Type.Union([Type.String({ maxLength: 500 }), Type.Number(), Type.Boolean(), Type.Null()]),
  { maxProperties: 50, description: 'Up to 50 keys; string values up to 500 characters.' },
)
const PricingType = Type.Union([Type.Literal('fixed_price'), Type.Literal('no_price')], {
  description:
    '`fixed_price`: the customer pays `local_price`; `no_price`: any amount completes the charge.',
})

/** Fields the service does not take are ignored and named in the response's `warnings`. */
export const CreateChargeBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    description: Type.Optional(nullable(Type.String({ maxLength: 1000 }))),
    pricing_type: PricingType,
    local_price: Type.Optional(
      Type.Object({ amount: LocalAmount, currency: CurrencyCode }, { additionalProperties: false }),
    ),
    metadata: Type.Optional(nullable(Metadata)),
    redirect_url: Type.Optional(nullable(HttpUrl)),
    cancel_url: Type.Optional(nullable(HttpUrl)),
    checkout_id: Type.Optional(
      Type.String({ format: 'uuid', description: 'Makes the charge from this checkout.' }),
    ),
  },
  { additionalProperties: true },
)
export type CreateChargeInput = Static<typeof CreateChargeBody>

export const CreateCheckoutBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    description: Type.Optional(nullable(Type.String({ maxLength: 1000 }))),
    pricing_type: PricingType,
    local_price: Type.Optional(
      Type.Object({ amount: LocalAmount, currency: CurrencyCode }, { additionalProperties: false }),
    ),
    requested_info: Type.Optional(
      Type.Array(Type.String(), {
        maxItems: 0,
        description:
          'Must be empty: the hosted page asks the customer for nothing (the merchant knows its customer).',
      }),
    ),
  },
  { additionalProperties: true },
)
export type CreateCheckoutInput = Static<typeof CreateCheckoutBody>

export const UpdateCheckoutBody = Type.Partial(CreateCheckoutBody, { additionalProperties: true })
export type UpdateCheckoutInput = Static<typeof UpdateCheckoutBody>

const TimelineStep = Type.Object(
  {
    time: Type.String({ format: 'date-time' }),
    status: Type.Union(
      ['NEW', 'PENDING', 'COMPLETED', 'EXPIRED', 'UNRESOLVED', 'RESOLVED', 'CANCELED'].map((s) =>
        Type.Literal(s),
      ),
    ),
    context: Type.Optional(
      Type.Union(
        ['UNDERPAID', 'OVERPAID', 'DELAYED', 'MULTIPLE', 'OTHER'].map((s) => Type.Literal(s)),
        { description: 'Why it is UNRESOLVED.' },
      ),
    ),
  },
  { title: 'CommerceTimelineStep' },
)

const Payment = Type.Object(
  {
    network: Type.String({ description: 'The network, as the service names it.' }),
    transaction_id: Type.String({ description: 'The transaction hash.' }),
    status: Type.Union([Type.Literal('PENDING'), Type.Literal('CONFIRMED')]),
    detected_at: Type.String({ format: 'date-time' }),
    value: Type.Object({
      local: nullable(Money),
      crypto: Money,
    }),
    block: Type.Object({
      height: Type.Integer(),
      hash: Type.String(),
      confirmations_accumulated: Type.Integer(),
      confirmations_required: Type.Integer(),
    }),
  },
  { title: 'CommercePayment' },
)

export const ChargeObject = Type.Object(
  {
    id: Type.String({ format: 'uuid', description: "The charge's id: the transaction's id." }),
    resource: Type.Literal('charge'),
    code: Type.String({ description: "The transaction's number.", examples: ['TX-7K3M-Q9PD'] }),
    name: nullable(Type.String()),
    description: nullable(Type.String()),
    logo_url: Type.Null(),
    hosted_url: Type.String({ description: "The service's pay page for it." }),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.String({ format: 'date-time' }),
    confirmed_at: nullable(Type.String({ format: 'date-time' })),
    checkout: nullable(Type.Object({ id: Type.String({ format: 'uuid' }) })),
    timeline: Type.Array(TimelineStep),
    metadata: Type.Record(Type.String(), Type.Unknown()),
    pricing_type: PricingType,
    local_price: nullable(Money),
    pricing: Type.Record(Type.String(), Money, {
      description:
        '`local`, and each token it may be paid in, keyed `<network>_<token>` (as `base_usdc`): the chosen one at its locked quote, the others at current prices. Empty for `no_price`.',
    }),
    payments: Type.Array(Payment),
    addresses: Type.Record(Type.String(), Type.String(), {
      description:
        'The deposit address, keyed like `pricing`, once the customer chose a token on the hosted page.',
    }),
    redirect_url: nullable(Type.String()),
    cancel_url: nullable(Type.String()),
  },
  { title: 'CommerceCharge' },
)

export const CheckoutObject = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    resource: Type.Literal('checkout'),
    name: Type.String(),
    description: nullable(Type.String()),
    logo_url: Type.Null(),
    requested_info: Type.Array(Type.String()),
    pricing_type: PricingType,
    local_price: nullable(Money),
    hosted_url: Type.String({
      description: 'Opening it makes a charge and sends the customer to its pay page.',
    }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { title: 'CommerceCheckout' },
)

export const EventObject = Type.Object(
  {
    id: Type.String(),
    resource: Type.Literal('event'),
    type: Type.String({ examples: ['charge:confirmed'] }),
    api_version: Type.Literal(COMMERCE_API_VERSION),
    created_at: Type.String({ format: 'date-time' }),
    data: ChargeObject,
  },
  { title: 'CommerceEvent' },
)

const Pagination = Type.Object(
  {
    order: Type.Union([Type.Literal('asc'), Type.Literal('desc')]),
    starting_after: nullable(Type.String()),
    ending_before: nullable(Type.String()),
    total: Type.Integer(),
    yielded: Type.Integer(),
    limit: Type.Integer(),
    previous_uri: nullable(Type.String()),
    next_uri: nullable(Type.String()),
    cursor_range: Type.Array(Type.String()),
  },
  { title: 'CommercePagination' },
)

const Warnings = Type.Optional(Type.Array(Type.String()))
export const one = <T extends TSchema>(data: T, title: string) =>
  Type.Object({ data, warnings: Warnings }, { title })
export const many = <T extends TSchema>(data: T, title: string) =>
  Type.Object({ pagination: Pagination, data: Type.Array(data), warnings: Warnings }, { title })

export const CommerceError = Type.Object(
  {
    error: Type.Object({
      type: Type.Union(
        [
          'invalid_request',
          'param_required',
          'validation_error',
          'authentication_error',
          'not_found',
          'rate_limit_exceeded',
          'internal_server_error',
          'service_unavailable',
        ].map((s) => Type.Literal(s)),
      ),
      message: Type.String(),
    }),
  },
  { title: 'CommerceError' },
)

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100, default: 25, description: 'Results per page.' }),
    ),
    starting_after: Type.Optional(
      Type.String({ description: 'The id after which (in `order`) the page starts.' }),
    ),
    ending_before: Type.Optional(
      Type.String({ description: 'The id before which (in `order`) the page ends.' }),
    ),
    order: Type.Optional(
      Type.Union([Type.Literal('asc'), Type.Literal('desc')], {
        default: 'desc',
        description: 'By creation: newest first (`desc`) or oldest first.',
      }),
    ),
  },
  { additionalProperties: true },
)
export type ListQueryInput = Static<typeof ListQuery>
