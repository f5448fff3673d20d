import { formatUnits, getAddress, type Address } from 'viem'
import type { Static } from '@sinclair/typebox'
import { DEPOSIT_ACCOUNT, depositAccountEvents } from '../../chain/deposit-account.ts'
import { ETHEREUM_ACCOUNT_PATH } from '../../chain/deposit-addresses.ts'
import type { DepositService } from '../../chain/deposit.service.ts'
import type { NetworkConfig, TokenConfig } from '../../chain/networks-config.ts'
import type { OutgoingLedger, OutgoingNews } from '../../chain/outgoing-tracker.ts'
import type { PriceReader } from '../../chain/prices.ts'
import { readSignedTransaction, sweepsOf } from '../../chain/signed-transaction.ts'
import type { SweepStatus } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'
import { newId } from '../../lib/ids.ts'
import type { Logger } from '../../lib/logger.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import type { RecordSweepBody } from './model.ts'
import type { SweepItemRow, SweepRow, TreasuryRepo } from './treasury.repo.ts'

/** What the treasury needs of the chain watcher: the networks, whether each is verified, and prices. */
export interface TreasuryChain {
  networks: readonly NetworkConfig[]
  verified(network: string): boolean
  prices(network: string): PriceReader | null
}

const iso = (d: Date | null) => (d ? d.toISOString() : null)

/**
 * The treasury's side of the service (issue 13): what the merchant's treasury tool reads (the
 * networks of the key's mode, the deposit key, the deposit addresses handed out) and the sweeps it
 * records before sending them, which the chain follower then settles from their receipts. The
 * service holds no key: it reads and records; the tool signs.
 */
