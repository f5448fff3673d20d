import { describe, expect, test } from 'bun:test'
import { getInitialSnapshot, transition, type SnapshotFrom } from 'xstate'
import { refundMachine, type RefundEvent, type RefundInput } from '../../machines/refund.machine.ts'
import { refundableLines } from '../../src/modules/refunds/refundable.ts'

type Snap = SnapshotFrom<typeof refundMachine>
const start = (input: Partial<RefundInput> = {}) =>
  getInitialSnapshot(refundMachine, { refundId: 'rf_1', requiredConfirmations: 3, ...input })
const TX = '0xaaa'
/** Applies events in order; a refused one throws, naming it. */
function run(s: Snap, ...events: RefundEvent[]): Snap {
  for (const e of events) {
    if (!s.can(e)) throw new Error(`${String(s.value)} refuses ${e.type}`)
    s = transition(refundMachine, s, e)[0]
  }
  return s
}

describe('refundMachine', () => {
  const gas = { txHash: TX, from: '0xgas', nonce: 7, route: 'gas' as const }
  const deposit = {
    txHash: TX,
    from: '0xgas',
    nonce: 7,
    route: 'deposit' as const,
    payUntil: 1_800_000_000,
    fromBlock: 90,
  }
  const inBlock = (blockNumber: number, txHash = TX) => ({
    type: 'submission.included' as const,
    txHash,
    from: '0xgas',
    nonce: 7,
    blockNumber,
    blockHash: `0xb${blockNumber}`,
  })

  test('pending -> submitted -> confirming -> completed at the required confirmations', () => {
    let s = run(start(), { type: 'submission.recorded', submission: gas })
    expect(s.value).toBe('submitted')
    s = run(s, inBlock(10))
    expect(s.value).toBe('confirming')
    s = run(s, { type: 'confirmations.updated', confirmations: 2 })
    expect([s.value, s.context.confirmations]).toEqual(['confirming', 2])
    s = run(s, { type: 'confirmations.updated', confirmations: 3 })
    expect(s.value).toBe('completed')
    expect(s.status).toBe('done')
  })

  test("a reorg taking the payment's block back returns it to submitted: it never completes on it", () => {
    let s = run(start(), { type: 'submission.recorded', submission: gas }, inBlock(10), {
      type: 'confirmations.updated',
      confirmations: 2,
    })
    s = run(s, { type: 'submission.reorged', txHash: TX })
    expect([s.value, s.context.blockNumber, s.context.confirmations]).toEqual([
      'submitted',
      null,
      null,
    ])
    expect(s.can({ type: 'confirmations.updated', confirmations: 99 })).toBe(false)
    // Found again in another block, it counts from there.
    s = run(s, inBlock(12), { type: 'confirmations.updated', confirmations: 3 })
    expect([s.value, s.context.blockNumber]).toEqual(['completed', 12])
  })

  test('re-included in another block while confirming: the count restarts from the new block', () => {
    let s = run(start(), { type: 'submission.recorded', submission: gas }, inBlock(10), {
      type: 'confirmations.updated',
      confirmations: 2,
    })
    expect(s.can(inBlock(10))).toBe(false)
    s = run(s, inBlock(11))
    expect([s.value, s.context.blockHash, s.context.confirmations]).toEqual([
      'confirming',
      '0xb11',
      null,
    ])
  })

  test("direct route (the deposit address's own transfer, a chain without EIP-7702): like the gas route, only its own transaction pays it", () => {
    const direct = { txHash: TX, from: '0xdeposit', nonce: 0, route: 'direct' as const }
    const submitted = run(start(), { type: 'submission.recorded', submission: direct })
    expect(submitted.can(inBlock(10, '0xother'))).toBe(false)
    expect(submitted.can({ type: 'submission.expired', txHash: TX })).toBe(false)
    expect(run(submitted, { type: 'submission.dropped', txHash: TX }).value).toBe('pending')
    expect(
      run(submitted, {
        type: 'submission.reverted',
        txHash: TX,
        blockNumber: 10,
        blockHash: '0xb10',
        detail: 'reverted',
      }).value,
    ).toBe('failed')
    expect(
      run(submitted, inBlock(10), { type: 'confirmations.updated', confirmations: 3 }).value,
    ).toBe('completed')
  })

  test('a recorded payment found unmineable is abandoned: pending again, its submission forgotten; only while submitted, and only its own', () => {
    for (const submission of [gas, deposit]) {
      const submitted = run(start(), { type: 'submission.recorded', submission })
      expect(submitted.can({ type: 'submission.abandoned', txHash: '0xother', detail: 'x' })).toBe(
        false,
      )
      const abandoned = run(submitted, {
        type: 'submission.abandoned',
        txHash: TX,
        detail: 'its nonce went to another transaction',
      })
      expect([abandoned.value, abandoned.context.submission]).toEqual(['pending', null])
      const confirming = run(submitted, inBlock(10))
      expect(confirming.can({ type: 'submission.abandoned', txHash: TX, detail: 'x' })).toBe(false)
    }
    expect(start().can({ type: 'submission.abandoned', txHash: TX, detail: 'x' })).toBe(false)
  })

  test('gas route: only its own transaction pays it; dropped (its nonce taken) it is pending again; mined and reverted it fails', () => {
    const submitted = run(start(), { type: 'submission.recorded', submission: gas })
    expect(submitted.can(inBlock(10, '0xother'))).toBe(false)
    expect(submitted.can({ type: 'submission.expired', txHash: TX })).toBe(false)
    const dropped = run(submitted, { type: 'submission.dropped', txHash: TX })
    expect([dropped.value, dropped.context.submission]).toEqual(['pending', null])
    const reverted = run(submitted, {
      type: 'submission.reverted',
      txHash: TX,
      blockNumber: 10,
      blockHash: '0xb10',
      detail: 'reverted',
    })
    expect([reverted.value, reverted.context.failureReason]).toEqual(['failed', 'reverted'])
  })

  test('deposit route: whichever transaction delivered the signature pays it; it is never dropped or failed for its own, only pending again once the signature expired unpaid', () => {
    const submitted = run(start(), { type: 'submission.recorded', submission: deposit })
    // Someone sent the signature first: that transaction is the payment.
    const byOther = run(submitted, inBlock(10, '0xother'))
    expect([
      byOther.value,
      byOther.context.submission?.txHash,
      byOther.context.submission?.route,
    ]).toEqual(['confirming', '0xother', 'deposit'])
    expect(submitted.can({ type: 'submission.dropped', txHash: TX })).toBe(false)
    expect(
      submitted.can({
        type: 'submission.reverted',
        txHash: TX,
        blockNumber: 1,
        blockHash: '0x1',
        detail: 'x',
      }),
    ).toBe(false)
    const expired = run(submitted, { type: 'submission.expired', txHash: TX })
    expect([expired.value, expired.context.submission]).toEqual(['pending', null])
  })

  test('found unpayable: failed, with the reason', () => {
    const refused = run(start(), {
      type: 'payment.refused',
      detail: 'the token refused the address',
    })
    expect([refused.value, refused.context.failureReason, refused.context.failureDetail]).toEqual([
      'failed',
      'unpayable',
      'the token refused the address',
    ])
  })

  test('only a pending refund can be cancelled or take a payment; news of another transaction is refused', () => {
    const submitted = run(start(), { type: 'submission.recorded', submission: gas })
    expect(submitted.can({ type: 'cancel.requested' })).toBe(false)
    expect(
      submitted.can({ type: 'submission.recorded', submission: { ...gas, txHash: '0xbbb' } }),
    ).toBe(false)
    expect(submitted.can({ type: 'submission.dropped', txHash: '0xbbb' })).toBe(false)
    expect(run(start(), { type: 'cancel.requested' }).value).toBe('cancelled')
    for (const final of [
      run(start(), { type: 'cancel.requested' }),
      run(start(), { type: 'payment.refused', detail: 'x' }),
    ]) {
      expect(final.can({ type: 'submission.recorded', submission: gas })).toBe(false)
    }
  })

  test('on a network that waits for its finalized block, confirmations alone do not complete it', () => {
    let s = run(
      start({ finality: 'finalized' }),
      { type: 'submission.recorded', submission: gas },
      inBlock(10),
    )
    s = run(s, { type: 'confirmations.updated', confirmations: 50, final: false })
    expect(s.value).toBe('confirming')
    s = run(s, { type: 'confirmations.updated', confirmations: 51, final: true })
    expect(s.value).toBe('completed')
  })

  test('a persisted snapshot restores and goes on', () => {
    const s = run(start(), { type: 'submission.recorded', submission: gas })
    const restored = refundMachine.resolveState(
      JSON.parse(JSON.stringify(refundMachine.getPersistedSnapshot(s))),
    )
    expect(run(restored, inBlock(3)).value).toBe('confirming')
  })
})

