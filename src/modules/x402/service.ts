/**
 * The x402 facilitator for a merchant's own resources (docs/decisions/0063-x402.md): a merchant's
 * server running x402 middleware (`@x402/hono`, `@x402/express`) with this service's URL and one of
 * its API keys (scope `x402:settle`) has payments verified and settled here. The relayer submits
 * the payer's EIP-3009 authorization and pays the gas; the tokens go straight to the project's own
 * x402 address, which only the operator sets. Every settled payment becomes a transaction of the
 * key's project and mode, found and confirmed by the follower like any payment.
 *
 * Everything is checked before any gas: the requirement must be one this service would issue
 * (scheme `exact`, a network of the key's mode a relayer serves, a token taking signatures with its
 * domain in `extra`, `payTo` the project's address, an amount at least the network's floor), the
 * payment must be for it exactly, and the authorization must be good on chain (signer, window,
 * nonce unused, balance, simulation). The relayer's own limits (per project, per payer) apply on
 * top (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md). A settle answers success
 * only for a successful receipt; the same authorization settled again while its transaction is
 * pending is answered from that transaction, and once success was answered it is a replay.
 */
import { type Address, formatUnits, getAddress, type Hex, type PublicClient } from 'viem'
import type { Quote, TxEvent } from '../../../machines/transaction.machine.ts'
import {
  checkAuthorization,
  signatureTokens,
} from '../../chain/signature-pay/authorization-check.ts'
import type { AuthorizationDomain, TransferAuthorization } from '../../chain/eip3009.ts'
import {
  type NetworkConfig,
  nativeToken,
  relayerRules,
  type TokenConfig,
} from '../../chain/networks-config.ts'
import type { PriceReader, PriceResult } from '../../chain/prices.ts'
import { quoteTokenUnits, tokenUnitsToCents, type UsdPrice } from '../../chain/quote.ts'
import { recordRate } from '../../chain/pricing.ts'
import type { Relayed, Relayer } from '../../chain/signature-pay/relayer.ts'
import { CHANNELS } from '../../db/channels.ts'
import type { Database } from '../../db/client.ts'
import type { Clock } from '../../lib/clock.ts'
import { decimalToMinor } from '../../lib/currency.ts'
import { centsToDecimal } from '../../lib/money.ts'
import { type Denial, deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { Mode, ProjectMode } from '../../projects/mode.ts'
import {
  caip2,
  chainIdOf,
  type PaymentPayload,
  DEFAULT_SETTLE_WAIT_MS,
  type PaymentRequirements,
  sameRequirement,
  settleFailure,
} from '../../x402/protocol.ts'
import type { TransactionRow } from '../transactions/transaction.repo.ts'
import { newTransactionRow } from '../transactions/service.ts'
import { createPayToRepo } from './pay-to.repo.ts'

/** An authorization must leave at least this long to be mined. */
const MIN_VALID_SECONDS = 10n
/** How far past `maxTimeoutSeconds` a `validBefore` may reach (the client's clock may run ahead). */
const CLOCK_SLACK_SECONDS = 60n
/**
 * The order description of a settled payment: the service's words. The caller's own account of the
 * resource is kept in metadata (`x402_caller_resource`, `x402_caller_description`).
 */
export const X402_ORDER_DESCRIPTION = 'x402 payment'
/** The longest caller-supplied text kept (a metadata value's limit). */
const MAX_RESOURCE_CHARS = 500
/** A floor below a cent is no floor: a settle of less than a cent is refused however cheap gas is. */
const MIN_FLOOR_CENTS = 1n

export interface FacilitatorDeps {
  database: Database
  clock: Clock
  networks: NetworkConfig[]
  verified: (network: string) => boolean
  relayer: Relayer | null
  authorizationDomain: (network: string, token: string) => AuthorizationDomain | null
  client: (
    network: string,
  ) => Pick<PublicClient, 'readContract' | 'getCode' | 'waitForTransactionReceipt'> | null
  prices: (network: string) => PriceReader | null
  /** How long a settle waits for the relayer's receipt (X402_SETTLE_WAIT, default 60 s). */
  settleWaitMs?: number
  lifecycle: {
    create(request: {
      row: TransactionRow
      timelineDetails: Record<string, unknown>
    }): Promise<'created' | 'key_taken' | 'number_taken'>
    apply(id: string, event: TxEvent): Promise<Outcome<TransactionRow>>
  }
  watch: (address: string) => void
}

export interface FacilitatorRequest {
  x402Version: 2
  paymentPayload: PaymentPayload
  paymentRequirements: PaymentRequirements
}

export interface VerifyResult {
  isValid: boolean
  invalidReason?: string
  invalidMessage?: string
  payer?: string
}

export interface SettleResult {
  success: boolean
  errorReason?: string
  errorMessage?: string
  payer?: string
  transaction: string
  network: string
  extra?: { transaction_id: string }
}

type Erc20 = Extract<TokenConfig, { kind: 'erc20' }>

/** A payment that passed every check: what the relayer is to send. */
interface Accepted {
  network: NetworkConfig
  token: Erc20
  /** The token's USD price, read for the floor; the recorded transaction's value. */
  price: Extract<PriceResult, { ok: true }>
  authorization: TransferAuthorization
  signature: Hex
  payTo: string
}

type Judged = { ok: true; value: Accepted } | { ok: false; reason: string; message: string }

/** A node or price feed that could not be asked: nothing was sent, the caller may try again. */
const unreachable = (e: unknown): Denial =>
  deny(
    'unavailable',
    `a node cannot be asked right now (${(e as { shortMessage?: string }).shortMessage ?? (e as Error).message}); nothing was sent, try again`,
  )
const invalid = (reason: string, message: string): Judged => ({ ok: false, reason, message })

export function createFacilitatorService(deps: FacilitatorDeps) {
  const payTo = createPayToRepo(deps.database)
  const waitMs = deps.settleWaitMs ?? DEFAULT_SETTLE_WAIT_MS

  /**
   * The smallest settle of `token` on `n`, in its smallest units at `price`: the network's
   * `minSettleUsd`, else what one relay's gas can cost now (its ceiling at the current max fee)
   * at the native coin's price; never under a cent.
   */
  async function floorUnits(n: NetworkConfig, token: Erc20, price: UsdPrice): Promise<bigint> {
    const rules = relayerRules(n)
    let cents = MIN_FLOOR_CENTS
    if (rules.minSettleUsd !== null) cents = decimalToMinor(rules.minSettleUsd, 'USD')
    else {
      const native = nativeToken(n)
      const nativePrice = native ? await deps.prices(n.name)!.read(native) : null
      if (nativePrice?.ok) {
        const wei = await deps.relayer!.worstCost(n.name, getAddress(token.address))
        // Rounded up: the floor covers the gas.
        cents = tokenUnitsToCents(wei, native!.decimals, nativePrice) + 1n
      }
    }
    return quoteTokenUnits(cents > MIN_FLOOR_CENTS ? cents : MIN_FLOOR_CENTS, token.decimals, price)
  }

  /** Networks of this mode the facilitator settles on, with their signature tokens. */
  function settleable(mode: Mode) {
    return deps.networks
      .filter((n) => n.testnet === (mode === 'test') && deps.verified(n.name))
      .map((n) => ({
        network: n,
        tokens: signatureTokens(n, deps.relayer, deps.authorizationDomain),
      }))
      .filter((n) => n.tokens.length > 0)
  }

  /** Every check before any gas; the reasons are x402's own where it names one. */
  async function judge(caller: ProjectMode, body: FacilitatorRequest): Promise<Judged> {
    const req = body.paymentRequirements
    const payment = body.paymentPayload
    if (req.scheme !== 'exact' || payment.accepted.scheme !== 'exact')
      return invalid('unsupported_scheme', 'only the exact scheme is settled here')
    const chainId = chainIdOf(req.network)
    const where = settleable(caller.mode).find((n) => n.network.chainId === chainId)
    if (!where)
      return invalid(
        'invalid_network',
        `${req.network} is not a network this service settles on for ${caller.mode} keys`,
      )
    const found = where.tokens.find(
      (t) => t.token.address.toLowerCase() === req.asset.toLowerCase(),
    )
    if (!found)
      return invalid(
        'invalid_payment_requirements',
        `asset ${req.asset} is not a token this service settles on ${where.network.name} (one taking EIP-3009 signatures)`,
      )
    if (req.extra?.name !== found.domain.name)
      return invalid(
        'invalid_exact_evm_token_name_mismatch',
        `extra.name must be the token's EIP-712 name, ${JSON.stringify(found.domain.name)}`,
      )
    if (req.extra?.version !== found.domain.version)
      return invalid(
        'invalid_exact_evm_token_version_mismatch',
        `extra.version must be the token's EIP-712 version, ${JSON.stringify(found.domain.version)}`,
      )
    const own = await payTo.get(caller)
    if (!own)
      return invalid(
        'invalid_exact_evm_recipient_mismatch',
        `this project has no x402 address for ${caller.mode} mode: the operator sets it with project set-x402-pay-to`,
      )
    if (req.payTo.toLowerCase() !== own)
      return invalid(
        'invalid_exact_evm_recipient_mismatch',
        `payTo must be this project's x402 address, ${getAddress(own)}`,
      )
    if (!sameRequirement(payment.accepted, req))
      return invalid(
        'invalid_payment_requirements',
        'paymentPayload.accepted is not paymentRequirements',
      )
    const a = payment.payload.authorization
    if (a.to.toLowerCase() !== own)
      return invalid('invalid_exact_evm_recipient_mismatch', 'the authorization is not to payTo')
    if (a.value !== req.amount)
      return invalid(
        'invalid_exact_evm_payload_authorization_value_mismatch',
        `the authorization moves ${a.value}, not the ${req.amount} required`,
      )
    const now = BigInt(Math.floor(deps.clock.now() / 1000))
    const validAfter = BigInt(a.validAfter)
    const validBefore = BigInt(a.validBefore)
    if (validAfter > now)
      return invalid('invalid_exact_evm_payload_authorization_valid_after', 'not valid yet')
    if (validBefore < now + MIN_VALID_SECONDS)
      return invalid(
        'invalid_exact_evm_payload_authorization_valid_before',
        `expired, or too close to expiry to be mined (under ${MIN_VALID_SECONDS} s left)`,
      )
    if (validBefore > now + BigInt(req.maxTimeoutSeconds) + CLOCK_SLACK_SECONDS)
      return invalid(
        'invalid_exact_evm_payload_authorization_valid_before',
        'valid for longer than maxTimeoutSeconds allows',
      )
    const authorization: TransferAuthorization = {
      from: getAddress(a.from),
      to: getAddress(a.to),
      value: BigInt(a.value),
      validAfter,
      validBefore,
      nonce: a.nonce.toLowerCase() as Hex,
    }
    const price = await deps.prices(where.network.name)!.read(found.token)
    if (!price.ok) throw new Error(`the ${found.token.symbol} price is unavailable`)
    const floor = await floorUnits(where.network, found.token, price)
    if (BigInt(req.amount) < floor)
      return invalid(
        'invalid_exact_evm_authorization_value',
        `amount ${req.amount} is below this facilitator's smallest settle on ${where.network.name}, ${floor} (${formatUnits(floor, found.token.decimals)} ${found.token.symbol}): the relay's gas would cost more than the payment`,
      )
    const signature = payment.payload.signature as Hex
    const client = deps.client(where.network.name)
    if (!client) throw new Error(`${where.network.name} has no client`)
    const token = getAddress(found.token.address)
    const checked = await checkAuthorization(client, {
      network: where.network.name,
      token,
      domain: found.domain,
      authorization,
      signature,
    })
    if (!checked.ok) {
      if (checked.code === 'unavailable') throw new Error(checked.message)
      const field = checked.details?.[0]?.path
      return invalid(
        checked.code === 'conflict'
          ? 'invalid_exact_evm_nonce_already_used'
          : field === 'from'
            ? 'invalid_exact_evm_insufficient_balance'
            : 'invalid_exact_evm_signature',
        checked.message,
      )
    }
    const simulated = await deps.relayer!.check({
      network: where.network.name,
      token,
      authorization,
      signature,
    })
    if (!simulated.ok)
      return invalid(
        simulated.details?.[0]?.path === 'from'
          ? 'invalid_exact_evm_signature'
          : 'invalid_exact_evm_transaction_simulation_failed',
        simulated.message,
      )
    return {
      ok: true,
      value: {
        network: where.network,
        token: found.token,
        price,
        authorization,
        signature,
        payTo: own,
      },
    }
  }

  /**
   * The transaction recording a settled payment: created, then its token chosen with exactly the
   * amount authorized, to the x402 address, so the follower's transfer completes it. It expires a
   * minute after the authorization can no longer be mined.
   */
  async function record(
    caller: ProjectMode,
    p: Accepted,
    resource: PaymentPayload['resource'],
  ): Promise<string> {
    const price = p.price
    const cents = tokenUnitsToCents(p.authorization.value, p.token.decimals, price)
    const now = new Date(deps.clock.now())
    // What the settling caller said of the resource is its word, not the merchant's: kept under
    // metadata keys that say so, never as the order's description.
    const url = resource?.url?.slice(0, MAX_RESOURCE_CHARS) ?? null
    const description = resource?.description?.slice(0, MAX_RESOURCE_CHARS) ?? null
    let row: TransactionRow | null = null
    for (let attempt = 0; attempt < 5 && !row; attempt++) {
      const candidate = {
        ...newTransactionRow(
          caller,
          {
            order_description: X402_ORDER_DESCRIPTION,
            metadata: {
              x402_payer: p.authorization.from,
              x402_caller_resource: url,
              x402_caller_description: description,
            },
          },
          // The value received, in USD: nobody asked a price.
          {
            currency: 'USD',
            amountInCurrency: centsToDecimal(cents),
            amountUsd: centsToDecimal(cents),
            usdRate: null,
          },
          now,
        ),
        expiresAt: new Date(Number(p.authorization.validBefore) * 1000 + 60_000),
      }
      const created = await deps.lifecycle.create({
        row: candidate,
        timelineDetails: {
          amount_usd: candidate.amountUsd,
          expires_at: candidate.expiresAt.toISOString(),
          x402_caller_resource: url,
        },
      })
      if (created === 'created') row = candidate
    }
    if (!row) throw new Error('no free transaction number after 5 attempts')
    const quote: Quote = {
      tokenSymbol: p.token.symbol,
      network: p.network.name,
      tokenAmount: p.authorization.value.toString(),
      depositAddress: getAddress(p.payTo),
      requiredConfirmations: p.network.confirmations,
      ...(p.network.finality === 'confirmations' ? {} : { finality: p.network.finality }),
      rates: {
        quotedAt: now.toISOString(),
        method: 'usd',
        tokenUsd: recordRate(price),
        currencyUsd: null,
      },
    }
    const selected = await deps.lifecycle.apply(row.id, { type: 'token.selected', quote })
    if (!selected.ok) throw new Error(selected.message)
    // Every instance's follower watches the x402 address (also after a restart: it is stored).
    deps.watch(p.payTo)
    await deps.database.notify(CHANNELS.depositAddress, p.payTo)
    return row.id
  }

  /** The relayer's request for a settle (no client: the caller is the merchant's own server). */
  const relayRequest = (
    caller: ProjectMode,
    network: string,
    token: Erc20,
    authorization: TransferAuthorization,
    signature: Hex,
  ) => ({
    network,
    token: getAddress(token.address) as Address,
    authorization,
    signature,
    transactionId: null,
    projectId: caller.projectId,
    client: null,
  })

  /**
   * A settle of an authorization the relayer was asked to send before (a retry after
   * `settlement_pending`, or a replay): its record and the request to answer it by, `replay` when
   * it is not this caller's same payment or success was answered already; null for a new one.
   * The payment must equal the recorded one (recipient, value, window), so a retry never answers
   * for a payment other than the one first checked.
   */
  async function earlier(caller: ProjectMode, body: FacilitatorRequest) {
    const req = body.paymentRequirements
    const a = body.paymentPayload.payload.authorization
    const chainId = chainIdOf(req.network)
    const where = settleable(caller.mode).find((n) => n.network.chainId === chainId)
    const found = where?.tokens.find(
      (t) => t.token.address.toLowerCase() === req.asset.toLowerCase(),
    )
    if (!where || !found) return null
    const authorization: TransferAuthorization = {
      from: getAddress(a.from),
      to: getAddress(a.to),
      value: BigInt(a.value),
      validAfter: BigInt(a.validAfter),
      validBefore: BigInt(a.validBefore),
      nonce: a.nonce.toLowerCase() as Hex,
    }
    const request = relayRequest(
      caller,
      where.network.name,
      found.token,
      authorization,
      body.paymentPayload.payload.signature as Hex,
    )
    const row = await deps.relayer!.find(request)
    if (!row) return null
    const same =
      row.projectId === caller.projectId &&
      row.payTo === a.to.toLowerCase() &&
      row.value === a.value &&
      row.validBefore === authorization.validBefore
    return ok({ row: same && !row.answeredAt ? row : ('replay' as const), request })
  }

  return {
    /** The address and assets a merchant's middleware is to use in this key's mode. */
    async payTo(caller: ProjectMode) {
      const own = await payTo.get(caller)
      const assets = settleable(caller.mode).flatMap(({ network, tokens }) =>
        tokens.map(async ({ token, domain }) => {
          // The floor as it stands now (null: a price or the node cannot be read right now).
          const price = await deps
            .prices(network.name)!
            .read(token)
            .catch(() => null)
          const floor = price?.ok ? await floorUnits(network, token, price).catch(() => null) : null
          return {
            network: caip2(network.chainId),
            blockchain_network: network.name,
            token_symbol: token.symbol,
            asset: getAddress(token.address),
            decimals: token.decimals,
            extra: { name: domain.name, version: domain.version },
            min_amount: floor === null ? null : floor.toString(),
          }
        }),
      )
      return { pay_to: own ? getAddress(own) : null, assets: await Promise.all(assets) }
    },

    /** `project set-x402-pay-to`: the operator names where the project's x402 payments go. */
    async setPayTo(
      projectId: string,
      mode: string,
      address: string,
    ): Promise<Outcome<{ projectId: string; mode: Mode; payTo: string }>> {
      if (mode !== 'test' && mode !== 'live')
        return deny('invalid_request', 'mode must be test or live', [
          { path: 'mode', message: 'test or live' },
        ])
      if (!/^0x[0-9a-fA-F]{40}$/.test(address))
        return deny('invalid_request', 'address must be a 0x-prefixed 20-byte address', [
          { path: 'address', message: 'a 0x-prefixed 20-byte address' },
        ])
      if (BigInt(address) === 0n)
        return deny('invalid_request', 'address must not be the zero address', [
          { path: 'address', message: 'not the zero address' },
        ])
      if (!(await payTo.set(projectId, mode, address.toLowerCase(), new Date(deps.clock.now()))))
        return deny('not_found', `No project ${projectId}`)
      await deps.database.notify(CHANNELS.depositAddress, address.toLowerCase())
      return ok({ projectId, mode, payTo: getAddress(address) })
    },

    /** x402 `GET /supported`: what this key's mode can be settled on. */
    supported(caller: ProjectMode) {
      const relayer = deps.relayer
      return {
        kinds: settleable(caller.mode).map(({ network }) => ({
          x402Version: 2 as const,
          scheme: 'exact' as const,
          network: caip2(network.chainId),
        })),
        extensions: [] as string[],
        signers: relayer ? { 'eip155:*': [relayer.address] } : {},
      }
    },

    /** x402 `POST /verify`: whether settle would go through now; nothing is sent. */
    async verify(caller: ProjectMode, body: FacilitatorRequest): Promise<Outcome<VerifyResult>> {
      const judged = await judge(caller, body).catch(unreachable)
      if (!judged.ok && 'code' in judged) return judged
      const payer = getAddress(body.paymentPayload.payload.authorization.from)
      return ok(
        judged.ok
          ? { isValid: true, payer }
          : { isValid: false, invalidReason: judged.reason, invalidMessage: judged.message, payer },
      )
    },

    /**
     * x402 `POST /settle`: checks as verify does, records the payment as a transaction of the
     * key's project and mode, has the relayer send it, and answers once it is mined.
     */
    async settle(caller: ProjectMode, body: FacilitatorRequest): Promise<Outcome<SettleResult>> {
      const network = body.paymentRequirements.network
      const payer = getAddress(body.paymentPayload.payload.authorization.from)
      const refused = (reason: string, message: string) =>
        ok({
          success: false,
          errorReason: reason,
          errorMessage: message,
          payer,
          transaction: '',
          network,
        })
      /** What the relay `sent` (paying transaction `transactionId`) answers, once it ends or the wait does. */
      const answer = async (
        sent: Pick<Relayed, 'id' | 'hash'>,
        transactionId: string | null,
      ): Promise<Outcome<SettleResult>> => {
        const outcome = await deps.relayer!.outcome(sent, waitMs)
        const settled = {
          payer,
          transaction: sent.hash,
          network,
          ...(transactionId ? { extra: { transaction_id: transactionId } } : {}),
        }
        if (outcome !== 'succeeded')
          return ok({ success: false, ...settleFailure(outcome, sent.hash, waitMs), ...settled })
        // Success is answered once: a settle of the same payment after that is a replay, which
        // a resource server would otherwise serve again for nothing.
        if (!(await deps.relayer!.markAnswered(sent.id)))
          return refused(
            'invalid_exact_evm_nonce_already_used',
            `this payment was settled already (${sent.hash}); a payment is settled once`,
          )
        return ok({ success: true, ...settled })
      }
      const again = await earlier(caller, body).catch(unreachable)
      if (again && !again.ok) return again
      if (again?.ok) {
        const { row, request } = again.value
        if (row === 'replay')
          return refused(
            'invalid_exact_evm_nonce_already_used',
            'this authorization was settled already, or belongs to another settle',
          )
        // Sent before: answered from that transaction (sent again if it left the chain).
        const sent = await deps.relayer!.relay(request).catch(unreachable)
        if (!sent.ok)
          return sent.code === 'unavailable'
            ? sent
            : refused('invalid_exact_evm_transaction_simulation_failed', sent.message)
        return answer(sent.value, row.transactionId)
      }
      const judged = await judge(caller, body).catch(unreachable)
      if (!judged.ok && 'code' in judged) return judged
      if (!judged.ok) return refused(judged.reason, judged.message)
      const p = judged.value
      let transactionId: string | null = null
      const sent = await deps
        .relayer!.relay({
          ...relayRequest(caller, p.network.name, p.token, p.authorization, p.signature),
          makeTransaction: async () => {
            transactionId = await record(caller, p, body.paymentPayload.resource)
            return transactionId
          },
        })
        .catch(unreachable)
      if (!sent.ok) {
        if (transactionId)
          await deps.lifecycle.apply(transactionId, { type: 'cancel.requested', by: 'merchant' })
        return sent.code === 'unavailable'
          ? sent
          : refused(
              sent.details?.[0]?.path === 'from'
                ? 'invalid_exact_evm_signature'
                : 'invalid_exact_evm_transaction_simulation_failed',
              sent.message,
            )
      }
      return answer(sent.value, transactionId)
    },
  }
}

export type FacilitatorService = ReturnType<typeof createFacilitatorService>
