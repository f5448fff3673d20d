import { type Static, type TProperties, Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { TxEvent } from '../../machines/transaction.machine.ts'

const units = Type.String({
  pattern: '^(0|[1-9][0-9]{0,77})$',
  description: 'Smallest token units',
})
const hash = Type.String({ minLength: 1, maxLength: 200 })
const block = Type.Integer({ minimum: 0 })
/**
 * The Transfer log's index in its block; -1 for a native transfer, -2 for native coin that arrived
 * by an internal call.
 */
const logIndex = Type.Optional(Type.Integer({ minimum: -2 }))
const obj = <T extends TProperties>(props: T) => Type.Object(props, { additionalProperties: false })
const nullableString = Type.Union([Type.String(), Type.Null()])
const recordedRate = obj({
  usd: Type.String({ pattern: '^[0-9]+(\\.[0-9]+)?$' }),
  source: Type.Union([Type.Literal('chainlink'), Type.Literal('fixed')]),
  network: nullableString,
  feed: nullableString,
  roundId: nullableString,
  updatedAt: Type.String({ minLength: 1 }),
})

/** Lifecycle events as data, for events that arrive from outside the process (the CLI). */
const TxEventSchema = Type.Union([
  obj({
    type: Type.Literal('token.selected'),
    quote: obj({
      tokenSymbol: Type.String({ minLength: 1 }),
      network: Type.String({ minLength: 1 }),
      tokenAmount: units,
      depositAddress: Type.String({ minLength: 1 }),
      requiredConfirmations: Type.Integer({ minimum: 1 }),
      finality: Type.Optional(Type.Union([Type.Literal('safe'), Type.Literal('finalized')])),
      rates: Type.Optional(
        obj({
          quotedAt: Type.String({ minLength: 1 }),
          method: Type.Union([Type.Literal('par'), Type.Literal('usd')]),
          tokenUsd: Type.Union([recordedRate, Type.Null()]),
          currencyUsd: Type.Union([recordedRate, Type.Null()]),
        }),
      ),
    }),
  }),
  obj({ type: Type.Literal('customer.confirmed') }),
  obj({
    type: Type.Literal('payment.detected'),
    txHash: hash,
    logIndex,
    amount: units,
    blockNumber: Type.Optional(Type.Union([block, Type.Null()])),
  }),
  obj({ type: Type.Literal('payment.included'), txHash: hash, logIndex, blockNumber: block }),
  obj({
    type: Type.Literal('confirmations.updated'),
    confirmations: Type.Integer({ minimum: 0 }),
    at: Type.Integer({ minimum: 0 }),
    final: Type.Optional(Type.Boolean()),
  }),
  obj({ type: Type.Literal('payment.reorged'), txHash: hash, logIndex }),
  obj({ type: Type.Literal('payment.reverted'), txHash: hash, logIndex }),
  obj({
    type: Type.Literal('wrong_asset.received'),
    txHash: hash,
    logIndex,
    tokenSymbol: Type.String({ minLength: 1 }),
    amount: units,
  }),
  obj({ type: Type.Literal('wrong_asset.reorged'), txHash: hash, logIndex }),
  obj({ type: Type.Literal('expiry.reached'), at: Type.Integer({ minimum: 0 }) }),
  obj({
    type: Type.Literal('cancel.requested'),
    by: Type.Union([Type.Literal('merchant'), Type.Literal('customer')]),
  }),
])

/**
 * The machine owns the event type (machines import nothing but xstate); this schema must
 * describe exactly that type, field for field, or the project does not compile: the error then
 * names each event whose fields drifted apart, or each event only one of them has.
 */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
/**
 * A type with every field required and marked as optional or not, all the way down: two types
 * are then mutually assignable only when they have the same fields, equally optional.
 */
type Fields<T> = T extends object
  ? {
      [K in keyof T]-?: [
        Fields<Exclude<T[K], undefined>>,
        Partial<Pick<T, K>> extends Pick<T, K> ? 'optional' : 'required',
      ]
    }
  : T
type SchemaEvent = Static<typeof TxEventSchema>
type Drifted = {
  [K in TxEvent['type'] | SchemaEvent['type']]: Same<
    Fields<Extract<TxEvent, { type: K }>>,
    Fields<Extract<SchemaEvent, { type: K }>>
  > extends true
    ? never
    : K
}[TxEvent['type'] | SchemaEvent['type']]
const _schemaMatchesMachine: [Drifted] extends [never]
  ? true
  : `the schema and the machine differ on ${Drifted}` = true

const check = TypeCompiler.Compile(TxEventSchema)

/** The event if `value` is a well-formed lifecycle event, else null. */
export function parseTxEvent(value: unknown): TxEvent | null {
  return check.Check(value) ? (value as TxEvent) : null
}
