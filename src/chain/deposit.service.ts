import { and, asc, eq } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { chainTransfers, depositAddresses, projects, projectXpubs } from '../db/schema.ts'
import type { Clock } from '../lib/clock.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import { deriveAddress, generateDevnetXpub, parseXpub } from './deposit-addresses.ts'

export type Mode = 'test' | 'live'

/** How many derived addresses the dashboard shows for checking an xpub against a wallet. */
const SHOWN_ADDRESSES = 3

/** A transfer seen to a deposit address: a payment, a wrong asset or a late payment (R14). */
export interface TransferView {
  network: string
  txHash: string
  blockNumber: number
  tokenSymbol: string
  fromAddress: string
  amount: string
  kind: 'pending' | 'payment' | 'wrong_asset' | 'late'
  /** Its block left the canonical chain. */
  reorged: boolean
  seenAt: Date
}

/** Channel telling every instance's block followers to watch a new deposit address. */
export const DEPOSIT_CHANNEL = 'deposit_address'

/**
 * R17: deposit addresses, non-custodial. Each project and mode has an xpub; each transaction
 * that selects a token gets the next child address, stored, unique and never reused. Test mode
 * without an operator-set xpub gets one generated once (nobody keeps its keys: test funds only);
 * live mode refuses until the operator sets one (`project set-xpub`).
 */
export function createDepositService(deps: { database: Database; clock: Clock }) {
  const { db } = deps.database

  async function takeIndex(projectId: string, mode: Mode): Promise<{ xpub: string; index: number } | null> {
    const rows = await deps.database.query<{ xpub: string; index: number }>(
      `UPDATE project_xpubs SET next_index = next_index + 1 WHERE project_id = $1 AND mode = $2 RETURNING xpub, next_index - 1 AS index`,
      [projectId, mode])
    return rows[0] ?? null
  }

  return {
    /** Each mode's xpub with its first derived addresses, for checking it against the wallet that holds the keys. */
    async xpubs(projectId: string): Promise<{ mode: Mode; xpub: string; generated: boolean; addressesHandedOut: number; firstAddresses: string[] }[]> {
      const rows = await db.select().from(projectXpubs).where(eq(projectXpubs.projectId, projectId)).orderBy(asc(projectXpubs.mode))
      return rows.map((r) => ({
        mode: r.mode, xpub: r.xpub, generated: r.generated, addressesHandedOut: r.nextIndex,
        firstAddresses: Array.from({ length: SHOWN_ADDRESSES }, (_, i) => deriveAddress(r.xpub, i)),
      }))
    },

    /** Every transfer seen to a transaction's deposit address, in the order seen, late ones included (R14). */
    async transfersTo(transactionId: string): Promise<TransferView[]> {
      const rows = await db.select().from(chainTransfers).where(eq(chainTransfers.transactionId, transactionId)).orderBy(asc(chainTransfers.id))
      return rows.map((r) => ({
        network: r.network, txHash: r.txHash, blockNumber: r.blockNumber, tokenSymbol: r.tokenSymbol, fromAddress: r.fromAddress,
        amount: r.amount, kind: r.kind, reorged: r.reorgedAt !== null, seenAt: r.seenAt,
      }))
    },

    /** `project set-xpub`: validated; a new key starts at index 0, the same key keeps its counter. */
    async setXpub(projectId: string, mode: string, xpub: string): Promise<Outcome<{ projectId: string; mode: Mode; xpub: string; firstAddresses: string[] }>> {
      if (mode !== 'test' && mode !== 'live') return deny('invalid_request', 'mode must be test or live', [{ path: 'mode', message: 'test or live' }])
      const parsed = parseXpub(xpub)
      if (!parsed.ok) return deny('invalid_request', `xpub: ${parsed.message}`, [{ path: 'xpub', message: parsed.message }])
      const [project] = await db.select({ id: projects.id }).from(projects).where(eq(projects.id, projectId))
      if (!project) return deny('not_found', `No project ${projectId}`)
      const key = parsed.key.xpub
      await deps.database.query(
        `INSERT INTO project_xpubs (project_id, mode, xpub, next_index, generated, updated_at) VALUES ($1, $2, $3, 0, false, $4::timestamptz)
         ON CONFLICT (project_id, mode) DO UPDATE SET xpub = excluded.xpub, generated = false, updated_at = excluded.updated_at,
           next_index = CASE WHEN project_xpubs.xpub = excluded.xpub THEN project_xpubs.next_index ELSE 0 END`,
        [projectId, mode, key, new Date(deps.clock.now()).toISOString()])
      return ok({ projectId, mode, xpub: key, firstAddresses: [0, 1, 2].map((i) => deriveAddress(parsed.key, i)) })
    },

    /** The transaction's deposit address: the one it already has, or the next one derived for it. */
    async assign(tx: { id: string; projectId: string; mode: Mode }): Promise<Outcome<{ address: string; isNew: boolean }>> {
      const [existing] = await db.select({ address: depositAddresses.address }).from(depositAddresses).where(eq(depositAddresses.transactionId, tx.id))
      if (existing) return ok({ address: existing.address, isNew: false })
      let taken = await takeIndex(tx.projectId, tx.mode)
      if (!taken && tx.mode === 'test') {
        const { xpub } = generateDevnetXpub()
        await deps.database.query(
          `INSERT INTO project_xpubs (project_id, mode, xpub, next_index, generated, updated_at) VALUES ($1, 'test', $2, 0, true, $3::timestamptz) ON CONFLICT DO NOTHING`,
          [tx.projectId, xpub, new Date(deps.clock.now()).toISOString()])
        taken = await takeIndex(tx.projectId, tx.mode)
      }
      if (!taken) return deny('unavailable', 'This merchant has not set up live payments yet (no deposit key); please contact the merchant')
      // An address collides only if an xpub was set again after being replaced; skip it then.
      for (let attempt = 0; attempt < 5; attempt++) {
        const address = deriveAddress(taken.xpub, taken.index).toLowerCase()
        const inserted = await deps.database.query(
          `INSERT INTO deposit_addresses (address, transaction_id, project_id, mode, xpub, derivation_index, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7::timestamptz) ON CONFLICT DO NOTHING RETURNING address`,
          [address, tx.id, tx.projectId, tx.mode, taken.xpub, taken.index, new Date(deps.clock.now()).toISOString()])
        if (inserted.length) {
          await deps.database.notify(DEPOSIT_CHANNEL, address)
          return ok({ address, isNew: true })
        }
        const [mine] = await db.select({ address: depositAddresses.address }).from(depositAddresses).where(eq(depositAddresses.transactionId, tx.id))
        if (mine) return ok({ address: mine.address, isNew: false })
        taken = (await takeIndex(tx.projectId, tx.mode))!
      }
      throw new Error('no free deposit address after 5 attempts')
    },
  }
}

export type DepositService = ReturnType<typeof createDepositService>
