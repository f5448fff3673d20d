import { describe, expect, test } from 'bun:test'
import { getInitialSnapshot, transition, type SnapshotFrom } from 'xstate'
import { refundMachine, type RefundEvent, type RefundInput } from '../../machines/refund.machine.ts'
import { refundableLines } from '../../src/modules/refunds/refundable.ts'

type Snap = SnapshotFrom<typeof refundMachine>
const start = (input: Partial<RefundInput> = {}) => getInitialSnapshot(refundMachine, { refundId: 'rf_1', requiredConfirmations: 3, ...input })
const TX = '0xaaa'
const submission = { txHash: TX, from: '0xgas', nonce: 7 }
/** Applies events in order; a refused one throws, naming it. */
function run(s: Snap, ...events: RefundEvent[]): Snap {
  for (const e of events) {
    if (!s.can(e)) throw new Error(`${String(s.value)} refuses ${e.type}`)
    s = transition(refundMachine, s, e)[0]
  }
  return s
}

describe('refundMachine', () => {
  test('pending -> submitted -> confirming -> completed at the required confirmations', () => {
    let s = run(start(), { type: 'submission.recorded', submission })
    expect(s.value).toBe('submitted')
    s = run(s, { type: 'submission.included', txHash: TX, blockNumber: 10, blockHash: '0xb10' })
    expect(s.value).toBe('confirming')
    s = run(s, { type: 'confirmations.updated', confirmations: 2 })
    expect([s.value, s.context.confirmations]).toEqual(['confirming', 2])
    s = run(s, { type: 'confirmations.updated', confirmations: 3 })
    expect(s.value).toBe('completed')
    expect(s.status).toBe('done')
  })

  test('a reorg taking the payment\'s block back returns it to submitted: it never completes on it', () => {
    let s = run(start(), { type: 'submission.recorded', submission }, { type: 'submission.included', txHash: TX, blockNumber: 10, blockHash: '0xb10' }, { type: 'confirmations.updated', confirmations: 2 })
    s = run(s, { type: 'submission.reorged', txHash: TX })
    expect([s.value, s.context.blockNumber, s.context.confirmations]).toEqual(['submitted', null, null])
    expect(s.can({ type: 'confirmations.updated', confirmations: 99 })).toBe(false)
    // Found again in another block, it counts from there.
    s = run(s, { type: 'submission.included', txHash: TX, blockNumber: 12, blockHash: '0xb12' }, { type: 'confirmations.updated', confirmations: 3 })
    expect([s.value, s.context.blockNumber]).toEqual(['completed', 12])
  })

  test('re-included in another block while confirming: the count restarts from the new block', () => {
    let s = run(start(), { type: 'submission.recorded', submission }, { type: 'submission.included', txHash: TX, blockNumber: 10, blockHash: '0xb10' }, { type: 'confirmations.updated', confirmations: 2 })
    expect(s.can({ type: 'submission.included', txHash: TX, blockNumber: 10, blockHash: '0xb10' })).toBe(false)
    s = run(s, { type: 'submission.included', txHash: TX, blockNumber: 11, blockHash: '0xb11' })
    expect([s.value, s.context.blockHash, s.context.confirmations]).toEqual(['confirming', '0xb11', null])
  })

  test('a payment whose nonce another transaction took is dropped: pending again, to be paid anew', () => {
    const s = run(start(), { type: 'submission.recorded', submission }, { type: 'submission.dropped', txHash: TX })
    expect([s.value, s.context.submission]).toEqual(['pending', null])
  })

  test('mined but reverted, or found unpayable: failed, with the reason', () => {
    const reverted = run(start(), { type: 'submission.recorded', submission }, { type: 'submission.reverted', txHash: TX, blockNumber: 10, blockHash: '0xb10' })
    expect([reverted.value, reverted.context.failureReason]).toEqual(['failed', 'reverted'])
    const refused = run(start(), { type: 'payment.refused', detail: 'the token refused the address' })
    expect([refused.value, refused.context.failureReason, refused.context.failureDetail]).toEqual(['failed', 'unpayable', 'the token refused the address'])
  })

  test('only a pending refund can be cancelled or take a payment; news of another transaction is refused', () => {
    const submitted = run(start(), { type: 'submission.recorded', submission })
    expect(submitted.can({ type: 'cancel.requested' })).toBe(false)
    expect(submitted.can({ type: 'submission.recorded', submission: { ...submission, txHash: '0xbbb' } })).toBe(false)
    expect(submitted.can({ type: 'submission.included', txHash: '0xbbb', blockNumber: 1, blockHash: '0x1' })).toBe(false)
    expect(run(start(), { type: 'cancel.requested' }).value).toBe('cancelled')
    for (const final of [run(start(), { type: 'cancel.requested' }), run(start(), { type: 'payment.refused', detail: 'x' })]) {
      expect(final.can({ type: 'submission.recorded', submission })).toBe(false)
    }
  })

  test('on a network that waits for its finalized block, confirmations alone do not complete it', () => {
    let s = run(start({ finality: 'finalized' }), { type: 'submission.recorded', submission }, { type: 'submission.included', txHash: TX, blockNumber: 10, blockHash: '0xb10' })
    s = run(s, { type: 'confirmations.updated', confirmations: 50, final: false })
    expect(s.value).toBe('confirming')
    s = run(s, { type: 'confirmations.updated', confirmations: 51, final: true })
    expect(s.value).toBe('completed')
  })

  test('a persisted snapshot restores and goes on', () => {
    const s = run(start(), { type: 'submission.recorded', submission })
    const restored = refundMachine.resolveState(JSON.parse(JSON.stringify(refundMachine.getPersistedSnapshot(s))))
    expect(run(restored, { type: 'submission.included', txHash: TX, blockNumber: 3, blockHash: '0x3' }).value).toBe('confirming')
  })
})

