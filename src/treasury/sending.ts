/**
 * Sending what the treasury tool signed: see each transaction mined (or say how to resume), and
 * deploy DepositAccount where the chain does not have it yet (anyone may: its address follows from
 * its code alone, and it has no owner).
 */
import { keccak256, type Address, type Hex, type LocalAccount } from 'viem'
import { CREATE2_DEPLOYER, DEPLOY_DATA, DEPOSIT_ACCOUNT } from '../chain/deposit-account.ts'
import type { TreasuryChain } from './chain.ts'
import { Refused } from './session.ts'

/** Added to each gas estimate. */
export const withGasMargin = (gas: bigint) => gas + gas / 10n

/** Sends a signed transaction and waits for it to be mined; refuses (resumable) when it is not within the timeout, or reverted. */
export async function sendAndWait(chain: TreasuryChain, raw: Hex, timeoutMs: number, what: string) {
  const hash = keccak256(raw)
  const sent = await chain.send(raw)
  const receipt = await chain.receipt(hash, sent === 'nonce-used' ? 5_000 : timeoutMs)
  if (!receipt) throw new Refused(`${what} (${hash}) was sent but is not mined after ${timeoutMs / 1000} s: run the command again to see it through (nothing will be paid twice)`)
  if (receipt.status !== 'success') throw new Refused(`${what} (${hash}) was mined but reverted`)
  return receipt
}

/** Whether DepositAccount has code on this chain. */
export async function depositAccountDeployed(chain: TreasuryChain): Promise<boolean> {
  return !!(await chain.client.getCode({ address: DEPOSIT_ACCOUNT }).catch(() => undefined))?.length
}

/** Deploys DepositAccount from the gas account with `nonce`; resolves once it has code. */
export async function deployDepositAccount(chain: TreasuryChain, sponsor: LocalAccount & { address: Address }, o: { chainId: number; nonce: number; gas: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint; timeoutMs: number }) {
  const raw = await sponsor.signTransaction({ type: 'eip1559', chainId: o.chainId, nonce: o.nonce, to: CREATE2_DEPLOYER, data: DEPLOY_DATA, gas: o.gas, maxFeePerGas: o.maxFeePerGas, maxPriorityFeePerGas: o.maxPriorityFeePerGas })
  await sendAndWait(chain, raw, o.timeoutMs, 'DepositAccount\'s deployment')
  if (!(await depositAccountDeployed(chain))) throw new Refused(`DepositAccount's deployment was mined, but ${DEPOSIT_ACCOUNT} has no code: does this chain have the deterministic deployment proxy at ${CREATE2_DEPLOYER}?`)
}

/** The network's fees now (EIP-1559, or a legacy gas price as both). */
export async function feesNow(chain: TreasuryChain): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
  try {
    const f = await chain.client.estimateFeesPerGas()
    return { maxFeePerGas: f.maxFeePerGas!, maxPriorityFeePerGas: f.maxPriorityFeePerGas ?? 0n }
  } catch {
    const price = await chain.client.getGasPrice()
    return { maxFeePerGas: price, maxPriorityFeePerGas: price }
  }
}
