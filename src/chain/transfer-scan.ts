/**
 * Pure matching of a block's transfers against the deposit addresses being watched.
 *
 * Inputs are the raw JSON-RPC shapes (hex strings), not viem's formatted objects: the follower
 * fetches with `client.request` so a block with 1,000 logs is not formatted field by field
 * only to be thrown away. Decoding is by hand (topics[1..2] -> addresses, data -> amount):
 * an ERC-20 `Transfer` has a fixed layout, and the watch-set lookup on `to` runs before the
 * amount is parsed, so an unmatched log costs two string slices and one Set probe.
 *
 * All addresses in findings are lowercase, like the watch set: checksumming costs a keccak
 * per address and callers compare, they do not display.
 *
 * Native ETH: only top-level transactions are visible here. ETH sent by a contract's
 * internal call (a multisig, a smart wallet, an exchange's batch payout) never appears in a
 * block's transaction list; the follower finds it by comparing balances (internalTransfers in
 * follower/findings.ts).
 */
import type { Address, Hex } from 'viem'

/** keccak256("Transfer(address,address,uint256)") */
export const TRANSFER_TOPIC: Hex =
  '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef'

/** Lowercase deposit addresses; a `Set<string>` fits. */
export interface WatchSet {
  has(addressLowercase: string): boolean
}

export interface Erc20Finding {
  kind: 'erc20'
  token: Address
  from: Address
  to: Address
  amount: bigint
  txHash: Hex
  logIndex: number
  blockNumber: bigint
  blockHash: Hex
}

export interface NativeFinding {
  kind: 'native'
  /**
   * Sent by a contract's internal call: seen as a balance rise, not in the block's transaction
   * list. Without traces `txHash` is the block's hash and `from` the zero address; `traced`: the
   * node's traces named the transaction (`txHash`) and the contract that sent it (`from`).
   */
  internal?: true
  traced?: true
  from: Address
  to: Address
  amount: bigint
  txHash: Hex
  blockNumber: bigint
  blockHash: Hex
}

export type Finding = Erc20Finding | NativeFinding

/**
 * The log index a native finding is recorded with (ERC-20 transfers keep their log's): a block's
 * own transaction to the address; coin by an internal call named by its block (its transaction
 * not known: `txHash` is the block's hash); coin by an internal call named by the transaction the
 * node's traces found.
 */
export const NATIVE_TRANSFER = -1
export const INTERNAL_TRANSFER = -2
export const INTERNAL_TRACED = -3

/** A log as `eth_getLogs` returns it. */
export interface RpcLogLike {
  address: string
  topics: readonly string[]
  data: string
  transactionHash: string | null
  logIndex: string | null
  blockNumber: string | null
  blockHash: string | null
  removed?: boolean
}

/** A transaction as `eth_getBlockByNumber(n, true)` returns it. */
export interface RpcTransactionLike {
  hash: string
  from: string
  to: string | null
  value: string
}

const ZERO_PAD = '000000000000000000000000' // the 12 high bytes of an address topic

/** The address in a 32-byte topic, or null when it is not a left-padded 20-byte value. */
export function topicToAddress(topic: string): Address | null {
  if (topic.length !== 66 || topic.slice(2, 26) !== ZERO_PAD) return null
  return `0x${topic.slice(26).toLowerCase()}`
}

/**
 * Decodes an ERC-20 Transfer, or null for anything else with the same topic0: ERC-721
 * (tokenId indexed: 4 topics), malformed or truncated data, pending logs.
 */
export function decodeTransferLog(
  log: RpcLogLike,
): { token: Address; from: Address; to: Address; amount: bigint } | null {
  const t = log.topics
  if (t.length !== 3 || t[0] !== TRANSFER_TOPIC || log.data.length !== 66) return null
  const from = topicToAddress(t[1]!)
  const to = topicToAddress(t[2]!)
  const amount = hexToBigint(log.data)
  if (!from || !to || amount === null) return null
  return { token: log.address.toLowerCase() as Address, from, to, amount }
}

/**
 * The ERC-20 Transfers a transaction's receipt shows from one token contract (`token`,
 * lowercase): what a payment or sweep the service did not build itself moved.
 */
export function receiptTransfers(
  logs: readonly { address: string; topics: readonly Hex[]; data: Hex }[],
  token: string,
): { from: Address; to: Address; amount: bigint }[] {
  return logs.flatMap((l) => {
    if (l.address.toLowerCase() !== token) return []
    const t = decodeTransferLog({
      address: l.address as Address,
      topics: [...l.topics],
      data: l.data,
      transactionHash: null,
      logIndex: null,
      blockNumber: null,
      blockHash: null,
    })
    return t ? [t] : []
  })
}

/**
 * ERC-20 findings among `logs`: Transfer logs of a non-zero amount to a watched address, emitted by
 * one of `tokens` (lowercase; omitted: any emitter — the follower already filters by address in
 * `eth_getLogs`, this is a second check against a node that ignores the filter).
 */
export function scanTransferLogs(
  logs: readonly RpcLogLike[],
  watch: WatchSet,
  tokens?: ReadonlySet<string>,
): Erc20Finding[] {
  const found: Erc20Finding[] = []
  for (const log of logs) {
    const t = log.topics
    // Cheap reject first: shape and watch-set probe, before any parsing.
    if (t.length !== 3 || t[0] !== TRANSFER_TOPIC) continue
    const to = topicToAddress(t[2]!)
    if (!to || !watch.has(to)) continue
    if (
      log.removed ||
      !log.transactionHash ||
      log.logIndex === null ||
      !log.blockNumber ||
      !log.blockHash
    )
      continue
    if (tokens && !tokens.has(log.address.toLowerCase())) continue
    const decoded = decodeTransferLog(log)
    // Zero-value transfers pay nothing and are the usual address-poisoning spam.
    if (!decoded || decoded.amount === 0n) continue
    found.push({
      kind: 'erc20',
      ...decoded,
      txHash: log.transactionHash as Hex,
      logIndex: Number(log.logIndex),
      blockNumber: BigInt(log.blockNumber),
      blockHash: log.blockHash as Hex,
    })
  }
  return found
}

/** Native findings: top-level transactions with value > 0 to a watched address. */
export function scanNativeTransactions(
  block: { number: bigint; hash: Hex; transactions: readonly (RpcTransactionLike | string)[] },
  watch: WatchSet,
): NativeFinding[] {
  const found: NativeFinding[] = []
  for (const tx of block.transactions) {
    if (typeof tx === 'string') continue // hashes only: the block was fetched without bodies
    if (!tx.to) continue // contract creation
    const to = tx.to.toLowerCase()
    if (!watch.has(to)) continue
    const amount = hexToBigint(tx.value)
    if (amount === null || amount === 0n) continue
    found.push({
      kind: 'native',
      from: tx.from.toLowerCase() as Address,
      to: to as Address,
      amount,
      txHash: tx.hash as Hex,
      blockNumber: block.number,
      blockHash: block.hash,
    })
  }
  return found
}

const HEX_QUANTITY = /^0x[0-9a-fA-F]{1,64}$/

function hexToBigint(hex: string): bigint | null {
  return HEX_QUANTITY.test(hex) ? BigInt(hex) : null
}
