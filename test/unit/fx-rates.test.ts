import { describe, expect, test } from 'bun:test'
import { createRateBook } from '../../src/chain/fx-rates.ts'
import type { NetworkConfig, RateSource } from '../../src/chain/networks-config.ts'
import type { PriceReader, PriceResult } from '../../src/chain/prices.ts'
import { manualClock } from '../../src/lib/clock.ts'

const FEED_A = '0x1a81afB8146aeFfCFc5E50e8479e826E7D55b910'
const FEED_B = '0x91FAB41F5f3bE955963a986366edAcff1aaeaa83'

const network = (
  name: string,
  testnet: boolean,
  fx: { currency: string; rate: RateSource }[],
): NetworkConfig => ({
  name,
  chainId: name.length,
  rpcUrl: 'http://127.0.0.1:1',
  fallbackRpcUrls: [],
  wsUrl: null,
  confirmations: 1,
  finality: 'confirmations',
  pollIntervalMs: 1000,
  maxLogRange: 1000,
  maxRequestsPerSecond: null,
  testnet,
  tokens: [],
  fx,
})
const feed = (address: string, maxAgeSeconds = 3600): RateSource => ({
  kind: 'chainlink',
  feed: address as `0x${string}`,
  maxAgeSeconds,
})

/** Readers that answer from a table per network, counting the calls. */
function readers(answers: Record<string, (feed: string) => PriceResult>) {
  const calls: string[] = []
  return {
    calls,
    reader: (n: string): PriceReader => ({
      async read({ price }) {
        calls.push(n)
        if (price.kind !== 'chainlink') throw new Error('only feeds here')
        return answers[n]!(price.feed)
      },
    }),
  }
}
const answer = (usd: bigint, updatedAt: number, network = 'eth'): PriceResult => ({
  ok: true,
  answer: usd,
  decimals: 8,
  updatedAt: new Date(updatedAt),
  roundId: 7n,
  source: { kind: 'chainlink', network, feed: FEED_A },
})
const down: PriceResult = { ok: false, reason: 'unavailable', message: 'node down' }

describe('rate book', () => {
  test('offers USD and each currency a network of the mode carries, per mode', () => {
    const book = createRateBook({
      networks: [
        network('eth', false, [
          { currency: 'GBP', rate: feed(FEED_A) },
          { currency: 'EUR', rate: feed(FEED_B) },
        ]),
        network('sep', true, [{ currency: 'JPY', rate: feed(FEED_A) }]),
      ],
      readers: () => null,
      clock: manualClock(0),
    })
    expect(book.offered('live')).toEqual(['USD', 'EUR', 'GBP'])
    expect(book.offered('test')).toEqual(['USD', 'JPY'])
  })

  test('current() answers from the last read, without calling, while it is current', async () => {
    const clock = manualClock(1_000_000)
    const r = readers({ eth: () => answer(108_000_000n, clock.now()) })
    const book = createRateBook({
      networks: [network('eth', false, [{ currency: 'EUR', rate: feed(FEED_A, 3600) }])],
      readers: r.reader,
      clock,
      maxCachedMs: 300_000,
    })
    expect(book.current('live', 'EUR')).toBeNull() // nothing read yet
    expect(await book.read('live', 'EUR')).toMatchObject({ ok: true, answer: 108_000_000n })
    expect(r.calls).toEqual(['eth'])
    clock.advance(299_000)
    expect(book.current('live', 'EUR')).toMatchObject({ ok: true, answer: 108_000_000n })
    expect(r.calls).toEqual(['eth'])
    // Read too long ago (the node has been silent): not current.
    clock.advance(2_000)
    expect(book.current('live', 'EUR')).toBeNull()
    // USD needs no rate.
    expect(book.current('live', 'USD')).toMatchObject({ ok: true, answer: 1n, decimals: 0 })
  })

  test("a round older than the feed's maxAgeSeconds is not current, however recently read", async () => {
    const clock = manualClock(10_000_000)
    const roundAt = clock.now() - 3_500_000 // 3,500 s old at the read
    const book = createRateBook({
      networks: [network('eth', false, [{ currency: 'EUR', rate: feed(FEED_A, 3600) }])],
      readers: readers({ eth: () => answer(108_000_000n, roundAt) }).reader,
      clock,
    })
    await book.read('live', 'EUR')
    expect(book.current('live', 'EUR')).not.toBeNull()
    clock.advance(101_000) // the round is now 3,601 s old
    expect(book.current('live', 'EUR')).toBeNull()
  })

  test('asks the next network only when one cannot be reached; a stale answer is the verdict', async () => {
    const clock = manualClock(5_000_000)
    let first: PriceResult = down
    const r = readers({
      a: () => first,
      b: () => answer(127_000_000n, clock.now(), 'b'),
    })
    const book = createRateBook({
      networks: [
        network('a', false, [{ currency: 'GBP', rate: feed(FEED_A) }]),
        network('b', false, [{ currency: 'GBP', rate: feed(FEED_B) }]),
      ],
      readers: r.reader,
      clock,
    })
    expect(await book.read('live', 'GBP')).toMatchObject({ ok: true, answer: 127_000_000n })
    expect(r.calls).toEqual(['a', 'b'])
    first = { ok: false, reason: 'stale', message: 'old round' }
    expect(await book.read('live', 'GBP')).toMatchObject({ ok: false, reason: 'stale' })
    expect(r.calls).toEqual(['a', 'b', 'a'])
  })

  test('a network not verified against its chain is never asked', async () => {
    const r = readers({ eth: () => answer(1n, 0) })
    const book = createRateBook({
      networks: [network('eth', false, [{ currency: 'EUR', rate: feed(FEED_A) }])],
      readers: r.reader,
      verified: () => false,
      clock: manualClock(0),
    })
    expect(await book.read('live', 'EUR')).toMatchObject({ ok: false, reason: 'unavailable' })
    expect(r.calls).toEqual([])
  })
})

test('callers reading a currency at once share one read', async () => {
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  let calls = 0
  const book = createRateBook({
    networks: [network('eth', false, [{ currency: 'EUR', rate: feed(FEED_A) }])],
    readers: () => ({
      async read() {
        calls++
        await gate
        return answer(108_000_000n, 0)
      },
    }),
    clock: manualClock(0),
  })
  const reads = [book.read('live', 'EUR'), book.read('live', 'EUR'), book.read('live', 'EUR')]
  release()
  for (const r of await Promise.all(reads)) expect(r).toMatchObject({ ok: true })
  expect(calls).toBe(1)
  await book.read('live', 'EUR')
  expect(calls).toBe(2)
})
