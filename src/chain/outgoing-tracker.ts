/**
 * Watches the transactions the merchant's treasury tool sent and recorded here
 * (docs/decisions/0040-the-service-records-only-what-it-verifies.md: sweeps and refund payments)
 * until they are settled, on each head the network's follower reports. Each one is looked up by its
 * hash every head while in flight:
 *  - its receipt in a block the follower has processed, whose hash is the canonical block's at
 *    that height: `included`, then its confirmations as the head moves; a reverted receipt is
 *    `reverted` once it has the network's confirmations (a reorg may still put it elsewhere);
 *  - no receipt (or one from a block no longer canonical, or a reverted one in another block)
 *    after it was in a block: `reorged`, so nothing completes on a payment a reorg took back;
 *  - no receipt, and its sender's nonce at a block the network's confirmations deep (read before
 *    the receipt, so a transaction mined in between is not taken for a lost one) had gone past it
 *    on every head for as many blocks: `dropped` (another transaction took the nonce, so this one
 *    can never be mined);
 *  - no receipt otherwise: `unmined`, on every head (a refund's signed payment can be delivered
 *    by another transaction, or lapse unsent; its ledger asks the chain which).
 * What each piece of news means is the ledger's business (refunds, sweeps); this module only reads
 * the chain. A failure here is logged and tried again at the next head; it never holds up payments.
 */
import type { Hex } from 'viem'
import type { RpcClient } from './rpc.ts'
import { settledBlock } from './settled-block.ts'

export interface OutgoingReceipt {
  blockNumber: number
  blockHash: string
  status: 'success' | 'reverted'
  gasUsed: bigint
  effectiveGasPrice: bigint
  /** The L1 data fee an OP Stack chain charged on top (null elsewhere). */
  l1Fee: bigint | null
  logs: { address: string; topics: readonly Hex[]; data: Hex; logIndex: number | null }[]
}

export type OutgoingNews =
  | { type: 'included'; blockNumber: number; blockHash: string; receipt: OutgoingReceipt }
  | { type: 'reverted'; blockNumber: number; blockHash: string; receipt: OutgoingReceipt }
  | { type: 'reorged' }
  | { type: 'dropped' }
  /**
   * Not in a block, its nonce not taken: it may be mined yet, or (a signature that lapsed) never
   * move anything.
   */
  | { type: 'unmined' }
  /**
   * `final`: on a network that waits for its safe or finalized block, whether that has reached the
   * transaction's.
   */
  | { type: 'confirmations'; confirmations: number; final?: boolean; receipt: OutgoingReceipt }

/** What a ledger may ask of the network while it settles a piece of news. */
export interface OutgoingChain {
  /** A JSON-RPC call to the network's node. */
  request(method: string, params: unknown[]): Promise<unknown>
  /** The height the follower has processed. */
  head: bigint
  /**
   * The time (seconds since the epoch, as the chain says) of the newest block as final as a payment
   * must be: the network's confirmations deep, or its safe or finalized block. A transaction that
   * could only have been mined before this time, and is not on the chain at `head`, never will be.
   */
  settledTimestamp(): Promise<bigint>
  /** The most blocks one eth_getLogs may span on this network. */
  maxLogRange: number
}

/** A recorded transaction in flight, as its ledger last left it. */
export interface OutgoingItem {
  id: string
  /** Lowercase. */
  txHash: string
  /** Lowercase; null when not known (then it is never judged dropped). */
  sender: string | null
  nonce: number | null
  /** The block it was last seen in; null while not in one. */
  blockHash: string | null
  confirmations: number | null
  settle(news: OutgoingNews, chain: OutgoingChain): Promise<void>
}

export interface OutgoingLedger {
  inFlight(network: string): Promise<OutgoingItem[]>
}

const quantity = (n: number | bigint) => `0x${n.toString(16)}`
const big = (v: unknown) => (typeof v === 'string' && /^0x[0-9a-fA-F]+$/.test(v) ? BigInt(v) : null)

/**
 * One network's tracker: `onHead` after the follower processed up to `head` (and, on a finality
 * network, `final`).
 */
