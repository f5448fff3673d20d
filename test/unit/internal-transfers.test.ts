import { describe, expect, test } from 'bun:test'
import type { Address, Hex } from 'viem'
import { internalTransfers } from '../../src/chain/follower/findings.ts'
import type { NativeFinding } from '../../src/chain/transfer-scan.ts'

const A = '0x00000000000000000000000000000000000000aa'
const B = '0x00000000000000000000000000000000000000bb'
const block = { number: 7n, hash: `0x${'7'.repeat(64)}` as Hex }
const listed = (to: string, amount: bigint): NativeFinding => ({
  kind: 'native',
  from: B as Address,
  to: to as Address,
  amount,
  txHash: `0x${'1'.repeat(64)}`,
  blockNumber: 7n,
  blockHash: block.hash,
})

describe('internalTransfers(): native coin that arrived without a listed transaction', () => {
  test('the balance beyond what was credited and what the chunk lists arrived by an internal call, recorded in the block', () => {
    const found = internalTransfers(block, new Map([[A, { balance: 10n, credited: 3n }]]), [
      listed(A, 2n),
    ])
    expect(found).toEqual([
      {
        kind: 'native',
        internal: true,
        from: '0x0000000000000000000000000000000000000000',
        to: A,
        amount: 5n,
        txHash: block.hash,
        blockNumber: 7n,
        blockHash: block.hash,
      },
    ])
  })

  test('nothing when the listed transfers and earlier credits explain the balance; nothing when money left', () => {
    expect(
      internalTransfers(block, new Map([[A, { balance: 5n, credited: 3n }]]), [listed(A, 2n)]),
    ).toEqual([])
    expect(internalTransfers(block, new Map([[A, { balance: 0n, credited: 3n }]]), [])).toEqual([])
  })

  test('each address on its own: a transfer listed to one explains nothing of another', () => {
    const found = internalTransfers(
      block,
      new Map([
        [A, { balance: 4n, credited: 0n }],
        [B, { balance: 1n, credited: 0n }],
      ]),
      [listed(A, 4n)],
    )
    expect(found.map((f) => [f.to, f.amount])).toEqual([[B, 1n]])
  })
})
