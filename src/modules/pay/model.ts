import { type Static, Type } from '@sinclair/typebox'

/**
 * What the pay page shows and polls (docs/decisions/0026-pay-page-endpoints.md `GET
 * /pay/{id}/state`).
 */
export interface PayState {
  id: string
  transaction_number: string
  status: string
  project_name: string
  testing_mode: boolean
  amount_usd: number
  /** ISO 4217: what the amount is in. */
  currency: string
  /** The amount charged, in `currency`. */
  amount_in_currency: number
  /**
   * Any amount pays it (a Commerce `no_price` charge): there is no amount to show, the quote asks
   * for one smallest unit and the payment URI names none.
   */
  any_amount: boolean
  order_description: string | null
  expires_at: string
  /**
   * The server's clock when this state was read, so the page counts down on it, not the device's.
   */
  server_time: string
  completed_at: string | null
  tokens: { token_symbol: string; blockchain_network: string; decimals: number; native: boolean }[]
  quote: {
    token_symbol: string
    blockchain_network: string
    chain_id: number
    decimals: number
    token_address: string | null
    /** The locked quote, in smallest units. */
    token_amount: string
    deposit_address: string
    /** EIP-681 URI for what is still due (the whole quote until something arrives). */
    payment_uri: string
    required_confirmations: number
    /**
     * What completes the payment: confirmations counted to required_confirmations, or the network's
     * safe / finalized block reaching it.
     */
    finality: 'confirmations' | 'safe' | 'finalized'
  } | null
  amount_received: string | null
  amount_due: string | null
  transaction_hash: string | null
  block_number: number | null
  confirmations: number | null
  failure_reason: string | null
  /**
   * Another token than the quoted one arrived at the deposit address
   * (docs/decisions/0012-transaction-lifecycle.md): recorded, it does not count toward the payment.
   */
  wrong_asset_received: boolean
  success_url: string | null
  cancel_url: string | null
  /** The service's devnet wallet can pay this (test mode on its own devnet): the page offers it. */
  test_wallet: boolean
  /**
   * Paying by one signature (EIP-3009, the relayer paying gas): the EIP-712 domain and the message
   * fields a browser wallet signs with `eth_signTypedData_v4`, the nonce being the wallet's
   * random 32 bytes. Null when not offered (the token takes no signatures, no relayer, nothing
   * due).
   */
  authorization: {
    domain: { name: string; version: string; chainId: number; verifyingContract: string }
    primary_type: 'TransferWithAuthorization'
    /** The deposit address. */
    to: string
    /** Exactly what is due, in smallest units. */
    value: string
    valid_after: string
    /** Unix seconds: the transaction's expiry. */
    valid_before: string
    /** The relayer's address, which pays the gas. */
    relayer: string
  } | null
  version: number
}

/**
 * The OpenAPI model of what a transaction's x402_url answers once paid: the pay page's state
 * (`PayState`), its main fields named, the rest as the pay page reads them.
 */
export const X402TransactionState = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    status: Type.String({ description: 'The transaction status (processing once paid).' }),
    amount_due: Type.Union([Type.String(), Type.Null()], {
      description: "Still due, in the token's smallest units.",
    }),
    transaction_hash: Type.Union([Type.String(), Type.Null()]),
  },
  {
    additionalProperties: true,
    description: 'The transaction as its pay page sees it (`GET /pay/{id}/state`).',
  },
)

/** `POST /pay/{id}/select`. */
export const SelectBody = Type.Object(
  {
    token_symbol: Type.String({ minLength: 1, maxLength: 32 }),
    blockchain_network: Type.String({ minLength: 1, maxLength: 64 }),
  },
  { additionalProperties: false },
)

const UINT = Type.String({ pattern: '^[0-9]{1,78}$' })

/** `POST /pay/{id}/authorization`: a TransferWithAuthorization the customer's wallet signed. */
export const SignedAuthorizationBody = Type.Object(
  {
    from: Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' }),
    value: UINT,
    valid_after: UINT,
    valid_before: UINT,
    nonce: Type.String({ pattern: '^0x[0-9a-fA-F]{64}$' }),
    /** 65 bytes (r, s, v), or longer for a contract wallet (EIP-1271). */
    signature: Type.String({ pattern: '^0x([0-9a-fA-F]{2}){65,4096}$' }),
  },
  { additionalProperties: false },
)
export type SignedAuthorization = Static<typeof SignedAuthorizationBody>
