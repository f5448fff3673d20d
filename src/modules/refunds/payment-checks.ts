/**
 * Whether a signed transaction the treasury tool records pays exactly this refund, and by which
 * route: DepositAccount's `pay` at the deposit address for this refund's id, token, address and
 * amount (`deposit`); or a plain transfer of the amount to the address, by the deposit address
 * itself (`direct`) or by the gas account (`gas`). Refusals are the words a 400 answers with.
 */
import { encodeFunctionData, erc20Abi, getAddress, type Address } from 'viem'
import type { PaymentRoute } from '../../../machines/refund.machine.ts'
import { paymentId } from '../../chain/deposit-account.ts'
import type { ChainReader } from '../../chain/record-checks.ts'
import type { Payout, SignedTransaction } from '../../chain/signed-transaction.ts'
import type { RefundRow } from './refund.repo.ts'

export function paymentRoute(
  row: RefundRow,
  tx: Pick<SignedTransaction, 'from' | 'authorizations'>,
  payout: Payout | null,
  /** The refund's token (lowercase); null for the native coin. */
  tokenAddress: string | null,
): { ok: true; route: PaymentRoute } | { ok: false; problem: string } {
  const to = row.address.toLowerCase()
  const amount = BigInt(row.amount)
  const refuse = (problem: string) => ({ ok: false as const, problem })
  if (payout?.kind === 'deposit-account') {
    if (
      payout.account !== row.depositAddress ||
      payout.id !== paymentId(row.id) ||
      payout.token !== tokenAddress ||
      payout.to !== to ||
      payout.amount !== amount
    ) {
      return refuse(
        `calls pay() for another payment than this refund (${amount} ${row.tokenSymbol} to ${row.address} from ${getAddress(row.depositAddress)})`,
      )
    }
    return { ok: true, route: 'deposit' }
  }
  if (
    (payout?.kind === 'erc20' && payout.token === tokenAddress) ||
    (payout?.kind === 'native' && tokenAddress === null)
  ) {
    if (payout.to !== to || payout.amount !== amount)
      return refuse(`pays ${payout.amount} to ${payout.to}; the refund is ${amount} to ${to}`)
    if (tx.authorizations.length)
      return refuse(
        "is a plain transfer carrying EIP-7702 authorizations; a refund's plain transfer carries none",
      )
    return { ok: true, route: tx.from === row.depositAddress ? 'direct' : 'gas' }
  }
  return refuse(
    `does not pay this refund: it must call pay() on the deposit address ${getAddress(row.depositAddress)} for this refund, or transfer ${amount} ${row.tokenSymbol} to ${row.address}`,
  )
}

/** Null when `holder` holds `amount` of `token` now, else what is wrong. */
export async function heldBy(
  reader: ChainReader,
  token: string,
  holder: string,
  amount: bigint,
  symbol: string,
): Promise<string | null> {
  const held = BigInt(
    (await reader.request('eth_call', [
      {
        to: token,
        data: encodeFunctionData({
          abi: erc20Abi,
          functionName: 'balanceOf',
          args: [holder as Address],
        }),
      },
      'latest',
    ])) as string,
  )
  return held >= amount ? null : `transfers ${amount} ${symbol} from ${holder}, which holds ${held}`
}
