/**
 * `treasury refunds pay`: pays the pending refunds of a network, on the merchant's machine.
 *
 * Where money goes (approval.ts): without the merchant's approval here, a refund is paid only from
 * its transaction's own deposit address, back to an address the chain shows paid it (payers.ts),
 * no more than that address sent. Any other refund waits for `--approve rf_...` or a yes at the
 * terminal; `--max-usd` caps what one run pays. So what the service lists (a stolen API key can
 * create refunds; a compromised server can list anything) moves nothing the merchant did not
 * approve but customers' own money back the way it came.
 *
 * How it is paid (route.ts): from the deposit address through DepositAccount's `pay` under EIP-7702
 * (its key signs this refund's id, so it is paid once at most, whoever sends it), or, on a chain
 * without EIP-7702, by the deposit address's own transfer after the gas account topped up exactly
 * its fee; or, once approved, from the gas account's own funds. Each payment is recorded through
 * the API before it is sent; the service watches it and completes the refund at the network's
 * confirmations.
 *
 * What it says: a payment that would revert while the money is there marks the refund unpayable
 * (`refund.failed`); one whose address holds too little now waits (it is never failed for that);
 * a refund that cannot be seen through is reported and the run goes on with the others.
 */
import {
  BaseError,
  decodeErrorResult,
  encodeFunctionData,
  erc20Abi,
  formatUnits,
  getAddress,
  serializeTransaction,
  type Address,
  type Hex,
  type SignedAuthorization,
} from 'viem'
import { DepositAccount } from '../chain/artifacts/index.ts'
import { createL1FeeReader } from '../chain/l1-fee.ts'
import {
  DEPOSIT_ACCOUNT,
  delegatesToDepositAccount,
  depositAccountCode,
  delegatesToEarlierDepositAccount,
  paidAnswer,
  paidData,
  payData,
  paymentId,
  payTypedData,
} from '../chain/deposit-account.ts'
import { tokenUsdCents } from '../lib/money.ts'
import type { ApiRefund } from './api.ts'
import { approves, type Approval } from './approval.ts'
import { payersOf, returnedOnChain } from './payers.ts'
import { moneyOutRoute, topUp, topUpGasPrice } from './route.ts'
import {
  depositAccountDeployed,
  ensureDepositAccount,
  feesNow,
  sendAndWait,
  seeThrough,
  withGasMargin,
} from './sending.ts'
import { Refused, type Session } from './session.ts'

export interface RefundOptions {
  /** Only these refunds (null: every pending refund of the network). */
  only: readonly string[] | null
  /** Say what would be paid, and from where; sign nothing, record and send nothing. */
  dryRun: boolean
  receiptTimeoutMs: number
  approval: Approval
  /** What this run may pay in all, in USD cents (null: no cap). */
  maxUsdCents: bigint | null
}

/**
 * What a failed simulation says: a revert (with its reason in words: DepositAccount's own errors by
 * name, a token's revert string, else the node's short message cleaned of what is not text), or no
 * verdict at all (the node did not answer: nothing is concluded from that).
 */
function verdictOf(
  e: unknown,
):
  | { revert: true; reason: string; alreadyPaid: boolean; expired?: true }
  | { revert: false; reason: string } {
  const base = e instanceof BaseError ? e : null
  const data = (
    base?.walk((c) => typeof (c as { data?: unknown }).data === 'string') as { data?: Hex } | null
  )?.data
  if (data && data.length >= 10) {
    try {
      const decoded = decodeErrorResult({ abi: DepositAccount.abi, data })
      if (decoded.errorName === 'AlreadyPaid')
        return { revert: true, reason: 'already paid from the deposit address', alreadyPaid: true }
      if (decoded.errorName === 'Expired')
        return { revert: true, reason: 'its signature lapsed', alreadyPaid: false, expired: true }
      if (decoded.errorName === 'TransferFailed')
        return {
          revert: true,
          reason: 'the transfer itself reverted: the address (or the token) refuses it',
          alreadyPaid: false,
        }
      return { revert: true, reason: decoded.errorName, alreadyPaid: false }
    } catch {}
  }
  const text = (base ? base.shortMessage : e instanceof Error ? e.message : String(e))
    .split('\n')[0]!
    .replace(/[\u0000-\u001f\u007f-\u009f\p{Cs}]/gu, '')
    .slice(0, 400)
  const reverted =
    !!data ||
    !!base?.walk((c) => (c as Error).name === 'ExecutionRevertedError') ||
    /revert/i.test(text)
  return reverted
    ? { revert: true, reason: text, alreadyPaid: false }
    : { revert: false, reason: text }
}

