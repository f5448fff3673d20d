import { Type } from '@sinclair/typebox'
import { PaymentPayload, PaymentRequirements } from '../../x402/protocol.ts'

/** `POST /api/x402/verify` and `/settle`: what an x402 resource server's middleware sends. */
export const FacilitatorRequest = Type.Object(
  {
    x402Version: Type.Literal(2, { description: 'x402 protocol version; 2 is spoken here.' }),
    paymentPayload: PaymentPayload,
    paymentRequirements: PaymentRequirements,
  },
  {
    additionalProperties: false,
    description:
      "The payment a client sent (its `PAYMENT-SIGNATURE`, decoded) and the requirement the merchant's server matched it to.",
  },
)

export const VerifyResponse = Type.Object(
  {
    isValid: Type.Boolean(),
    invalidReason: Type.Optional(
      Type.String({
        description:
          'Why not, as x402 names it (`invalid_exact_evm_signature`, `invalid_exact_evm_recipient_mismatch`, ...).',
      }),
    ),
    invalidMessage: Type.Optional(Type.String({ description: 'The same, in a sentence.' })),
    payer: Type.Optional(Type.String({ description: 'The address that signed, when known.' })),
  },
  { additionalProperties: false },
)

export const SettleResponse = Type.Object(
  {
    success: Type.Boolean(),
    errorReason: Type.Optional(Type.String()),
    errorMessage: Type.Optional(Type.String()),
    payer: Type.Optional(Type.String()),
    transaction: Type.String({
      description: "The relayer's transaction hash; empty when nothing was sent.",
    }),
    network: Type.String({ description: 'CAIP-2 network id, such as `eip155:8453`.' }),
    extra: Type.Optional(
      Type.Object(
        {
          transaction_id: Type.String({
            format: 'uuid',
            description:
              "This service's transaction recording the payment (webhooks, stats, dashboard).",
          }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)

export const SupportedResponse = Type.Object(
  {
    kinds: Type.Array(
      Type.Object(
        {
          x402Version: Type.Literal(2),
          scheme: Type.Literal('exact'),
          network: Type.String({ description: 'CAIP-2 network id.' }),
        },
        { additionalProperties: false },
      ),
      {
        description:
          "One per network of the key's mode that this service settles on (a relayer serves it, and a token there takes EIP-3009 signatures).",
      },
    ),
    extensions: Type.Array(Type.String()),
    signers: Type.Record(Type.String(), Type.Array(Type.String()), {
      description: "The relayer's address, which sends settlements and pays their gas.",
    }),
  },
  { additionalProperties: false },
)

export const PayToResponse = Type.Object(
  {
    success: Type.Literal(true),
    mode: Type.Union([Type.Literal('test'), Type.Literal('live')]),
    pay_to: Type.Union([Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' }), Type.Null()], {
      description:
        "The address payments of the project's own resources must go to (`payTo` in the middleware's route config), as the operator set it with `project set-x402-pay-to`; null: none is set for this mode, and every settle is refused.",
    }),
    assets: Type.Array(
      Type.Object(
        {
          network: Type.String({ description: 'CAIP-2 network id.' }),
          blockchain_network: Type.String({ description: "The network's name here." }),
          token_symbol: Type.String(),
          asset: Type.String({ description: 'The token contract.' }),
          decimals: Type.Integer(),
          extra: Type.Object(
            { name: Type.String(), version: Type.String() },
            { description: "The token's EIP-712 domain, read from the chain." },
          ),
          min_amount: Type.Union([Type.String({ pattern: '^[0-9]+$' }), Type.Null()], {
            description:
              "The smallest amount (the token's smallest units) a settle of this asset may be now: the network's `minSettleUsd`, else what one relay's gas can cost at the current fees; a smaller one is refused with `invalid_exact_evm_authorization_value`. Null: a price or the node cannot be read right now.",
          }),
        },
        { additionalProperties: false },
      ),
      { description: 'What the middleware may ask for, with the domain its `extra` must carry.' },
    ),
  },
  { additionalProperties: false },
)
