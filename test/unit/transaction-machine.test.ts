import { describe, expect, test } from 'bun:test'
import { createActor, fromCallback, transition } from 'xstate'
import type { DeadlineInput, TimerFired } from '../../machines/deadline-timer.ts'
import {
  EVENT_TYPES,
  transactionMachine,
  type Payment,
  type TxContext,
  type TxEvent,
  type TxStatus,
} from '../../machines/transaction.machine.ts'

const DEADLINE = Date.parse('2030-01-01T01:00:00Z')
const quote = {
  tokenSymbol: 'USDC',
  network: 'devnet',
  tokenAmount: '1000',
  depositAddress: '0xabc',
  requiredConfirmations: 3,
}

/** A representative context for each status, as the lifecycle would have built it. */
function contextFor(status: TxStatus): TxContext {
  const base: TxContext = {
    transactionId: 't1',
    expiresAt: DEADLINE,
    quote: null,
    payments: [],
    received: '0',
    txHash: null,
    blockNumber: null,
    confirmations: null,
    confirmedAt: null,
    failureReason: null,
    wrongAssets: [],
  }
  const paid = (payments: Payment[]) => ({
    payments,
    received: payments.reduce((a, p) => a + BigInt(p.amount), 0n).toString(),
  })
  switch (status) {
    case 'created':
      return base
    case 'prepared':
      return { ...base, quote }
    case 'pending':
      return { ...base, quote, ...paid([{ txHash: 'tx0', amount: '400', blockNumber: null }]) }
    case 'processing':
      return { ...base, quote, ...paid([{ txHash: 'tx1', amount: '1000', blockNumber: null }]) }
    case 'confirming':
      return {
        ...base,
        quote,
        ...paid([{ txHash: 'tx1', amount: '1000', blockNumber: 100 }]),
        txHash: 'tx1',
        blockNumber: 100,
        confirmations: 1,
      }
    default:
      return { ...base, quote }
  }
}

const known = (status: TxStatus) => (status === 'pending' ? 'tx0' : 'tx1')
function eventFor(type: TxEvent['type'], status: TxStatus): TxEvent {
  switch (type) {
    case 'token.selected':
      return { type, quote: { ...quote, tokenSymbol: 'ETH', tokenAmount: '5' } }
    case 'customer.confirmed':
      return { type }
    case 'payment.detected':
      return { type, txHash: 'tx9', amount: '1000' }
    case 'payment.included':
      return { type, txHash: known(status), blockNumber: 101 }
    case 'confirmations.updated':
      return { type, confirmations: 3, at: DEADLINE - 1000 }
    case 'payment.reorged':
      return { type, txHash: known(status) }
    case 'payment.reverted':
      return { type, txHash: known(status) }
    case 'wrong_asset.received':
      return { type, txHash: 'tx8', tokenSymbol: 'DAI', amount: '7' }
    case 'wrong_asset.reorged':
      return { type, txHash: 'tx8' }
    case 'expiry.reached':
      return { type, at: DEADLINE }
    case 'cancel.requested':
      return { type, by: 'merchant' }
  }
}

const STATUSES: TxStatus[] = [
  'created',
  'prepared',
  'pending',
  'processing',
  'confirming',
  'completed',
  'failed',
  'expired',
  'cancelled',
]

/**
 * docs/decisions/0011-cancel.md, docs/decisions/0012-transaction-lifecycle.md,
 * docs/decisions/0013-absolute-deadlines.md, docs/decisions/0014-amounts-add-up.md,
 * docs/decisions/0015-confirmations-and-reorgs.md: every allowed move; everything missing here must
 * be refused.
 */
const ALLOWED: Partial<Record<TxStatus, Partial<Record<TxEvent['type'], TxStatus>>>> = {
  created: {
    'token.selected': 'prepared',
    'wrong_asset.received': 'created',
    'expiry.reached': 'expired',
    'cancel.requested': 'cancelled',
  },
  prepared: {
    'token.selected': 'prepared',
    'customer.confirmed': 'pending',
    'payment.detected': 'processing',
    'wrong_asset.received': 'prepared',
    'expiry.reached': 'expired',
    'cancel.requested': 'cancelled',
  },
  pending: {
    'payment.detected': 'processing',
    'payment.included': 'pending',
    'payment.reorged': 'pending',
    'wrong_asset.received': 'pending',
    'expiry.reached': 'failed',
    'cancel.requested': 'cancelled',
  },
  processing: {
    'wrong_asset.received': 'processing',
    'payment.detected': 'processing',
    'payment.included': 'confirming',
    'payment.reorged': 'pending',
    'payment.reverted': 'failed',
  },
  confirming: {
    'wrong_asset.received': 'confirming',
    'payment.detected': 'confirming',
    'payment.included': 'confirming',
    'confirmations.updated': 'completed',
    'payment.reorged': 'pending',
    'payment.reverted': 'failed',
  },
}

