import type { Metrics } from '../metrics/metrics.ts'
import type { TxEvent } from '../../machines/transaction.machine.ts'
import { FINAL_STATUSES } from '../../machines/transaction.machine.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { Outcome } from '../lib/outcome.ts'
import type { FollowerEvent, FollowerHandler } from './follower/events.ts'
import type { ChainRepo, TransferFinding, TransferKind, UnappliedTransfer } from './chain.repo.ts'
import { nativeToken, type NetworkConfig } from './networks-config.ts'
import { LATE_PAYMENT_EVENT } from '../db/schema.ts'
import {
  INTERNAL_TRACED,
  INTERNAL_TRANSFER,
  NATIVE_TRANSFER,
  type Finding,
} from './transfer-scan.ts'

/**
 * What the tracker needs of the lifecycle: apply an event to a transaction's actor, and note what
 * happens after its final status.
 */
export interface Lifecycle {
  apply(id: string, event: TxEvent): Promise<Outcome<unknown>>
  noteAfterFinal(
    id: string,
    cause: string,
    details: Record<string, unknown>,
    eventType?: string | null,
  ): Promise<void>
}

/**
 * The wait before a transfer whose judging failed is tried again: 5 s, doubling, at most 10
 * minutes.
 */
export const retryDelayMs = (attempts: number) =>
  Math.min(600_000, 5_000 * 2 ** Math.max(0, attempts - 1))

/**
 * Turns one network's block follower events into lifecycle events
 * (docs/decisions/0031-transfers-recorded-then-judged.md,
 * docs/decisions/0012-transaction-lifecycle.md, docs/decisions/0014-amounts-add-up.md,
 * docs/decisions/0015-confirmations-and-reorgs.md):
 *  - a transfer to a deposit address in the token and network the customer selected is a
 *    payment: `payment.detected` then `payment.included` (the follower sees mined blocks);
 *  - another configured token, or the right token on another network, is a wrong asset;
 *  - anything reaching a transaction in a final status is a late payment, recorded only;
 *  - a block that left the canonical chain takes its payments back (`payment.reorged`), and a
 *    re-included transfer is found again in its new block;
 *  - each new head updates the confirmations of the network's confirming transactions.
 * Findings are recorded first (unique per transfer and block), then judged and marked applied,
 * so a block delivered again after a crash applies exactly what was not applied.
 */
