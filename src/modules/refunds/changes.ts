/**
 * Every change to a refund, whoever asks for it (a merchant's command, or news of its payment
 * from the chain), is judged by the refund machine on the refund's stored snapshot and committed
 * with its timeline note and webhook event (src/modules/refunds/refund.repo.ts).
 */
import { transition } from 'xstate'
import {
  REFUND_MACHINE_VERSION,
  refundMachine,
  type RefundEvent,
  type RefundStatus,
  type Submission,
} from '../../../machines/refund.machine.ts'
import { restoreActor } from '../../actors/restore-actor.ts'
import type { Clock } from '../../lib/clock.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import { refundWebhookData } from '../../webhooks/payload.ts'
import type { RefundRepo, RefundRow } from './refund.repo.ts'
import { eventFields } from './views.ts'

export interface RefundChanges {
  /**
   * Judges `event` on the refund's stored snapshot and commits the result with its note and
   * event; a refused event changes nothing (a conflict). One retry when another writer moved the
   * row meanwhile.
   */
  apply(
    id: string,
    event: RefundEvent,
    extra?: (row: RefundRow) => Partial<RefundRow>,
  ): Promise<Outcome<RefundRow>>
}

export function createRefundChanges(deps: {
  repo: RefundRepo
  clock: Clock
  /** Webhook events were committed: the dispatcher fans them out. */
  eventsWritten: () => void
}): RefundChanges {
  const now = () => new Date(deps.clock.now())
  return {
    async apply(id, event, extra = () => ({})) {
      for (let attempt = 0; attempt < 2; attempt++) {
        const row = await deps.repo.find(id)
        if (!row) return deny('not_found', `No refund ${id}`)
        const before = restoreActor(refundMachine, row.snapshot).getSnapshot()
        if (!before.can(event))
          return deny('conflict', `A refund in status ${row.status} cannot take ${event.type}`)
        const [after] = transition(refundMachine, before, event)
        const status = after.value as RefundStatus
        const c = after.context
        const at = now()
        const patch: Partial<RefundRow> = {
          status,
          snapshot: refundMachine.getPersistedSnapshot(after) as Record<string, unknown>,
          machineVersion: REFUND_MACHINE_VERSION,
          blockNumber: c.blockNumber,
          blockHash: c.blockHash,
          confirmations: c.confirmations,
          failureReason: c.failureReason,
          failureDetail: c.failureDetail,
          updatedAt: at,
          // The row shows the submission the machine holds: none, the recorded one, or (deposit
          // route) the transaction that paid.
          ...(c.submission === null
            ? {
                txHash: null,
                rawTransaction: null,
                txNonce: null,
                sender: null,
                paidFrom: null,
                submittedAt: null,
              }
            : c.submission.txHash !== row.txHash
              ? {
                  txHash: c.submission.txHash,
                  sender: c.submission.from,
                  txNonce: c.submission.nonce,
                  rawTransaction: null,
                }
              : {}),
          ...(status === 'completed' ? { completedAt: at } : {}),
          ...extra(row),
        }
        const note = noteOf(event, row.status, status, c)
        const committed = await deps.repo.commit({
          id,
          expectedVersion: row.version,
          patch,
          note,
          event: (written, transaction) =>
            status === row.status || (status !== 'completed' && status !== 'failed')
              ? null
              : {
                  eventType: `refund.${status}`,
                  data: refundWebhookData(transaction, eventFields(written)),
                },
        })
        if (!committed) continue
        if (
          committed.status !== row.status &&
          (committed.status === 'completed' || committed.status === 'failed')
        )
          deps.eventsWritten()
        return ok(committed)
      }
      return deny('conflict', `Refund ${id} changed while this was being applied; retry`)
    },
  }
}

/**
 * The payment the refund machine holds for the refund: none, the one recorded, or (deposit route)
 * the one that paid.
 */
export const submissionOf = (row: RefundRow): Submission | null =>
  restoreActor(refundMachine, row.snapshot).getSnapshot().context.submission

function noteOf(
  event: RefundEvent,
  from: RefundStatus,
  to: RefundStatus,
  c: {
    blockNumber: number | null
    failureDetail: string | null
    submission: { txHash: string } | null
  },
) {
  if (event.type === 'confirmations.updated' && from === to) return null
  if (event.type === 'submission.included' && from === to)
    return {
      cause: 'refund.included',
      details: { block_number: c.blockNumber, moved: 'into another block after a reorg' },
    }
  const cause = {
    'submission.recorded': 'refund.submitted',
    'submission.included': 'refund.included',
    'submission.reorged': 'refund.reorged',
    'submission.dropped': 'refund.dropped',
    'submission.expired': 'refund.expired_unpaid',
    'submission.abandoned': 'refund.abandoned',
    'submission.reverted': 'refund.failed',
    'confirmations.updated': 'refund.completed',
    'payment.refused': 'refund.failed',
    'cancel.requested': 'refund.cancelled',
  }[event.type]
  const txHash =
    'txHash' in event
      ? event.txHash
      : event.type === 'submission.recorded'
        ? event.submission.txHash
        : (c.submission?.txHash ?? null)
  return {
    cause,
    details: {
      refund_status: to,
      ...(txHash ? { tx_hash: txHash } : {}),
      ...(c.blockNumber !== null ? { block_number: c.blockNumber } : {}),
      ...(to === 'failed' ? { failure: c.failureDetail } : {}),
    },
  }
}
