/**
 * `treasury refunds pay` (issue 13): pays the pending refunds of a network. A refund is paid from
 * its transaction's own deposit address while that holds enough (the deposit key signs
 * DepositAccount's `pay` for this refund's id, so it can be paid once at most, whoever sends it
 * and however often; the gas account sends it), or else from the gas account's own funds (the
 * deposit address was swept already). Each payment is recorded through the API before it is
 * sent; the service then watches it on-chain and completes the refund at the network's
 * confirmations. A payment that would revert marks the refund unpayable (`refund.failed`); one the
 * accounts cannot cover yet is left pending, and said.
 */
import { BaseError, decodeErrorResult, encodeFunctionData, erc20Abi, formatUnits, getAddress, type Address, type Hex, type SignedAuthorization } from 'viem'
import { DepositAccount } from '../chain/artifacts/index.ts'
import { CREATE2_DEPLOYER, DEPLOY_DATA, DEPOSIT_ACCOUNT, delegatesToDepositAccount, paidAnswer, paidData, payData, paymentId, payTypedData } from '../chain/deposit-account.ts'
import type { ApiRefund } from './api.ts'
import { deployDepositAccount, depositAccountDeployed, feesNow, sendAndWait, seeThrough, withGasMargin } from './sending.ts'
import { Refused, type Session } from './session.ts'

export interface RefundOptions {
  /** Only these refunds (null: every pending refund of the network). */
  only: readonly string[] | null
  /** Say what would be paid, and from where; sign nothing, record and send nothing. */
  dryRun: boolean
  receiptTimeoutMs: number
}

/**
 * What a failed simulation says: a revert (with its reason in words: DepositAccount's own errors by
 * name, a token's revert string, else the node's short message cleaned of what is not text), or no
 * verdict at all (the node did not answer: nothing is concluded from that).
 */
function verdictOf(e: unknown): { revert: true; reason: string; alreadyPaid: boolean } | { revert: false; reason: string } {
  const base = e instanceof BaseError ? e : null
  const data = (base?.walk((c) => typeof (c as { data?: unknown }).data === 'string') as { data?: Hex } | null)?.data
  if (data && data.length >= 10) {
    try {
      const decoded = decodeErrorResult({ abi: DepositAccount.abi, data })
      if (decoded.errorName === 'AlreadyPaid') return { revert: true, reason: 'already paid from the deposit address', alreadyPaid: true }
      if (decoded.errorName === 'TransferFailed') return { revert: true, reason: 'the transfer itself reverted: the address (or the token) refuses it', alreadyPaid: false }
      return { revert: true, reason: decoded.errorName, alreadyPaid: false }
    } catch {}
  }
  const text = (base ? base.shortMessage : e instanceof Error ? e.message : String(e)).split('\n')[0]!.replace(/[\u0000-\u001f\u007f-\u009f\p{Cs}]/gu, '').slice(0, 400)
  const reverted = !!data || !!base?.walk((c) => (c as Error).name === 'ExecutionRevertedError') || /revert/i.test(text)
  return reverted ? { revert: true, reason: text, alreadyPaid: false } : { revert: false, reason: text }
}

/** How long a pay signature holds: a payment not mined by then can never be (and the refund is paid afresh). */
const PAY_SIGNATURE_LIFETIME_S = 3600n

