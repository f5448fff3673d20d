import { Type, type Static } from '@sinclair/typebox'
import { REFUND_STATUSES } from '../../../machines/refund.machine.ts'
import { StringEnum } from '../../lib/string-enum.ts'
import { closed } from '../transactions/model.ts'

export const RefundStatus = StringEnum(REFUND_STATUSES, {
  description:
    'pending: waiting to be paid by the treasury tool; submitted: its payment is sent, not yet in a block; confirming: in a block, collecting confirmations; completed; failed (see failure_reason); cancelled.',
})

const units = (description: string) => Type.String({ pattern: '^[0-9]+$', description })
const EvmAddress = (description: string) =>
  Type.String({ pattern: '^0x[0-9a-fA-F]{40}$', description })
const nullable = <T extends ReturnType<typeof Type.String>>(s: T) => Type.Union([s, Type.Null()])
const time = (description: string) =>
  Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description })

export const CreateRefundBody = Type.Object(
  {
    amount: Type.Optional(
      Type.Union([
        Type.String({
          pattern: '^[0-9]{1,78}$',
          description:
            "In the token's smallest unit, as a decimal string. Omitted or null: everything still refundable in that token.",
          examples: ['25000000'],
        }),
        Type.Null(),
      ]),
    ),
    address: Type.String({
      maxLength: 42,
      description:
        'Where the refund goes: an EVM address (0x and 40 hex digits; mixed case must be a valid EIP-55 checksum).',
      examples: ['0x52908400098527886E0F7030069857D2E4169EE7'],
    }),
    reason: Type.Optional(
      Type.Union([
        Type.String({
          maxLength: 500,
          description: "Why, for your records and the customer's receipt.",
        }),
        Type.Null(),
      ]),
    ),
    token_symbol: Type.Optional(
      Type.Union([
        Type.String({
          maxLength: 32,
          description:
            "The token to refund in; default: the transaction's. Another one when another asset arrived (a wrong token, or the right one on another network).",
        }),
        Type.Null(),
      ]),
    ),
    blockchain_network: Type.Optional(
      Type.Union([
        Type.String({
          maxLength: 64,
          description: "The network of that token; default: the transaction's.",
        }),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: false },
)
export type CreateRefundInput = Static<typeof CreateRefundBody>

export const RecordPaymentBody = Type.Object(
  {
    raw_transaction: Type.String({
      pattern: '^0x[0-9a-fA-F]+$',
      maxLength: 60_000,
      description:
        'The signed transaction that pays the refund, as it is sent to the network: recorded before it is sent, so a run killed in between sends the very same one again.',
    }),
  },
  { additionalProperties: false },
)

export const RefuseRefundBody = Type.Object(
  {
    reason: Type.String({
      minLength: 1,
      maxLength: 500,
      description: 'Why it cannot be paid (what the chain answered).',
    }),
  },
  { additionalProperties: false },
)

export const Arrival = Type.Object(
  {
    kind: StringEnum(['token', 'native', 'internal'] as const, {
      description:
        "token: an ERC-20 Transfer; native: a transaction sending the native coin; internal: native coin sent by a contract's internal call.",
    }),
    transaction_hash: Type.Union([Type.String({ pattern: '^0x[0-9a-f]{64}$' }), Type.Null()], {
      description:
        'The transaction that moved it; null for an internal one whose transaction the node could not name (then only its block is known).',
    }),
    block_hash: Type.String({ pattern: '^0x[0-9a-f]{64}$' }),
    block_number: Type.Integer(),
    log_index: Type.Union([Type.Integer(), Type.Null()], {
      description: "The Transfer log's index in its block (token arrivals only).",
    }),
    from_address: Type.Union([EvmAddress('Who sent it (EIP-55).'), Type.Null()], {
      description: 'Null where only the block is known.',
    }),
    amount: units('Smallest units.'),
  },
  closed,
)

export const RefundObject = Type.Object(
  {
    id: Type.String({ examples: ['rf_3kT9xPq2Vd8sLm4Na7Bc'] }),
    transaction_id: Type.String({ format: 'uuid' }),
    status: RefundStatus,
    testing_mode: Type.Boolean(),
    amount: units("In the token's smallest unit."),
    token_symbol: Type.String(),
    blockchain_network: Type.String(),
    currency: Type.Union([Type.String({ pattern: '^[A-Z]{3}$' }), Type.Null()], {
      description: "The transaction's currency (ISO 4217).",
    }),
    amount_in_currency: Type.Union([Type.Number(), Type.Null()], {
      description:
        "The refund in the transaction's currency: `amount` at the transaction's locked quote (amount_in_currency per token_amount), rounded down. Null for a token other than the one quoted.",
    }),
    address: EvmAddress('Where it goes (EIP-55).'),
    reason: nullable(Type.String()),
    deposit_address: EvmAddress(
      "The transaction's deposit address: the refund is paid from there while it holds enough, else from the gas account.",
    ),
    paid_from: Type.Union([EvmAddress('The account the payment spends from.'), Type.Null()]),
    transaction_hash: Type.Union([Type.String({ pattern: '^0x[0-9a-f]{64}$' }), Type.Null()], {
      description: "The payment's on-chain transaction, once recorded.",
    }),
    raw_transaction: Type.Union([Type.String(), Type.Null()], {
      description: 'The signed payment as recorded, for sending it again unchanged.',
    }),
    block_number: Type.Union([Type.Integer(), Type.Null()]),
    confirmations: Type.Union([Type.Integer(), Type.Null()]),
    required_confirmations: Type.Union([Type.Integer(), Type.Null()], {
      description: 'Null on a network that waits for its finalized (or safe) block instead.',
    }),
    failure_reason: Type.Union([StringEnum(['reverted', 'unpayable'] as const), Type.Null()], {
      description:
        'reverted: the payment was mined but reverted; unpayable: the treasury tool found the transfer would revert.',
    }),
    failure_detail: nullable(Type.String()),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    submitted_at: time('When its payment was recorded.'),
    completed_at: time('When it reached its confirmations.'),
    arrivals: Type.Array(Arrival, {
      description:
        "What arrived at the deposit address in this token on this network (payments, late payments, another asset), oldest first, not taken back by a reorg. The treasury tool reads each one on-chain and, without the merchant's approval on their machine, pays a refund only back to an address one of them came from, and no more than it sent.",
    }),
  },
  closed,
)
export type RefundView = Static<typeof RefundObject>

export const Refundable = Type.Object(
  {
    token_symbol: Type.String(),
    blockchain_network: Type.String(),
    received: units(
      'Confirmed on-chain arrivals at the deposit address in this token: payments, late payments, other assets.',
    ),
    refunded: units('Refunds not failed or cancelled.'),
    refundable: units('What a new refund may still take.'),
  },
  closed,
)

export const RefundResponse = Type.Object(
  { success: Type.Literal(true), refund: RefundObject },
  closed,
)
export const TransactionRefundsResponse = Type.Object(
  {
    success: Type.Literal(true),
    transaction_id: Type.String({ format: 'uuid' }),
    refunds: Type.Array(RefundObject),
    refundable: Type.Array(Refundable, {
      description: 'What arrived per token and network, and what is left to refund.',
    }),
  },
  closed,
)
/** A page of a list other than transactions. */
export const Page = Type.Object(
  {
    limit: Type.Integer(),
    offset: Type.Integer(),
    total: Type.Integer({ description: 'Records matching the filter.' }),
    has_more: Type.Boolean({
      description: 'True when another page follows: ask again with offset + limit.',
    }),
  },
  closed,
)

export const RefundListResponse = Type.Object(
  { success: Type.Literal(true), refunds: Type.Array(RefundObject), pagination: Page },
  closed,
)