export function createOutgoingTracker(deps: {
  network: string
  client: RpcClient
  ledgers: readonly OutgoingLedger[]
  confirmations: number
  maxLogRange: number
}) {
  const rpc = (method: string, params: unknown[]) => deps.client.request({ method, params })
  /**
   * Transactions whose nonce another one took, by hash: the head from which that was seen without a
   * break.
   */
  const passedSince = new Map<string, bigint>()

  function receiptOf(raw: unknown): OutgoingReceipt | null {
    const r = raw as Record<string, unknown> | null
    const blockNumber = big(r?.blockNumber)
    if (!r || blockNumber === null || typeof r.blockHash !== 'string') return null
    return {
      blockNumber: Number(blockNumber),
      blockHash: r.blockHash.toLowerCase(),
      status: r.status === '0x1' ? 'success' : 'reverted',
      gasUsed: big(r.gasUsed) ?? 0n,
      effectiveGasPrice: big(r.effectiveGasPrice) ?? 0n,
      l1Fee: big(r.l1Fee),
      logs: Array.isArray(r.logs)
        ? (r.logs as Record<string, unknown>[]).map((l) => ({
            address: String(l.address).toLowerCase(),
            topics: (l.topics as Hex[]) ?? [],
            data: (l.data as Hex) ?? '0x',
            logIndex: big(l.logIndex) === null ? null : Number(big(l.logIndex)),
          }))
        : [],
    }
  }

  return {
    async onHead(head: bigint, final?: bigint): Promise<void> {
      const items = (await Promise.all(deps.ledgers.map((l) => l.inFlight(deps.network)))).flat()
      for (const hash of passedSince.keys())
        if (!items.some((i) => i.txHash === hash)) passedSince.delete(hash)
      if (items.length === 0) return
      // The confirmed depth: where nonces are read, and (or the final block) whose time settles a
      // lapsed signature.
      const depth = settledBlock(head, deps.confirmations)
      const settledAt = final ?? depth
      let timestamp: Promise<bigint> | null = null
      const chain: OutgoingChain = {
        request: rpc,
        head,
        maxLogRange: deps.maxLogRange,
        // No block, no time: 0 concludes nothing.
        settledTimestamp: () =>
          (timestamp ??= rpc('eth_getBlockByNumber', [quantity(settledAt), false]).then(
            (b) => big((b as { timestamp?: unknown } | null)?.timestamp) ?? 0n,
          )),
      }
      // Nonces first (one read after the receipts could take a transaction mined in between for a
      // lost one), at the confirmed depth where the node still has that state, else at the head.
      const nonces = new Map<string, bigint>()
      await Promise.all(
        [...new Set(items.flatMap((i) => (i.sender ? [i.sender] : [])))].map(async (s) => {
          const n = big(
            await rpc('eth_getTransactionCount', [s, quantity(depth)]).catch(() =>
              rpc('eth_getTransactionCount', [s, 'latest']),
            ),
          )
          if (n !== null) nonces.set(s, n)
        }),
      )
      const receipts = (
        await Promise.all(items.map((i) => rpc('eth_getTransactionReceipt', [i.txHash])))
      ).map(receiptOf)
      // Only blocks the follower has processed count, and only while canonical: read each one's
      // hash at its height.
      const heights = [
        ...new Set(
          receipts.flatMap((r) => (r && BigInt(r.blockNumber) <= head ? [r.blockNumber] : [])),
        ),
      ]
      const canonical = new Map<number, string>()
      await Promise.all(
        heights.map(async (n) => {
          const b = (await rpc('eth_getBlockByNumber', [quantity(n), false])) as {
            hash?: string
          } | null
          if (b?.hash) canonical.set(n, b.hash.toLowerCase())
        }),
      )
      for (let i = 0; i < items.length; i++) {
        const item = items[i]!
        const receipt = receipts[i]
        const inBlock =
          receipt && canonical.get(receipt.blockNumber) === receipt.blockHash ? receipt : null
        if (!inBlock) {
          // A receipt from a block past what the follower has processed: wait for the follower.
          if (receipt && BigInt(receipt.blockNumber) > head) continue
          if (item.blockHash !== null) await item.settle({ type: 'reorged' }, chain)
          const passed =
            !receipt &&
            item.sender !== null &&
            item.nonce !== null &&
            (nonces.get(item.sender) ?? -1n) > BigInt(item.nonce)
          if (!passed) {
            passedSince.delete(item.txHash)
            if (!receipt) await item.settle({ type: 'unmined' }, chain)
          } else if (!passedSince.has(item.txHash)) passedSince.set(item.txHash, head)
          else if (
            head - passedSince.get(item.txHash)! + 1n >=
            BigInt(Math.max(2, deps.confirmations))
          ) {
            passedSince.delete(item.txHash)
            await item.settle({ type: 'dropped' }, chain)
          }
          continue
        }
        passedSince.delete(item.txHash)
        const at = {
          blockNumber: inBlock.blockNumber,
          blockHash: inBlock.blockHash,
          receipt: inBlock,
        }
        const confirmations = Number(head - BigInt(inBlock.blockNumber) + 1n)
        const reached = final === undefined ? undefined : final >= BigInt(inBlock.blockNumber)
        const moved = item.blockHash !== inBlock.blockHash
        if (inBlock.status === 'reverted') {
          // Seen in a block before, and a reorg mined it again, reverting this time: taken back
          // first.
          if (moved && item.blockHash !== null) await item.settle({ type: 'reorged' }, chain)
          // Settled only once it is as final as a success would be: a reorg may still mine it
          // elsewhere.
          if (reached === undefined ? confirmations >= deps.confirmations : reached)
            await item.settle({ type: 'reverted', ...at }, chain)
          continue
        }
        if (moved) await item.settle({ type: 'included', ...at }, chain)
        if (!moved && confirmations === item.confirmations && reached !== true) continue
        await item.settle(
          {
            type: 'confirmations',
            confirmations,
            receipt: inBlock,
            ...(reached === undefined ? {} : { final: reached }),
          },
          chain,
        )
      }
    },
  }
}

export type OutgoingTracker = ReturnType<typeof createOutgoingTracker>
