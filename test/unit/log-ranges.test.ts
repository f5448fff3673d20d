import { describe, expect, test } from 'bun:test'
import type { Address } from 'viem'
import { createLogRanges, isRangeRefusal } from '../../src/chain/follower/log-ranges.ts'
import type { RpcLogLike } from '../../src/chain/transfer-scan.ts'

const TOKEN = '0x00000000000000000000000000000000000000aa' as Address

/** A provider that takes at most `limit` blocks a call and answers one log per block asked. */
function provider(limit: number, refusal = 'query exceeds max block range 1000') {
  const asked: [number, number][] = []
  const rpc = async (method: string, params: unknown[]) => {
    expect(method).toBe('eth_getLogs')
    const f = params[0] as { fromBlock: string; toBlock: string }
    const from = Number(BigInt(f.fromBlock))
    const to = Number(BigInt(f.toBlock))
    asked.push([from, to])
    if (to - from + 1 > limit) throw new Error(refusal)
    const logs: Partial<RpcLogLike>[] = []
    for (let n = from; n <= to; n++) logs.push({ blockNumber: `0x${n.toString(16)}` })
    return logs
  }
  return { asked, rpc }
}

const heights = (logs: RpcLogLike[]) => logs.map((l) => Number(BigInt(l.blockNumber!)))
const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i)

describe('createLogRanges(): eth_getLogs over a range the provider may refuse', () => {
  test('a range within maxLogRange is asked in calls of at most that span, all at once', async () => {
    const p = provider(1000)
    const ranges = createLogRanges({
      rpc: p.rpc,
      tokens: [TOKEN],
      maxLogRange: 4,
      stopped: () => false,
      network: 'test',
    })
    expect(heights(await ranges.logs(10n, 19n))).toEqual(range(10, 19))
    expect(p.asked).toEqual([
      [10, 13],
      [14, 17],
      [18, 19],
    ])
  })

  test('a refused range is asked again in halves down to what the provider takes, and the narrower span is kept', async () => {
    const p = provider(3)
    const refused: unknown[] = []
    const ranges = createLogRanges({
      rpc: p.rpc,
      tokens: [TOKEN],
      maxLogRange: 10,
      stopped: () => false,
      network: 'test',
      onRefused: (e) => refused.push(e),
    })
    expect(heights(await ranges.logs(0n, 9n))).toEqual(range(0, 9))
    expect(ranges.span()).toBe(3)
    expect(refused.length).toBeGreaterThan(0)
    p.asked.length = 0
    refused.length = 0
    expect(heights(await ranges.logs(10n, 15n))).toEqual(range(10, 15))
    // The next range starts at the span found: no refusal this time.
    expect(p.asked).toEqual([
      [10, 12],
      [13, 15],
    ])
    expect(refused).toEqual([])
  })

  test('a single block refused is an error, not split further', async () => {
    const p = provider(0)
    const ranges = createLogRanges({
      rpc: p.rpc,
      tokens: [TOKEN],
      maxLogRange: 1,
      stopped: () => false,
      network: 'test',
    })
    await expect(ranges.logs(5n, 5n)).rejects.toThrow('max block range')
  })

  test('an error that is not a range refusal (a rate limit, a node down) is thrown as is, unsplit', async () => {
    for (const message of ['429 Too Many Requests', 'fetch failed: ECONNREFUSED']) {
      const p = provider(1, message)
      const ranges = createLogRanges({
        rpc: p.rpc,
        tokens: [TOKEN],
        maxLogRange: 8,
        stopped: () => false,
        network: 'test',
      })
      await expect(ranges.logs(0n, 7n)).rejects.toThrow(message)
      expect(p.asked).toEqual([[0, 7]])
      expect(ranges.span()).toBe(8)
    }
  })

  test('once the follower stopped, a refusal is not split (the call was aborted with it)', async () => {
    const p = provider(1)
    const ranges = createLogRanges({
      rpc: p.rpc,
      tokens: [TOKEN],
      maxLogRange: 8,
      stopped: () => true,
      network: 'test',
    })
    await expect(ranges.logs(0n, 7n)).rejects.toThrow('max block range')
    expect(p.asked).toEqual([[0, 7]])
  })

  test('no watched token: nothing is asked', async () => {
    const p = provider(1000)
    const ranges = createLogRanges({
      rpc: p.rpc,
      tokens: [],
      maxLogRange: 8,
      stopped: () => false,
      network: 'test',
    })
    expect(await ranges.logs(0n, 100n)).toEqual([])
    expect(p.asked).toEqual([])
  })
})

describe('isRangeRefusal()', () => {
  test("knows the big providers' words for a range or answer too large", () => {
    for (const message of [
      'block range too large',
      'exceed maximum block range: 5000',
      'query returned more than 10000 results',
      'Log response size exceeded',
      'eth_getLogs is limited to a 10,000 range limit',
    ])
      expect({ message, refused: isRangeRefusal(new Error(message)) }).toEqual({
        message,
        refused: true,
      })
  })

  test('a rate limit, or anything else, is not one', () => {
    expect(isRangeRefusal(new Error('429: too many requests, block range 5'))).toBe(false)
    expect(isRangeRefusal(new Error('execution reverted'))).toBe(false)
    expect(
      isRangeRefusal(
        Object.assign(new Error('wrapped'), { cause: new Error('block range too large') }),
      ),
    ).toBe(true)
  })
})
