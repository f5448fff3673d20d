/**
 * The x402 v2 wire format (docs/decisions/0063-x402.md): HTTP 402 answers carry a
 * `PAYMENT-REQUIRED` header, a paying retry a `PAYMENT-SIGNATURE` header, a settled answer a
 * `PAYMENT-RESPONSE` header, each a JSON object in standard, padded base64. Networks are CAIP-2
 * ids (`eip155:<chain id>`); amounts are strings of the token's smallest units.
 *
 * Only what this service speaks is modelled: scheme `exact` over EIP-3009 on EVM chains.
 */
import { type Static, Type } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

export const X402_VERSION = 2
export const PAYMENT_REQUIRED_HEADER = 'PAYMENT-REQUIRED'
export const PAYMENT_SIGNATURE_HEADER = 'PAYMENT-SIGNATURE'
export const PAYMENT_RESPONSE_HEADER = 'PAYMENT-RESPONSE'

/** Largest header value accepted (a payload is well under 2 KiB; EIP-1271 signatures are longer). */
const MAX_HEADER_CHARS = 16_384

export const caip2 = (chainId: number) => `eip155:${chainId}`

/** The chain id of an `eip155:<id>` network, else null. */
export function chainIdOf(network: string): number | null {
  const m = /^eip155:([1-9][0-9]{0,15})$/.exec(network)
  return m ? Number(m[1]) : null
}

const UINT = Type.String({ pattern: '^[0-9]{1,78}$' })
const ADDRESS = Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' })

/** One way to pay: what the resource asks for, and where it must go. */
export const PaymentRequirements = Type.Object({
  scheme: Type.String({ maxLength: 32 }),
  network: Type.String({ maxLength: 64 }),
  /** The token contract. */
  asset: ADDRESS,
  /** Smallest units, exactly. */
  amount: UINT,
  payTo: ADDRESS,
  maxTimeoutSeconds: Type.Integer({ minimum: 0 }),
  /** For `exact` on EVM: the token's EIP-712 domain name and version. */
  extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
})
export type PaymentRequirements = Static<typeof PaymentRequirements>

export const ResourceInfo = Type.Object({
  url: Type.String({ maxLength: 2048 }),
  description: Type.Optional(Type.String({ maxLength: 1024 })),
  mimeType: Type.Optional(Type.String({ maxLength: 255 })),
})
export type ResourceInfo = Static<typeof ResourceInfo>

/** A 402's `PAYMENT-REQUIRED`: what the resource takes, and why a payment was refused if one was. */
export const PaymentRequired = Type.Object(
  {
    x402Version: Type.Literal(X402_VERSION),
    error: Type.Optional(Type.String({ description: 'Why the payment sent was refused.' })),
    resource: ResourceInfo,
    accepts: Type.Array(PaymentRequirements),
  },
  { additionalProperties: false },
)
export type PaymentRequired = Static<typeof PaymentRequired>

/** The `exact` scheme's EVM payload: an EIP-3009 TransferWithAuthorization and its signature. */
export const ExactEvmPayload = Type.Object({
  authorization: Type.Object({
    from: ADDRESS,
    to: ADDRESS,
    value: UINT,
    validAfter: UINT,
    validBefore: UINT,
    nonce: Type.String({ pattern: '^0x[0-9a-fA-F]{64}$' }),
  }),
  signature: Type.String({ pattern: '^0x([0-9a-fA-F]{2}){65,4096}$' }),
})
export type ExactEvmPayload = Static<typeof ExactEvmPayload>

export const PaymentPayload = Type.Object({
  x402Version: Type.Literal(X402_VERSION),
  resource: Type.Optional(ResourceInfo),
  /** The requirement the client chose, as it was offered. */
  accepted: PaymentRequirements,
  payload: ExactEvmPayload,
  extensions: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
})
export type PaymentPayload = Static<typeof PaymentPayload>

/**
 * Whether two requirements ask for the same payment: scheme, network, asset, recipient and
 * amount (addresses compared without case). The timeout is not compared: a transaction's shrinks
 * as its expiry nears.
 */
export function sameRequirement(a: PaymentRequirements, b: PaymentRequirements): boolean {
  return (
    a.scheme === b.scheme &&
    a.network === b.network &&
    a.asset.toLowerCase() === b.asset.toLowerCase() &&
    a.payTo.toLowerCase() === b.payTo.toLowerCase() &&
    a.amount === b.amount
  )
}

/** The settlement's outcome, for the payer. */
export interface SettleResponse {
  success: boolean
  errorReason?: string
  errorMessage?: string
  payer?: string
  transaction: string
  network: string
}

/** How long a settle waits for the relayer's receipt by default (X402_SETTLE_WAIT). */
export const DEFAULT_SETTLE_WAIT_MS = 60_000

/**
 * x402's failure answer for a relayed payment that did not succeed within the wait: `reverted` and
 * `dropped` paid nothing; `pending` may still be mined, and the same payment sent again is
 * answered from that transaction (x402's `settlement_pending`, which the reference server retries
 * once).
 */
export function settleFailure(
  outcome: 'reverted' | 'dropped' | 'pending',
  hash: string,
  waitMs: number,
): { errorReason: string; errorMessage: string } {
  if (outcome === 'pending')
    return {
      errorReason: 'settlement_pending',
      errorMessage: `sent as ${hash} but not mined within ${Math.round(waitMs / 1000)} s; it completes if it is mined, and the same payment sent again is answered from it`,
    }
  return {
    errorReason: 'invalid_exact_evm_transaction_failed',
    errorMessage:
      outcome === 'reverted'
        ? `the relayed transaction ${hash} reverted on chain: nothing was paid`
        : `the relayed transaction ${hash} was never mined and can no longer be: nothing was paid`,
  }
}

/** A JSON value as x402 headers carry it: UTF-8 JSON in standard base64. */
export function encodeHeader(value: unknown): string {
  const bytes = new TextEncoder().encode(JSON.stringify(value))
  let binary = ''
  for (const b of bytes) binary += String.fromCharCode(b)
  return btoa(binary)
}

/** A header's JSON value, or null when it is not base64 of JSON. */
export function decodeHeader(header: string): unknown {
  if (header.length > MAX_HEADER_CHARS || !/^[A-Za-z0-9+/]*={0,2}$/.test(header)) return null
  try {
    const binary = atob(header)
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0))
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch {
    return null
  }
}

/**
 * A `PAYMENT-SIGNATURE` header as a v2 `exact` EVM payment, or the reason it is not one (a
 * sentence naming the first field at fault).
 */
export function parsePaymentPayload(
  value: unknown,
): { ok: true; payload: PaymentPayload } | { ok: false; reason: string } {
  if (value === null || typeof value !== 'object')
    return { ok: false, reason: 'PAYMENT-SIGNATURE is not base64 of a JSON object' }
  const version = (value as { x402Version?: unknown }).x402Version
  if (version !== X402_VERSION)
    return { ok: false, reason: `x402Version ${String(version)} is not spoken here (2 is)` }
  const first = Value.Errors(PaymentPayload, value).First()
  if (first)
    return { ok: false, reason: `${first.path || '(payload)'}: ${first.message}`.slice(0, 300) }
  return { ok: true, payload: value as PaymentPayload }
}