export function createTreasuryService(deps: { repo: TreasuryRepo; deposits: Pick<DepositService, 'xpubs'>; chain: TreasuryChain; clock: Clock; logger: Logger }) {
  const now = () => new Date(deps.clock.now())
  const networkOf = (name: string) => deps.chain.networks.find((n) => n.name === name) ?? null
  const servesMode = (n: NetworkConfig, mode: ProjectMode['mode']) => n.testnet === (mode === 'test')
  const symbolOfAsset = (n: NetworkConfig, token: string | null) =>
    n.tokens.find((t) => (token === null ? t.kind === 'native' : t.kind === 'erc20' && t.address.toLowerCase() === token))?.symbol ?? null

  async function usdPrice(network: string, token: TokenConfig): Promise<string | null> {
    const reader = deps.chain.prices(network)
    const price = reader ? await reader.read(token).catch(() => null) : null
    return price?.ok ? formatUnits(price.answer, price.decimals) : null
  }

  const sweepView = (r: SweepRow, items: SweepItemRow[]) => ({
    id: r.id, status: r.status, testing_mode: r.mode === 'test', blockchain_network: r.network, treasury: r.treasury, sender: getAddress(r.sender as Address),
    transaction_hash: r.txHash, raw_transaction: r.rawTransaction, nonce: r.txNonce, block_number: r.blockNumber, confirmations: r.confirmations,
    gas_used: r.gasUsed, fee: r.fee,
    items: items.filter((i) => i.sweepId === r.id).map((i) => ({ address: getAddress(i.address as Address), token_symbol: i.tokenSymbol, planned: i.planned, swept: i.swept })),
    created_at: r.createdAt.toISOString(), confirmed_at: iso(r.confirmedAt),
  })

  /** What the chain follower says of a sweep: confirmed once the network's confirmations are there, with what each address gave. */
  async function settle(r: SweepRow, news: OutgoingNews) {
    const at = now()
    const n = networkOf(r.network)
    if (!n) return
    const from = r.status as SweepStatus
    let moved: boolean
    if (news.type === 'included' || news.type === 'reverted') {
      const fee = news.receipt.gasUsed * news.receipt.effectiveGasPrice + (news.receipt.l1Fee ?? 0n)
      moved = await deps.repo.updateSweep(r.id, from, {
        status: news.type === 'included' ? 'confirming' : 'failed', blockNumber: news.blockNumber, blockHash: news.blockHash, confirmations: null,
        gasUsed: news.receipt.gasUsed.toString(), fee: fee.toString(), updatedAt: at,
      })
    } else if (news.type === 'reorged') {
      moved = await deps.repo.updateSweep(r.id, from, { status: 'submitted', blockNumber: null, blockHash: null, confirmations: null, updatedAt: at })
    } else if (news.type === 'dropped') {
      moved = await deps.repo.updateSweep(r.id, from, { status: 'dropped', updatedAt: at })
    } else {
      const enough = news.final === undefined ? news.confirmations >= n.confirmations : news.final && news.confirmations >= 1
      if (!enough) {
        await deps.repo.updateSweep(r.id, 'confirming', { confirmations: news.confirmations, updatedAt: at })
        return
      }
      const swept = depositAccountEvents(news.receipt.logs).flatMap((e) => {
        const symbol = e.kind === 'swept' ? symbolOfAsset(n, e.token) : null
        return symbol ? [{ address: e.account, tokenSymbol: symbol, amount: e.amount }] : []
      })
      moved = await deps.repo.updateSweep(r.id, 'confirming', { status: 'confirmed', confirmations: news.confirmations, confirmedAt: at, updatedAt: at }, swept)
    }
    if (moved) deps.logger.info('sweep moved', { sweepId: r.id, network: r.network, txHash: r.txHash, event: news.type })
  }

  return {
    /** The networks of the caller's mode, with their tokens and current prices. */
    async networks(caller: ProjectMode) {
      return Promise.all(deps.chain.networks.filter((n) => servesMode(n, caller.mode)).map(async (n) => ({
        name: n.name, chain_id: n.chainId, testnet: n.testnet, confirmations: n.confirmations, finality: n.finality, verified: deps.chain.verified(n.name),
        tokens: await Promise.all(n.tokens.map(async (t) => ({
          symbol: t.symbol, decimals: t.decimals, address: t.kind === 'erc20' ? t.address : null, native: t.kind === 'native', usd_price: await usdPrice(n.name, t),
        }))),
      })))
    },

    /** The extended public key the caller's mode derives deposit addresses from. */
    async depositKey(caller: ProjectMode) {
      const key = (await deps.deposits.xpubs(caller.projectId)).find((x) => x.mode === caller.mode)
      if (!key) return deny('not_found', `No deposit key is set for ${caller.mode} mode (the operator sets one with project set-xpub)`)
      return ok({ mode: caller.mode, xpub: key.xpub, derivation_path: ETHEREUM_ACCOUNT_PATH, generated: key.generated, addresses_handed_out: key.addressesHandedOut })
    },

    /** The deposit addresses of the caller's current deposit key, in derivation order. */
    async depositAddresses(caller: ProjectMode, q: { after?: number; limit: number; network?: string; address?: string }) {
      const key = (await deps.deposits.xpubs(caller.projectId)).find((x) => x.mode === caller.mode)
      if (!key) return ok({ deposit_addresses: [], has_more: false, next_after: null })
      const rows = await deps.repo.depositAddresses(caller, { xpub: key.xpub, after: q.after ?? -1, limit: q.limit + 1, network: q.network, address: q.address })
      const page = rows.slice(0, q.limit)
      const more = rows.length > q.limit
      return ok({
        deposit_addresses: page.map((r) => ({
          address: getAddress(r.address as Address), derivation_index: r.derivationIndex, transaction_id: r.transactionId, transaction_status: r.transactionStatus as never,
          blockchain_network: r.network, token_symbol: r.tokenSymbol, amount_received: r.amountReceived,
          swept: r.swept, last_swept_at: iso(r.lastSweptAt), created_at: r.createdAt.toISOString(),
        })),
        has_more: more,
        next_after: more ? page.at(-1)!.derivationIndex : null,
      })
    },

    /**
     * Records a sweep the tool is about to send: a DepositAccount batch of sweeps, each of a deposit
     * address of the caller's project and mode, all to one treasury, signed for the network's chain.
     * Recording the same transaction again returns the first record.
     */
    async recordSweep(caller: ProjectMode, body: Static<typeof RecordSweepBody>): Promise<Outcome<ReturnType<typeof sweepView>>> {
      const bad = (path: string, message: string) => deny('invalid_request', `Invalid request body: ${path} ${message}`, [{ path, message }])
      const n = networkOf(body.blockchain_network)
      if (!n || !servesMode(n, caller.mode)) return bad('blockchain_network', `is not a network of ${caller.mode} mode here (${deps.chain.networks.filter((x) => servesMode(x, caller.mode)).map((x) => x.name).join(', ') || 'none'})`)
      const read = await readSignedTransaction(body.raw_transaction)
      if (!read.ok) return bad('raw_transaction', read.message)
      const tx = read.tx
      if (tx.chainId !== n.chainId) return bad('raw_transaction', `is for chain ${tx.chainId}; ${n.name} is chain ${n.chainId}`)
      if (tx.delegatesTo.some((a) => a !== DEPOSIT_ACCOUNT.toLowerCase())) return bad('raw_transaction', `delegates an account to another contract than DepositAccount (${DEPOSIT_ACCOUNT})`)
      const calls = tx.to === DEPOSIT_ACCOUNT.toLowerCase() ? sweepsOf(tx) : null
      if (!calls || calls.length === 0) return bad('raw_transaction', `is not a sweep: it must call batch() on DepositAccount (${DEPOSIT_ACCOUNT}) with sweep() calls only`)
      const treasuries = new Set(calls.map((c) => c.to))
      if (treasuries.size !== 1) return bad('raw_transaction', 'sweeps to more than one address; one sweep has one treasury')
      const accounts = new Set(calls.map((c) => c.account))
      const own = await deps.repo.ownDepositAddresses(caller, [...accounts])
      const foreign = [...accounts].filter((a) => !own.has(a))
      if (foreign.length) return bad('raw_transaction', `sweeps addresses that are not this project's ${caller.mode} deposit addresses: ${foreign.slice(0, 5).join(', ')}`)
      const symbols = new Set(n.tokens.map((t) => t.symbol))
      const problems = body.items.flatMap((i, k) => [
        ...(accounts.has(i.address.toLowerCase()) ? [] : [{ path: `items.${k}.address`, message: 'is not swept by this transaction' }]),
        ...(symbols.has(i.token_symbol) ? [] : [{ path: `items.${k}.token_symbol`, message: `is not a token of ${n.name}` }]),
      ])
      if (problems.length) return deny('invalid_request', `Invalid request body: ${problems.map((p) => `${p.path} ${p.message}`).join('; ')}`, problems)
      const at = now()
      const { row } = await deps.repo.insertSweep({
        id: newId('swp'), projectId: caller.projectId, mode: caller.mode, network: n.name, treasury: getAddress([...treasuries][0]! as Address), sender: tx.from,
        txHash: tx.hash, rawTransaction: body.raw_transaction.toLowerCase(), txNonce: tx.nonce, status: 'submitted', createdAt: at, updatedAt: at,
      }, body.items.map((i) => ({ address: i.address.toLowerCase(), tokenSymbol: i.token_symbol, planned: BigInt(i.amount).toString() })))
      if (row.projectId !== caller.projectId || row.mode !== caller.mode) return deny('conflict', 'This transaction is recorded as another project\'s sweep')
      return ok(sweepView(row, await deps.repo.sweepItems([row.id])))
    },

    async sweep(caller: ProjectMode, id: string) {
      const row = await deps.repo.sweep(id)
      if (!row || row.projectId !== caller.projectId || row.mode !== caller.mode) return deny('not_found', `No sweep ${id}`)
      return ok(sweepView(row, await deps.repo.sweepItems([row.id])))
    },

    async sweeps(caller: ProjectMode, filter: { network?: string; status?: SweepStatus; limit: number; offset: number }) {
      const { rows, total } = await deps.repo.sweepPage(caller, filter)
      const items = await deps.repo.sweepItems(rows.map((r) => r.id))
      return { sweeps: rows.map((r) => sweepView(r, items)), pagination: { limit: filter.limit, offset: filter.offset, total, has_more: filter.offset + rows.length < total } }
    },

    /** What waits at the caller's deposit addresses per network and token, as recorded (the dashboard's Funds page). */
    async waiting(caller: ProjectMode) {
      return (await deps.repo.waiting(caller)).map((w) => {
        const left = w.arrived - w.swept - w.refunded
        return { ...w, waiting: left > 0n ? left : 0n, decimals: networkOf(w.network)?.tokens.find((t) => t.symbol === w.tokenSymbol)?.decimals ?? null }
      })
    },

    /** What the chain follower tracks of sweeps: those sent and not settled yet. */
    ledger: {
      async inFlight(network: string) {
        return (await deps.repo.inFlight(network)).map((r) => ({
          id: r.id, txHash: r.txHash, sender: r.sender, nonce: r.txNonce, blockHash: r.blockHash, confirmations: r.confirmations,
          settle: (news: OutgoingNews) => settle(r, news),
        }))
      },
    } satisfies OutgoingLedger,
  }
}

export type TreasuryService = ReturnType<typeof createTreasuryService>