const at = (status: TxStatus, context: Partial<TxContext> = {}) =>
  transactionMachine.resolveState({ value: status, context: { ...contextFor(status), ...context } })
const step = (
  status: TxStatus | ReturnType<typeof at>,
  event: TxEvent,
  context: Partial<TxContext> = {},
) => {
  const snapshot = typeof status === 'string' ? at(status, context) : status
  return { can: snapshot.can(event), next: transition(transactionMachine, snapshot, event)[0] }
}

describe('transactionMachine: every state x every event', () => {
  for (const status of STATUSES) {
    for (const type of EVENT_TYPES) {
      const target = ALLOWED[status]?.[type]
      test(`${status} + ${type} -> ${target ?? 'refused'}`, () => {
        const { can, next } = step(status, eventFor(type, status))
        expect(can).toBe(target !== undefined)
        if (target) expect(next.value).toBe(target)
        else expect(next.value).toBe(status)
      })
    }
  }
})

describe('transactionMachine: amounts (docs/decisions/0014-amounts-add-up.md)', () => {
  test('two partial payments add up and proceed once they cover the quote', () => {
    const first = step('prepared', { type: 'payment.detected', txHash: 'a', amount: '400' }).next
    expect(first.value).toBe('pending')
    expect(first.context.received).toBe('400')
    const second = step(first, { type: 'payment.detected', txHash: 'b', amount: '600' }).next
    expect(second.value).toBe('processing')
    expect(second.context.received).toBe('1000')
  })

  test('the same transfer reported twice is counted once (refused the second time)', () => {
    const once = step('prepared', { type: 'payment.detected', txHash: 'a', amount: '400' }).next
    expect(step(once, { type: 'payment.detected', txHash: 'a', amount: '400' }).can).toBe(false)
  })

  test('two transfers in one transaction (two log indexes of one hash) add up; each counts once', () => {
    const first = step('prepared', {
      type: 'payment.detected',
      txHash: 'a',
      logIndex: 0,
      amount: '400',
    }).next
    expect(
      step(first, { type: 'payment.detected', txHash: 'a', logIndex: 0, amount: '400' }).can,
    ).toBe(false)
    const second = step(first, {
      type: 'payment.detected',
      txHash: 'a',
      logIndex: 1,
      amount: '600',
    }).next
    expect(second.value).toBe('processing')
    expect(second.context.received).toBe('1000')
    expect(second.context.payments).toEqual([
      { txHash: 'a', logIndex: 0, amount: '400', blockNumber: null },
      { txHash: 'a', logIndex: 1, amount: '600', blockNumber: null },
    ])
    // A reorg names the one transfer it takes back.
    const back = step(second, { type: 'payment.reorged', txHash: 'a', logIndex: 1 }).next
    expect(back.value).toBe('pending')
    expect(back.context.received).toBe('400')
  })

  test('a payment recorded before log indexes were kept is the transfer of its hash, whatever index names it now', () => {
    const reorged = step('confirming', { type: 'payment.reorged', txHash: 'tx1', logIndex: 3 }).next
    expect(reorged.value).toBe('pending')
    expect(reorged.context.received).toBe('0')
    expect(
      step('confirming', { type: 'payment.detected', txHash: 'tx1', logIndex: 3, amount: '1000' })
        .can,
    ).toBe(false)
  })

  test('an overpayment proceeds and is recorded', () => {
    const over = step('pending', { type: 'payment.detected', txHash: 'b', amount: '5000' }).next
    expect(over.value).toBe('processing')
    expect(over.context.received).toBe('5400')
  })

  test('amounts are exact beyond 2^53', () => {
    const big = '123456789012345678901234567890'
    const next = step(
      'prepared',
      { type: 'payment.detected', txHash: 'a', amount: big },
      { quote: { ...quote, tokenAmount: big } },
    ).next
    expect(next.value).toBe('processing')
    expect(next.context.received).toBe(big)
  })

  test('underpaid at the deadline fails with reason underpaid; nothing received expires', () => {
    const failed = step('pending', { type: 'expiry.reached', at: DEADLINE }).next
    expect(failed.value).toBe('failed')
    expect(failed.context.failureReason).toBe('underpaid')
    const expired = step(
      'pending',
      { type: 'expiry.reached', at: DEADLINE },
      { payments: [], received: '0' },
    ).next
    expect(expired.value).toBe('expired')
  })

  test('a reverted payment fails with reason reverted', () => {
    expect(
      step('confirming', eventFor('payment.reverted', 'confirming')).next.context.failureReason,
    ).toBe('reverted')
  })
})

