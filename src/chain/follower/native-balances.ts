/**
 * The native balances of many deposit addresses at one block, in few JSON-RPC calls
 * (docs/decisions/0046-native-coin-by-internal-call.md). Where the chain has Multicall3 (at
 * 0xcA11bde05977b3631167028862bE2a173976CA11, src/chain/deposit-account.ts `MULTICALL3`, from
 * github.com/mds1/multicall3, README "Deployments"; the network's start-up verification says
 * whether the chain has it, and the watcher passes its address in), each call is one `eth_call` of
 * its `aggregate3` of
 * `getEthBalance` calls, a few thousand addresses at a time; elsewhere, or where Multicall3 does
 * not answer as itself at that block (no code there then, a revert, an answer that does not
 * decode), each address is one `eth_getBalance`, which the client sends as JSON-RPC batches of 100.
 * Either way every read is at the block's hash (EIP-1898), so the balances belong to the chain the
 * headers were validated on; a node that cannot say (a state it no longer keeps) throws.
 */
import type { Address, Hex } from 'viem'
import { errorSummary, type Logger } from '../../lib/logger.ts'
import { errorChain, isRateLimit } from '../../metrics/metrics.ts'
import { parseQuantity, type Rpc } from './rpc-data.ts'

export interface NativeBalances {
  /** Each address's balance at the block, in the order asked; throws when the node cannot say. */
  at(addresses: readonly string[], blockHash: Hex): Promise<bigint[]>
}

/**
 * Addresses per Multicall3 call at most; a part of n addresses is split evenly (10,000 are three
 * calls of 3,334). Measured on anvil with contracts/TestMulticall3.sol, whose aggregate3 is
 * Multicall3's: about 6,300 gas an address at 1,000 and 6,900 at 3,334 (a cold BALANCE is 2,600;
 * the rest is the inner call, the call data and memory, which grows faster than the count), 224
 * bytes of call data and 160 of answer an address, twice that as hex in the JSON. So 3,334
 * addresses are 23.0M gas, a 1.5 MB request and a 1.1 MB answer: within the eth_call gas cap of
 * geth, reth and Erigon (50,000,000 by default) with half to spare, within anvil's 30,000,000 (its
 * block gas limit: it runs out of memory gas near 4,300), and within geth's 5 MB request body
 * (anvil refuses about 2 MB). EIP-7825's cap on a transaction's gas (2^24 on Ethereum since
 * Fusaka) does not bind eth_call in geth or reth. This size keeps 10,000 open quotes at three
 * calls a block; calls of 1,000 would be ten. Calls are sent one after another, never in one HTTP
 * request. A node that refuses a call as too large (less gas, a smaller body) is asked again in
 * halves, and the smaller size kept for every later call.
 */
export const MULTICALL_ADDRESSES_PER_CALL = 3_500
/** Halving stops here: a node that refuses this few is failing for another reason. */
const MULTICALL_SMALLEST = 125
/**
 * eth_getBalance calls in flight at once without Multicall3: the client sends them as JSON-RPC
 * batches of 100, so ten HTTP requests at a time, and 10,000 addresses are ten rounds of them.
 */
const BATCH_WAVE = 1_000

export function createNativeBalances(o: {
  rpc: Rpc
  /** Multicall3's address, where the network's chain has it (network-verification.ts). */
  multicall3?: Address
  network: string
  /** Throws when the follower stopped: a call it aborted is not a refusal to narrow. */
  checkStopped: () => void
  logger?: Logger
}): NativeBalances {
  const { multicall3 } = o
  let perCall = MULTICALL_ADDRESSES_PER_CALL
  let saidNotAnswering = false

  /**
   * Balances through Multicall3, `perCall` addresses a call at most, split evenly; null when it
   * does not answer as itself at that block.
   */
  async function viaMulticall(
    multicall3: Address,
    addresses: readonly string[],
    blockHash: Hex,
  ): Promise<bigint[] | null> {
    const found: bigint[] = []
    // One call after another: calls issued together would share one HTTP request, whose body a
    // node caps. `perCall` may shrink on the way (a refusal).
    for (let i = 0; i < addresses.length; ) {
      const left = addresses.length - i
      const size = Math.ceil(left / Math.ceil(left / perCall))
      const part = await aggregate(multicall3, addresses.slice(i, i + size), blockHash)
      if (part === null) return null
      for (const balance of part) found.push(balance)
      i += size
    }
    return found
  }

  /**
   * One aggregate3 call; refused as too large, `perCall` is halved and the addresses asked again
   * in smaller calls.
   */
  async function aggregate(
    multicall3: Address,
    addresses: readonly string[],
    blockHash: Hex,
  ): Promise<bigint[] | null> {
    let answer: unknown
    try {
      answer = await o.rpc('eth_call', [
        { to: multicall3, data: encodeBalanceCalls(multicall3, addresses) },
        { blockHash },
      ])
    } catch (error) {
      o.checkStopped()
      if (isRevert(error)) return null
      if (addresses.length <= MULTICALL_SMALLEST || !isTooLarge(error)) throw error
      perCall = Math.min(perCall, Math.ceil(addresses.length / 2))
      o.logger?.warn(
        'the node refused a Multicall3 balance read as too large; asking fewer a call',
        {
          network: o.network,
          addresses: addresses.length,
          perCall,
          error: errorSummary(error),
        },
      )
      return viaMulticall(multicall3, addresses, blockHash)
    }
    return decodeBalances(answer, addresses.length)
  }

  async function viaBatches(addresses: readonly string[], blockHash: Hex) {
    const found: bigint[] = []
    for (let i = 0; i < addresses.length; i += BATCH_WAVE) {
      const answers = await Promise.all(
        addresses.slice(i, i + BATCH_WAVE).map((a) => o.rpc('eth_getBalance', [a, { blockHash }])),
      )
      for (const answer of answers) found.push(parseQuantity(answer, 'eth_getBalance'))
    }
    return found
  }

  return {
    async at(addresses, blockHash) {
      if (addresses.length === 0) return []
      if (multicall3) {
        const found = await viaMulticall(multicall3, addresses, blockHash)
        if (found) return found
        // Said once at warn: a chain caught up from before Multicall3 was deployed says it at every
        // block until then.
        const say = saidNotAnswering ? o.logger?.debug : o.logger?.warn
        saidNotAnswering = true
        say?.call(
          o.logger,
          'Multicall3 did not answer as itself at this block; native balances read by eth_getBalance batches',
          { network: o.network, blockHash },
        )
      }
      return viaBatches(addresses, blockHash)
    },
  }
}

