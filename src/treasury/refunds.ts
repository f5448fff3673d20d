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
import { CREATE2_DEPLOYER, DEPLOY_DATA, DEPOSIT_ACCOUNT, delegatesToDepositAccount, payData, paymentId, payTypedData } from '../chain/deposit-account.ts'
import { readSignedTransaction } from '../chain/signed-transaction.ts'
import type { ApiRefund } from './api.ts'
import { deployDepositAccount, depositAccountDeployed, feesNow, sendAndWait, withGasMargin } from './sending.ts'
import { Refused, type Session } from './session.ts'

export interface RefundOptions {
  /** Only these refunds (null: every pending refund of the network). */
  only: readonly string[] | null
  receiptTimeoutMs: number
}

/**
 * Why a payment would revert, in words: DepositAccount's own errors by name, a token's revert
 * string, else the node's short message (control characters and the like taken out: a revert's
 * raw bytes are not text).
 */
function reasonOf(e: unknown): string {
  const data = e instanceof BaseError ? (e.walk((c) => typeof (c as { data?: unknown }).data === 'string') as { data?: Hex } | null)?.data : undefined
  if (data && data.length >= 10) {
    try {
      const decoded = decodeErrorResult({ abi: DepositAccount.abi, data })
      if (decoded.errorName === 'TransferFailed') return 'the transfer itself reverted: the address (or the token) refuses it'
      return decoded.errorName
    } catch {}
  }
  const text = e instanceof BaseError ? e.shortMessage : e instanceof Error ? e.message : String(e)
  return text.split('\n')[0]!.replace(/[\u0000-\u001f\u007f-\u009f\p{Cs}]/gu, '').slice(0, 400)
}

export async function payRefunds(s: Session, o: RefundOptions) {
  const { api, chain, network } = s
  const sponsor = s.sponsor!
  const keys = s.keys!
  const wanted = (r: ApiRefund) => o.only === null || o.only.includes(r.id)

  // What earlier runs recorded and the chain has not seen: the same payment sent again, or left to the service when its nonce went elsewhere.
  const resumed: { refund_id: string; transaction_hash: string; outcome: string }[] = []
  for (const r of (await api.refunds({ network: network.name, status: 'submitted' })).filter(wanted)) {
    const hash = r.transaction_hash as Hex
    if (await chain.client.getTransactionReceipt({ hash }).catch(() => null)) {
      resumed.push({ refund_id: r.id, transaction_hash: hash, outcome: 'mined' })
      continue
    }
    const read = await readSignedTransaction(r.raw_transaction!)
    if (!read.ok) continue
    if ((await chain.client.getTransactionCount({ address: read.tx.from as Address, blockTag: 'latest' })) > read.tx.nonce) {
      resumed.push({ refund_id: r.id, transaction_hash: hash, outcome: 'dropped: its nonce went to another transaction; the service puts the refund back to pending' })
      continue
    }
    await sendAndWait(chain, r.raw_transaction as Hex, o.receiptTimeoutMs, `refund ${r.id}'s payment`)
    resumed.push({ refund_id: r.id, transaction_hash: hash, outcome: 'sent again, mined' })
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

    let tx: { to: Address; data?: Hex; value?: bigint; authorizationList?: SignedAuthorization[] }
    let from: string
    const account = entry ? keys.account(entry.derivation_index) : null
    if (account && account.address === deposit && atDeposit >= amount) {
      const [state] = [...(await chain.accounts([deposit])).values()]
      if (state!.code && state!.code !== '0x' && !delegatesToDepositAccount(state!.code)) {
        waiting.push({ refund_id: r.id, reason: `the deposit address delegates to another contract; fund the gas account with ${formatUnits(amount, token.decimals)} ${token.symbol} to pay it from there` })
        continue
      }
      if (!(await depositAccountDeployed(chain))) {
        const gas = withGasMargin(await chain.client.estimateGas({ account: sponsor.address, to: CREATE2_DEPLOYER, data: DEPLOY_DATA }))
        await deployDepositAccount(chain, sponsor, { chainId: network.chain_id, nonce: nonce++, gas, ...fees, timeoutMs: o.receiptTimeoutMs })
      }
      const signature = await account.signTypedData(payTypedData({ chainId: network.chain_id, account: deposit, id: paymentId(r.id), token: asset.token, to, amount }) as Parameters<typeof account.signTypedData>[0])
      const authorizationList = delegatesToDepositAccount(state!.code) ? [] : [await account.signAuthorization!({ contractAddress: DEPOSIT_ACCOUNT, chainId: network.chain_id, nonce: state!.nonce })]
      tx = { to: deposit, data: payData({ id: paymentId(r.id), token: asset.token, to, amount, signature }), ...(authorizationList.length ? { authorizationList } : {}) }
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
      const reason = `the payment would revert: ${reasonOf(e)}`
      await api.markUnpayable(r.id, reason)
      unpayable.push({ refund_id: r.id, reason })
      continue
    }
    const raw = await sponsor.signTransaction({
      chainId: network.chain_id, nonce: nonce++, gas, ...fees, ...tx,
      ...(tx.authorizationList ? { type: 'eip7702' as const } : { type: 'eip1559' as const }),
    } as Parameters<typeof sponsor.signTransaction>[0])
    // Recorded before it is sent: a run killed in between finds it, and sends the very same transaction.
    await api.recordRefundPayment(r.id, raw)
    const receipt = await sendAndWait(chain, raw, o.receiptTimeoutMs, `refund ${r.id}'s payment`)
    paid.push({ refund_id: r.id, transaction_hash: receipt.transactionHash, paid_from: from, amount: r.amount, amount_decimal: formatUnits(amount, token.decimals), token_symbol: token.symbol, to })
  }
  return {
    result: { network: network.name, resumed, paid, unpayable, waiting_for_funds: waiting, note: paid.length ? 'the service completes each refund once its payment has the network\'s confirmations, and sends refund.completed' : undefined },
    complete: waiting.length === 0 && unpayable.length === 0,
  }
}