export async function payRefunds(s: Session, o: RefundOptions) {
  const { api, chain, network } = s
  const sponsor = s.sponsor!
  const keys = s.keys!
  const wanted = (r: ApiRefund) => o.only === null || o.only.includes(r.id)

  // What earlier runs recorded and the chain has not seen through (sending.ts `seeThrough`); a dry run only says what it would do.
  const resumed: { refund_id: string; transaction_hash: string; outcome: string }[] = []
  for (const r of (await api.refunds({ network: network.name, status: 'submitted' })).filter(wanted)) {
    const outcome = await seeThrough(chain, sponsor, r.raw_transaction as Hex, { chainId: network.chain_id, dryRun: o.dryRun, timeoutMs: o.receiptTimeoutMs, what: `refund ${r.id}'s payment` })
    resumed.push({ refund_id: r.id, transaction_hash: r.transaction_hash!, outcome })
  }
  if (!(await chain.settled(sponsor.address, o.receiptTimeoutMs))) {
    throw new Refused(`the gas account ${sponsor.address} has transactions in flight that are not mined after ${o.receiptTimeoutMs / 1000} s: run again once they are`)
  }

  const pending = (await api.refunds({ network: network.name, status: 'pending' })).filter(wanted)
  if (o.only) for (const id of o.only) if (!pending.some((r) => r.id === id) && !resumed.some((r) => r.refund_id === id)) throw new Refused(`refund ${id} is not pending on ${network.name}`)
  const fees = await feesNow(chain)
  let nonce = await chain.client.getTransactionCount({ address: sponsor.address, blockTag: 'latest' })
  const paid: Record<string, unknown>[] = []
  const unpayable: { refund_id: string; reason: string }[] = []
  const waiting: { refund_id: string; reason: string }[] = []
  const alreadyPaid: string[] = []
  const deadline = (await chain.client.getBlock({ blockTag: 'latest' })).timestamp + PAY_SIGNATURE_LIFETIME_S
  for (const r of pending) {
    const token = network.tokens.find((t) => t.symbol === r.token_symbol)
    if (!token) {
      waiting.push({ refund_id: r.id, reason: `${network.name} has no token ${r.token_symbol} configured` })
      continue
    }
    const asset = { symbol: token.symbol, token: token.address as Address | null }
    const amount = BigInt(r.amount)
    const to = getAddress(r.address)
    const deposit = getAddress(r.deposit_address)
    const [entry] = await api.depositAddresses({ address: deposit })
    const balances = await chain.balances([deposit, sponsor.address], [asset])
    const atDeposit = balances.get(deposit.toLowerCase())?.get(asset.symbol) ?? 0n
    const atGas = balances.get(sponsor.address.toLowerCase())?.get(asset.symbol) ?? 0n

    // Paid already from the deposit address (a signature of an earlier run, sent by someone): never
    // pay it again, from there or from the gas account; the service confirms it from the chain.
    const [state] = [...(await chain.accounts([deposit])).values()]
    if (delegatesToDepositAccount(state!.code) && await isPaid(chain, deposit, r.id)) {
      alreadyPaid.push(r.id)
      continue
    }
    let tx: { to: Address; data?: Hex; value?: bigint; authorizationList?: SignedAuthorization[] }
    let from: string
    const account = entry ? keys.account(entry.derivation_index) : null
    if (account && account.address === deposit && atDeposit >= amount) {
      if (state!.code && state!.code !== '0x' && !delegatesToDepositAccount(state!.code)) {
        waiting.push({ refund_id: r.id, reason: `the deposit address delegates to another contract; fund the gas account with ${formatUnits(amount, token.decimals)} ${token.symbol} to pay it from there` })
        continue
      }
      if (!o.dryRun && !(await depositAccountDeployed(chain))) {
        const gas = withGasMargin(await chain.client.estimateGas({ account: sponsor.address, to: CREATE2_DEPLOYER, data: DEPLOY_DATA }))
        await deployDepositAccount(chain, sponsor, { chainId: network.chain_id, nonce: nonce++, gas, ...fees, timeoutMs: o.receiptTimeoutMs })
      }
      const signature = await account.signTypedData(payTypedData({ chainId: network.chain_id, account: deposit, id: paymentId(r.id), token: asset.token, to, amount, deadline }) as Parameters<typeof account.signTypedData>[0])
      const authorizationList = delegatesToDepositAccount(state!.code) ? [] : [await account.signAuthorization!({ contractAddress: DEPOSIT_ACCOUNT, chainId: network.chain_id, nonce: state!.nonce })]
      tx = { to: deposit, data: payData({ id: paymentId(r.id), token: asset.token, to, amount, deadline, signature }), ...(authorizationList.length ? { authorizationList } : {}) }
      from = deposit
    } else if (atGas >= amount) {
      tx = asset.token ? { to: asset.token, data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] }) } : { to, value: amount }
      from = sponsor.address
    } else {
      waiting.push({
        refund_id: r.id,
        reason: `needs ${formatUnits(amount, token.decimals)} ${token.symbol}: the deposit address holds ${formatUnits(atDeposit, token.decimals)} and the gas account ${formatUnits(atGas, token.decimals)}`,
      })
      continue
    }

    // A transfer that would revert now (a token refusing the address, a contract refusing the coin) is not payable: say so.
    let gas: bigint
    try {
      gas = withGasMargin(await chain.client.estimateGas({ account: sponsor.address, ...tx }))
    } catch (e) {
      const verdict = verdictOf(e)
      if (!verdict.revert) {
        waiting.push({ refund_id: r.id, reason: `the node could not simulate the payment: ${verdict.reason}` })
      } else if (verdict.alreadyPaid) alreadyPaid.push(r.id)
      else {
        const reason = `the payment would revert: ${verdict.reason}`
        if (!o.dryRun) await api.markUnpayable(r.id, reason)
        unpayable.push({ refund_id: r.id, reason })
      }
      continue
    }
    if (o.dryRun) {
      paid.push({ refund_id: r.id, would_pay_from: from, amount: r.amount, amount_decimal: formatUnits(amount, token.decimals), token_symbol: token.symbol, to, estimated_gas: gas.toString() })
      continue
    }
    const raw = await sponsor.signTransaction({
      chainId: network.chain_id, nonce: nonce++, gas, ...fees, ...tx,
      ...(tx.authorizationList ? { type: 'eip7702' as const } : { type: 'eip1559' as const }),
    } as Parameters<typeof sponsor.signTransaction>[0])
    // Recorded before it is sent: a run killed in between finds it, and sends the very same transaction.
    await api.recordRefundPayment(r.id, raw)
    let receipt
    try {
      receipt = await sendAndWait(chain, raw, o.receiptTimeoutMs, `refund ${r.id}'s payment`)
    } catch (e) {
      // Reverted because another transaction delivered the same signature first: paid, once.
      if (from === deposit && e instanceof Refused && /reverted/.test(e.message) && await isPaid(chain, deposit, r.id)) {
        alreadyPaid.push(r.id)
        continue
      }
      throw e
    }
    paid.push({ refund_id: r.id, transaction_hash: receipt.transactionHash, paid_from: from, amount: r.amount, amount_decimal: formatUnits(amount, token.decimals), token_symbol: token.symbol, to })
  }
  return {
    result: {
      network: network.name, dry_run: o.dryRun, resumed, paid, already_paid: alreadyPaid, unpayable, waiting_for_funds: waiting,
      note: paid.length && !o.dryRun ? 'the service completes each refund once its payment has the network\'s confirmations, and sends refund.completed' : undefined,
    },
    complete: waiting.length === 0 && unpayable.length === 0,
  }
}

/** Whether DepositAccount at `account` has paid refund `refundId` (its `paid` view). */
async function isPaid(chain: Session['chain'], account: Address, refundId: string): Promise<boolean> {
  return paidAnswer((await chain.client.call({ to: account, data: paidData(paymentId(refundId)) })).data)
}
