import { getAddress } from 'viem'
import type { Quote, TxEvent } from '../../../machines/transaction.machine.ts'
import type { DepositService } from '../../chain/deposit.service.ts'
import type { NetworkConfig, TokenConfig } from '../../chain/networks-config.ts'
import { paymentUri } from '../../chain/payment-uri.ts'
import type { PriceReader, PriceResult } from '../../chain/prices.ts'
import type { TestWallet } from '../../chain/test-wallet.ts'
import { canQuote, quoteToken } from '../../chain/pricing.ts'
import { type RateBook, USD_ONLY } from '../../chain/fx-rates.ts'
import {
  decimalAmountNumber,
  decimalToMinor,
  minorToDecimal,
  minorUnits,
} from '../../lib/currency.ts'
import { ONE_DOLLAR, quoteInCurrency } from '../../chain/quote.ts'
import type { Database } from '../../db/client.ts'
import type { Clock } from '../../lib/clock.ts'
import { UUID_RE } from '../../lib/ids.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { TransactionRow } from '../transactions/transaction.repo.ts'
import type { PayState, SignedAuthorization } from './model.ts'
import { authorizationOffer, type SignatureDeps, submitAuthorization } from './signature-payment.ts'
import type { Relayer } from '../../chain/signature-pay/relayer.ts'
import type { AuthorizationDomain } from '../../chain/eip3009.ts'
import { createPayRepo } from './pay.repo.ts'
import { modeOf } from '../../projects/mode.ts'
import { DEFAULT_SETTLE_WAIT_MS, type PaymentPayload, settleFailure } from '../../x402/protocol.ts'
import { createX402Payment, isPaid, type X402Answer, type X402Transaction } from './x402-payment.ts'

export interface PayDeps {
  database: Database
  clock: Clock
  /** The service's public address (BASE_URL): x402 names its resources under it. */
  baseUrl: string
  networks: NetworkConfig[]
  prices: (network: string) => PriceReader | null
  /** Fiat currencies' USD rates (fx-rates.ts); absent: USD only. */
  rates?: Pick<RateBook, 'offered' | 'read' | 'current'>
  deposits: DepositService
  /** The native balance an address holds now on a network (null: the node cannot say). */
  nativeBalance?: (network: string, address: string) => Promise<bigint | null>
  /**
   * Whether a network was checked against its chain and agrees: only then are its tokens offered
   * (absent: all are).
   */
  verified?: (network: string) => boolean
  /** Called when an address is handed out, so this instance's followers watch it at once. */
  watch: (address: string) => void
  lifecycle: { apply(id: string, event: TxEvent): Promise<Outcome<TransactionRow>> }
  /** The devnet's funded wallet, when the service runs its own devnet. */
  testWallet?: TestWallet | null
  /** Pays the gas of signed payments (./signature-payment.ts); null: not offered. */
  relayer?: Relayer | null
  /** A token's verified EIP-712 domain (null: it takes no signatures). */
  authorizationDomain?: (network: string, token: string) => AuthorizationDomain | null
  /** A network's JSON-RPC client, to check a signed payment before the relayer sends it. */
  client?: SignatureDeps['client']
  /** How long an x402 payment waits for the relayer's receipt (X402_SETTLE_WAIT, default 60 s). */
  settleWaitMs?: number
}

/**
 * The customer's side of a transaction (docs/decisions/0026-pay-page-endpoints.md), authorised by
 * its unguessable id alone: read its state, choose a token (quote locked, deposit address
 * assigned), say the payment was sent, or cancel. Tokens offered are those of networks whose
 * `testnet` flag matches the mode and that were checked against their chain (an unchecked contract
 * address is never quoted).
 */
/** How long token prices shown as a guide (never a quote) are kept. */
const PRICE_BOARD_MS = 30_000

