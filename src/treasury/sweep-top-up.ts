/**
 * `treasury sweep` on a chain without EIP-7702 (route.ts): each deposit address sends its own
 * transfers to the treasury, signed here by its own key, after the gas account sent it exactly the
 * fees they cost (all addresses in one transaction): the gas account pays every fee, so the
 * treasury gains exactly what each address held. Tokens go first, each in a transaction of its
 * own, the native coin last; an address ends with nothing but the gas a token transfer did not use
 * (its gas refund for emptying a balance). Every transaction is recorded through the API before it
 * is sent, and resumes as a batch does (an earlier run's record is sent again while its nonce is
 * free). An address whose native coin waits for a refund keeps it: its fees are topped up in full.
 */
import {
  encodeFunctionData,
  erc20Abi,
  formatUnits,
  serializeTransaction,
  type Address,
  type Hex,
} from 'viem'
import { createL1FeeReader } from '../chain/l1-fee.ts'
import { sendAndWait } from './sending.ts'
import { topUp, topUpGasPrice } from './route.ts'
import { Refused, type Session } from './session.ts'

/**
 * What the sweep plan gives this route: an address, what it takes there, and what its native coin
 * is.
 */
export interface TopUpCandidate {
  address: Address
  derivationIndex: number
  transactionId: string
  assets: { symbol: string; token: Address | null; amount: bigint; decimals: number }[]
  /** The address's native balance now. */
  native: bigint
  /** Its native coin waits for a refund: not one wei of it pays a fee. */
  nativeHeld: boolean
}

interface PlannedTransfer {
  symbol: string
  token: Address | null
  /** What the address held of it when planned. */
  amount: bigint
  gas: bigint
  l1Fee: bigint
}

/** How many addresses send at once. */
const PARALLEL = 8

