/**
 * Settling refunds from the chain: the outgoing tracker (src/chain/outgoing-tracker.ts) reads
 * each refund payment in flight on every head the follower reports, and tells what it found:
 * mined (`included`), confirmed (`confirmations`), taken back by a reorg (`reorged`), `reverted`,
 * `dropped` (its nonce went to another transaction), or not mined (`unmined`). This turns that
 * news into the refund machine's events (see the routes in machines/refund.machine.ts): the
 * refund completes once its payment has the network's confirmations, and `refund.completed`
 * is sent.
 */
import type { RefundEvent, Submission } from '../../../machines/refund.machine.ts'
import {
  PAID_TOPIC,
  depositAccountEvents,
  paidAnswer,
  paidData,
  paymentId,
} from '../../chain/deposit-account.ts'
import type { NetworkConfig } from '../../chain/networks-config.ts'
import type {
  OutgoingChain,
  OutgoingLedger,
  OutgoingNews,
  OutgoingReceipt,
} from '../../chain/outgoing-tracker.ts'
import { receiptTransfers } from '../../chain/transfer-scan.ts'
import type { Logger } from '../../lib/logger.ts'
import { submissionOf, type RefundChanges } from './changes.ts'
import type { RefundRepo, RefundRow } from './refund.repo.ts'

/**
 * The ledger the outgoing tracker reads refunds' payments in flight from, and settles them with.
 */
