/**
 * Which transaction moved native coin to an address by a contract's internal call (a Safe, a
 * smart wallet, an exchange's batch payout): no block lists such a transfer, and the balance only
 * says that coin arrived. A node that traces says who sent it: geth and its kin answer
 * `debug_traceBlockByHash` with the `callTracer`, Erigon, Nethermind, Reth and anvil `trace_block`
 * (Parity's format). Each answer is the tree of calls of every transaction in the block; a call
 * below a transaction's top (that one the block lists already) that carries value to the address
 * is an internal transfer, unless it, or a call above it, reverted (then nothing moved).
 *
 * Where neither method answers (most public RPCs refuse both), the block is all that is known;
 * such a node is not asked again for an hour.
 */
import type { Hex } from 'viem'
import { answeredWithError } from '../read-again.ts'

export interface InternalTransfer {
  /** Lowercase. */
  txHash: string
  /** The contract whose call sent it (lowercase). */
  from: string
  to: string
  value: bigint
}

type Rpc = (method: string, params: unknown[]) => Promise<unknown>

const RETRY_AFTER_MS = 3_600_000
const TX_HASH = /^0x[0-9a-fA-F]{64}$/
const big = (v: unknown) =>
  typeof v === 'string' && /^0x[0-9a-fA-F]*$/.test(v) ? BigInt(v === '0x' ? 0 : v) : 0n
const lower = (v: unknown) => (typeof v === 'string' ? v.toLowerCase() : '')

interface CallFrame {
  type?: string
  from?: string
  to?: string
  value?: string
  error?: string
  calls?: CallFrame[]
}

/**
 * Internal value transfers in a callTracer tree, below its top frame, skipping reverted subtrees.
 */
function fromCallTree(txHash: string, top: CallFrame): InternalTransfer[] {
  const found: InternalTransfer[] = []
  const walk = (frame: CallFrame, depth: number) => {
    if (frame.error) return
    const type = (frame.type ?? '').toUpperCase()
    if (depth > 0 && (type === 'CALL' || type === 'SELFDESTRUCT') && big(frame.value) > 0n) {
      found.push({ txHash, from: lower(frame.from), to: lower(frame.to), value: big(frame.value) })
    }
    for (const child of frame.calls ?? []) walk(child, depth + 1)
  }
  walk(top, 0)
  return found
}

interface ParityTrace {
  type?: string
  action?: {
    callType?: string
    from?: string
    to?: string
    value?: string
    address?: string
    refundAddress?: string
    balance?: string
  }
  error?: string
  traceAddress?: number[]
  transactionHash?: string
  blockHash?: string
}

/**
 * Internal value transfers among a block's Parity-style traces (a flat list with each frame's
 * path).
 */
function fromParity(traces: ParityTrace[], blockHash: string): InternalTransfer[] | null {
  if (traces.some((t) => t.blockHash && lower(t.blockHash) !== blockHash)) return null
  const reverted = traces
    .filter((t) => t.error)
    .map((t) => `${lower(t.transactionHash)}:${(t.traceAddress ?? []).join('.')}`)
  const underRevert = (t: ParityTrace) => {
    const path = (t.traceAddress ?? []).join('.')
    return reverted.some((r) => {
      const [hash, at] = r.split(':')
      return (
        hash === lower(t.transactionHash) && (at === '' || path === at || path.startsWith(`${at}.`))
      )
    })
  }
  if (traces.some((t) => !TX_HASH.test(t.transactionHash ?? ''))) return null
  const found: InternalTransfer[] = []
  for (const t of traces) {
    if ((t.traceAddress ?? []).length === 0 || underRevert(t)) continue
    if (
      t.type === 'call' &&
      (t.action?.callType ?? 'call') === 'call' &&
      big(t.action?.value) > 0n
    ) {
      found.push({
        txHash: lower(t.transactionHash),
        from: lower(t.action?.from),
        to: lower(t.action?.to),
        value: big(t.action?.value),
      })
    } else if (t.type === 'suicide' && big(t.action?.balance) > 0n) {
      found.push({
        txHash: lower(t.transactionHash),
        from: lower(t.action?.address),
        to: lower(t.action?.refundAddress),
        value: big(t.action?.balance),
      })
    }
  }
  return found
}

export function createTraceReader(rpc: Rpc, clock: { now(): number } = Date) {
  let unavailableUntil = 0
  return {
    /**
     * The block's internal value transfers, or null when the node cannot trace it (then only the
     * block is known).
     */
    async internalTransfers(block: {
      number: bigint
      hash: Hex
    }): Promise<InternalTransfer[] | null> {
      if (clock.now() < unavailableUntil) return null
      const hash = block.hash.toLowerCase()
      // A node that does not answer is asked again at the follower's next try; one that answers
      // "no" is believed.
      const ask = (method: string, params: unknown[]) =>
        rpc(method, params).catch((e) => {
          if (answeredWithError(e)) return null
          throw e
        })
      const tree = (await ask('debug_traceBlockByHash', [block.hash, { tracer: 'callTracer' }])) as
        | { txHash?: string; result?: CallFrame; error?: string }[]
        | null
      // Every transaction's tree, each naming its transaction (older geth leaves the hash out: then
      // only the block is known).
      if (Array.isArray(tree) && tree.every((a) => a.result && !a.error)) {
        return tree.every((a) => TX_HASH.test(a.txHash ?? ''))
          ? tree.flatMap((a) => fromCallTree(lower(a.txHash), a.result!))
          : null
      }
      const traces = (await ask('trace_block', [`0x${block.number.toString(16)}`])) as
        | ParityTrace[]
        | null
      if (Array.isArray(traces)) {
        // Another block at that height (the chain moved): not known this time, not a node that
        // cannot trace.
        return fromParity(traces, hash)
      }
      unavailableUntil = clock.now() + RETRY_AFTER_MS
      return null
    },
  }
}

export type TraceReader = ReturnType<typeof createTraceReader>