/**
 * How long a pay signature holds: a payment not mined by then can never be (and the refund is paid
 * afresh).
 */
const PAY_SIGNATURE_LIFETIME_S = 3600n

type Outcome =
  | { kind: 'paid'; entry: Record<string, unknown>; usdCents: bigint | null }
  | { kind: 'would_pay'; entry: Record<string, unknown>; usdCents: bigint | null }
  | { kind: 'waiting' | 'unpayable' | 'awaiting_approval' | 'over_cap'; reason: string }
  | { kind: 'already_paid' }

export async function payRefunds(s: Session, o: RefundOptions) {
  const { api, chain, network } = s
  const sponsor = s.sponsor!
  const wanted = (r: ApiRefund) => o.only === null || o.only.includes(r.id)

  // What earlier runs recorded and the chain has not seen through (sending.ts `seeThrough`); a dry
  // run only says what it would do. One that cannot be seen through is said, and the run goes on.
  const resumed: { refund_id: string; transaction_hash: string | null; outcome: string }[] = []
  const errors: { refund_id: string; reason: string }[] = []
  for (const r of (await api.refunds({ network: network.name, status: 'submitted' })).filter(
    wanted,
  )) {
    if (!r.raw_transaction) {
      // Paid by another transaction that delivered its signature, which a reorg then took back:
      // nothing of ours to send.
      resumed.push({
        refund_id: r.id,
        transaction_hash: r.transaction_hash,
        outcome:
          'its payment is another transaction (it delivered the signature first), which the service watches; nothing to send',
      })
      continue
    }
    try {
      const outcome = await seeThrough(chain, sponsor, r.raw_transaction as Hex, {
        chainId: network.chain_id,
        dryRun: o.dryRun,
        timeoutMs: o.receiptTimeoutMs,
        what: `refund ${r.id}'s payment`,
      })
      resumed.push({ refund_id: r.id, transaction_hash: r.transaction_hash, outcome })
    } catch (e) {
      const reason = e instanceof Error ? e.message.split('\n')[0]! : String(e)
      resumed.push({
        refund_id: r.id,
        transaction_hash: r.transaction_hash,
        outcome: `failed: ${reason}`,
      })
      errors.push({ refund_id: r.id, reason: `resuming its recorded payment failed: ${reason}` })
    }
  }
  if (!(await chain.settled(sponsor.address, o.receiptTimeoutMs))) {
    throw new Refused(
      `the gas account ${sponsor.address} has transactions in flight that are not mined after ${o.receiptTimeoutMs / 1000} s: run again once they are`,
    )
  }

  // Each refund once, whatever the list says (a server listing one twice gets it considered once).
  const pending = [
    ...new Map(
      (await api.refunds({ network: network.name, status: 'pending' }))
        .filter(wanted)
        .map((r) => [r.id, r]),
    ).values(),
  ]
  if (o.only)
    for (const id of o.only)
      if (!pending.some((r) => r.id === id) && !resumed.some((r) => r.refund_id === id))
        throw new Refused(`refund ${id} is not pending on ${network.name}`)
  const route = await moneyOutRoute(s)
  const run: RunState = {
    nonce: await chain.client.getTransactionCount({ address: sponsor.address, blockTag: 'latest' }),
    spentCents: 0n,
    returned: new Map(),
    tokens: new Map(),
    l1Fee: createL1FeeReader(chain.client),
  }
  const paid: Record<string, unknown>[] = []
  const lists = {
    unpayable: [] as { refund_id: string; reason: string }[],
    waiting: [] as { refund_id: string; reason: string }[],
    awaiting_approval: [] as { refund_id: string; reason: string }[],
    over_cap: [] as { refund_id: string; reason: string }[],
  }
  const alreadyPaid: string[] = []
  for (const r of pending) {
    let outcome: Outcome
    try {
      outcome = await payOne(s, r, o, run, route.route)
    } catch (e) {
      // One refund that cannot be paid now (the node, the service) does not stop the others.
      errors.push({
        refund_id: r.id,
        reason: e instanceof Error ? e.message.split('\n')[0]! : String(e),
      })
      continue
    }
    if (outcome.kind === 'paid' || outcome.kind === 'would_pay') {
      paid.push(outcome.entry)
      run.spentCents += outcome.usdCents ?? 0n
    } else if (outcome.kind === 'already_paid') alreadyPaid.push(r.id)
    else
      lists[outcome.kind === 'waiting' ? 'waiting' : outcome.kind].push({
        refund_id: r.id,
        reason: outcome.reason,
      })
  }
  return {
    result: {
      network: network.name,
      dry_run: o.dryRun,
      route: route.route,
      route_detail: route.detail,
      resumed,
      paid,
      already_paid: alreadyPaid,
      awaiting_approval: lists.awaiting_approval,
      over_cap: lists.over_cap,
      unpayable: lists.unpayable,
      waiting_for_funds: lists.waiting,
      errors,
      note:
        paid.length && !o.dryRun
          ? "the service completes each refund once its payment has the network's confirmations, and sends refund.completed"
          : undefined,
    },
    complete:
      errors.length === 0 &&
      lists.waiting.length === 0 &&
      lists.unpayable.length === 0 &&
      lists.awaiting_approval.length === 0 &&
      lists.over_cap.length === 0,
  }
}