describe('transactionMachine: another asset than the quoted one (docs/decisions/0012-transaction-lifecycle.md: recorded, never moves the status by itself)', () => {
  const dust = {
    type: 'wrong_asset.received',
    txHash: 'dust',
    tokenSymbol: 'ETH (devnet)',
    amount: '1',
  } as const
  const mixUp = {
    type: 'wrong_asset.received',
    txHash: 'usdt',
    tokenSymbol: 'USDT (devnet)',
    amount: '1000',
  } as const

  test('1 wei of dust is recorded and the correct payment that follows completes the transaction', () => {
    let s = step('prepared', dust).next
    expect(s.value).toBe('prepared')
    expect(s.context.wrongAssets).toEqual(['dust'])
    expect(s.context.failureReason).toBeNull()
    s = transition(transactionMachine, s, {
      type: 'payment.detected',
      txHash: 'pay',
      amount: '1000',
    })[0]
    s = transition(transactionMachine, s, {
      type: 'payment.included',
      txHash: 'pay',
      blockNumber: 10,
    })[0]
    s = transition(transactionMachine, s, {
      type: 'confirmations.updated',
      confirmations: 3,
      at: 5,
    })[0]
    expect(s.value).toBe('completed')
  })

  test('the same wrong-asset transfer twice is recorded once', () => {
    const once = step('pending', dust).next
    expect(once.can(dust)).toBe(false)
  })

  test('two wrong-asset transfers in one transaction are two; a reorg of one leaves the other', () => {
    const first = step('prepared', {
      type: 'wrong_asset.received',
      txHash: 'w',
      logIndex: 0,
      tokenSymbol: 'DAI',
      amount: '7',
    }).next
    const both = step(first, {
      type: 'wrong_asset.received',
      txHash: 'w',
      logIndex: 1,
      tokenSymbol: 'DAI',
      amount: '7',
    }).next
    expect(both.context.wrongAssets).toEqual(['w:0', 'w:1'])
    const one = step(both, { type: 'wrong_asset.reorged', txHash: 'w', logIndex: 0 }).next
    expect(one.context.wrongAssets).toEqual(['w:1'])
  })

  test('at the deadline: only a wrong asset received fails wrong_asset; with part of the quote, underpaid; nothing at all, expired', () => {
    for (const status of ['prepared', 'pending'] as const) {
      const onlyWrong = transition(
        transactionMachine,
        step(status, mixUp, { payments: [], received: '0' }).next,
        { type: 'expiry.reached', at: DEADLINE },
      )[0]
      expect({ status, value: onlyWrong.value, reason: onlyWrong.context.failureReason }).toEqual({
        status,
        value: 'failed',
        reason: 'wrong_asset',
      })
    }
    const partAndWrong = transition(transactionMachine, step('pending', mixUp).next, {
      type: 'expiry.reached',
      at: DEADLINE,
    })[0]
    expect([partAndWrong.value, partAndWrong.context.failureReason]).toEqual([
      'failed',
      'underpaid',
    ])
    const created = transition(transactionMachine, step('created', dust).next, {
      type: 'expiry.reached',
      at: DEADLINE,
    })[0]
    expect([created.value, created.context.failureReason]).toEqual(['failed', 'wrong_asset'])
  })

  test('a wrong asset whose block left the chain is forgotten: the deadline then expires the transaction', () => {
    const recorded = step('prepared', dust).next
    const forgotten = transition(transactionMachine, recorded, {
      type: 'wrong_asset.reorged',
      txHash: 'dust',
    })[0]
    expect(forgotten.context.wrongAssets).toEqual([])
    expect(
      transition(transactionMachine, forgotten, { type: 'expiry.reached', at: DEADLINE })[0].value,
    ).toBe('expired')
  })

  test('a snapshot made before wrong assets were recorded (no wrongAssets in context) still expires as before', () => {
    const { wrongAssets: _, ...old } = contextFor('prepared')
    const expired = transition(
      transactionMachine,
      transactionMachine.resolveState({ value: 'prepared', context: old as TxContext }),
      { type: 'expiry.reached', at: DEADLINE },
    )[0]
    expect(expired.value).toBe('expired')
    const dusted = transition(
      transactionMachine,
      transactionMachine.resolveState({ value: 'prepared', context: old as TxContext }),
      dust,
    )[0]
    expect(dusted.context.wrongAssets).toEqual(['dust'])
  })
})

