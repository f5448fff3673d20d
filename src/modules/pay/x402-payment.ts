/**
 * A transaction paid over x402 (docs/decisions/0063-x402.md): its `x402_url` answers a request
 * without payment with 402 and one `exact` requirement per token that takes signatures and that
 * the transaction can be paid in (each quoted now, to its deposit address), and a request carrying
 * a `PAYMENT-SIGNATURE` for one of them with the payment settled by the relayer.
 *
 * Nothing here trusts the payload's own account of what it pays for: the requirement it names must
 * be one this transaction offers now, exactly, and the signature is then checked over the
 * message this service builds (./signature-payment.ts), as on the pay page. The payment is found
 * and confirmed by the follower like any transfer.
 */
import { getAddress } from 'viem'
import { signatureTokens } from '../../chain/signature-pay/authorization-check.ts'
import type { NetworkConfig, TokenConfig } from '../../chain/networks-config.ts'
import type { Clock } from '../../lib/clock.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import {
  caip2,
  type PaymentPayload,
  type PaymentRequired,
  type PaymentRequirements,
  type SettleResponse,
  sameRequirement,
  X402_VERSION,
} from '../../x402/protocol.ts'
import type { PayState } from './model.ts'
import type { SignatureDeps } from './signature-payment.ts'

/** The longest an x402 authorization may stay valid (validBefore = signing time + this). */
const MAX_TIMEOUT_SECONDS = 300
/**
 * Kept between the requirement's timeout and the transaction's expiry, so an authorization signed
 * within this long of the 402 still ends before the transaction does.
 */
const SIGNING_SLACK_SECONDS = 60
/** Below this, no x402 requirement is offered: too little time to sign, relay and mine. */
const MIN_TIMEOUT_SECONDS = 30

/** What a transaction's x402_url answers. */
export type X402Answer =
  /**
   * 402: what to pay (`error` set when a payment was refused); `settlement` (success false) when
   * the relayer sent this payment and its transaction did not succeed within the wait.
   */
  | { kind: 'required'; paymentRequired: PaymentRequired; settlement?: SettleResponse }
  /** 200: the transaction, with the settlement when this request paid it. */
  | { kind: 'paid'; state: PayState; settlement: SettleResponse | null }

/** A token the transaction can be paid in over x402, quoted now. */
export interface X402Option {
  network: NetworkConfig
  token: Extract<TokenConfig, { kind: 'erc20' }>
  requirement: PaymentRequirements
}

export interface X402Deps {
  clock: Clock
  signatures: Pick<SignatureDeps, 'relayer' | 'authorizationDomain'>
  /** Tokens offered to this transaction's mode, on networks checked against their chain. */
  offered: (testingMode: boolean) => NetworkConfig[]
}

/** What the options of one transaction need of it. */
export interface X402Transaction {
  state: PayState
  /** What the token costs now for this transaction, in smallest units. */
  quote: (network: NetworkConfig, token: TokenConfig) => Promise<Outcome<bigint>>
  /** The transaction's deposit address (assigned on first ask, then watched). */
  depositAddress: () => Promise<Outcome<string>>
}

/** Paid, or being confirmed: a transaction's x402_url answers 200 with it and takes nothing. */
export const isPaid = (s: Pick<PayState, 'status'>) =>
  ['processing', 'confirming', 'completed'].includes(s.status)

/** Seconds the authorization may stay valid for this transaction now (0: too late to offer). */
export function x402Timeout(s: Pick<PayState, 'expires_at'>, now: number): number {
  const left = Math.floor((Date.parse(s.expires_at) - now) / 1000) - SIGNING_SLACK_SECONDS
  const timeout = Math.min(MAX_TIMEOUT_SECONDS, left)
  return timeout >= MIN_TIMEOUT_SECONDS ? timeout : 0
}

