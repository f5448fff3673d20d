/**
 * What the service checks of a signed transaction the treasury tool records (a sweep, a refund's
 * payment) before it accepts it: a record is watched until the chain settles it and holds the
 * money it moves (a pending refund, a sweep's balance) meanwhile, so one that can never be mined,
 * or that would move nothing, would freeze that money. Only what can be verified is recorded:
 *  - it is for the network's chain, of a type the chain has (EIP-7702 only where it runs);
 *  - its sender's nonce is the sender's next one or a few past it (a batch of transactions
 *    recorded one after another), never one used already or far ahead (a transaction that could
 *    not be mined until thousands of others were);
 *  - its sender holds what it may cost (its gas at its fee cap, and its value);
 *  - every EIP-7702 authorization it carries is signed by an account allowed to delegate (a deposit
 *    address it moves money from) and delegates to DepositAccount, for this chain;
 *  - every DepositAccount signature it carries (`sweep`, `pay`) recovers to the deposit address it
 *    moves money from, and expires in the future, no later than MAX_SIGNATURE_HOURS from now.
 * Each check answers what is wrong in words (the API's 400), or null.
 */
import { recoverTypedDataAddress, type Address, type Hex } from 'viem'
import { recoverAuthorizationAddress } from 'viem/utils'
import { DEPOSIT_ACCOUNT, payTypedData, sweepTypedData } from './deposit-account.ts'
import type { SignedSweep, SignedTransaction } from './signed-transaction.ts'

/** What the checks read from the network's node, now. */
export interface ChainReader {
  transactionCount(address: string): Promise<number>
  balance(address: string): Promise<bigint>
  /**
   * The latest block's time, seconds since the epoch (DepositAccount compares deadlines with it).
   */
  latestTimestamp(): Promise<bigint>
  /**
   * What an OP Stack chain charges for a transaction's bytes on top of its gas (0 elsewhere):
   * src/chain/l1-fee.ts.
   */
  l1Fee(serialized: Hex): Promise<bigint>
  /** Any other JSON-RPC call. */
  request(method: string, params: unknown[]): Promise<unknown>
}

/** How far past its sender's next nonce a recorded transaction may be. */
export const MAX_NONCE_AHEAD = 16
/**
 * How far ahead of the chain's time a signature's deadline may be (the treasury tool signs for one
 * hour).
 */
export const MAX_SIGNATURE_HOURS = 2

/** The transaction is for the network's chain, of a type the chain has. */
export function checkChainAndType(
  tx: SignedTransaction,
  o: { chainId: number; network: string; eip7702: boolean | null },
): string | null {
  if (tx.chainId !== o.chainId)
    return `is for chain ${tx.chainId}; ${o.network} is chain ${o.chainId}`
  if (tx.type === 4 && o.eip7702 !== true) {
    return o.eip7702 === false
      ? `is an EIP-7702 transaction, and ${o.network}'s chain has no EIP-7702`
      : `is an EIP-7702 transaction, and ${o.network} has not been checked for EIP-7702 yet; try again once it is verified`
  }
  return null
}

/**
 * The transaction can be mined now: its sender's nonce and balance. `raw`: the signed transaction,
 * for its L1 fee.
 */
export async function checkSendable(
  tx: SignedTransaction,
  raw: Hex,
  o: { reader: ChainReader },
): Promise<string | null> {
  const [next, balance, l1Fee] = await Promise.all([
    o.reader.transactionCount(tx.from),
    o.reader.balance(tx.from),
    o.reader.l1Fee(raw),
  ])
  if (tx.nonce < next)
    return `has nonce ${tx.nonce}, which ${tx.from} has used already (its next is ${next})`
  if (tx.nonce > next + MAX_NONCE_AHEAD)
    return `has nonce ${tx.nonce}, more than ${MAX_NONCE_AHEAD} past ${tx.from}'s next (${next}): it could not be mined until all those before it were`
  // Its sender's next transactions recorded before it (a batch) spend first; each was checked on
  // its own.
  const cost = tx.gas * tx.maxFeePerGas + l1Fee + tx.value
  if (balance < cost)
    return `may cost up to ${cost} (gas${l1Fee ? ', L1 data fee' : ''} and value), and its sender ${tx.from} holds ${balance}`
  return null
}

/**
 * Each EIP-7702 authorization delegates to DepositAccount on this chain, signed by one of
 * `authorities` (lowercase).
 */