export function createPayService(deps: PayDeps) {
  const repo = createPayRepo(deps.database)
  const signatures: SignatureDeps = {
    relayer: deps.relayer ?? null,
    authorizationDomain: deps.authorizationDomain ?? (() => null),
    client: deps.client ?? (() => null),
    clock: deps.clock,
  }

  const usable = (n: NetworkConfig) => deps.verified?.(n.name) ?? true
  const offered = (testingMode: boolean) =>
    deps.networks.filter((n) => n.testnet === testingMode && usable(n))
  const rates = deps.rates ?? USD_ONLY
  const currencies = (testingMode: boolean) => rates.offered(modeOf(testingMode))
  /** A token a transaction can be quoted in: a stablecoin of another currency needs its rate. */
  const quotable = (tx: Pick<TransactionRow, 'currency' | 'testingMode'>, t: TokenConfig) =>
    canQuote(t, tx.currency, currencies(tx.testingMode))
  const x402 = createX402Payment({ clock: deps.clock, signatures, offered })
  const settleWaitMs = deps.settleWaitMs ?? DEFAULT_SETTLE_WAIT_MS
  const tokenOf = (network: string | null, symbol: string | null) => {
    const n = deps.networks.find((x) => x.name === network)
    const t = n?.tokens.find((x) => x.symbol === symbol)
    return n && t ? { network: n, token: t } : null
  }

  async function load(id: string) {
    // Not a UUID: no such transaction (the column would refuse the comparison).
    return UUID_RE.test(id) ? repo.load(id) : null
  }

  async function view(
    tx: TransactionRow,
    projectName: string,
    wrongAsset: boolean,
  ): Promise<PayState> {
    const chosen = tokenOf(tx.blockchainNetwork, tx.tokenSymbol)
    const short =
      tx.tokenAmount === null || tx.anyAmount
        ? null
        : BigInt(tx.tokenAmount) - BigInt(tx.amountReceived ?? '0')
    const due = short === null ? null : short > 0n ? short : 0n
    const s: Omit<PayState, 'authorization'> = {
      id: tx.id,
      transaction_number: tx.transactionNumber,
      status: tx.status,
      project_name: projectName,
      testing_mode: tx.testingMode,
      amount_usd: Number(tx.amountUsd),
      currency: tx.currency,
      amount_in_currency: decimalAmountNumber(tx.amountInCurrency, tx.currency),
      any_amount: tx.anyAmount,
      order_description: tx.orderDescription,
      expires_at: tx.expiresAt.toISOString(),
      server_time: new Date(deps.clock.now()).toISOString(),
      completed_at: tx.completedAt?.toISOString() ?? null,
      tokens: offered(tx.testingMode).flatMap((n) =>
        n.tokens
          .filter((t) => quotable(tx, t))
          .map((t) => ({
            token_symbol: t.symbol,
            blockchain_network: n.name,
            decimals: t.decimals,
            native: t.kind === 'native',
          })),
      ),
      quote:
        tx.tokenAmount !== null && tx.depositAddress && chosen
          ? {
              token_symbol: chosen.token.symbol,
              blockchain_network: chosen.network.name,
              chain_id: chosen.network.chainId,
              decimals: chosen.token.decimals,
              token_address: chosen.token.kind === 'erc20' ? chosen.token.address : null,
              token_amount: tx.tokenAmount,
              deposit_address: tx.depositAddress,
              payment_uri: paymentUri({
                chainId: chosen.network.chainId,
                to: tx.depositAddress as `0x${string}`,
                amount: due,
                token: chosen.token,
              }),
              required_confirmations: tx.requiredConfirmations ?? chosen.network.confirmations,
              finality: tx.finality ?? chosen.network.finality,
            }
          : null,
      amount_received: tx.amountReceived,
      amount_due: due === null ? null : due.toString(),
      transaction_hash: tx.transactionHash,
      block_number: tx.blockNumber,
      confirmations: tx.confirmations,
      failure_reason: tx.status === 'failed' ? await repo.failureReason(tx.id) : null,
      wrong_asset_received: wrongAsset,
      success_url: tx.successUrl,
      cancel_url: tx.cancelUrl,
      test_wallet:
        !!deps.testWallet && tx.testingMode && chosen?.network.name === deps.testWallet.network,
      version: tx.version,
    }
    // Paying by signature names an amount: not offered when the customer chooses it.
    return { ...s, authorization: tx.anyAmount ? null : authorizationOffer(signatures, s) }
  }

  async function stateAfter(
    id: string,
    applied: Outcome<TransactionRow>,
  ): Promise<Outcome<PayState>> {
    if (!applied.ok) return applied
    const r = await load(id)
    return r
      ? ok(await view(r.tx, r.projectName, r.wrongAsset))
      : deny('not_found', `No transaction ${id}`)
  }

  async function state(id: string): Promise<Outcome<PayState>> {
    const r = await load(id)
    return r
      ? ok(await view(r.tx, r.projectName, r.wrongAsset))
      : deny('not_found', `No transaction ${id}`)
  }

  /**
   * The transaction's deposit address (docs/decisions/0017-deposit-addresses-from-an-xpub.md): the
   * one it has, or the next one derived for it; watched by this instance's followers at once.
   */
  async function depositAddressOf(tx: TransactionRow): Promise<Outcome<string>> {
    const a = await deps.deposits.assign({
      id: tx.id,
      projectId: tx.projectId,
      mode: modeOf(tx.testingMode),
    })
    if (!a.ok) return a
    deps.watch(a.value.address)
    return ok(a.value.address)
  }

  /**
   * What `token` costs now for the transaction's amount, in smallest units, rounded up, with the
   * rates it was computed with (src/chain/pricing.ts).
   */
  function quoteFor(tx: TransactionRow, network: NetworkConfig, token: TokenConfig) {
    return quoteToken({
      // Any amount: the rates of one unit of the currency, so what is paid can be valued.
      tx: tx.anyAmount ? { ...tx, amountInCurrency: minorToDecimal(1n, tx.currency) } : tx,
      token,
      prices: deps.prices(network.name)!,
      rates,
      clock: deps.clock,
    })
  }

  /**
   * Locks a quote for the chosen token and assigns the deposit address
   * (docs/decisions/0012-transaction-lifecycle.md,
   * docs/decisions/0017-deposit-addresses-from-an-xpub.md).
   */
  async function select(
    id: string,
    choice: { token_symbol: string; blockchain_network: string },
    clientIp: string | null,
  ): Promise<Outcome<PayState>> {
    const r = await load(id)
    if (!r) return deny('not_found', `No transaction ${id}`)
    const tx = r.tx
    if (tx.status !== 'created' && tx.status !== 'prepared')
      return deny('conflict', `A token can no longer be chosen: the transaction is ${tx.status}`)
    const found = tokenOf(choice.blockchain_network, choice.token_symbol)
    if (
      !found ||
      found.network.testnet !== tx.testingMode ||
      !usable(found.network) ||
      !quotable(tx, found.token)
    ) {
      return deny(
        'invalid_request',
        `${choice.token_symbol} on ${choice.blockchain_network} is not offered for this transaction`,
        [{ path: 'token_symbol', message: 'one of the offered tokens' }],
      )
    }
    const priced = await quoteFor(tx, found.network, found.token)
    if (!priced.ok) return priced
    const address = await depositAddressOf(tx)
    if (!address.ok) return address
    // What the address already held when the native coin was first quoted on this network is not
    // a payment: arrivals by internal call count above it. Chosen again, the baseline stays: what
    // arrived since may be a payment not seen yet.
    const baselineNetwork =
      tx.nativeBaselineNetwork ?? (tx.nativeBaseline !== null ? tx.blockchainNetwork : null)
    if (
      found.token.kind === 'native' &&
      deps.nativeBalance &&
      !(tx.nativeBaseline !== null && baselineNetwork === found.network.name)
    ) {
      const held = await deps.nativeBalance(found.network.name, address.value)
      if (held === null)
        return deny(
          'unavailable',
          `${found.network.name} cannot be reached right now; please try again in a moment or choose another token`,
        )
      await repo.setNativeBaseline(tx.id, found.network.name, held)
    }
    if (clientIp && tx.customerIpAddress === null) {
      await repo.recordCustomerIp(tx.id, clientIp)
    }
    const quote: Quote = {
      tokenSymbol: found.token.symbol,
      network: found.network.name,
      // Any amount: one smallest unit pays it (a transfer of nothing does not).
      tokenAmount: tx.anyAmount ? '1' : priced.value.units.toString(),
      // Checksummed (EIP-55) for people and wallets; stored lowercase for matching.
      depositAddress: getAddress(address.value),
      requiredConfirmations: found.network.confirmations,
      ...(found.network.finality === 'confirmations' ? {} : { finality: found.network.finality }),
      rates: priced.value.rates,
    }
    return stateAfter(id, await deps.lifecycle.apply(id, { type: 'token.selected', quote }))
  }

  /** What x402 needs of one transaction: its state, quotes and deposit address. */
  function x402Transaction(tx: TransactionRow, state: PayState): X402Transaction {
    return {
      state,
      quote: async (network, token) => {
        const priced = await quoteFor(tx, network, token)
        return priced.ok ? ok(priced.value.units) : priced
      },
      depositAddress: () => depositAddressOf(tx),
    }
  }

  /** The offered tokens' prices per mode, read at most once per PRICE_BOARD_MS. */
  const boards = new Map<boolean, { at: number; prices: Promise<Map<string, PriceResult>> }>()
  function priceBoard(testingMode: boolean): Promise<Map<string, PriceResult>> {
    const now = deps.clock.now()
    const held = boards.get(testingMode)
    if (held && now - held.at < PRICE_BOARD_MS) return held.prices
    const prices = Promise.all(
      offered(testingMode).flatMap((n) =>
        n.tokens.map(
          async (t) =>
            [`${n.name}:${t.symbol}`, await deps.prices(n.name)!.read(t)] as [string, PriceResult],
        ),
      ),
    ).then((entries) => new Map(entries))
    boards.set(testingMode, { at: now, prices })
    prices.catch(() => boards.delete(testingMode))
    return prices
  }

  const x402Url = (id: string) => `${deps.baseUrl}/pay/${id}/x402`
  /** x402 pays an exact amount the server names, never one the customer chooses. */
  const anyAmountRefused = () =>
    deny('invalid_request', 'This charge takes any amount: pay it on its pay page, not by x402')

  return {
    state,

    select,

    /**
     * What each token the transaction may be paid in costs, as a guide (a Commerce charge's
     * `pricing`): the chosen one at its locked quote, the others at the prices of the last
     * PRICE_BOARD_MS and the currency's current rate (null where either is missing); none for any
     * amount. Never a read per transaction: a page of charges costs one read per token at most.
     */
    async pricedTokens(
      tx: TransactionRow,
    ): Promise<{ network: string; symbol: string; decimals: number; units: bigint | null }[]> {
      if (tx.anyAmount) return []
      const prices = await priceBoard(tx.testingMode)
      const rate = rates.current(modeOf(tx.testingMode), tx.currency)
      const amount = {
        minor: decimalToMinor(tx.amountInCurrency, tx.currency),
        places: minorUnits(tx.currency),
      }
      return offered(tx.testingMode).flatMap((n) =>
        n.tokens
          .filter((t) => quotable(tx, t))
          .map((t) => {
            const chosen =
              tx.tokenAmount !== null &&
              tx.blockchainNetwork === n.name &&
              tx.tokenSymbol === t.symbol
            const price = prices.get(`${n.name}:${t.symbol}`)
            const units = chosen
              ? BigInt(tx.tokenAmount!)
              : t.price.kind === 'par' && t.price.currency === tx.currency
                ? quoteInCurrency(amount, t.decimals, 'par', ONE_DOLLAR)
                : price?.ok && rate?.ok
                  ? quoteInCurrency(amount, t.decimals, price, rate)
                  : null
            return { network: n.name, symbol: t.symbol, decimals: t.decimals, units }
          }),
      )
    },

    /**
     * "I have sent the payment" (docs/decisions/0012-transaction-lifecycle.md: prepared ->
     * pending).
     */
    async confirm(id: string): Promise<Outcome<PayState>> {
      if (!(await load(id))) return deny('not_found', `No transaction ${id}`)
      return stateAfter(id, await deps.lifecycle.apply(id, { type: 'customer.confirmed' }))
    },

    async cancel(id: string): Promise<Outcome<PayState>> {
      if (!(await load(id))) return deny('not_found', `No transaction ${id}`)
      return stateAfter(
        id,
        await deps.lifecycle.apply(id, { type: 'cancel.requested', by: 'customer' }),
      )
    },

    /**
     * Pay by one signature: the customer's wallet signed an EIP-3009 authorization of what is due
     * to the deposit address; checked, then submitted by the relayer, which pays the gas.
     */
    async payBySignature(
      id: string,
      body: SignedAuthorization,
      clientIp: string | null,
    ): Promise<Outcome<{ transactionHash: string }>> {
      const r = await load(id)
      if (!r) return deny('not_found', `No transaction ${id}`)
      const s = await view(r.tx, r.projectName, r.wrongAsset)
      const sent = await submitAuthorization(signatures, s, r.tx.projectId, body, clientIp)
      return sent.ok ? ok({ transactionHash: sent.value.hash }) : sent
    },

    /**
     * A transaction's x402_url without payment (docs/decisions/0063-x402.md): what to pay, or the
     * transaction once it is paid.
     */
    async x402Required(id: string): Promise<Outcome<X402Answer>> {
      const r = await load(id)
      if (!r) return deny('not_found', `No transaction ${id}`)
      if (r.tx.anyAmount) return anyAmountRefused()
      const s = await view(r.tx, r.projectName, r.wrongAsset)
      if (isPaid(s)) return ok({ kind: 'paid', state: s, settlement: null })
      const opts = await x402.options(x402Transaction(r.tx, s))
      if (!opts.ok) return opts
      return ok({
        kind: 'required',
        paymentRequired: x402.paymentRequired(x402Url(id), opts.value),
      })
    },

    /**
     * A transaction's x402_url with a payment: the requirement it names must be one offered now,
     * exactly; the token is then chosen (quote locked) if it was not, and the authorization is
     * checked and relayed as on the pay page. A refused payment answers 402 with the reason.
     */
    async x402Pay(
      id: string,
      payment: PaymentPayload,
      clientIp: string | null,
    ): Promise<Outcome<X402Answer>> {
      const r = await load(id)
      if (!r) return deny('not_found', `No transaction ${id}`)
      if (r.tx.anyAmount) return anyAmountRefused()
      let s = await view(r.tx, r.projectName, r.wrongAsset)
      // Paid already: nothing more is taken.
      if (isPaid(s)) return ok({ kind: 'paid', state: s, settlement: null })
      const opts = await x402.options(x402Transaction(r.tx, s))
      if (!opts.ok) return opts
      const refuse = async (why: string): Promise<Outcome<X402Answer>> => {
        // Offered again as they stand now (the quote may have been locked meanwhile).
        const again = await load(id)
        const now = again
          ? await x402.options(
              x402Transaction(again.tx, await view(again.tx, again.projectName, again.wrongAsset)),
            )
          : opts
        return ok({
          kind: 'required',
          paymentRequired: x402.paymentRequired(x402Url(id), now.ok ? now.value : opts.value, why),
        })
      }
      const chosen = x402.chosen(opts.value, payment)
      if (!chosen)
        return refuse(
          `accepted: not a requirement this transaction offers now (scheme, network, asset, payTo and amount must be one of accepts exactly)`,
        )
      const a = payment.payload.authorization
      if (a.to.toLowerCase() !== chosen.requirement.payTo.toLowerCase())
        return refuse(`payload.authorization.to: must be the requirement's payTo`)
      if (a.value !== chosen.requirement.amount)
        return refuse(`payload.authorization.value: must be the requirement's amount`)
      const locked =
        s.quote?.blockchain_network === chosen.network.name &&
        s.quote.token_symbol === chosen.token.symbol
      if (!locked) {
        const selected = await select(
          id,
          { token_symbol: chosen.token.symbol, blockchain_network: chosen.network.name },
          clientIp,
        )
        if (!selected.ok) return selected
        s = selected.value
        if (s.authorization?.value !== chosen.requirement.amount)
          return refuse(
            `the ${chosen.token.symbol} price moved since this requirement was offered; sign the new amount`,
          )
      }
      const sent = await submitAuthorization(
        signatures,
        s,
        r.tx.projectId,
        {
          from: a.from,
          value: a.value,
          valid_after: a.validAfter,
          valid_before: a.validBefore,
          nonce: a.nonce,
          signature: payment.payload.signature,
        },
        clientIp,
      )
      if (!sent.ok)
        return sent.code === 'unavailable' || sent.code === 'not_found'
          ? sent
          : refuse(sent.message)
      // Success only for a successful receipt (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md).
      const settlement = {
        transaction: sent.value.hash,
        network: chosen.requirement.network,
        payer: getAddress(a.from),
      }
      const outcome = await signatures.relayer!.outcome(sent.value, settleWaitMs)
      if (outcome !== 'succeeded') {
        const failure = settleFailure(outcome, sent.value.hash, settleWaitMs)
        const answer = await refuse(failure.errorMessage)
        return answer.ok && answer.value.kind === 'required'
          ? ok({ ...answer.value, settlement: { success: false, ...failure, ...settlement } })
          : answer
      }
      const after = await state(id)
      if (!after.ok) return after
      return ok({ kind: 'paid', state: after.value, settlement: { success: true, ...settlement } })
    },

    /**
     * "Pay with test wallet": the devnet wallet sends what is still due, as a customer would.
     * Test mode on the service's own devnet only; the chain follower sees it like any payment.
     */
    async payWithTestWallet(id: string): Promise<Outcome<{ txHash: string }>> {
      const r = await state(id)
      if (!r.ok) return r
      const s = r.value
      if (!deps.testWallet || !s.test_wallet)
        return deny(
          'not_found',
          "No test wallet for this transaction: it is not a test transaction on this service's devnet, or no token is chosen",
        )
      if (!['prepared', 'pending'].includes(s.status))
        return deny('conflict', `Nothing to pay: the transaction is ${s.status}`)
      const due = BigInt(s.amount_due ?? s.quote!.token_amount)
      if (due <= 0n) return deny('conflict', 'Nothing is due')
      try {
        return ok({
          txHash: await deps.testWallet.pay(s.quote!.token_symbol, s.quote!.deposit_address, due),
        })
      } catch (e) {
        // The devnet is down or the wallet cannot pay: the customer gets a reason, not a 500.
        return deny(
          'unavailable',
          `The test wallet could not pay: ${(e as { shortMessage?: string }).shortMessage ?? (e as Error).message}`,
        )
      }
    },
  }
}

export type PayService = ReturnType<typeof createPayService>
