import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Address } from 'viem'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { MockAggregatorV3 } from '../../src/chain/artifacts/index.ts'
import {
  ANVIL_DEFAULT_MNEMONIC,
  createDevnetClient,
  deployMockAggregator,
  type DevnetClient,
} from '../../src/chain/devnet.ts'
import type { PriceSource } from '../../src/chain/networks-config.ts'
import { createPriceReader } from '../../src/chain/prices.ts'
import { quoteTokenUnits } from '../../src/chain/quote.ts'
import { manualClock, systemClock } from '../../src/lib/clock.ts'
import { bytesToHex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'

const ETH_3000 = 3000_00000000n
const HOUR = 3600

let node: AnvilNode
let client: DevnetClient

beforeAll(async () => {
  node = await startAnvil({ chainId: 31337 })
  const key = bytesToHex(mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC).getHdKey().privateKey!)
  client = createDevnetClient(node.rpcUrl, key)
})
afterAll(async () => {
  await node?.stop()
})

const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000))
const chainlink = (feed: Address, maxAgeSeconds = HOUR): { price: PriceSource } => ({
  price: { kind: 'chainlink', feed, maxAgeSeconds },
})

/** A fresh feed whose latest round is written verbatim. */
async function feedWithRound(round: {
  roundId?: bigint
  answer?: bigint
  updatedAt: bigint
  answeredInRound?: bigint
}): Promise<Address> {
  const feed = await deployMockAggregator(client, { answer: ETH_3000 })
  const roundId = round.roundId ?? 7n
  const hash = await client.writeContract({
    address: feed,
    abi: MockAggregatorV3.abi,
    functionName: 'setRoundData',
    args: [
      roundId,
      round.answer ?? ETH_3000,
      round.updatedAt,
      round.updatedAt,
      round.answeredInRound ?? roundId,
    ],
  })
  await client.waitForTransactionReceipt({ hash })
  return feed
}

describe('createPriceReader() against a real anvil feed', () => {
  test('read() returns a fresh feed answer with its decimals and round', async () => {
    const feed = await deployMockAggregator(client, { answer: ETH_3000 })
    const result = await createPriceReader({ client, clock: systemClock }).read(chainlink(feed))
    if (!result.ok) throw new Error(result.message)
    expect(result.answer).toBe(ETH_3000)
    expect(result.decimals).toBe(8)
    expect(result.roundId).toBe(1n)
    expect(Math.abs(result.updatedAt.getTime() - Date.now())).toBeLessThan(60_000)
    // and the answer quotes: $30.00 of ETH = 0.01 ETH
    expect(quoteTokenUnits(3000n, 18, result)).toBe(10n ** 16n)
  })

  test('read() follows updateAnswer() to the new round', async () => {
    const feed = await deployMockAggregator(client, { answer: ETH_3000 })
    const reader = createPriceReader({ client, clock: systemClock })
    expect((await reader.read(chainlink(feed))).ok).toBe(true)
    await client.waitForTransactionReceipt({
      hash: await client.writeContract({
        address: feed,
        abi: MockAggregatorV3.abi,
        functionName: 'updateAnswer',
        args: [2500_00000000n],
      }),
    })
    const result = await reader.read(chainlink(feed))
    expect(result.ok && [result.answer, result.roundId]).toEqual([2500_00000000n, 2n])
  })

  test('read() calls a feed older than maxAgeSeconds stale', async () => {
    const feed = await feedWithRound({ updatedAt: nowSeconds() - 2n * BigInt(HOUR) })
    const result = await createPriceReader({ client, clock: systemClock }).read(chainlink(feed))
    expect(result).toMatchObject({ ok: false, reason: 'stale' })
    if (!result.ok) expect(result.message).toContain('limit 3600 s')
  })

  test('read() judges age by the injected clock', async () => {
    const feed = await deployMockAggregator(client, { answer: ETH_3000 })
    const clock = manualClock()
    const reader = createPriceReader({ client, clock })
    expect((await reader.read(chainlink(feed, 600))).ok).toBe(true)
    clock.advance(601_000 + 2_000) // past the limit, with room for a block-second boundary
    expect(await reader.read(chainlink(feed, 600))).toMatchObject({ ok: false, reason: 'stale' })
  })

  test('read() calls an answer carried over from an older round stale', async () => {
    const feed = await feedWithRound({ roundId: 9n, answeredInRound: 8n, updatedAt: nowSeconds() })
    expect(
      await createPriceReader({ client, clock: systemClock }).read(chainlink(feed)),
    ).toMatchObject({ ok: false, reason: 'stale' })
  })

  test('read() refuses a negative or zero answer as invalid', async () => {
    const reader = createPriceReader({ client, clock: systemClock })
    const negative = await deployMockAggregator(client, { answer: -1n })
    expect(await reader.read(chainlink(negative))).toMatchObject({ ok: false, reason: 'invalid' })
    const zero = await deployMockAggregator(client, { answer: 0n })
    expect(await reader.read(chainlink(zero))).toMatchObject({ ok: false, reason: 'invalid' })
  })

  test('read() refuses an incomplete round (updatedAt 0) as invalid', async () => {
    const feed = await feedWithRound({ updatedAt: 0n })
    expect(
      await createPriceReader({ client, clock: systemClock }).read(chainlink(feed)),
    ).toMatchObject({ ok: false, reason: 'invalid' })
  })

  test('read() refuses a round dated more than a minute ahead as invalid, and tolerates small skew', async () => {
    const reader = createPriceReader({ client, clock: systemClock })
    const ahead = await feedWithRound({ updatedAt: nowSeconds() + BigInt(HOUR) })
    expect(await reader.read(chainlink(ahead))).toMatchObject({ ok: false, reason: 'invalid' })
    const slightly = await feedWithRound({ updatedAt: nowSeconds() + 20n })
    expect((await reader.read(chainlink(slightly))).ok).toBe(true)
  })

  test('read() reports a feed address without a contract as unavailable', async () => {
    const result = await createPriceReader({ client, clock: systemClock }).read(
      chainlink('0x000000000000000000000000000000000000dEaD'),
    )
    expect(result).toMatchObject({ ok: false, reason: 'unavailable' })
  })

  test('read() gives a fixed USD price exactly, without a client', async () => {
    const result = await createPriceReader({ clock: manualClock(1_000) }).read({
      price: { kind: 'fixedUsd', usd: '0.9998' },
    })
    expect(result).toEqual({
      ok: true,
      answer: 9998n,
      decimals: 4,
      updatedAt: new Date(1_000),
      source: { kind: 'fixed' },
    })
  })

  // Last: it stops the node.
  test('read() reports a stopped node as unavailable', async () => {
    const feed = await deployMockAggregator(client, { answer: ETH_3000 })
    const reader = createPriceReader({ client, clock: systemClock })
    expect((await reader.read(chainlink(feed))).ok).toBe(true) // decimals now cached
    await node.stop()
    const result = await reader.read(chainlink(feed))
    expect(result).toMatchObject({ ok: false, reason: 'unavailable' })
  })
})