export function createPaymentTracker(deps: {
  network: NetworkConfig
  repo: ChainRepo
  lifecycle: Lifecycle
  clock: Clock
  logger: Logger
  metrics: Pick<Metrics, 'reorgAfterFinal'>
}): FollowerHandler {
  const { network, repo } = deps
  const symbolOfToken = new Map(
    network.tokens
      .filter((t) => t.kind === 'erc20')
      .map((t) => [t.address.toLowerCase(), t.symbol]),
  )
  const nativeSymbol = nativeToken(network)?.symbol ?? null
  const now = () => new Date(deps.clock.now())

  function symbolOf(f: Finding): string | null {
    return f.kind === 'native' ? nativeSymbol : (symbolOfToken.get(f.token.toLowerCase()) ?? null)
  }

  async function apply(id: string, event: TxEvent) {
    const r = await deps.lifecycle.apply(id, event)
    // A refusal (conflict) means the event no longer applies; anything else is retried later.
    if (!r.ok && r.code !== 'conflict') throw new Error(`${event.type} for ${id}: ${r.message}`)
    return r.ok
  }

  async function judge(row: UnappliedTransfer): Promise<TransferKind> {
    const id = row.transactionId
    const { blockNumber } = row
    // One transaction may carry several transfers to the address (a batch): each is its own
    // payment.
    const transfer = { txHash: row.txHash, logIndex: row.logIndex }
    if (row.reorgedAt !== null) {
      if (row.kind === 'wrong_asset') await apply(id, { type: 'wrong_asset.reorged', ...transfer })
      if (row.kind !== 'payment') return row.kind
      if (FINAL_STATUSES.includes(row.status)) {
        // docs/decisions/0015-confirmations-and-reorgs.md: too late to take it back (the
        // transaction completed, or failed): the operator must know.
        deps.logger.error('a reorg took back a payment of a transaction in a final status', {
          network: network.name,
          transactionId: id,
          status: row.status,
          txHash: row.txHash,
          blockNumber,
        })
        await deps.lifecycle.noteAfterFinal(id, 'payment.reorged_after_final', {
          txHash: row.txHash,
          blockNumber,
          network: network.name,
        })
        deps.metrics.reorgAfterFinal(network.name)
        return row.kind
      }
      await apply(id, { type: 'payment.reorged', ...transfer })
      return row.kind
    }
    if (FINAL_STATUSES.includes(row.status)) {
      // A late payment moves nothing; the timeline keeps it, and its outbox event tells Commerce
      // endpoints (charge:delayed; docs/decisions/0065-coinbase-commerce-drop-in.md).
      await deps.lifecycle.noteAfterFinal(
        id,
        'payment.late',
        {
          txHash: row.txHash,
          logIndex: row.logIndex,
          amount: row.amount,
          blockNumber,
          network: network.name,
          tokenSymbol: row.tokenSymbol,
        },
        LATE_PAYMENT_EVENT,
      )
      return 'late'
    }
    if (row.txTokenSymbol === row.tokenSymbol && row.txNetwork === network.name) {
      await apply(id, { type: 'payment.detected', ...transfer, amount: row.amount, blockNumber })
      await apply(id, { type: 'payment.included', ...transfer, blockNumber })
      return 'payment'
    }
    await apply(id, {
      type: 'wrong_asset.received',
      ...transfer,
      tokenSymbol: `${row.tokenSymbol} (${network.name})`,
      amount: row.amount,
    })
    return 'wrong_asset'
  }

  /**
   * Judges every transfer not judged yet, in chain order. One that fails (a bug, a transaction
   * whose actor this version cannot run) is recorded, logged with its ids and tried again later
   * with back-off, and the rest of the network goes on; later transfers of the same transaction
   * wait behind it, so its transfers are still judged in order.
   */
  async function applyPending() {
    const waiting = new Set<string>()
    for (const row of await repo.unappliedTransfers(network.name)) {
      if (
        waiting.has(row.transactionId) ||
        (row.retryAt !== null && row.retryAt.getTime() > deps.clock.now())
      ) {
        waiting.add(row.transactionId)
        continue
      }
      let kind: TransferKind
      try {
        kind = await judge(row)
      } catch (e) {
        waiting.add(row.transactionId)
        const retryAt = new Date(deps.clock.now() + retryDelayMs(row.attempts + 1))
        const attempts = await repo.markFailed(row.id, retryAt, String(e))
        deps.logger.error('transfer not applied; tried again later', {
          network: network.name,
          transferId: row.id,
          transactionId: row.transactionId,
          txHash: row.txHash,
          attempts,
          retryAt: retryAt.toISOString(),
          error: String(e),
        })
        continue
      }
      await repo.markApplied(row.id, kind)
      if (kind === 'late')
        deps.logger.info('late payment recorded', {
          network: network.name,
          transactionId: row.transactionId,
          txHash: row.txHash,
          amount: row.amount,
          token: row.tokenSymbol,
        })
    }
  }

  /** `final`: where the safe / finalized block stands, on a network that waits for it. */
  async function updateConfirmations(head: bigint, final: bigint | undefined) {
    for (const r of await repo.confirmingTransactions(network.name)) {
      const confirmations = Number(head - BigInt(r.blockNumber) + 1n)
      const reached = final === undefined ? undefined : final >= BigInt(r.blockNumber)
      if (confirmations < 0 || (confirmations === r.confirmations && !reached)) continue
      // One transaction that cannot take it must not hold up the others' confirmations; the next
      // head tries it again.
      await apply(r.id, {
        type: 'confirmations.updated',
        confirmations,
        at: deps.clock.now(),
        ...(reached === undefined ? {} : { final: reached }),
      }).catch((e) =>
        deps.logger.error('confirmations not applied; tried again on the next head', {
          network: network.name,
          transactionId: r.id,
          error: String(e),
        }),
      )
    }
  }

  return async (event: FollowerEvent) => {
    if (event.type === 'block') {
      const findings = event.findings.flatMap((f): TransferFinding[] => {
        const symbol = symbolOf(f)
        if (symbol === null) return []
        return [
          {
            txHash: f.txHash.toLowerCase(),
            logIndex:
              f.kind === 'erc20'
                ? f.logIndex
                : f.internal
                  ? f.traced
                    ? INTERNAL_TRACED
                    : INTERNAL_TRANSFER
                  : NATIVE_TRANSFER,
            blockNumber: f.blockNumber,
            blockHash: f.blockHash.toLowerCase(),
            tokenSymbol: symbol,
            fromAddress: f.from.toLowerCase(),
            toAddress: f.to.toLowerCase(),
            amount: f.amount,
          },
        ]
      })
      if (findings.length) await repo.recordFindings(network.name, findings, now())
      if (findings.length) await applyPending()
    } else if (event.type === 'reorg') {
      const taken = await repo.takeBackBlocks(
        network.name,
        event.removed.map((b) => b.hash.toLowerCase()),
        now(),
      )
      if (taken) {
        deps.logger.warn('reorg took back transfers', {
          network: network.name,
          forkPoint: event.forkPoint.toString(),
          transfers: taken,
        })
        await applyPending()
      }
    } else {
      // Leftovers of a crash between recording and judging are judged on the next head too.
      await applyPending()
      await updateConfirmations(event.number, event.final)
    }
  }
}