describe('refundableLines()', () => {
  const heights = new Map([['base', 100n]])
  const arrival = (amount: bigint, blockNumber: number, tokenSymbol = 'USDC') => ({ network: 'base', tokenSymbol, amount, blockNumber })

  test('counts confirmed arrivals only, less refunds that are not failed or cancelled', () => {
    const lines = refundableLines({
      arrivals: [arrival(10n, 90), arrival(5n, 98), arrival(7n, 100), arrival(3n, 95, 'ETH')],
      refunds: [
        { network: 'base', tokenSymbol: 'USDC', amount: 4n, status: 'completed' },
        { network: 'base', tokenSymbol: 'USDC', amount: 1n, status: 'pending' },
        { network: 'base', tokenSymbol: 'USDC', amount: 9n, status: 'failed' },
        { network: 'base', tokenSymbol: 'USDC', amount: 9n, status: 'cancelled' },
      ],
      heights,
    }, () => 3)
    // Block 100 has 1 confirmation of 3, block 98 has 3: 10 + 5 received.
    expect(lines).toEqual([
      { network: 'base', tokenSymbol: 'USDC', received: 15n, refunded: 5n, refundable: 10n },
      { network: 'base', tokenSymbol: 'ETH', received: 3n, refunded: 0n, refundable: 3n },
    ])
  })

  test('nothing is refundable on a network the follower has not reached, or one no longer configured', () => {
    expect(refundableLines({ arrivals: [arrival(10n, 1)], refunds: [], heights: new Map() }, () => 1)).toEqual([])
    expect(refundableLines({ arrivals: [arrival(10n, 1)], refunds: [], heights }, () => null)).toEqual([])
  })

  test('never below zero', () => {
    const [line] = refundableLines({ arrivals: [arrival(5n, 1)], refunds: [{ network: 'base', tokenSymbol: 'USDC', amount: 9n, status: 'completed' }], heights }, () => 1)
    expect(line!.refundable).toBe(0n)
  })
})
