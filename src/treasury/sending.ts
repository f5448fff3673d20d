/**
 * Sending what the treasury tool signed: see each transaction mined (or say how to resume), and
 * deploy DepositAccount where the chain does not have it yet (anyone may: its address follows from
 * its code alone, and it has no owner).
 */
import { keccak256, type Address, type Hex, type LocalAccount } from 'viem'
import { CREATE2_DEPLOYER, DEPLOY_DATA, DEPOSIT_ACCOUNT } from '../chain/deposit-account.ts'
import { readSignedTransaction, signaturesHoldUntil } from '../chain/signed-transaction.ts'
import type { TreasuryChain } from './chain.ts'
import { Refused } from './session.ts'

/** Added to each gas estimate. */
export const withGasMargin = (gas: bigint) => gas + gas / 10n

/**
 * Sends a signed transaction and waits for it to be mined; refuses (resumable) when it is not
 * within the timeout, or reverted.
 */
export async function sendAndWait(chain: TreasuryChain, raw: Hex, timeoutMs: number, what: string) {
  const hash = keccak256(raw)
  const sent = await chain.send(raw)
  const receipt = await chain.receipt(hash, sent === 'nonce-used' ? 5_000 : timeoutMs)
  if (!receipt)
    throw new Refused(
      `${what} (${hash}) was sent but is not mined after ${timeoutMs / 1000} s: run the command again to see it through (nothing will be paid twice)`,
    )
  if (receipt.status !== 'success') throw new Refused(`${what} (${hash}) was mined but reverted`)
  return receipt
}

/**
 * Sees through a transaction an earlier run recorded (signed, perhaps sent) that has no receipt
 * yet, one of:
 *  - its sender's nonce went past it: another transaction took the nonce, so it can never be mined;
 *  - the signatures it carries have lapsed (the latest block is past their deadline): sent now it
 *    would move nothing and still cost its fee, so the gas account gives its nonce to a zero-value
 *    transfer to itself instead (21,000 gas), after which it can never be mined and the service
 *    calls it dropped (a refund goes back to pending, to be paid afresh);
 *  - else the very same transaction is sent again (its nonce lets it be mined once at most) and
 *    waited for.
 * A dry run sends nothing, and needs no gas account (`sponsor` null). Answers what became of
 * it, in words.
 */
export async function seeThrough(
  chain: TreasuryChain,
  sponsor: (LocalAccount & { address: Address }) | null,
  raw: Hex,
  o: { chainId: number; dryRun: boolean; timeoutMs: number; what: string },
): Promise<string> {
  const hash = keccak256(raw)
  const mined = await chain.client.getTransactionReceipt({ hash }).catch(() => null)
  if (mined) return mined.status === 'success' ? 'mined' : 'mined, reverted'
  const read = await readSignedTransaction(raw)
  if (!read.ok)
    throw new Refused(`${o.what} (${hash}), as the service recorded it, ${read.message}`)
  const tx = read.tx
  if (
    (await chain.client.getTransactionCount({ address: tx.from as Address, blockTag: 'latest' })) >
    tx.nonce
  ) {
    return 'dropped: its nonce went to another transaction, so it can never be mined'
  }
  const holdsUntil = signaturesHoldUntil(tx)
  if (
    holdsUntil !== null &&
    (await chain.client.getBlock({ blockTag: 'latest' })).timestamp > holdsUntil
  ) {
    if (sponsor && tx.from !== sponsor.address.toLowerCase()) {
      return `expired unsent; its nonce ${tx.nonce} belongs to another gas account (${tx.from}), whose next transaction retires it`
    }
    if (o.dryRun || !sponsor)
      return `expired unsent: its signatures lapsed; would give its nonce ${tx.nonce} to a zero-value transfer of the gas account to itself`
    const retire = await sponsor.signTransaction({
      type: 'eip1559',
      chainId: o.chainId,
      nonce: tx.nonce,
      to: sponsor.address,
      value: 0n,
      gas: 21_000n,
      ...(await feesNow(chain)),
    })
    const r = await sendAndWait(
      chain,
      retire,
      o.timeoutMs,
      `the transfer retiring ${o.what}'s nonce`,
    )
    return `expired unsent: its signatures lapsed; its nonce ${tx.nonce} went to ${r.transactionHash} (a zero-value transfer), so it can never be mined`
  }
  if (o.dryRun) return 'would be sent again'
  const sent = await chain.send(raw)
  const receipt = await chain.receipt(hash, sent === 'nonce-used' ? 5_000 : o.timeoutMs)
  if (!receipt)
    throw new Refused(
      `${o.what} (${hash}) from an earlier run is sent but not mined after ${o.timeoutMs / 1000} s: run again later`,
    )
  return `${sent === 'known' ? 'mined after waiting' : 'sent again'}${receipt.status === 'success' ? '' : ', reverted'}`
}

/** Whether DepositAccount has code on this chain. */
export async function depositAccountDeployed(chain: TreasuryChain): Promise<boolean> {
  return !!(await chain.client.getCode({ address: DEPOSIT_ACCOUNT }).catch(() => undefined))?.length
}

/**
 * Deploys DepositAccount from the gas account at `nonce` where the chain lacks it; true when it did
 * (the nonce is then spent).
 */
export async function ensureDepositAccount(
  chain: TreasuryChain,
  sponsor: LocalAccount & { address: Address },
  o: { chainId: number; nonce: number; timeoutMs: number },
): Promise<boolean> {
  if (await depositAccountDeployed(chain)) return false
  const gas = withGasMargin(
    await chain.client.estimateGas({
      account: sponsor.address,
      to: CREATE2_DEPLOYER,
      data: DEPLOY_DATA,
    }),
  )
  await deployDepositAccount(chain, sponsor, {
    chainId: o.chainId,
    nonce: o.nonce,
    gas,
    ...(await feesNow(chain)),
    timeoutMs: o.timeoutMs,
  })
  return true
}

/** Deploys DepositAccount from the gas account with `nonce`; resolves once it has code. */
export async function deployDepositAccount(
  chain: TreasuryChain,
  sponsor: LocalAccount & { address: Address },
  o: {
    chainId: number
    nonce: number
    gas: bigint
    maxFeePerGas: bigint
    maxPriorityFeePerGas: bigint
    timeoutMs: number
  },
) {
  const raw = await sponsor.signTransaction({
    type: 'eip1559',
    chainId: o.chainId,
    nonce: o.nonce,
    to: CREATE2_DEPLOYER,
    data: DEPLOY_DATA,
    gas: o.gas,
    maxFeePerGas: o.maxFeePerGas,
    maxPriorityFeePerGas: o.maxPriorityFeePerGas,
  })
  await sendAndWait(chain, raw, o.timeoutMs, "DepositAccount's deployment")
  if (!(await depositAccountDeployed(chain)))
    throw new Refused(
      `DepositAccount's deployment was mined, but ${DEPOSIT_ACCOUNT} has no code: does this chain have the deterministic deployment proxy at ${CREATE2_DEPLOYER}?`,
    )
}

/** The network's fees now (EIP-1559, or a legacy gas price as both). */
export async function feesNow(
  chain: TreasuryChain,
): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
  try {
    const f = await chain.client.estimateFeesPerGas()
    return { maxFeePerGas: f.maxFeePerGas!, maxPriorityFeePerGas: f.maxPriorityFeePerGas ?? 0n }
  } catch {
    const price = await chain.client.getGasPrice()
    return { maxFeePerGas: price, maxPriorityFeePerGas: price }
  }
}