export async function checkAuthorizations(
  tx: SignedTransaction,
  o: { chainId: number; authorities: ReadonlySet<string> },
): Promise<string | null> {
  for (const [i, a] of tx.authorizations.entries()) {
    if (a.address.toLowerCase() !== DEPOSIT_ACCOUNT.toLowerCase())
      return `authorization ${i} delegates to ${a.address}, not to DepositAccount (${DEPOSIT_ACCOUNT})`
    if (a.chainId !== 0 && a.chainId !== o.chainId)
      return `authorization ${i} is for chain ${a.chainId}`
    const authority = (
      await recoverAuthorizationAddress({ authorization: a }).catch(() => null)
    )?.toLowerCase()
    if (!authority || !o.authorities.has(authority))
      return `authorization ${i} is signed by ${authority ?? 'nobody'}, not by a deposit address it moves money from`
  }
  return null
}

/**
 * secp256k1's n / 2: DepositAccount refuses a signature with a larger `s` (the malleated twin of a
 * valid one).
 */
const HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n

/** 65 bytes, `v` 27 or 28 and a low `s`, as DepositAccount takes a signature. */
function wellFormed(signature: Hex): boolean {
  if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return false
  const s = BigInt(`0x${signature.slice(66, 130)}`)
  const v = Number.parseInt(signature.slice(130), 16)
  return s <= HALF_N && (v === 27 || v === 28)
}

/**
 * A signature's deadline is in the future and at most MAX_SIGNATURE_HOURS ahead of the chain's
 * time.
 */
function checkDeadline(deadline: bigint, now: bigint, what: string): string | null {
  if (deadline < now)
    return `${what}'s signature expired at ${deadline} (the chain's time is ${now}): it can move nothing`
  if (deadline > now + BigInt(MAX_SIGNATURE_HOURS * 3600))
    return `${what}'s signature holds until ${deadline}, more than ${MAX_SIGNATURE_HOURS} hours past the chain's time (${now})`
  return null
}

/**
 * Each sweep in a batch is signed by the deposit address it sweeps, and is not expired or too
 * long-lived.
 */
export async function checkSweepSignatures(
  sweeps: readonly SignedSweep[],
  o: { chainId: number; now: bigint },
): Promise<string | null> {
  for (const [i, w] of sweeps.entries()) {
    const late = checkDeadline(w.deadline, o.now, `sweep ${i}`)
    if (late) return late
    if (!wellFormed(w.signature))
      return `sweep ${i}'s signature is not one DepositAccount takes (65 bytes, v 27 or 28, low s)`
    const typed = sweepTypedData({
      chainId: o.chainId,
      account: w.account as Address,
      to: w.to as Address,
      tokens: w.tokens as Address[],
      native: w.native,
      nonce: w.nonce,
      deadline: w.deadline,
    })
    const signer = await recoverTypedDataAddress({ ...typed, signature: w.signature } as Parameters<
      typeof recoverTypedDataAddress
    >[0]).catch(() => null)
    if (signer?.toLowerCase() !== w.account)
      return `sweep ${i} is not signed by the deposit address it sweeps (${w.account})`
  }
  return null
}

/**
 * A DepositAccount `pay` is signed by the deposit address that pays, and is not expired or too
 * long-lived.
 */
export async function checkPaySignature(
  p: {
    account: string
    id: Hex
    token: string | null
    to: string
    amount: bigint
    deadline: bigint
    signature: Hex
  },
  o: { chainId: number; now: bigint },
): Promise<string | null> {
  const late = checkDeadline(p.deadline, o.now, 'the payment')
  if (late) return late
  if (!wellFormed(p.signature))
    return 'its pay() signature is not one DepositAccount takes (65 bytes, v 27 or 28, low s)'
  const typed = payTypedData({
    chainId: o.chainId,
    account: p.account as Address,
    id: p.id,
    token: p.token as Address | null,
    to: p.to as Address,
    amount: p.amount,
    deadline: p.deadline,
  })
  const signer = await recoverTypedDataAddress({ ...typed, signature: p.signature } as Parameters<
    typeof recoverTypedDataAddress
  >[0]).catch(() => null)
  return signer?.toLowerCase() === p.account
    ? null
    : `its pay() is not signed by the deposit address that pays (${p.account})`
}