export async function sweepByTopUp(
  s: Session,
  o: { to: Address; dryRun: boolean; receiptTimeoutMs: number },
  candidates: readonly TopUpCandidate[],
  report: {
    failed: { address: string; reason: string }[]
    skipped: { address: string; reason: string }[]
  },
) {
  const { chain, network, api } = s
  const price = await topUpGasPrice(s)
  const l1Fee = createL1FeeReader(chain.client)
  const accounts = await chain.accounts(candidates.map((c) => c.address))
  const plans: { c: TopUpCandidate; transfers: PlannedTransfer[]; topUp: bigint }[] = []
  for (const c of candidates) {
    if ((accounts.get(c.address.toLowerCase())?.code ?? '0x') !== '0x') {
      report.skipped.push({ address: c.address, reason: 'it has contract code; not touched' })
      continue
    }
    const transfers: PlannedTransfer[] = []
    for (const a of c.assets) {
      const call = a.token
        ? {
            to: a.token,
            data: encodeFunctionData({
              abi: erc20Abi,
              functionName: 'transfer',
              args: [o.to, a.amount],
            }),
          }
        : { to: o.to, value: 1n }
      let gas: bigint
      try {
        // Exact, with no margin: an estimate is the least gas the transfer succeeds with, and every
        // wei of fee was topped up for it.
        gas = await chain.client.estimateGas({ account: c.address, ...call })
      } catch (e) {
        report.failed.push({
          address: c.address,
          reason: `its ${a.symbol} transfer would revert (${(e as Error).message.split('\n')[0]})`,
        })
        continue
      }
      const fee = await l1Fee(
        serializeTransaction({
          type: 'legacy',
          chainId: network.chain_id,
          nonce: 0,
          gasPrice: price,
          gas,
          ...call,
        }),
      )
      // Here every transfer is a transaction of its own: coin worth less than that costs is left
      // (the gas a token transfer did not use, say).
      if (!a.token && a.amount <= gas * price + fee) {
        report.skipped.push({
          address: c.address,
          reason: `its ${formatUnits(a.amount, a.decimals)} ${a.symbol} is less than the fee of sending it on its own`,
        })
        continue
      }
      transfers.push({ symbol: a.symbol, token: a.token, amount: a.amount, gas, l1Fee: fee })
    }
    // The gas account pays every fee, as it does under EIP-7702: its top-up covers them all, less
    // the coin at the address that nobody takes (not swept here, not waiting for a refund), so
    // the treasury gains exactly what the address held.
    const fees = transfers.reduce((sum, t) => sum + t.gas * price + t.l1Fee, 0n)
    const spare = c.nativeHeld || transfers.some((t) => t.token === null) ? 0n : c.native
    const topUp = fees > spare ? fees - spare : 0n
    if (transfers.length) plans.push({ c, transfers, topUp })
  }

  const native = network.tokens.find((t) => t.native)
  const toppedUp = plans.reduce((a, p) => a + p.topUp, 0n)
  const gas = plans.reduce((a, p) => a + p.transfers.reduce((b, t) => b + t.gas, 0n), 0n)
  const fees = plans.reduce(
    (a, p) => a + p.transfers.reduce((b, t) => b + t.gas * price + t.l1Fee, 0n),
    0n,
  )
  const result: Record<string, unknown> = {
    plan: plans.map((p) => ({
      address: p.c.address,
      derivation_index: p.c.derivationIndex,
      transaction_id: p.c.transactionId,
      top_up: p.topUp.toString(),
      assets: p.transfers.map((t) => ({
        token_symbol: t.symbol,
        amount: t.amount.toString(),
        gas: t.gas.toString(),
      })),
    })),
    estimated: {
      transactions: plans.reduce((a, p) => a + p.transfers.length, 0),
      gas_price: price.toString(),
      gas: gas.toString(),
      fees: fees.toString(),
      fees_decimal: formatUnits(fees, native?.decimals ?? 18),
      top_up: toppedUp.toString(),
      top_up_decimal: formatUnits(toppedUp, native?.decimals ?? 18),
    },
  }
  if (o.dryRun || plans.length === 0) return { ...result, top_up_transaction: null, sweeps: [] }

  const sponsor = s.sponsor!
  const balance = await chain.client.getBalance({ address: sponsor.address })
  if (balance < toppedUp)
    throw new Refused(
      `the gas account ${sponsor.address} holds ${formatUnits(balance, native?.decimals ?? 18)}; this sweep tops up the deposit addresses with ${formatUnits(toppedUp, native?.decimals ?? 18)} (and pays its own fee). Nothing was sent`,
    )
  const topUpTx = await topUp(s, new Map(plans.map((p) => [p.c.address, p.topUp])), {
    timeoutMs: o.receiptTimeoutMs,
  })

  const sweeps: Record<string, unknown>[] = []
  const queue = [...plans]
  const worker = async () => {
    for (let p = queue.shift(); p; p = queue.shift()) {
      try {
        await send(p)
      } catch (e) {
        // One address that cannot be seen through does not hold up the others; a run later resumes
        // what it recorded.
        report.failed.push({
          address: p.c.address,
          reason: e instanceof Error ? e.message.split('\n')[0]! : String(e),
        })
      }
    }
  }
  const send = async (p: (typeof plans)[number]) => {
    {
      const account = s.keys!.account(p.c.derivationIndex)
      let nonce = await chain.client.getTransactionCount({
        address: p.c.address,
        blockTag: 'latest',
      })
      for (const t of p.transfers) {
        const amount = t.amount
        const call: { to: Address; data?: Hex; value?: bigint } = t.token
          ? {
              to: t.token,
              data: encodeFunctionData({
                abi: erc20Abi,
                functionName: 'transfer',
                args: [o.to, t.amount],
              }),
            }
          : { to: o.to, value: t.amount }
        const raw = await account.signTransaction({
          type: 'legacy',
          chainId: network.chain_id,
          nonce: nonce++,
          gasPrice: price,
          gas: t.gas,
          ...call,
        })
        const record = await api.recordSweep({
          blockchain_network: network.name,
          raw_transaction: raw,
          items: [{ address: p.c.address, token_symbol: t.symbol, amount: amount.toString() }],
        })
        const receipt = await sendAndWait(chain, raw, o.receiptTimeoutMs, `sweep ${record.id}`)
        const fee = receipt.gasUsed * receipt.effectiveGasPrice
        sweeps.push({
          sweep_id: record.id,
          transaction_hash: receipt.transactionHash,
          status: receipt.status,
          address: p.c.address,
          token_symbol: t.symbol,
          amount: amount.toString(),
          gas_used: receipt.gasUsed.toString(),
          fee: fee.toString(),
        })
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(PARALLEL, plans.length) }, worker))
  return { ...result, top_up_transaction: topUpTx, sweeps }
}
