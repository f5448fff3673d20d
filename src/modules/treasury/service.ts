import { formatUnits, getAddress, type Address, type Hex } from 'viem'
import type { Static } from '@sinclair/typebox'
import { DEPOSIT_ACCOUNT, depositAccountEvents } from '../../chain/deposit-account.ts'
import { depositKeyFingerprint, ETHEREUM_ACCOUNT_PATH } from '../../chain/deposit-addresses.ts'
import type { DepositService } from '../../chain/deposit.service.ts'
import type { NetworkConfig, TokenConfig } from '../../chain/networks-config.ts'
import type { OutgoingClaims } from '../../chain/outgoing-claims.repo.ts'
import type { OutgoingLedger, OutgoingNews, OutgoingReceipt } from '../../chain/outgoing-tracker.ts'
import { receiptTransfers } from '../../chain/transfer-scan.ts'
import type { PriceReader } from '../../chain/prices.ts'
import {
  checkAuthorizations,
  checkChainAndType,
  checkSendable,
  checkSweepSignatures,
  type ChainReader,
} from '../../chain/record-checks.ts'
import {
  payoutOf,
  readSignedTransaction,
  sweepsOf,
  type SignedTransaction,
} from '../../chain/signed-transaction.ts'
import type { SweepStatus } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'
import { newId } from '../../lib/ids.ts'
import { errorSummary, type Logger } from '../../lib/logger.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import type { RecordSweepBody } from './model.ts'
import type { SweepItemRow, SweepRow, TreasuryRepo } from './treasury.repo.ts'

/**
 * What the treasury needs of the chain watcher: the networks, whether each is verified (and runs
 * EIP-7702), prices, and the node's answers now.
 */
export interface TreasuryChain {
  networks: readonly NetworkConfig[]
  verified(network: string): boolean
  eip7702(network: string): boolean | null
  prices(network: string): PriceReader | null
  reader(network: string): ChainReader | null
}

const iso = (d: Date | null) => (d ? d.toISOString() : null)

/**
 * How money leaves deposit addresses on a chain that runs EIP-7702 (true), does not (false), or is
 * not known yet (null).
 */
export const moneyOutRoute = (eip7702: boolean | null) =>
  eip7702 === null ? null : eip7702 ? ('eip7702' as const) : ('top-up' as const)

/**
 * A sweep on a chain without EIP-7702: a deposit address's own plain transaction moving one
 * configured token (`transfer`) or its native coin (no data) to the treasury. Null for anything
 * else.
 */
function plainSweep(
  n: NetworkConfig,
  tx: SignedTransaction,
): { to: string; symbol: string } | null {
  if (tx.authorizations.length) return null
  const payout = payoutOf(tx)
  if (payout?.kind === 'native') {
    const native = n.tokens.find((t) => t.kind === 'native')
    return native ? { to: payout.to, symbol: native.symbol } : null
  }
  if (payout?.kind === 'erc20') {
    const token = n.tokens.find(
      (t) => t.kind === 'erc20' && t.address.toLowerCase() === payout.token,
    )
    return token ? { to: payout.to, symbol: token.symbol } : null
  }
  return null
}

/**
 * The treasury's side of the service
 * (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md): what the merchant's treasury
 * tool reads (the networks of the key's mode, the deposit key, the deposit addresses handed out)
 * and the sweeps it records before sending them, which the chain follower then settles from their
 * receipts. The service holds no key: it reads and records; the tool signs.
 */
