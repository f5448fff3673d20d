/**
 * Whether a refund's recorded payment can no longer be mined, and so may be abandoned by the
 * merchant's treasury tool: a DepositAccount `pay` whose signature expired (at a block as final as
 * a payment must be) with the id unpaid, or a plain transfer whose nonce another transaction took
 * (at the network's depth). Asked of the network's node now, and answered in words either way.
 */
import type { Submission } from '../../../machines/refund.machine.ts'
import { paidAnswer, paidData, paymentId } from '../../chain/deposit-account.ts'
import type { NetworkConfig } from '../../chain/networks-config.ts'
import type { ChainReader } from '../../chain/record-checks.ts'
import { settledBlock } from '../../chain/settled-block.ts'
import type { RefundRow } from './refund.repo.ts'

export async function abandonable(
  row: RefundRow,
  submission: Submission,
  network: NetworkConfig,
  reader: ChainReader,
): Promise<{ abandon: boolean; detail: string }> {
  const head = BigInt((await reader.request('eth_blockNumber', [])) as string)
  const settledTag =
    network.finality === 'confirmations'
      ? `0x${settledBlock(head, network.confirmations).toString(16)}`
      : network.finality
  // Read before the receipt, so a transaction mined in between is seen mined, not taken for one
  // whose nonce went elsewhere.
  const nonce =
    submission.route === 'deposit'
      ? null
      : BigInt(
          (await reader.request('eth_getTransactionCount', [
            submission.from,
            settledTag,
          ])) as string,
        )
  const receipt = (await reader.request('eth_getTransactionReceipt', [submission.txHash])) as {
    blockNumber?: string
  } | null
  if (receipt?.blockNumber)
    return {
      abandon: false,
      detail: `it is mined, in block ${BigInt(receipt.blockNumber)}; the service settles it from there`,
    }
  if (submission.route === 'deposit') {
    const paid = paidAnswer(
      await reader.request('eth_call', [
        { to: row.depositAddress, data: paidData(paymentId(row.id)) },
        'latest',
      ]),
    )
    if (paid)
      return {
        abandon: false,
        detail:
          'its id is paid on-chain (another transaction delivered its signature); the service takes that one as its payment',
      }
    const block = (await reader.request('eth_getBlockByNumber', [settledTag, false])) as {
      timestamp?: string
    } | null
    const settledAt = block?.timestamp ? BigInt(block.timestamp) : 0n
    const until = BigInt(submission.payUntil ?? 0)
    if (settledAt > until)
      return {
        abandon: true,
        detail: `its signature expired at ${new Date(Number(until) * 1000).toISOString()} unpaid, as a block ${network.finality === 'confirmations' ? `${network.confirmations} confirmations deep` : `as ${network.finality} as a payment must be`} shows`,
      }
    return {
      abandon: false,
      detail: `its signature holds until ${new Date(Number(until) * 1000).toISOString()} (chain time), and a block ${network.finality === 'confirmations' ? `${network.confirmations} confirmations deep` : network.finality} must be past that first`,
    }
  }
  if (nonce !== null && submission.nonce !== null && nonce > BigInt(submission.nonce))
    return {
      abandon: true,
      detail: `its nonce ${submission.nonce} went to another transaction of ${submission.from}, so it can never be mined`,
    }
  return {
    abandon: false,
    detail: `its nonce ${submission.nonce} of ${submission.from} is not taken yet, so it can still be mined: \`treasury refunds pay\` sends it again, or gives its nonce to a zero-value transfer when it can no longer pay`,
  }
}
