import type { TxEvent } from '../../machines/transaction.machine.ts'
import { FINAL_STATUSES, type TxStatus } from '../../machines/transaction.machine.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { Outcome } from '../lib/outcome.ts'
import type { FollowerEvent, FollowerHandler } from './block-follower.ts'
import type { NetworkConfig } from './networks-config.ts'
import type { Finding } from './transfer-scan.ts'

/** What the tracker needs of the lifecycle: apply an event to a transaction's actor. */
export interface Lifecycle {
  apply(id: string, event: TxEvent): Promise<Outcome<unknown>>
}

interface TransferRow {
  id: number
  tx_hash: string
  log_index: number
  block_number: number | string
  token_symbol: string
  amount: string
  transaction_id: string
  reorged_at: string | Date | null
  kind: string
  status: TxStatus
  tx_token_symbol: string | null
  tx_network: string | null
}

/** Records findings; one statement for a block. $1 network, $2 findings as JSON, $3 now. */
const RECORD = `
INSERT INTO chain_transfers (network, tx_hash, log_index, block_number, block_hash, token_symbol, from_address, to_address, amount, transaction_id, seen_at)
SELECT $1, f.tx_hash, f.log_index, f.block_number, f.block_hash, f.token_symbol, f.from_address, f.to_address, f.amount, d.transaction_id, $3::timestamptz
FROM jsonb_to_recordset($2::jsonb) AS f(tx_hash text, log_index int, block_number bigint, block_hash text, token_symbol text, from_address text, to_address text, amount numeric)
JOIN deposit_addresses d ON d.address = f.to_address
ON CONFLICT (network, tx_hash, log_index, block_hash) DO NOTHING`

/** Transfers of this network whose lifecycle event was not judged yet, oldest first. */
const UNAPPLIED = `
SELECT c.id, c.tx_hash, c.log_index, c.block_number, c.token_symbol, c.amount, c.transaction_id, c.reorged_at, c.kind,
       t.status, t.token_symbol AS tx_token_symbol, t.blockchain_network AS tx_network
FROM chain_transfers c JOIN transactions t ON t.id = c.transaction_id
WHERE c.network = $1 AND NOT c.applied ORDER BY c.block_number, c.log_index, c.id`

/**
 * Turns one network's block follower events into lifecycle events (issue 4, R12, R14, R15):
 *  - a transfer to a deposit address in the token and network the customer selected is a
 *    payment: `payment.detected` then `payment.included` (the follower sees mined blocks);
 *  - another configured token, or the right token on another network, is a wrong asset;
 *  - anything reaching a transaction in a final status is a late payment, recorded only;
 *  - a block that left the canonical chain takes its payments back (`payment.reorged`), and a
 *    re-included transfer is found again in its new block;
 *  - each new head updates the confirmations of the network's confirming transactions.
 * Findings are recorded first (unique per transfer and block), then judged and marked applied,
 * so a block delivered again after a crash applies exactly what was not applied.
 */
export function createPaymentTracker(deps: { network: NetworkConfig; database: Database; lifecycle: Lifecycle; clock: Clock; logger: Logger }): FollowerHandler {
  const { network, database } = deps
  const symbolOfToken = new Map(network.tokens.filter((t) => t.kind === 'erc20').map((t) => [t.address.toLowerCase(), t.symbol]))
  const nativeSymbol = network.tokens.find((t) => t.kind === 'native')?.symbol ?? null
  const now = () => new Date(deps.clock.now()).toISOString()

  function symbolOf(f: Finding): string | null {
    return f.kind === 'native' ? nativeSymbol : symbolOfToken.get(f.token.toLowerCase()) ?? null
  }

  async function apply(id: string, event: TxEvent) {
    const r = await deps.lifecycle.apply(id, event)
    // A refusal (conflict) means the event no longer applies; anything else is retried later.
    if (!r.ok && r.code !== 'conflict') throw new Error(`${event.type} for ${id}: ${r.message}`)
    return r.ok
  }

  async function judge(row: TransferRow): Promise<string> {
    const id = row.transaction_id
    const blockNumber = Number(row.block_number)
    if (row.reorged_at !== null) {
      // Only a payment moved the transaction; taking back anything else changes nothing.
      if (row.kind === 'payment') await apply(id, { type: 'payment.reorged', txHash: row.tx_hash })
      return row.kind
    }
    if (FINAL_STATUSES.includes(row.status)) return 'late'
    if (row.tx_token_symbol === row.token_symbol && row.tx_network === network.name) {
      await apply(id, { type: 'payment.detected', txHash: row.tx_hash, amount: row.amount, blockNumber })
      await apply(id, { type: 'payment.included', txHash: row.tx_hash, blockNumber })
      return 'payment'
    }
    await apply(id, { type: 'wrong_asset.received', txHash: row.tx_hash, tokenSymbol: `${row.token_symbol} (${network.name})`, amount: row.amount })
    return 'wrong_asset'
  }

  async function applyPending() {
    const rows = await database.query<TransferRow>(UNAPPLIED, [network.name])
    for (const row of rows) {
      const kind = await judge(row)
      await database.query(`UPDATE chain_transfers SET applied = true, kind = $2 WHERE id = $1`, [row.id, kind])
      if (kind === 'late') deps.logger.info('late payment recorded', { network: network.name, transactionId: row.transaction_id, txHash: row.tx_hash, amount: row.amount, token: row.token_symbol })
    }
  }

  async function updateConfirmations(head: bigint) {
    const rows = await database.query<{ id: string; block_number: number | string; confirmations: number | null }>(
      `SELECT id, block_number, confirmations FROM transactions WHERE status = 'confirming' AND blockchain_network = $1 AND block_number IS NOT NULL`,
      [network.name])
    for (const r of rows) {
      const confirmations = Number(head - BigInt(r.block_number) + 1n)
      if (confirmations < 0 || confirmations === r.confirmations) continue
      await apply(r.id, { type: 'confirmations.updated', confirmations, at: deps.clock.now() })
    }
  }

  return async (event: FollowerEvent) => {
    if (event.type === 'block') {
      const findings = event.findings.flatMap((f) => {
        const symbol = symbolOf(f)
        if (symbol === null) return []
        return [{
          tx_hash: f.txHash.toLowerCase(), log_index: f.kind === 'erc20' ? f.logIndex : -1, block_number: f.blockNumber.toString(),
          block_hash: f.blockHash.toLowerCase(), token_symbol: symbol, from_address: f.from.toLowerCase(), to_address: f.to.toLowerCase(), amount: f.amount.toString(),
        }]
      })
      if (findings.length) await database.query(RECORD, [network.name, JSON.stringify(findings), now()])
      if (findings.length) await applyPending()
    } else if (event.type === 'reorg') {
      const hashes = event.removed.map((b) => b.hash.toLowerCase())
      const taken = await database.query(
        `UPDATE chain_transfers SET reorged_at = $3::timestamptz, applied = false
         WHERE network = $1 AND block_hash = ANY(string_to_array($2, ',')) AND reorged_at IS NULL RETURNING id`,
        [network.name, hashes.join(','), now()])
      if (taken.length) {
        deps.logger.warn('reorg took back transfers', { network: network.name, forkPoint: event.forkPoint.toString(), transfers: taken.length })
        await applyPending()
      }
    } else {
      // Leftovers of a crash between recording and judging are judged on the next head too.
      await applyPending()
      await updateConfirmations(event.number)
    }
  }
}
