/**
 * Who paid a refund's deposit address, and how much, read by the tool from the chain: the service
 * names the transfers that arrived (a refund's `arrivals`), and each one is looked up on the
 * network's node here. A transfer counts only when its receipt is in the canonical chain, as deep
 * as the network's confirmations (or its safe/finalized block), and shows the refund's token (a
 * `Transfer` log of the token's contract at the named index; for the native coin, the transaction
 * itself) arriving at the deposit address. So what the API says can name only real transfers: a
 * stolen API key or a compromised server cannot make an address that never paid look like one
 * that did, nor a payment larger than it was.
 *
 * Not counted (the refund then needs the merchant's approval): native coin sent by a contract's
 * internal call, whose arrival shows in no transaction's own fields; and anything the node cannot
 * answer for now.
 */
import { decodeEventLog, erc20Abi, getAddress, zeroAddress, type Address, type Hex } from 'viem'
import { PAID_TOPIC } from '../chain/deposit-account.ts'
import { settledBlock } from '../chain/settled-block.ts'
import { TRANSFER_TOPIC } from '../chain/transfer-scan.ts'
import type { ApiRefund } from './api.ts'
import type { Session } from './session.ts'

export interface Payers {
  /**
   * Lowercase address -> what it sent to the deposit address in the refund's token, smallest units.
   */
  sent: Map<string, bigint>
  /** Arrivals not counted, each in words. */
  unverified: string[]
  /**
   * The lowest block an arrival was in (where money could first leave the address again); null when
   * none counted.
   */
  since: bigint | null
}

export async function payersOf(s: Session, r: ApiRefund): Promise<Payers> {
  const { client } = s.chain
  const deposit = r.deposit_address.toLowerCase()
  const token = s.network.tokens.find((t) => t.symbol === r.token_symbol)
  const tokenAddress = token?.address?.toLowerCase() ?? null
  const sent = new Map<string, bigint>()
  const unverified: string[] = []
  let since: bigint | null = null
  const head = await client.getBlockNumber()
  // At least one confirmation, whatever the service says the network needs.
  const finalHeight =
    s.network.finality === 'confirmations'
      ? settledBlock(head, s.network.confirmations)
      : (await client.getBlock({ blockTag: s.network.finality })).number
  const seen = new Set<string>()
  for (const a of r.arrivals) {
    const name = a.transaction_hash
      ? `${a.kind} arrival ${a.transaction_hash}${a.log_index === null ? '' : `#${a.log_index}`}`
      : `an internal arrival in block ${a.block_number}`
    if (!a.transaction_hash || a.kind === 'internal') {
      unverified.push(
        `${name}: native coin sent by a contract's internal call is not read back here`,
      )
      continue
    }
    // One arrival counts once: a native one is its transaction, a token one its transaction's log.
    const key =
      a.kind === 'token'
        ? `${a.transaction_hash.toLowerCase()}:${a.log_index}`
        : a.transaction_hash.toLowerCase()
    if (seen.has(key)) continue
    seen.add(key)
    const hash = a.transaction_hash.toLowerCase() as Hex
    const receipt = await client.getTransactionReceipt({ hash }).catch(() => null)
    if (receipt?.status !== 'success') {
      unverified.push(`${name}: no successful receipt on this chain`)
      continue
    }
    const block = await client.getBlock({ blockNumber: receipt.blockNumber }).catch(() => null)
    if (!block || block.hash !== receipt.blockHash) {
      unverified.push(`${name}: its block is not on the canonical chain`)
      continue
    }
    if (receipt.blockNumber > finalHeight) {
      unverified.push(`${name}: not yet as final as the network's payments must be`)
      continue
    }
    let from: string | null = null
    let amount = 0n
    if (a.kind === 'token') {
      const log = receipt.logs.find((l) => l.logIndex === a.log_index)
      if (log && tokenAddress && log.address.toLowerCase() === tokenAddress) {
        try {
          const t = decodeEventLog({
            abi: erc20Abi,
            eventName: 'Transfer',
            topics: log.topics,
            data: log.data,
          })
          if (t.args.to.toLowerCase() === deposit) {
            from = t.args.from.toLowerCase()
            amount = t.args.value
          }
        } catch {}
      }
    } else if (tokenAddress === null) {
      const tx = await client.getTransaction({ hash }).catch(() => null)
      if (tx && tx.to?.toLowerCase() === deposit) {
        from = tx.from.toLowerCase()
        amount = tx.value
      }
    }
    if (from === null || amount === 0n) {
      unverified.push(
        `${name}: the chain shows no ${r.token_symbol} arriving at ${getAddress(deposit as Address)} there`,
      )
      continue
    }
    sent.set(from, (sent.get(from) ?? 0n) + amount)
    if (since === null || receipt.blockNumber < since) since = receipt.blockNumber
  }
  return { sent, unverified, since }
}

/**
 * What the deposit address already sent back to `to` in the refund's token since `from`, as the
 * chain shows it: the token's Transfer logs from the address to it (any route), or, for the native
 * coin, DepositAccount's Paid events at the address to it (a plain native transfer leaves no log:
 * on a chain without EIP-7702 the service's record of earlier refunds is all there is). Asked in
 * spans a provider takes, halved where it refuses one.
 */
export async function returnedOnChain(
  s: Session,
  r: ApiRefund,
  to: string,
  from: bigint,
): Promise<bigint> {
  const { client } = s.chain
  const token = s.network.tokens.find((t) => t.symbol === r.token_symbol)
  const topic = (a: string) => `0x${a.toLowerCase().slice(2).padStart(64, '0')}` as Hex
  const filter = token?.address
    ? {
        address: token.address as Address,
        topics: [TRANSFER_TOPIC, topic(r.deposit_address), topic(to)],
      }
    : {
        address: r.deposit_address as Address,
        topics: [PAID_TOPIC, null, topic(zeroAddress), topic(to)],
      }
  const head = await client.getBlockNumber()
  let returned = 0n
  let span = 10_000n
  for (let lo = from; lo <= head; ) {
    const hi = lo + span - 1n < head ? lo + span - 1n : head
    let logs: { data: Hex }[]
    try {
      logs = (await client.request({
        method: 'eth_getLogs',
        params: [{ ...filter, fromBlock: `0x${lo.toString(16)}`, toBlock: `0x${hi.toString(16)}` }],
      } as never)) as { data: Hex }[]
    } catch (e) {
      if (span === 1n) throw e
      span = span / 2n
      continue
    }
    for (const log of logs) returned += BigInt(log.data.slice(0, 66))
    lo = hi + 1n
  }
  return returned
}