describe('transactionMachine: confirmations and reorgs (docs/decisions/0015-confirmations-and-reorgs.md)', () => {
  test('confirmations below the requirement are recorded without completing; enough completes with confirmedAt', () => {
    const two = step('confirming', { type: 'confirmations.updated', confirmations: 2, at: 5 }).next
    expect(two.value).toBe('confirming')
    expect(two.context.confirmations).toBe(2)
    const three = step(two, { type: 'confirmations.updated', confirmations: 3, at: 7 }).next
    expect(three.value).toBe('completed')
    expect(three.context.confirmedAt).toBe(7)
  })

  test('on a network that waits for finality, confirmations past the requirement do not complete; the final block does', () => {
    const counted = step('confirming', {
      type: 'confirmations.updated',
      confirmations: 50,
      at: 5,
      final: false,
    })
    expect(counted.next.value).toBe('confirming')
    expect(counted.next.context.confirmations).toBe(50)
    const final = step(counted.next, {
      type: 'confirmations.updated',
      confirmations: 50,
      at: 6,
      final: true,
    }).next
    expect(final.value).toBe('completed')
    expect(final.context.confirmedAt).toBe(6)
  })

  test('a reorged-out payment returns to awaiting payment and cannot complete', () => {
    const back = step('confirming', { type: 'payment.reorged', txHash: 'tx1' }).next
    expect(back.value).toBe('pending')
    expect(back.context).toMatchObject({
      received: '0',
      payments: [],
      blockNumber: null,
      txHash: null,
      confirmations: null,
    })
    expect(back.can({ type: 'confirmations.updated', confirmations: 10, at: 1 })).toBe(false)
  })

  test('re-included after a reorg, it confirms again from its new block', () => {
    const back = step('confirming', { type: 'payment.reorged', txHash: 'tx1' }).next
    const again = step(back, { type: 'payment.detected', txHash: 'tx1', amount: '1000' }).next
    expect(again.value).toBe('processing')
    const included = step(again, { type: 'payment.included', txHash: 'tx1', blockNumber: 105 }).next
    expect(included.value).toBe('confirming')
    expect(included.context.blockNumber).toBe(105)
  })

  test('a reorg that leaves enough payments already in blocks keeps confirming, counted from the block that still settles', () => {
    // Nothing sends the inclusion of the payment that stayed again: in processing it would wait
    // forever.
    const ctx = {
      payments: [
        { txHash: 'tx1', amount: '1000', blockNumber: 100 },
        { txHash: 'tx2', amount: '1000', blockNumber: 99 },
      ],
      received: '2000',
    }
    const next = step('confirming', { type: 'payment.reorged', txHash: 'tx1' }, ctx).next
    expect(next.value).toBe('confirming')
    expect(next.context).toMatchObject({
      received: '1000',
      txHash: 'tx2',
      blockNumber: 99,
      confirmations: null,
    })
    expect(step(next, { type: 'confirmations.updated', confirmations: 3, at: 9 }).next.value).toBe(
      'completed',
    )
  })

  test('a reorg that leaves enough payments, not all in blocks yet, goes back to processing', () => {
    const ctx = {
      payments: [
        { txHash: 'tx1', amount: '1000', blockNumber: 100 },
        { txHash: 'tx2', amount: '1000', blockNumber: null },
      ],
      received: '2000',
    }
    const next = step('confirming', { type: 'payment.reorged', txHash: 'tx1' }, ctx).next
    expect(next.value).toBe('processing')
    expect(
      step(next, { type: 'payment.included', txHash: 'tx2', blockNumber: 101 }).next.value,
    ).toBe('confirming')
  })

  test('while confirming, the same inclusion judged twice (a block redelivered after a crash) is refused and the count is kept', () => {
    const s = at('confirming', {
      payments: [{ txHash: 'tx1', amount: '1000', blockNumber: 100 }],
      received: '1000',
      txHash: 'tx1',
      blockNumber: 100,
      confirmations: 2,
    })
    expect(s.can({ type: 'payment.included', txHash: 'tx1', blockNumber: 100 })).toBe(false)
    // Re-included in another block after a reorg: taken.
    expect(s.can({ type: 'payment.included', txHash: 'tx1', blockNumber: 101 })).toBe(true)
    // A payment detected in its block is still included when the transaction reaches processing.
    const processing = at('processing', {
      payments: [{ txHash: 'tx1', amount: '1000', blockNumber: 100 }],
      received: '1000',
    })
    expect(
      step(processing, { type: 'payment.included', txHash: 'tx1', blockNumber: 100 }).next.value,
    ).toBe('confirming')
  })

  test('events about unknown transfers are refused', () => {
    for (const type of ['payment.included', 'payment.reorged', 'payment.reverted'] as const) {
      expect(step('confirming', { type, txHash: 'nope', blockNumber: 1 } as TxEvent).can).toBe(
        false,
      )
    }
  })
})

