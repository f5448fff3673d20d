import { describe, expect, test } from 'bun:test'
import { settledBlock } from '../../src/chain/settled-block.ts'

describe('settledBlock(): the newest block as final as a payment must be', () => {
  test('the head is the first confirmation: 12 confirmations deep below head 100 is block 89', () => {
    expect(settledBlock(100n, 12)).toBe(89n)
    expect(settledBlock(100n, 1)).toBe(100n)
  })

  test('at least one confirmation, and never below block 0 on a young chain', () => {
    expect(settledBlock(100n, 0)).toBe(100n)
    expect(settledBlock(5n, 12)).toBe(0n)
  })
})