interface RunState {
  /** The gas account's next nonce. */
  nonce: number
  /**
   * What this run returned so far without approval, per deposit address, token and destination
   * (`deposit:token:to`, lowercase).
   */
  returned: Map<string, bigint>
  /** What this run paid so far, in USD cents. */
  spentCents: bigint
  /** Each token's decimals and symbol as its contract answered them, asked once a run. */
  tokens: Map<string, ReturnType<typeof onChain>>
  l1Fee: ReturnType<typeof createL1FeeReader>
}

/**
 * Where a refund's money comes from: its deposit address (by DepositAccount, or its own transfer),
 * or the gas account.
 */
type Source = 'deposit' | 'direct' | 'gas'

async function payOne(
  s: Session,
  r: ApiRefund,
  o: RefundOptions,
  run: RunState,
  route: 'eip7702' | 'top-up',
): Promise<Outcome> {
  const { api, chain, network } = s
  const sponsor = s.sponsor!
  const listed = network.tokens.find((t) => t.symbol === r.token_symbol)
  if (!listed)
    return { kind: 'waiting', reason: `${network.name} has no token ${r.token_symbol} configured` }
  // What the merchant is shown and approves comes from the chain: a token's decimals and symbol as
  // its contract answers them.
  const token = await (run.tokens.get(listed.symbol) ??
    run.tokens.set(listed.symbol, onChain(s, listed)).get(listed.symbol)!)
  if (token.problem) return { kind: 'waiting', reason: token.problem }
  const asset = { symbol: listed.symbol, token: listed.address as Address | null }
  const amount = BigInt(r.amount)
  const to = getAddress(r.address)
  const deposit = getAddress(r.deposit_address)
  const decimals = (v: bigint) => formatUnits(v, token.decimals)
  const [entry] = await api.depositAddresses({ address: deposit })
  // The deposit address's key is derived here; an index that does not give this address is not ours
  // to sign for.
  const account = entry ? s.keys!.account(entry.derivation_index) : null
  const ours = !!account && account.address === deposit
  const balances = await chain.balances(
    [deposit, sponsor.address],
    [asset, { symbol: '\u0000native', token: null }],
  )
  const atDeposit = balances.get(deposit.toLowerCase())?.get(asset.symbol) ?? 0n
  const atGas = balances.get(sponsor.address.toLowerCase())?.get(asset.symbol) ?? 0n
  const nativeAtDeposit = balances.get(deposit.toLowerCase())?.get('\u0000native') ?? 0n
  const nativeAtGas = balances.get(sponsor.address.toLowerCase())?.get('\u0000native') ?? 0n

  // Paid already from the deposit address (a signature of an earlier run, sent by someone): never
  // pay it again, from there or from the gas account; the service confirms it from the chain.
  const [state] = [...(await chain.accounts([deposit])).values()]
  const delegated = delegatesToDepositAccount(state!.code)
  if (
    (delegated || delegatesToEarlierDepositAccount(state!.code)) &&
    (await isPaid(s, deposit, r.id))
  )
    return { kind: 'already_paid' }

  // From where: the deposit address while it holds the amount, else (approved only) the gas
  // account.
  let source: Source
  if (ours && atDeposit >= amount) {
    if (
      route === 'eip7702' &&
      state!.code &&
      state!.code !== '0x' &&
      !delegated &&
      !delegatesToEarlierDepositAccount(state!.code)
    ) {
      return {
        kind: 'waiting',
        reason: `the deposit address delegates to another contract; approve paying it from the gas account (--approve ${r.id}) once that holds ${decimals(amount)} ${token.symbol}`,
      }
    }
    source = route === 'eip7702' ? 'deposit' : 'direct'
  } else if (atGas >= amount) source = 'gas'
  else
    return {
      kind: 'waiting',
      reason: `needs ${decimals(amount)} ${token.symbol}: the deposit address holds ${decimals(atDeposit)} and the gas account ${decimals(atGas)}`,
    }

  // Whose approval it needs (approval.ts): the way the money came, or the merchant's word. What
  // went back to the destination before (on the chain, in the service's records, in this run)
  // counts against what it sent: many small refunds return no more than one large one could.
  const payers = await payersOf(s, r)
  const sentByDestination = payers.sent.get(to.toLowerCase()) ?? 0n
  const returnedKey = `${deposit}:${asset.symbol}:${to}`.toLowerCase()
  // The other refunds of the same deposit address, as the service records them (read once).
  const siblings = (
    await api.refunds({ network: network.name, depositAddress: r.deposit_address })
  ).filter((x) => x.id !== r.id)
  const returned =
    sentByDestination === 0n || source === 'gas'
      ? 0n
      : [
          payers.since === null ? 0n : await returnedOnChain(s, r, to, payers.since),
          returnedByRecord(siblings, r.token_symbol, to),
          run.returned.get(returnedKey) ?? 0n,
        ].reduce((a, b) => (a > b ? a : b))
  const why =
    source === 'gas'
      ? `it would be paid from your gas account ${sponsor.address}, not from the deposit address`
      : sentByDestination === 0n
        ? `${to} is not an address that paid this deposit address on-chain (paid by: ${[...payers.sent.keys()].map((a) => getAddress(a as Address)).join(', ') || 'nobody the chain shows'}${payers.unverified.length ? `; not counted: ${payers.unverified.join('; ')}` : ''})`
        : returned + amount > sentByDestination
          ? `it is more than ${to} sent this deposit address (${decimals(sentByDestination)} ${token.symbol}${returned ? `, of which ${decimals(returned)} went back already` : ''})`
          : null
  const usdCents = listed.usd_price ? tokenUsdCents(amount, token.decimals, listed.usd_price) : null
  const summary = printable(
    `Refund ${r.id}: ${decimals(amount)} ${token.symbol} on ${network.name}, of transaction ${r.transaction_id}, to ${to}, from ${source === 'gas' ? `the gas account ${sponsor.address}` : `the deposit address ${deposit}`}${usdCents === null ? '' : ` (about $${usdCents / 100n}.${(usdCents % 100n).toString().padStart(2, '0')})`}.`,
  )
  let approvedBy: 'named' | 'answered' | 'payer' = 'payer'
  const hint = `approve it with --approve ${r.id}:${to} (the destination named binds the approval), or answer yes at the terminal`
  if (why && o.dryRun && !approvedByName(o.approval, r.id, to))
    return { kind: 'awaiting_approval', reason: `${why}; ${hint}` }
  if (why) {
    const given = approvedByName(o.approval, r.id, to)
      ? 'named'
      : await approves(o.approval, r.id, `${summary}\nIt needs your approval: ${printable(why)}.`)
    if (!given) return { kind: 'awaiting_approval', reason: `${why}; ${hint}` }
    approvedBy = given
  }
  if (o.maxUsdCents !== null) {
    if (usdCents === null)
      return {
        kind: 'over_cap',
        reason: `${token.symbol} has no price, so it cannot be counted against --max-usd`,
      }
    if (run.spentCents + usdCents > o.maxUsdCents)
      return {
        kind: 'over_cap',
        reason: `paying it would take this run past --max-usd (${run.spentCents} + ${usdCents} cents of at most ${o.maxUsdCents})`,
      }
  }

  let tx: { to: Address; data?: Hex; value?: bigint; authorizationList?: SignedAuthorization[] }
  if (source === 'deposit') {
    // Its hour starts now, after any approval: a signature never lapses before it is sent.
    const deadline =
      (await chain.client.getBlock({ blockTag: 'latest' })).timestamp + PAY_SIGNATURE_LIFETIME_S
    const signature = await account!.signTypedData(
      payTypedData({
        chainId: network.chain_id,
        account: deposit,
        id: paymentId(r.id),
        token: asset.token,
        to,
        amount,
        deadline,
      }) as Parameters<NonNullable<typeof account>['signTypedData']>[0],
    )
    const authorizationList = delegated
      ? []
      : [
          await account!.signAuthorization!({
            contractAddress: DEPOSIT_ACCOUNT,
            chainId: network.chain_id,
            nonce: state!.nonce,
          }),
        ]
    tx = {
      to: deposit,
      data: payData({ id: paymentId(r.id), token: asset.token, to, amount, deadline, signature }),
      ...(authorizationList.length ? { authorizationList } : {}),
    }
  } else
    tx = asset.token
      ? {
          to: asset.token,
          data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] }),
        }
      : { to, value: amount }
  const from = source === 'gas' ? sponsor.address : deposit

  // DepositAccount deployed first where the chain lacks it (a dry run estimates with its code put
  // there instead).
  let override = {}
  if (source === 'deposit' && o.dryRun && !(await depositAccountDeployed(chain)))
    override = { stateOverride: [{ address: DEPOSIT_ACCOUNT, code: depositAccountCode() }] }
  else if (
    source === 'deposit' &&
    !o.dryRun &&
    (await ensureDepositAccount(chain, sponsor, {
      chainId: network.chain_id,
      nonce: run.nonce,
      timeoutMs: o.receiptTimeoutMs,
    }))
  )
    run.nonce++
  // A transfer that would revert now: not payable, unless the money left meanwhile (then it waits).
  let gas: bigint
  try {
    gas = await chain.client.estimateGas({
      account: source === 'direct' ? deposit : sponsor.address,
      ...tx,
      ...override,
    })
    gas = source === 'direct' ? gas : withGasMargin(gas)
  } catch (e) {
    const verdict = verdictOf(e)
    if (!verdict.revert)
      return {
        kind: 'waiting',
        reason: `the node could not simulate the payment: ${verdict.reason}`,
      }
    if (verdict.alreadyPaid) return { kind: 'already_paid' }
    if (verdict.expired)
      return {
        kind: 'waiting',
        reason:
          "its signature lapsed before it could be sent (the chain's clock ran past it); the next run signs it anew",
      }
    const now =
      (await chain.balances([from], [asset])).get(from.toLowerCase())?.get(asset.symbol) ?? 0n
    if (now < amount)
      return {
        kind: 'waiting',
        reason: `${from} holds ${decimals(now)} ${token.symbol} now, less than the refund`,
      }
    const reason = `the payment would revert: ${verdict.reason}`
    if (!o.dryRun) await api.markUnpayable(r.id, reason)
    return { kind: 'unpayable', reason }
  }

  // The fee, and what pays it: the gas account (deposit and gas routes), or the address itself
  // after a top-up (direct).
  const fees = await feesNow(chain)
  const price = source === 'direct' ? await topUpGasPrice(s) : fees.maxFeePerGas
  const unsigned =
    source === 'direct'
      ? serializeTransaction({
          type: 'legacy',
          chainId: network.chain_id,
          nonce: 0,
          gasPrice: price,
          gas,
          to: tx.to,
          data: tx.data,
          value: tx.value,
        })
      : serializeTransaction({
          type: 'eip1559',
          chainId: network.chain_id,
          nonce: run.nonce,
          gas,
          ...fees,
          ...tx,
        } as never)
  const l1Fee = await run.l1Fee(unsigned)
  const fee = gas * price + l1Fee
  // The address's own coin pays the fee only where no other refund waits for it.
  const nativeHeld =
    source === 'direct'
      ? heldForOtherNativeRefunds(siblings, network.tokens.find((t) => t.native)?.symbol ?? null)
      : 0n
  const topUpNeed =
    source === 'direct'
      ? (() => {
          const needed = fee + (asset.token === null ? amount : 0n)
          const spare = nativeAtDeposit > nativeHeld ? nativeAtDeposit - nativeHeld : 0n
          return spare >= needed ? 0n : needed - spare
        })()
      : 0n
  // What the gas account must hold of the native coin before anything is signed: the refund itself
  // (paid from it in the native coin), the payment's fee (L1 data fee included), or the top-up.
  const fromGas =
    source === 'direct' ? topUpNeed : fee + (source === 'gas' && asset.token === null ? amount : 0n)
  if (nativeAtGas < fromGas) {
    const native = network.tokens.find((t) => t.native)
    const what =
      source === 'direct'
        ? "the top-up of the deposit address's fee"
        : source === 'gas' && asset.token === null
          ? `the refund and its fee${l1Fee ? ' (L1 data fee included)' : ''}`
          : `the payment's fee${l1Fee ? ' (L1 data fee included)' : ''}`
    return {
      kind: 'waiting',
      reason: `the gas account holds ${formatUnits(nativeAtGas, native?.decimals ?? 18)} ${native?.symbol ?? 'of the native coin'}; ${what} needs up to ${formatUnits(fromGas, native?.decimals ?? 18)}`,
    }
  }
  const entryOut = {
    refund_id: r.id,
    paid_from: from,
    route: source,
    amount: r.amount,
    amount_decimal: decimals(amount),
    token_symbol: token.symbol,
    to,
    approved: approvedBy,
    ...(topUpNeed ? { top_up: topUpNeed.toString() } : {}),
  }
  if (o.dryRun)
    return { kind: 'would_pay', entry: { ...entryOut, estimated_gas: gas.toString() }, usdCents }

  let raw: Hex
  if (source === 'direct') {
    if (topUpNeed > 0n) {
      await topUp(s, new Map([[deposit, topUpNeed]]), { timeoutMs: o.receiptTimeoutMs })
      run.nonce = await chain.client.getTransactionCount({
        address: sponsor.address,
        blockTag: 'latest',
      })
    }
    const nonce = await chain.client.getTransactionCount({ address: deposit, blockTag: 'latest' })
    raw = await account!.signTransaction({
      type: 'legacy',
      chainId: network.chain_id,
      nonce,
      gasPrice: price,
      gas,
      to: tx.to,
      data: tx.data,
      value: tx.value,
    })
  } else {
    raw = await sponsor.signTransaction({
      chainId: network.chain_id,
      nonce: run.nonce,
      gas,
      ...fees,
      ...tx,
      ...(tx.authorizationList ? { type: 'eip7702' as const } : { type: 'eip1559' as const }),
    } as Parameters<typeof sponsor.signTransaction>[0])
  }
  // Recorded before it is sent: a run killed in between finds it, and sends the very same
  // transaction. A record refused leaves the gas account's nonce to the next payment.
  await api.recordRefundPayment(r.id, raw)
  if (source !== 'direct') run.nonce++
  if (source !== 'gas')
    run.returned.set(returnedKey, (run.returned.get(returnedKey) ?? 0n) + amount)
  let receipt: Awaited<ReturnType<typeof sendAndWait>>
  try {
    receipt = await sendAndWait(chain, raw, o.receiptTimeoutMs, `refund ${r.id}'s payment`)
  } catch (e) {
    // Reverted because another transaction delivered the same signature first: paid, once.
    if (
      source === 'deposit' &&
      e instanceof Refused &&
      /reverted/.test(e.message) &&
      (await isPaid(s, deposit, r.id))
    )
      return { kind: 'already_paid' }
    throw e
  }
  return {
    kind: 'paid',
    entry: { ...entryOut, transaction_hash: receipt.transactionHash },
    usdCents,
  }
}