describe('refundableLines()', () => {
  const heights = new Map([['base', 100n]])
  const arrival = (amount: bigint, blockNumber: number, tokenSymbol = 'USDC') => ({
    network: 'base',
    tokenSymbol,
    amount,
    blockNumber,
  })

  test('counts confirmed arrivals only, less refunds that are not failed or cancelled', () => {
    const lines = refundableLines(
      {
        arrivals: [arrival(10n, 90), arrival(5n, 98), arrival(7n, 100), arrival(3n, 95, 'ETH')],
        refunds: [
          { network: 'base', tokenSymbol: 'USDC', amount: 4n, status: 'completed' },
          { network: 'base', tokenSymbol: 'USDC', amount: 1n, status: 'pending' },
          { network: 'base', tokenSymbol: 'USDC', amount: 9n, status: 'failed' },
          { network: 'base', tokenSymbol: 'USDC', amount: 9n, status: 'cancelled' },
        ],
        heights,
      },
      () => 3,
    )
    // Block 100 has 1 confirmation of 3, block 98 has 3: 10 + 5 received.
    expect(lines).toEqual([
      { network: 'base', tokenSymbol: 'USDC', received: 15n, refunded: 5n, refundable: 10n },
      { network: 'base', tokenSymbol: 'ETH', received: 3n, refunded: 0n, refundable: 3n },
    ])
  })

  test('nothing is refundable on a network the follower has not reached, or one no longer configured', () => {
    expect(
      refundableLines({ arrivals: [arrival(10n, 1)], refunds: [], heights: new Map() }, () => 1),
    ).toEqual([])
    expect(
      refundableLines({ arrivals: [arrival(10n, 1)], refunds: [], heights }, () => null),
    ).toEqual([])
  })

  test('never below zero', () => {
    const [line] = refundableLines(
      {
        arrivals: [arrival(5n, 1)],
        refunds: [{ network: 'base', tokenSymbol: 'USDC', amount: 9n, status: 'completed' }],
        heights,
      },
      () => 1,
    )
    expect(line!.refundable).toBe(0n)
  })
})