export function createRefundSettlement(deps: {
  repo: Pick<RefundRepo, 'inFlight'>
  changes: RefundChanges
  networks: readonly NetworkConfig[]
  logger: Logger
}): OutgoingLedger {
  const networkOf = (name: string) => deps.networks.find((n) => n.name === name) ?? null

  /** What the chain follower says of a refund's payment. */
  async function settle(row: RefundRow, news: OutgoingNews, chain: OutgoingChain) {
    const submission = submissionOf(row)
    if (!submission) return
    const txHash = submission.txHash
    let event: RefundEvent | null
    if (news.type === 'included') {
      event = pays(row, submission, news.receipt.logs)
        ? {
            type: 'submission.included',
            txHash,
            from: submission.from,
            nonce: submission.nonce,
            blockNumber: news.blockNumber,
            blockHash: news.blockHash,
          }
        : // Mined without paying it: judged once that is as final as a payment would be (below).
          null
    } else if (news.type === 'reorged') event = { type: 'submission.reorged', txHash }
    else if (news.type === 'unmined') {
      // A signed payment not mined: delivered by another transaction, lapsed, or still to come. An
      // own transaction waits.
      event =
        submission.route === 'deposit' && row.status === 'submitted'
          ? await depositTruth(row, submission, chain)
          : null
    } else if (news.type === 'confirmations') {
      const enough =
        news.final === undefined
          ? news.confirmations >= (networkOf(row.network)?.confirmations ?? 0)
          : news.final
      if (row.status === 'confirming')
        event = {
          type: 'confirmations.updated',
          confirmations: news.confirmations,
          ...(news.final === undefined ? {} : { final: news.final }),
        }
      else if (!enough) event = null
      else if (submission.route !== 'deposit')
        event = {
          type: 'submission.reverted',
          txHash,
          blockNumber: news.receipt.blockNumber,
          blockHash: news.receipt.blockHash,
          detail: 'its transaction was mined but did not pay the refund',
        }
      else event = await depositTruth(row, submission, chain)
    } else if (submission.route !== 'deposit') {
      event =
        news.type === 'dropped'
          ? { type: 'submission.dropped', txHash }
          : {
              type: 'submission.reverted',
              txHash,
              blockNumber: news.blockNumber,
              blockHash: news.blockHash,
              detail: 'its transaction was mined but reverted',
            }
    } else event = await depositTruth(row, submission, chain)
    if (!event) return
    const r = await deps.changes.apply(row.id, event)
    if (!r.ok && r.code !== 'conflict')
      throw new Error(`${event.type} for refund ${row.id}: ${r.message}`)
    if (r.ok && r.value.status !== row.status) {
      deps.logger.info('refund moved', {
        refundId: row.id,
        transactionId: row.transactionId,
        from: row.status,
        to: r.value.status,
        txHash: r.value.txHash,
      })
    }
  }

  /**
   * A deposit-route payment whose recorded transaction did not pay (reverted, dropped, or mined
   * without paying): the contract says whether the id is paid, at the head the follower processed.
   * Paid, by whatever transaction delivered the signature first, that transaction is the payment.
   * Not paid, the refund goes back to pending only once a block as final as a payment must be is
   * past the signature's deadline: a payment could only be in an earlier block, which no reorg
   * takes back, so none was made and none can be. Until then someone may still send it, or a reorg
   * may bring back one that was.
   */
  async function depositTruth(
    row: RefundRow,
    submission: Submission,
    chain: OutgoingChain,
  ): Promise<RefundEvent | null> {
    const id = paymentId(row.id)
    const paid = paidAnswer(
      await chain.request('eth_call', [
        { to: row.depositAddress, data: paidData(id) },
        `0x${chain.head.toString(16)}`,
      ]),
    )
    if (!paid) {
      return (await chain.settledTimestamp()) > BigInt(submission.payUntil ?? 0)
        ? { type: 'submission.expired', txHash: submission.txHash }
        : null
    }
    // Paid: find the Paid event of this id at the deposit address, from where the payment could
    // first be mined.
    const start = BigInt(submission.fromBlock ?? 0)
    const span = BigInt(chain.maxLogRange)
    for (let to = chain.head; to >= start; to -= span) {
      const lower = to - span + 1n < start ? start : to - span + 1n
      const logs = (await chain.request('eth_getLogs', [
        {
          address: row.depositAddress,
          topics: [PAID_TOPIC, id],
          fromBlock: `0x${lower.toString(16)}`,
          toBlock: `0x${to.toString(16)}`,
        },
      ])) as { transactionHash: string; blockNumber: string; blockHash: string }[]
      const log = logs.at(-1)
      if (!log) continue
      const tx = (await chain.request('eth_getTransactionByHash', [log.transactionHash])) as {
        from?: string
        nonce?: string
      } | null
      return {
        type: 'submission.included',
        txHash: log.transactionHash.toLowerCase(),
        from: tx?.from?.toLowerCase() ?? null,
        nonce: tx?.nonce ? Number(BigInt(tx.nonce)) : null,
        blockNumber: Number(BigInt(log.blockNumber)),
        blockHash: log.blockHash.toLowerCase(),
      }
    }
    deps.logger.error(
      'a refund is paid on-chain (its id is marked paid at the deposit address), but its Paid event was not found; it stays submitted',
      { refundId: row.id, depositAddress: row.depositAddress },
    )
    return null
  }

  /**
   * Whether a mined receipt carries the refund's payment: DepositAccount's Paid at the deposit
   * address, or the gas account's transfer.
   */
  function pays(row: RefundRow, submission: Submission, logs: OutgoingReceipt['logs']): boolean {
    const token = networkOf(row.network)?.tokens.find((t) => t.symbol === row.tokenSymbol)
    if (!token) return false
    const tokenAddress = token.kind === 'erc20' ? token.address.toLowerCase() : null
    const to = row.address.toLowerCase()
    const amount = BigInt(row.amount)
    // A token payment shows as the token contract's own Transfer from the paying account, which no
    // other code can emit.
    const transferred = (from: string) =>
      tokenAddress !== null &&
      receiptTransfers(logs, tokenAddress).some(
        (t) => t.from === from && t.to === to && t.amount === amount,
      )
    if (submission.route === 'deposit') {
      const id = paymentId(row.id)
      const paid = depositAccountEvents(logs).some(
        (e) =>
          e.kind === 'paid' &&
          e.account === row.depositAddress &&
          e.id === id &&
          e.token === tokenAddress &&
          e.to === to &&
          e.amount === amount,
      )
      return paid && (tokenAddress === null || transferred(row.depositAddress))
    }
    // A plain transfer (gas account, or the deposit address itself): the native payment's value and
    // target were checked when it was recorded.
    return tokenAddress === null || transferred(submission.from ?? '')
  }

  return {
    async inFlight(network: string) {
      return (await deps.repo.inFlight(network)).map((r) => ({
        id: r.id,
        txHash: r.txHash!,
        sender: r.sender,
        nonce: r.txNonce,
        blockHash: r.blockHash,
        confirmations: r.confirmations,
        settle: (news: OutgoingNews, chain: OutgoingChain) => settle(r, news, chain),
      }))
    },
  }
}
