import { describe, expect, test } from 'bun:test'
import {
  createOutgoingTracker,
  type OutgoingItem,
  type OutgoingNews,
} from '../../src/chain/outgoing-tracker.ts'
import type { RpcClient } from '../../src/chain/rpc.ts'

const HASH = `0x${'aa'.repeat(32)}`
const SENDER = `0x${'11'.repeat(20)}`
const [X, Y] = [`0x${'0a'.repeat(32)}`, `0x${'0b'.repeat(32)}`]

/**
 * A node that answers as scripted: the transaction mined (reverted) in block 16 as `Y`, the sender
 * at nonce 5.
 */
function node(receipt: { blockHash: string; status: '0x0' | '0x1' } | null) {
  const answers: Record<string, (params: unknown[]) => unknown> = {
    eth_getTransactionCount: () => '0x5',
    eth_getTransactionReceipt: () =>
      receipt
        ? {
            blockNumber: '0x10',
            blockHash: receipt.blockHash,
            status: receipt.status,
            gasUsed: '0x5208',
            effectiveGasPrice: '0x1',
            logs: [],
          }
        : null,
    eth_getBlockByNumber: (p) => ({
      hash: p[0] === '0x10' ? Y : `0x${'cc'.repeat(32)}`,
      timestamp: '0x64',
    }),
  }
  return {
    request: async ({ method, params }: { method: string; params: unknown[] }) =>
      answers[method]!(params),
  } as unknown as RpcClient
}

/** The news one head brings an item last seen in `blockHash` (null: never in a block). */
async function newsAt(head: bigint, blockHash: string | null, receipt: Parameters<typeof node>[0]) {
  const news: OutgoingNews['type'][] = []
  const item: OutgoingItem = {
    id: 'x',
    txHash: HASH,
    sender: SENDER,
    nonce: 4,
    blockHash,
    confirmations: blockHash ? 1 : null,
    settle: async (n) => void news.push(n.type),
  }
  const tracker = createOutgoingTracker({
    network: 'n',
    client: node(receipt),
    ledgers: [{ inFlight: async () => [item] }],
    confirmations: 3,
    maxLogRange: 1000,
  })
  await tracker.onHead(head)
  return news
}

describe('the outgoing tracker', () => {
  test('a transaction seen in a block that a reorg mined again elsewhere, reverting, is taken back first, then reverted at its confirmations', async () => {
    expect(await newsAt(17n, X, { blockHash: Y, status: '0x0' })).toEqual(['reorged'])
    expect(await newsAt(18n, X, { blockHash: Y, status: '0x0' })).toEqual(['reorged', 'reverted'])
  })
  test('a reverted transaction never seen in a block before is reverted at its confirmations only', async () => {
    expect(await newsAt(17n, null, { blockHash: Y, status: '0x0' })).toEqual([])
    expect(await newsAt(18n, null, { blockHash: Y, status: '0x0' })).toEqual(['reverted'])
  })
  test('a success in another block than before is included there, then counts its confirmations', async () => {
    expect(await newsAt(18n, X, { blockHash: Y, status: '0x1' })).toEqual([
      'included',
      'confirmations',
    ])
  })
})
