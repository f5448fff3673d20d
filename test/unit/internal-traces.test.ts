/**
 * Naming native coin that arrived by a contract's internal call: the call trees geth's
 * callTracer gives and the flat traces of Parity's trace_block, read into the value transfers below
 * each transaction's top call (a reverted call, and everything under it, moved nothing); a node
 * that answers neither is not asked again for an hour.
 */
import { describe, expect, test } from 'bun:test'
import { RpcRequestError } from 'viem'
import { createTraceReader } from '../../src/chain/follower/internal-traces.ts'
import { manualClock } from '../../src/lib/clock.ts'

const BLOCK = {
  number: 21n,
  hash: '0xbb00000000000000000000000000000000000000000000000000000000000021' as const,
}
const DEPOSIT = '0x00000000000000000000000000000000000000d1'
const SAFE = '0x00000000000000000000000000000000000000a5'
const T1 = `0x${'a1'.repeat(32)}`
const T2 = `0x${'a2'.repeat(32)}`
const refused = (method: string) =>
  new RpcRequestError({
    body: { method },
    url: 'http://node',
    error: { code: -32601, message: `the method ${method} does not exist/is not available` },
  })

describe('createTraceReader', () => {
  test('callTracer trees: a value call below the top is an internal transfer; a reverted branch moved nothing', async () => {
    const reader = createTraceReader(async (method) => {
      expect(method).toBe('debug_traceBlockByHash')
      return [
        {
          txHash: T1,
          result: {
            type: 'CALL',
            from: '0xeoa',
            to: SAFE,
            value: '0x5',
            calls: [
              { type: 'CALL', from: SAFE, to: DEPOSIT, value: '0x3' },
              {
                type: 'CALL',
                from: SAFE,
                to: '0xelse',
                value: '0x2',
                error: 'execution reverted',
                calls: [{ type: 'CALL', from: '0xelse', to: DEPOSIT, value: '0x2' }],
              },
              { type: 'STATICCALL', from: SAFE, to: DEPOSIT },
            ],
          },
        },
        // The top call itself is a listed transfer, found by the block scan.
        { txHash: T2, result: { type: 'CALL', from: '0xeoa', to: DEPOSIT, value: '0x9' } },
      ]
    })
    expect(await reader.internalTransfers(BLOCK)).toEqual([
      { txHash: T1, from: SAFE, to: DEPOSIT, value: 3n },
    ])
  })

  test('trees that do not name their transactions (older geth): only the block is known', async () => {
    const reader = createTraceReader(async (method) => {
      if (method === 'debug_traceBlockByHash')
        return [
          {
            result: {
              type: 'CALL',
              from: '0xeoa',
              to: SAFE,
              value: '0x5',
              calls: [{ type: 'CALL', from: SAFE, to: DEPOSIT, value: '0x3' }],
            },
          },
        ]
      throw refused(method)
    })
    expect(await reader.internalTransfers(BLOCK)).toBeNull()
  })

  test('Parity traces, where callTracer is refused: calls with a path, self-destructs, and nothing under a reverted frame', async () => {
    const reader = createTraceReader(async (method) => {
      if (method === 'debug_traceBlockByHash') throw refused(method)
      return [
        {
          type: 'call',
          action: { callType: 'call', from: '0xeoa', to: SAFE, value: '0x9' },
          traceAddress: [],
          transactionHash: T1,
          blockHash: BLOCK.hash,
        },
        {
          type: 'call',
          action: { callType: 'call', from: SAFE, to: DEPOSIT, value: '0x4' },
          traceAddress: [0],
          transactionHash: T1,
          blockHash: BLOCK.hash,
        },
        {
          type: 'call',
          action: { callType: 'call', from: SAFE, to: '0xelse', value: '0x1' },
          traceAddress: [1],
          transactionHash: T1,
          blockHash: BLOCK.hash,
          error: 'Reverted',
        },
        {
          type: 'call',
          action: { callType: 'call', from: '0xelse', to: DEPOSIT, value: '0x1' },
          traceAddress: [1, 0],
          transactionHash: T1,
          blockHash: BLOCK.hash,
        },
        {
          type: 'call',
          action: { callType: 'delegatecall', from: SAFE, to: '0xlib', value: '0x0' },
          traceAddress: [2],
          transactionHash: T1,
          blockHash: BLOCK.hash,
        },
        {
          type: 'suicide',
          action: { address: '0xdead', refundAddress: DEPOSIT, balance: '0x7' },
          traceAddress: [0],
          transactionHash: T2,
          blockHash: BLOCK.hash,
        },
      ]
    })
    expect(await reader.internalTransfers(BLOCK)).toEqual([
      { txHash: T1, from: SAFE, to: DEPOSIT, value: 4n },
      { txHash: T2, from: '0xdead', to: DEPOSIT, value: 7n },
    ])
  })

  test('traces of another block at that height (the chain moved) name nothing this time, and the node is asked again next time', async () => {
    let calls = 0
    const reader = createTraceReader(async (method) => {
      calls++
      if (method === 'debug_traceBlockByHash') throw refused(method)
      return [
        {
          type: 'call',
          action: { callType: 'call', from: SAFE, to: DEPOSIT, value: '0x4' },
          traceAddress: [0],
          transactionHash: T1,
          blockHash: `0x${'cc'.repeat(32)}`,
        },
      ]
    })
    expect(await reader.internalTransfers(BLOCK)).toBeNull()
    expect(await reader.internalTransfers(BLOCK)).toBeNull()
    expect(calls).toBe(4)
  })

  test('a node that refuses both methods: only the block is known, and it is not asked again for an hour', async () => {
    const clock = manualClock(1_000_000)
    let calls = 0
    const reader = createTraceReader(async (method) => {
      calls++
      throw refused(method)
    }, clock)
    expect(await reader.internalTransfers(BLOCK)).toBeNull()
    expect(calls).toBe(2)
    clock.advance(3_599_000)
    expect(await reader.internalTransfers(BLOCK)).toBeNull()
    expect(calls).toBe(2)
    clock.advance(2_000)
    await reader.internalTransfers(BLOCK)
    expect(calls).toBe(4)
  })

  test('a node that does not answer at all is not taken for one that cannot trace: the follower tries again', async () => {
    const reader = createTraceReader(async () => {
      throw new Error('connect ECONNREFUSED')
    })
    await expect(reader.internalTransfers(BLOCK)).rejects.toThrow('ECONNREFUSED')
  })
})
