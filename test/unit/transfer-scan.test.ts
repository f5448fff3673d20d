import { describe, expect, test } from 'bun:test'
import { encodeAbiParameters, encodeEventTopics, parseAbiItem, type Address, type Hex } from 'viem'
import { decodeCursor, encodeCursor, memoryCursorStore } from '../../src/chain/follower/cursor.ts'
import {
  TRANSFER_TOPIC,
  decodeTransferLog,
  scanNativeTransactions,
  scanTransferLogs,
  topicToAddress,
  type RpcLogLike,
} from '../../src/chain/transfer-scan.ts'

const TOKEN = '0x5fbdb2315678afecb367f032d93f642f64180aa3' as Address
const OTHER_TOKEN = '0xe7f1725e7734ce288f8367e1bb143e90bb3f0512' as Address
const ALICE = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8' as Address
const DEPOSIT = '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc' as Address
const BLOCK_HASH = `0x${'ab'.repeat(32)}` as Hex
const TX = `0x${'cd'.repeat(32)}` as Hex
const pad = (a: string) => `0x${'0'.repeat(24)}${a.slice(2)}`

function transferLog(
  over: Partial<RpcLogLike> & { to?: string; amount?: bigint } = {},
): RpcLogLike {
  const { to = DEPOSIT, amount = 1_000_000n, ...rest } = over
  return {
    address: TOKEN,
    topics: [TRANSFER_TOPIC, pad(ALICE), pad(to)],
    data: encodeAbiParameters([{ type: 'uint256' }], [amount]),
    transactionHash: TX,
    logIndex: '0x3',
    blockNumber: '0x10',
    blockHash: BLOCK_HASH,
    ...rest,
  }
}

describe('decodeTransferLog()', () => {
  test('decodes what viem encodes for Transfer(address,address,uint256)', () => {
    const topics = encodeEventTopics({
      abi: [
        parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)'),
      ],
      args: { from: ALICE, to: DEPOSIT },
    })
    expect(topics[0]).toBe(TRANSFER_TOPIC)
    const log = transferLog({
      topics: topics as string[],
      data: encodeAbiParameters([{ type: 'uint256' }], [2n ** 256n - 1n]),
    })
    expect(decodeTransferLog(log)).toEqual({
      token: TOKEN,
      from: ALICE,
      to: DEPOSIT,
      amount: 2n ** 256n - 1n,
    })
  })

  test('lowercases a checksummed token address and mixed-case topics', () => {
    const log = transferLog({
      address: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
      topics: [TRANSFER_TOPIC, pad(ALICE), pad(DEPOSIT).toUpperCase().replace('0X', '0x')],
    })
    expect(decodeTransferLog(log)).toMatchObject({ token: TOKEN, to: DEPOSIT })
  })

  test('refuses ERC-721 transfers (tokenId indexed: 4 topics), wrong topic0, bad data and dirty address padding', () => {
    const bad: RpcLogLike[] = [
      transferLog({ topics: [TRANSFER_TOPIC, pad(ALICE), pad(DEPOSIT), pad(ALICE)], data: '0x' }),
      transferLog({ topics: [`0x${'11'.repeat(32)}`, pad(ALICE), pad(DEPOSIT)] }),
      transferLog({ data: '0x' }),
      transferLog({ data: `0x${'0'.repeat(62)}` }),
      transferLog({ data: `0x${'0'.repeat(128)}` }),
      transferLog({ data: `0x${'zz'.repeat(32)}` }),
      transferLog({
        topics: [TRANSFER_TOPIC, pad(ALICE), `0x${'ff'.repeat(12)}${DEPOSIT.slice(2)}`],
      }),
      transferLog({ topics: [TRANSFER_TOPIC, pad(ALICE), DEPOSIT] }),
    ]
    for (const log of bad) expect(decodeTransferLog(log)).toBeNull()
  })

  test('topicToAddress() needs exactly 12 zero bytes then 20 address bytes', () => {
    expect(topicToAddress(pad(DEPOSIT))).toBe(DEPOSIT)
    expect(topicToAddress(pad(DEPOSIT).slice(0, 65))).toBeNull()
  })
})

