/**
 * How money leaves deposit addresses on the session's network, decided by asking the chain, never
 * assumed from its name:
 *  - `eip7702`: each deposit address delegates to DepositAccount (its own key signs the
 *    authorization and each sweep or payment), and the gas account sends one transaction per batch;
 *    no coin is sent to a deposit address.
 *  - `top-up` (a chain without EIP-7702, such as Avalanche's C-Chain): the gas account sends each
 *    deposit address what it lacks for the fees of the transfers it is about to make (many
 *    addresses in one transaction, through DepositAccount's `topUp`), then each address sends its
 *    own transfers, signed here by its own key. A transaction type the chain lacks is never signed.
 * The tool probes its own node (`--rpc-url`); the service says what its node answered. EIP-7702
 * is used only when both agree it is there: the service refuses to record a type the chain lacks,
 * and a route that works everywhere costs only some gas more.
 */
import type { Address, Hex, LocalAccount } from 'viem'
import { probeEip7702 } from '../chain/eip7702-probe.ts'
import { CREATE2_DEPLOYER, DEPOSIT_ACCOUNT, topUpData } from '../chain/deposit-account.ts'
import {
  depositAccountDeployed,
  ensureDepositAccount,
  feesNow,
  sendAndWait,
  withGasMargin,
} from './sending.ts'
import { Refused, type Session } from './session.ts'

export type MoneyOutRoute = 'eip7702' | 'top-up'

export interface RouteVerdict {
  route: MoneyOutRoute
  /** Why, in words: what the tool's node and the service's answered. */
  detail: string
}

const asked = new WeakMap<Session, Promise<RouteVerdict>>()

/** The route of the session's network (asked once per session). */
export function moneyOutRoute(s: Session): Promise<RouteVerdict> {
  const known = asked.get(s)
  if (known) return known
  const route = (async (): Promise<RouteVerdict> => {
    const service = s.network.eip7702
    if (service === null)
      throw new Refused(
        `the service has not checked ${s.network.name} against its chain yet (its node may not answer); run again once /api/networks says it is verified`,
      )
    const mine = await probeEip7702(s.chain.client, s.network.chain_id)
    if (mine.supported && service)
      return {
        route: 'eip7702' as const,
        detail: `${mine.detail} (this tool's node, and the service's)`,
      }
    if (mine.supported)
      return {
        route: 'top-up' as const,
        detail:
          "this tool's node runs EIP-7702, but the service's node said it does not (the service would refuse such transactions): each address's fee is topped up instead",
      }
    return {
      route: 'top-up' as const,
      detail: `${mine.detail}: each address's fee is topped up by the gas account, then the address sends`,
    }
  })()
  asked.set(s, route)
  return route
}

/**
 * The gas price every deposit address's own transaction is signed with on the top-up route: a
 * legacy (type 0) transaction pays exactly `gasUsed * gasPrice`, so an address topped up with
 * `gas * gasPrice` spends exactly that (an EIP-1559 fee cap would leave what it did not use at the
 * address). A quarter above the node's suggestion, so a rising base fee does not stall it.
 */
export async function topUpGasPrice(s: Session): Promise<bigint> {
  const price = await s.chain.client.getGasPrice()
  return price + price / 4n
}

/**
 * Sends each address the native coin it lacks for its own transfers (`needs`, in wei), in one
 * transaction of the gas account (DepositAccount's `topUp`, deployed first where the chain lacks
 * it), and waits for it. Returns the transaction's hash and gas, or null when nobody lacked any.
 */
export async function topUp(
  s: Session,
  needs: ReadonlyMap<Address, bigint>,
  o: { timeoutMs: number },
): Promise<{ transaction_hash: Hex; gas_used: string; addresses: number; amount: string } | null> {
  const entries = [...needs].filter(([, wei]) => wei > 0n)
  if (entries.length === 0) return null
  const sponsor = s.sponsor as LocalAccount & { address: Address }
  const chain = s.chain
  let nonce = await chain.client.getTransactionCount({
    address: sponsor.address,
    blockTag: 'latest',
  })
  const fees = await feesNow(chain)
  if (
    !(await depositAccountDeployed(chain)) &&
    !(await chain.client.getCode({ address: CREATE2_DEPLOYER }).catch(() => undefined))?.length
  ) {
    // No deterministic deployment proxy on this chain, so no DepositAccount: one plain transfer per
    // address.
    let gasUsed = 0n
    let last: Hex = '0x'
    for (const [to, value] of entries) {
      const raw = await sponsor.signTransaction({
        type: 'eip1559',
        chainId: s.network.chain_id,
        nonce: nonce++,
        to,
        value,
        gas: 21_000n,
        ...fees,
      })
      const receipt = await sendAndWait(chain, raw, o.timeoutMs, `the gas top-up of ${to}`)
      gasUsed += receipt.gasUsed
      last = receipt.transactionHash
    }
    return {
      transaction_hash: last,
      gas_used: gasUsed.toString(),
      addresses: entries.length,
      amount: entries.reduce((a, [, wei]) => a + wei, 0n).toString(),
    }
  }
  if (
    await ensureDepositAccount(chain, sponsor, {
      chainId: s.network.chain_id,
      nonce,
      timeoutMs: o.timeoutMs,
    })
  )
    nonce++
  const value = entries.reduce((a, [, wei]) => a + wei, 0n)
  const data = topUpData({ to: entries.map(([a]) => a), amounts: entries.map(([, wei]) => wei) })
  const gas = withGasMargin(
    await chain.client.estimateGas({ account: sponsor.address, to: DEPOSIT_ACCOUNT, data, value }),
  )
  const raw = await sponsor.signTransaction({
    type: 'eip1559',
    chainId: s.network.chain_id,
    nonce,
    to: DEPOSIT_ACCOUNT,
    data,
    value,
    gas,
    ...fees,
  })
  const receipt = await sendAndWait(
    chain,
    raw,
    o.timeoutMs,
    'the gas top-up of the deposit addresses',
  )
  return {
    transaction_hash: receipt.transactionHash,
    gas_used: receipt.gasUsed.toString(),
    addresses: entries.length,
    amount: value.toString(),
  }
}