/** The one requirement for paying `amount` of `token` to `payTo`. */
export function exactRequirement(o: {
  network: NetworkConfig
  token: Extract<TokenConfig, { kind: 'erc20' }>
  domain: { name: string; version: string }
  amount: bigint
  payTo: string
  maxTimeoutSeconds: number
}): PaymentRequirements {
  return {
    scheme: 'exact',
    network: caip2(o.network.chainId),
    asset: getAddress(o.token.address),
    amount: o.amount.toString(),
    payTo: getAddress(o.payTo),
    maxTimeoutSeconds: o.maxTimeoutSeconds,
    extra: { name: o.domain.name, version: o.domain.version },
  }
}

export function createX402Payment(deps: X402Deps) {
  /**
   * The ways to pay this transaction over x402 now: the locked token alone once the customer said
   * they paid (pending), else every signature token offered (the locked one at its locked amount).
   */
  async function options(tx: X402Transaction): Promise<Outcome<X402Option[]>> {
    const s = tx.state
    if (!['created', 'prepared', 'pending'].includes(s.status))
      return deny('conflict', `This transaction cannot be paid: it is ${s.status}`)
    const timeout = x402Timeout(s, deps.clock.now())
    if (timeout === 0)
      return deny('conflict', 'This transaction expires too soon to be paid over x402')
    const relayer = deps.signatures.relayer
    const candidates = deps.offered(s.testing_mode).flatMap((network) =>
      signatureTokens(network, relayer, deps.signatures.authorizationDomain)
        // Only what the pay page offers this transaction (a stablecoin of another currency needs
        // that currency's rate in its mode).
        .filter(({ token }) =>
          s.tokens.some(
            (o) => o.token_symbol === token.symbol && o.blockchain_network === network.name,
          ),
        )
        .filter(
          ({ token }) =>
            s.status !== 'pending' ||
            (s.quote?.blockchain_network === network.name && s.quote.token_symbol === token.symbol),
        )
        .map(({ token, domain }) => ({ network, token, domain })),
    )
    if (candidates.length === 0)
      return deny(
        'conflict',
        relayer
          ? 'No token this transaction can be paid in takes signatures, so it cannot be paid over x402'
          : 'This service has no relayer, so it takes no payments over x402',
      )
    const payTo = await tx.depositAddress()
    if (!payTo.ok) return payTo
    const out: X402Option[] = []
    let unpriced: string | null = null
    for (const { network, token, domain } of candidates) {
      const locked =
        s.quote?.blockchain_network === network.name && s.quote.token_symbol === token.symbol
      const amount = locked
        ? ok(BigInt(s.amount_due ?? s.quote!.token_amount))
        : await tx.quote(network, token)
      if (!amount.ok) {
        unpriced = amount.message
        continue
      }
      if (amount.value <= 0n) continue
      out.push({
        network,
        token,
        requirement: exactRequirement({
          network,
          token,
          domain,
          amount: amount.value,
          payTo: payTo.value,
          maxTimeoutSeconds: timeout,
        }),
      })
    }
    if (out.length === 0)
      return deny('unavailable', unpriced ?? 'Nothing is due on this transaction now')
    return ok(out)
  }

  return {
    options,

    /** The 402's body: every way to pay, and why the last attempt was refused if it was. */
    paymentRequired(resourceUrl: string, opts: X402Option[], error?: string): PaymentRequired {
      return {
        x402Version: X402_VERSION,
        ...(error ? { error } : {}),
        resource: {
          url: resourceUrl,
          description: 'A payment to this transaction',
          mimeType: 'application/json',
        },
        accepts: opts.map((o) => o.requirement),
      }
    },

    /** The option the payment names, if this transaction offers it now exactly. */
    chosen(opts: X402Option[], payment: PaymentPayload): X402Option | null {
      return opts.find((o) => sameRequirement(o.requirement, payment.accepted)) ?? null
    },
  }
}

export type X402Payment = ReturnType<typeof createX402Payment>