/** Whether DepositAccount at `account` has paid refund `refundId` (its `paid` view). */
async function isPaid(s: Session, account: Address, refundId: string): Promise<boolean> {
  return paidAnswer(
    (await s.chain.client.call({ to: account, data: paidData(paymentId(refundId)) })).data,
  )
}

/**
 * What is safe to show at a terminal: no control characters (a carriage return or an escape
 * sequence could hide the destination).
 */
const printable = (text: string) => text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g, '?')

/**
 * Whether `--approve` names this refund: by its id, or by its id and this destination
 * (`rf_...:0x...`).
 */
function approvedByName(a: Approval, refundId: string, to: string): boolean {
  return a.approved.has(refundId) || a.approved.has(`${refundId}:${to.toLowerCase()}`)
}

/**
 * An ERC-20's decimals and symbol as its contract answers them (the native coin: 18, the network's
 * label), or why they cannot be trusted.
 */
async function onChain(
  s: Session,
  t: Session['network']['tokens'][number],
): Promise<{ decimals: number; symbol: string; problem?: string }> {
  if (!t.address) return { decimals: 18, symbol: t.symbol }
  const abi = [
    {
      type: 'function',
      name: 'decimals',
      stateMutability: 'view',
      inputs: [],
      outputs: [{ name: '', type: 'uint8' }],
    },
    {
      type: 'function',
      name: 'symbol',
      stateMutability: 'view',
      inputs: [],
      outputs: [{ name: '', type: 'string' }],
    },
  ] as const
  const [decimals, symbol] = await Promise.all([
    s.chain.client.readContract({ address: t.address as Address, abi, functionName: 'decimals' }),
    s.chain.client
      .readContract({ address: t.address as Address, abi, functionName: 'symbol' })
      .catch(() => t.symbol),
  ])
  if (decimals !== t.decimals)
    return {
      decimals,
      symbol,
      problem: `the service says ${t.symbol} has ${t.decimals} decimals; its contract ${t.address} answers ${decimals}: nothing is paid while they disagree`,
    }
  return { decimals, symbol: printable(symbol).slice(0, 32) }
}

/**
 * What the service's records say went back to `to` in `symbol` from the deposit address already
 * (`others`: its other refunds; in flight or completed).
 */
function returnedByRecord(others: readonly ApiRefund[], symbol: string, to: string): bigint {
  return others
    .filter(
      (x) =>
        x.token_symbol === symbol &&
        x.address.toLowerCase() === to.toLowerCase() &&
        ['submitted', 'confirming', 'completed'].includes(x.status),
    )
    .reduce((a, x) => a + BigInt(x.amount), 0n)
}

/**
 * The native coin (`nativeSymbol`) the deposit address's other open refunds (`others`) will pay
 * from it.
 */
function heldForOtherNativeRefunds(
  others: readonly ApiRefund[],
  nativeSymbol: string | null,
): bigint {
  return others
    .filter((x) => x.token_symbol === nativeSymbol && ['pending', 'submitted'].includes(x.status))
    .reduce((a, x) => a + BigInt(x.amount), 0n)
}
