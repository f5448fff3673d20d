import { CHANNELS } from '../db/channels.ts'
import type { Database } from '../db/client.ts'
import type { Clock } from '../lib/clock.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { Mode, ProjectMode } from '../projects/mode.ts'
import { deriveAddress, generateDevnetXpub, parseXpub } from './deposit-addresses.ts'
import { createDepositRepo } from './deposit.repo.ts'

/** How many derived addresses the dashboard shows for checking an xpub against a wallet. */
const SHOWN_ADDRESSES = 3

/**
 * A transfer seen to a deposit address: a payment, a wrong asset or a late payment
 * (docs/decisions/0014-amounts-add-up.md).
 */
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

/**
 * docs/decisions/0017-deposit-addresses-from-an-xpub.md: deposit addresses, non-custodial. Each
 * project and mode has an xpub; each transaction that selects a token gets the next child address,
 * stored, unique and never reused. Test mode without an operator-set xpub gets one generated once
 * (nobody keeps its keys: test funds only); live mode refuses until the operator sets one (`project
 * set-xpub`).
 */
export function createDepositService(deps: { database: Database; clock: Clock }) {
  const repo = createDepositRepo(deps.database)
  const now = () => new Date(deps.clock.now())

  return {
    /**
     * Each mode's xpub with its first derived addresses, for checking it against the wallet that
     * holds the keys.
     */
    async xpubs(projectId: string): Promise<
      {
        mode: Mode
        xpub: string
        generated: boolean
        addressesHandedOut: number
        firstAddresses: string[]
      }[]
    > {
      const rows = await repo.xpubsOf(projectId)
      return rows.map((r) => ({
        mode: r.mode,
        xpub: r.xpub,
        generated: r.generated,
        addressesHandedOut: r.nextIndex,
        firstAddresses: Array.from({ length: SHOWN_ADDRESSES }, (_, i) => deriveAddress(r.xpub, i)),
      }))
    },

    /**
     * Every transfer seen to a transaction's deposit address, in the order seen, late ones included
     * (docs/decisions/0014-amounts-add-up.md).
     */
    async transfersTo(transactionId: string): Promise<TransferView[]> {
      const rows = await repo.transfersTo(transactionId)
      return rows.map((r) => ({
        network: r.network,
        txHash: r.txHash,
        blockNumber: r.blockNumber,
        tokenSymbol: r.tokenSymbol,
        fromAddress: r.fromAddress,
        amount: r.amount,
        kind: r.kind,
        reorged: r.reorgedAt !== null,
        seenAt: r.seenAt,
      }))
    },

    /**
     * `project set-xpub`: validated; a new key starts at index 0, the same key keeps its counter.
     */
    async setXpub(
      projectId: string,
      mode: string,
      xpub: string,
    ): Promise<Outcome<{ projectId: string; mode: Mode; xpub: string; firstAddresses: string[] }>> {
      if (mode !== 'test' && mode !== 'live')
        return deny('invalid_request', 'mode must be test or live', [
          { path: 'mode', message: 'test or live' },
        ])
      const parsed = parseXpub(xpub)
      if (!parsed.ok)
        return deny('invalid_request', `xpub: ${parsed.message}`, [
          { path: 'xpub', message: parsed.message },
        ])
      if (!(await repo.projectExists(projectId)))
        return deny('not_found', `No project ${projectId}`)
      const key = parsed.key.xpub
      await repo.setXpub(projectId, mode, key, now())
      return ok({
        projectId,
        mode,
        xpub: key,
        firstAddresses: [0, 1, 2].map((i) => deriveAddress(parsed.key, i)),
      })
    },

    /**
     * The transaction's deposit address: the one it already has, or the next one derived for it.
     */
    async assign(
      tx: ProjectMode & { id: string },
    ): Promise<Outcome<{ address: string; isNew: boolean }>> {
      const existing = await repo.addressOf(tx.id)
      if (existing) return ok({ address: existing, isNew: false })
      let taken = await repo.takeIndex(tx.projectId, tx.mode)
      if (!taken && tx.mode === 'test') {
        await repo.insertGeneratedTestXpub(tx.projectId, generateDevnetXpub().xpub, now())
        taken = await repo.takeIndex(tx.projectId, tx.mode)
      }
      if (!taken)
        return deny(
          'unavailable',
          'This merchant has not set up live payments yet (no deposit key); please contact the merchant',
        )
      // An address collides only if an xpub was set again after being replaced; skip it then.
      for (let attempt = 0; attempt < 5; attempt++) {
        const address = deriveAddress(taken.xpub, taken.index).toLowerCase()
        const inserted = await repo.insertAddress({
          address,
          transactionId: tx.id,
          projectId: tx.projectId,
          mode: tx.mode,
          xpub: taken.xpub,
          index: taken.index,
          createdAt: now(),
        })
        if (inserted) {
          await deps.database.notify(CHANNELS.depositAddress, address)
          return ok({ address, isNew: true })
        }
        const mine = await repo.addressOf(tx.id)
        if (mine) return ok({ address: mine, isNew: false })
        taken = (await repo.takeIndex(tx.projectId, tx.mode))!
      }
      throw new Error('no free deposit address after 5 attempts')
    },
  }
}

export type DepositService = ReturnType<typeof createDepositService>