describe('transactionMachine: the deadline (docs/decisions/0013-absolute-deadlines.md)', () => {
  test('an expiry event before the deadline is refused', () => {
    for (const s of ['created', 'prepared', 'pending'] as const)
      expect(step(s, { type: 'expiry.reached', at: DEADLINE - 1 }).can).toBe(false)
  })

  test('the timer child is armed with the absolute deadline in the waiting states and stopped after', () => {
    const armed: { at: number; stopped: boolean }[] = []
    const machine = transactionMachine.provide({
      actors: {
        expiryTimer: fromCallback<TimerFired, DeadlineInput>(({ input }) => {
          const entry = { at: input.at, stopped: false }
          armed.push(entry)
          return () => (entry.stopped = true)
        }),
      },
    })
    const actor = createActor(machine, {
      input: { transactionId: 't1', expiresAt: DEADLINE },
    }).start()
    expect(armed).toEqual([{ at: DEADLINE, stopped: false }])
    actor.send({ type: 'token.selected', quote })
    actor.send({ type: 'customer.confirmed' })
    actor.send({ type: 'payment.detected', txHash: 'x', amount: '1000' })
    expect(actor.getSnapshot().value).toBe('processing')
    expect(armed.every((e) => e.at === DEADLINE && e.stopped)).toBe(true)
    // Restoring a persisted waiting snapshot arms the timer again, with the same deadline.
    const waiting = createActor(machine, {
      input: { transactionId: 't2', expiresAt: DEADLINE },
    }).start()
    waiting.send({ type: 'token.selected', quote })
    waiting.send({ type: 'customer.confirmed' })
    const persisted = JSON.parse(JSON.stringify(waiting.getPersistedSnapshot()))
    waiting.stop()
    armed.length = 0
    createActor(machine, { snapshot: persisted } as never).start()
    expect(armed).toEqual([{ at: DEADLINE, stopped: false }])
  })

  test('when the timer fires, the machine does not move by itself: it asks for the expiry (emits expiry.due) and stays', () => {
    for (const status of ['created', 'prepared', 'pending'] as const) {
      const asked: number[] = []
      const actor = createActor(transactionMachine, { snapshot: at(status) } as never)
      actor.on('expiry.due', (e) => asked.push(e.at))
      actor.start()
      actor.send({ type: 'timer.fired', at: DEADLINE + 5 })
      expect(asked).toEqual([DEADLINE + 5])
      expect(actor.getSnapshot().value).toBe(status)
      expect(actor.getSnapshot().context).toEqual(at(status).context)
    }
    // Past the waiting states the timer is gone, and a stray firing is not taken.
    for (const status of ['processing', 'confirming'] as const)
      expect(at(status).can({ type: 'timer.fired', at: DEADLINE })).toBe(false)
  })
})