/** `aggregate3(Call3[])`, `getEthBalance(address)`: Multicall3's selectors. */
const AGGREGATE3 = '82ad56cb'
const GET_ETH_BALANCE = '4d2301cc'
const ADDRESS = /^0x[0-9a-fA-F]{40}$/
const word = (n: number) => n.toString(16).padStart(64, '0')
/** A Call3 of getEthBalance: target, allowFailure, callData's offset, its length, its 36 bytes. */
const CALL_BYTES = 192

/**
 * The call data of Multicall3's `aggregate3` of one `getEthBalance(address)` for each address,
 * each call to `multicall3` itself (ABI-encoded by hand: viem takes about 0.1 s for 10,000, on
 * every block).
 */
export function encodeBalanceCalls(multicall3: Address, addresses: readonly string[]): Hex {
  const n = addresses.length
  const target = multicall3.slice(2).toLowerCase().padStart(64, '0')
  const parts: string[] = [`0x${AGGREGATE3}`, word(32), word(n)]
  for (let i = 0; i < n; i++) parts.push(word(n * 32 + i * CALL_BYTES))
  const allowFailure = word(1)
  const callDataAt = word(96)
  const callDataLength = word(36)
  for (const address of addresses) {
    if (!ADDRESS.test(address)) throw new Error(`not an address: ${address}`)
    parts.push(
      target,
      allowFailure,
      callDataAt,
      callDataLength,
      `${GET_ETH_BALANCE}${address.slice(2).toLowerCase().padStart(64, '0')}${'0'.repeat(56)}`,
    )
  }
  return parts.join('') as Hex
}

/**
 * The balances in an answer of `aggregate3` (`Result[]`: success, returnData), each a 32-byte
 * uint256, following the answer's own offsets; null when it is not `count` successful answers of
 * 32 bytes (no code at the address answers `0x`).
 */
export function decodeBalances(answer: unknown, count: number): bigint[] | null {
  if (typeof answer !== 'string' || !/^0x(?:[0-9a-fA-F]{64})*$/.test(answer)) return null
  const words = (answer.length - 2) / 64
  const at = (w: number): bigint | null =>
    Number.isSafeInteger(w) && w >= 0 && w < words
      ? BigInt(`0x${answer.slice(2 + w * 64, 2 + (w + 1) * 64)}`)
      : null
  /** The word `offset` bytes after word `from` (ABI offsets are in bytes, word-aligned here). */
  const after = (from: number, offset: bigint | null): number =>
    offset === null || offset % 32n !== 0n || offset > BigInt(words) * 32n
      ? -1
      : from + Number(offset / 32n)
  const list = after(0, at(0))
  if (at(list) !== BigInt(count)) return null
  const balances: bigint[] = []
  for (let i = 0; i < count; i++) {
    const result = after(list + 1, at(list + 1 + i))
    if (at(result) !== 1n) return null
    const returnData = after(result, at(result + 1))
    if (at(returnData) !== 32n) return null
    const balance = at(returnData + 1)
    if (balance === null) return null
    balances.push(balance)
  }
  return balances
}

/** The call reverted: the contract at Multicall3's address is not answering as Multicall3. */
function isRevert(error: unknown): boolean {
  return errorChain(error).some((c) =>
    /execution reverted|\brevert/i.test(`${c.message ?? ''} ${c.details ?? ''}`),
  )
}

/**
 * A node's refusal of a call as too large, in its own words: out of gas (anvil: "EVM error
 * OutOfGas", "MemoryOOG"), a gas cap, or a request body over its limit (HTTP 413; anvil answers
 * "Invalid request").
 */
function isTooLarge(error: unknown): boolean {
  if (isRateLimit(error)) return false
  return errorChain(error).some(
    (c) => c.status === 413 || TOO_LARGE.test(`${c.message ?? ''} ${c.details ?? ''}`),
  )
}
const TOO_LARGE =
  /out.?of.?gas|OOG\b|gas (required )?exceeds|intrinsic gas|gas (limit|cap)|too large|too big|entity|content.length|body (size|limit)|payload|invalid request|exceeds? .*(limit|cap|size)/i