export function createTreasuryService(deps: {
  repo: TreasuryRepo
  /** Which record holds each money-out transaction: a sweep is never also a refund's payment. */
  claims: OutgoingClaims
  deposits: Pick<DepositService, 'xpubs'>
  chain: TreasuryChain
  clock: Clock
  logger: Logger
}) {
  const now = () => new Date(deps.clock.now())
  const networkOf = (name: string) => deps.chain.networks.find((n) => n.name === name) ?? null
  const servesMode = (n: NetworkConfig, mode: ProjectMode['mode']) =>
    n.testnet === (mode === 'test')
  const symbolOfAsset = (n: NetworkConfig, token: string | null) =>
    n.tokens.find((t) =>
      token === null
        ? t.kind === 'native'
        : t.kind === 'erc20' && t.address.toLowerCase() === token,
    )?.symbol ?? null

  async function usdPrice(network: string, token: TokenConfig): Promise<string | null> {
    const reader = deps.chain.prices(network)
    const price = reader ? await reader.read(token).catch(() => null) : null
    return price?.ok ? formatUnits(price.answer, price.decimals) : null
  }

  const sweepView = (r: SweepRow, items: SweepItemRow[]) => ({
    id: r.id,
    status: r.status,
    testing_mode: r.mode === 'test',
    blockchain_network: r.network,
    treasury: r.treasury,
    sender: getAddress(r.sender as Address),
    transaction_hash: r.txHash,
    raw_transaction: r.rawTransaction,
    nonce: r.txNonce,
    block_number: r.blockNumber,
    confirmations: r.confirmations,
    gas_used: r.gasUsed,
    fee: r.fee,
    items: items
      .filter((i) => i.sweepId === r.id)
      .map((i) => ({
        address: getAddress(i.address as Address),
        token_symbol: i.tokenSymbol,
        planned: i.planned,
        swept: i.swept,
      })),
    created_at: r.createdAt.toISOString(),
    confirmed_at: iso(r.confirmedAt),
  })

  /**
   * What a mined sweep moved, per address and token: DepositAccount's Swept events (a batch), or
   * what a deposit address's own transfer sent (its token's Transfer from that address to the
   * treasury, or its value).
   */
  async function sweptBy(n: NetworkConfig, r: SweepRow, logs: OutgoingReceipt['logs']) {
    const events = depositAccountEvents(logs).flatMap((e) => {
      const symbol = e.kind === 'swept' ? symbolOfAsset(n, e.token) : null
      return symbol ? [{ address: e.account, tokenSymbol: symbol, amount: e.amount }] : []
    })
    if (events.length) return events
    const read = await readSignedTransaction(r.rawTransaction)
    const plain = read.ok ? plainSweep(n, read.tx) : null
    if (!read.ok || !plain) return []
    const payout = payoutOf(read.tx)!
    if (payout.kind === 'native')
      return [{ address: read.tx.from, tokenSymbol: plain.symbol, amount: payout.amount }]
    const moved = receiptTransfers(logs, (payout as { token: string }).token)
      .filter((t) => t.from === read.tx.from && t.to === plain.to)
      .map((t) => t.amount)
    return moved.length
      ? [
          {
            address: read.tx.from,
            tokenSymbol: plain.symbol,
            amount: moved.reduce((a, b) => a + b, 0n),
          },
        ]
      : []
  }

  /**
   * What the chain follower says of a sweep: confirmed once the network's confirmations are there,
   * with what each address gave.
   */
  async function settle(r: SweepRow, news: OutgoingNews) {
    const at = now()
    const n = networkOf(r.network)
    if (!n) return
    const from = r.status as SweepStatus
    let moved: boolean
    if (news.type === 'included' || news.type === 'reverted') {
      const fee = news.receipt.gasUsed * news.receipt.effectiveGasPrice + (news.receipt.l1Fee ?? 0n)
      moved = await deps.repo.updateSweep(r.id, from, {
        status: news.type === 'included' ? 'confirming' : 'failed',
        blockNumber: news.blockNumber,
        blockHash: news.blockHash,
        confirmations: null,
        gasUsed: news.receipt.gasUsed.toString(),
        fee: fee.toString(),
        updatedAt: at,
      })
    } else if (news.type === 'reorged') {
      moved = await deps.repo.updateSweep(r.id, from, {
        status: 'submitted',
        blockNumber: null,
        blockHash: null,
        confirmations: null,
        updatedAt: at,
      })
    } else if (news.type === 'unmined') {
      return
    } else if (news.type === 'dropped') {
      moved = await deps.repo.updateSweep(r.id, from, { status: 'dropped', updatedAt: at })
    } else {
      const enough =
        news.final === undefined
          ? news.confirmations >= n.confirmations
          : news.final && news.confirmations >= 1
      if (!enough) {
        await deps.repo.updateSweep(r.id, 'confirming', {
          confirmations: news.confirmations,
          updatedAt: at,
        })
        return
      }
      const swept = await sweptBy(n, r, news.receipt.logs)
      moved = await deps.repo.updateSweep(
        r.id,
        'confirming',
        { status: 'confirmed', confirmations: news.confirmations, confirmedAt: at, updatedAt: at },
        swept,
      )
    }
    if (moved)
      deps.logger.info('sweep moved', {
        sweepId: r.id,
        network: r.network,
        txHash: r.txHash,
        event: news.type,
      })
  }

  return {
    /** The networks of the caller's mode, with their tokens and current prices. */
    async networks(caller: ProjectMode) {
      return Promise.all(
        deps.chain.networks
          .filter((n) => servesMode(n, caller.mode))
          .map(async (n) => ({
            name: n.name,
            chain_id: n.chainId,
            testnet: n.testnet,
            confirmations: n.confirmations,
            finality: n.finality,
            verified: deps.chain.verified(n.name),
            eip7702: deps.chain.eip7702(n.name),
            money_out_route: moneyOutRoute(deps.chain.eip7702(n.name)),
            tokens: await Promise.all(
              n.tokens.map(async (t) => ({
                symbol: t.symbol,
                decimals: t.decimals,
                address: t.kind === 'erc20' ? t.address : null,
                native: t.kind === 'native',
                usd_price: await usdPrice(n.name, t),
              })),
            ),
          })),
      )
    },

    /**
     * What identifies the extended public key the caller's mode derives deposit addresses from
     * (never the key itself).
     */
    async depositKey(caller: ProjectMode) {
      const key = (await deps.deposits.xpubs(caller.projectId)).find((x) => x.mode === caller.mode)
      if (!key)
        return deny(
          'not_found',
          `No deposit key is set for ${caller.mode} mode (the operator sets one with project set-xpub)`,
        )
      return ok({
        mode: caller.mode,
        fingerprint: depositKeyFingerprint(key.xpub),
        derivation_path: ETHEREUM_ACCOUNT_PATH,
        generated: key.generated,
        addresses_handed_out: key.addressesHandedOut,
      })
    },

    /** The deposit addresses of the caller's current deposit key, in derivation order. */
    async depositAddresses(
      caller: ProjectMode,
      q: { after?: number; limit: number; network?: string; address?: string },
    ) {
      const key = (await deps.deposits.xpubs(caller.projectId)).find((x) => x.mode === caller.mode)
      if (!key) return ok({ deposit_addresses: [], has_more: false, next_after: null })
      const rows = await deps.repo.depositAddresses(caller, {
        xpub: key.xpub,
        after: q.after ?? -1,
        limit: q.limit + 1,
        network: q.network,
        address: q.address,
      })
      const page = rows.slice(0, q.limit)
      const more = rows.length > q.limit
      return ok({
        deposit_addresses: page.map((r) => ({
          address: getAddress(r.address as Address),
          derivation_index: r.derivationIndex,
          transaction_id: r.transactionId,
          transaction_status: r.transactionStatus as never,
          blockchain_network: r.network,
          token_symbol: r.tokenSymbol,
          amount_received: r.amountReceived,
          swept: r.swept,
          last_swept_at: iso(r.lastSweptAt),
          created_at: r.createdAt.toISOString(),
        })),
        has_more: more,
        next_after: more ? page.at(-1)!.derivationIndex : null,
      })
    },

    /**
     * Records a sweep the tool is about to send, once it is verified (src/chain/record-checks.ts):
     * either a DepositAccount batch of sweeps, each of a deposit address of the caller's project
     * and mode and signed by it, all to one treasury (a chain with EIP-7702); or a plain transfer
     * by such a deposit address itself, of a configured token's balance or of its native coin (a
     * chain without). It must be mineable now: its chain, type, nonce and its sender's balance are
     * read from the network's node. Recording the same transaction again returns the first record.
     */
    async recordSweep(
      caller: ProjectMode,
      body: Static<typeof RecordSweepBody>,
    ): Promise<Outcome<ReturnType<typeof sweepView>>> {
      const bad = (path: string, message: string) =>
        deny('invalid_request', `Invalid request body: ${path} ${message}`, [{ path, message }])
      const n = networkOf(body.blockchain_network)
      if (!n || !servesMode(n, caller.mode))
        return bad(
          'blockchain_network',
          `is not a network of ${caller.mode} mode here (${
            deps.chain.networks
              .filter((x) => servesMode(x, caller.mode))
              .map((x) => x.name)
              .join(', ') || 'none'
          })`,
        )
      const read = await readSignedTransaction(body.raw_transaction)
      if (!read.ok) return bad('raw_transaction', read.message)
      const tx = read.tx
      const recorded = await deps.repo.sweepByTxHash(n.name, tx.hash)
      if (recorded) {
        if (recorded.projectId !== caller.projectId || recorded.mode !== caller.mode)
          return deny('conflict', "This transaction is recorded as another project's sweep")
        return ok(sweepView(recorded, await deps.repo.sweepItems([recorded.id])))
      }
      const wrongChain = checkChainAndType(tx, {
        chainId: n.chainId,
        network: n.name,
        eip7702: deps.chain.eip7702(n.name),
      })
      if (wrongChain) return bad('raw_transaction', wrongChain)
      const plain = plainSweep(n, tx)
      const calls = tx.to === DEPOSIT_ACCOUNT.toLowerCase() ? sweepsOf(tx) : null
      if (!plain && (!calls || calls.length === 0)) {
        return bad(
          'raw_transaction',
          `is not a sweep: it must call batch() on DepositAccount (${DEPOSIT_ACCOUNT}) with sweep() calls only, or be a deposit address's own transfer of a token of ${n.name} (or of its native coin) to the treasury`,
        )
      }
      const treasuries = new Set(plain ? [plain.to] : calls!.map((c) => c.to))
      if (treasuries.size !== 1)
        return bad('raw_transaction', 'sweeps to more than one address; one sweep has one treasury')
      const accounts = new Set(plain ? [tx.from] : calls!.map((c) => c.account))
      const own = await deps.repo.ownDepositAddresses(caller, [...accounts])
      const foreign = [...accounts].filter((a) => !own.has(a))
      if (foreign.length)
        return bad(
          'raw_transaction',
          `sweeps addresses that are not this project's ${caller.mode} deposit addresses: ${foreign.slice(0, 5).join(', ')}`,
        )
      const reader = deps.chain.reader(n.name)
      if (!reader) return deny('conflict', `Network ${n.name} is not followed here`)
      let problem: string | null
      try {
        problem =
          (await checkSendable(tx, body.raw_transaction as Hex, { reader })) ??
          (await checkAuthorizations(tx, {
            chainId: n.chainId,
            authorities: plain ? new Set() : accounts,
          })) ??
          (calls
            ? await checkSweepSignatures(calls, {
                chainId: n.chainId,
                now: await reader.latestTimestamp(),
              })
            : null)
      } catch (e) {
        return deny(
          'unavailable',
          `${n.name}'s node cannot be asked right now, so the sweep cannot be verified (${errorSummary(e)}); try again in a moment`,
        )
      }
      if (problem) return bad('raw_transaction', problem)
      const symbols = new Set(n.tokens.map((t) => t.symbol))
      const problems = body.items.flatMap((i, k) => [
        ...(accounts.has(i.address.toLowerCase())
          ? []
          : [{ path: `items.${k}.address`, message: 'is not swept by this transaction' }]),
        ...(symbols.has(i.token_symbol)
          ? []
          : [{ path: `items.${k}.token_symbol`, message: `is not a token of ${n.name}` }]),
      ])
      if (problems.length)
        return deny(
          'invalid_request',
          `Invalid request body: ${problems.map((p) => `${p.path} ${p.message}`).join('; ')}`,
          problems,
        )
      const at = now()
      const id = newId('swp')
      const held = await deps.claims.claim(n.name, tx.hash, 'sweep', id)
      if (held)
        return deny(
          'conflict',
          `This transaction is recorded as the payment of refund ${held.recordId}; one transaction is a sweep or a refund, never both`,
        )
      const { row } = await deps.repo.insertSweep(
        {
          id,
          projectId: caller.projectId,
          mode: caller.mode,
          network: n.name,
          treasury: getAddress([...treasuries][0]! as Address),
          sender: tx.from,
          txHash: tx.hash,
          rawTransaction: body.raw_transaction.toLowerCase(),
          txNonce: tx.nonce,
          status: 'submitted',
          createdAt: at,
          updatedAt: at,
        },
        body.items.map((i) => ({
          address: i.address.toLowerCase(),
          tokenSymbol: i.token_symbol,
          planned: BigInt(i.amount).toString(),
        })),
      )
      if (row.projectId !== caller.projectId || row.mode !== caller.mode)
        return deny('conflict', "This transaction is recorded as another project's sweep")
      return ok(sweepView(row, await deps.repo.sweepItems([row.id])))
    },

    async sweep(caller: ProjectMode, id: string) {
      const row = await deps.repo.sweep(id)
      if (!row || row.projectId !== caller.projectId || row.mode !== caller.mode)
        return deny('not_found', `No sweep ${id}`)
      return ok(sweepView(row, await deps.repo.sweepItems([row.id])))
    },

    async sweeps(
      caller: ProjectMode,
      filter: { network?: string; status?: SweepStatus; limit: number; offset: number },
    ) {
      const { rows, total } = await deps.repo.sweepPage(caller, filter)
      const items = await deps.repo.sweepItems(rows.map((r) => r.id))
      return {
        sweeps: rows.map((r) => sweepView(r, items)),
        pagination: {
          limit: filter.limit,
          offset: filter.offset,
          total,
          has_more: filter.offset + rows.length < total,
        },
      }
    },

    /**
     * What waits at the caller's deposit addresses per network and token, as recorded (the
     * dashboard's Funds page).
     */
    async waiting(caller: ProjectMode) {
      return (await deps.repo.waiting(caller)).map((w) => {
        const left = w.arrived - w.swept - w.refunded
        return {
          ...w,
          waiting: left > 0n ? left : 0n,
          decimals:
            networkOf(w.network)?.tokens.find((t) => t.symbol === w.tokenSymbol)?.decimals ?? null,
        }
      })
    },

    /** What the chain follower tracks of sweeps: those sent and not settled yet. */
    ledger: {
      async inFlight(network: string) {
        return (await deps.repo.inFlight(network)).map((r) => ({
          id: r.id,
          txHash: r.txHash,
          sender: r.sender,
          nonce: r.txNonce,
          blockHash: r.blockHash,
          confirmations: r.confirmations,
          settle: (news: OutgoingNews) => settle(r, news),
        }))
      },
    } satisfies OutgoingLedger,
  }
}

export type TreasuryService = ReturnType<typeof createTreasuryService>
