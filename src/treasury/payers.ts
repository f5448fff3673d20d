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
import { decodeEventLog, erc20Abi, getAddress, type Address, type Hex } from 'viem'
import type { ApiRefund } from './api.ts'
import type { Session } from './session.ts'

export interface Payers {
  /** Lowercase address -> what it sent to the deposit address in the refund's token, smallest units. */
  sent: Map<string, bigint>
  /** Arrivals not counted, each in words. */
  unverified: string[]
}

export async function payersOf(s: Session, r: ApiRefund): Promise<Payers> {
  const { client } = s.chain
  const deposit = r.deposit_address.toLowerCase()
  const token = s.network.tokens.find((t) => t.symbol === r.token_symbol)
  const tokenAddress = token?.address?.toLowerCase() ?? null
  const sent = new Map<string, bigint>()
  const unverified: string[] = []
  const head = await client.getBlockNumber()
  const finalHeight = s.network.finality === 'confirmations' ? head - BigInt(s.network.confirmations) + 1n : (await client.getBlock({ blockTag: s.network.finality })).number
  const seen = new Set<string>()
  for (const a of r.arrivals) {
    const name = a.transaction_hash ? `${a.kind} arrival ${a.transaction_hash}${a.log_index === null ? '' : `#${a.log_index}`}` : `an internal arrival in block ${a.block_number}`
    if (!a.transaction_hash || a.kind === 'internal') {
      unverified.push(`${name}: native coin sent by a contract's internal call is not read back here`)
      continue
    }
    const key = `${a.transaction_hash}:${a.log_index}`
    if (seen.has(key)) continue
    seen.add(key)
    const hash = a.transaction_hash as Hex
    const receipt = await client.getTransactionReceipt({ hash }).catch(() => null)
    if (!receipt || receipt.status !== 'success') {
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
          const t = decodeEventLog({ abi: erc20Abi, eventName: 'Transfer', topics: log.topics, data: log.data })
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
      unverified.push(`${name}: the chain shows no ${r.token_symbol} arriving at ${getAddress(deposit as Address)} there`)
      continue
    }
    sent.set(from, (sent.get(from) ?? 0n) + amount)
  }
  return { sent, unverified }
}