describe('scanTransferLogs()', () => {
  const watch = new Set([DEPOSIT])

  test('reports a Transfer to a watched address with token, amount, tx, logIndex and block', () => {
    expect(scanTransferLogs([transferLog({ amount: 25n })], watch)).toEqual([
      {
        kind: 'erc20',
        token: TOKEN,
        from: ALICE,
        to: DEPOSIT,
        amount: 25n,
        txHash: TX,
        logIndex: 3,
        blockNumber: 16n,
        blockHash: BLOCK_HASH,
      },
    ])
  })

  test('skips unwatched recipients, other tokens, malformed, removed and pending logs', () => {
    const logs = [
      transferLog({ to: ALICE }),
      transferLog({ address: OTHER_TOKEN }),
      transferLog({ data: '0x1234' }),
      transferLog({ removed: true }),
      transferLog({ blockHash: null, blockNumber: null, logIndex: null }),
    ]
    expect(scanTransferLogs(logs, watch, new Set([TOKEN]))).toEqual([])
    // Without a token filter the other token's Transfer counts.
    expect(scanTransferLogs(logs, watch).map((f) => f.token)).toEqual([OTHER_TOKEN])
  })

  test('reports two transfers to one address separately, in log order', () => {
    const logs = [
      transferLog({ amount: 1n, logIndex: '0x0' }),
      transferLog({ amount: 2n, logIndex: '0x1' }),
    ]
    expect(scanTransferLogs(logs, watch).map((f) => [f.amount, f.logIndex])).toEqual([
      [1n, 0],
      [2n, 1],
    ])
  })

  test('a zero-amount Transfer (address-poisoning spam) is no finding', () => {
    expect(scanTransferLogs([transferLog({ amount: 0n })], watch)).toEqual([])
  })

  test('matches 1,000 logs against 100,000 watched addresses in well under a block time', () => {
    const big = new Set<string>()
    for (let i = 0; i < 100_000; i++) big.add(`0x${i.toString(16).padStart(40, '0')}`)
    const logs = Array.from({ length: 1000 }, (_, i) =>
      transferLog({
        to: `0x${(i * 200).toString(16).padStart(40, '0')}`,
        logIndex: `0x${i.toString(16)}`,
      }),
    )
    const t0 = performance.now()
    const found = scanTransferLogs(logs, big, new Set([TOKEN]))
    const ms = performance.now() - t0
    expect(found.length).toBe(500) // i * 200 < 100,000 for i < 500
    expect(ms).toBeLessThan(100) // measured ~0.5 ms; generous for a noisy machine
  })
})

describe('scanNativeTransactions()', () => {
  const block = { number: 7n, hash: BLOCK_HASH }
  const tx = (to: string | null, value: string, hash = TX) => ({
    hash,
    from: ALICE.toUpperCase().replace('0X', '0x'),
    to,
    value,
  })

  test('reports top-level transfers with value to a watched address', () => {
    const found = scanNativeTransactions(
      {
        ...block,
        transactions: [tx(DEPOSIT.toUpperCase().replace('0X', '0x'), '0xde0b6b3a7640000')],
      },
      new Set([DEPOSIT]),
    )
    expect(found).toEqual([
      {
        kind: 'native',
        from: ALICE,
        to: DEPOSIT,
        amount: 10n ** 18n,
        txHash: TX,
        blockNumber: 7n,
        blockHash: BLOCK_HASH,
      },
    ])
  })

  test('skips zero value, unwatched recipients, contract creations and hash-only transaction lists', () => {
    const transactions = [
      tx(DEPOSIT, '0x0'),
      tx(ALICE, '0x1'),
      tx(null, '0x5'),
      TX,
      tx(DEPOSIT, 'nonsense'),
    ]
    expect(scanNativeTransactions({ ...block, transactions }, new Set([DEPOSIT]))).toEqual([])
  })
})

describe('cursor persistence', () => {
  test('encodeCursor() / decodeCursor() round-trip heights and hashes', () => {
    const cursor = {
      height: 12n,
      recent: [
        { number: 11n, hash: BLOCK_HASH },
        { number: 12n, hash: TX },
      ],
    }
    expect(decodeCursor(encodeCursor(cursor))).toEqual(cursor)
  })

  test('decodeCursor() refuses a malformed cursor rather than follow a wrong chain', () => {
    for (const bad of [
      '{}',
      '{"height":"1","recent":[["1","0x12"]]}',
      '{"height":1,"recent":[]}',
      '{"height":"x","recent":[]}',
    ]) {
      expect(() => decodeCursor(bad)).toThrow()
    }
  })

  test('memoryCursorStore() hands out copies, so a caller cannot change what was saved', async () => {
    const store = memoryCursorStore()
    expect(await store.load()).toBeNull()
    const cursor = { height: 1n, recent: [{ number: 1n, hash: BLOCK_HASH }] }
    await store.save(cursor)
    cursor.recent.push({ number: 2n, hash: TX })
    const loaded = (await store.load())!
    loaded.recent.length = 0
    expect(await store.load()).toEqual({ height: 1n, recent: [{ number: 1n, hash: BLOCK_HASH }] })
  })
})
