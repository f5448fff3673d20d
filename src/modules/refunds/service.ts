import { createHash } from 'node:crypto'
import { getAddress, isAddress, type Address, type Hex } from 'viem'
import { getInitialSnapshot } from 'xstate'
import { FINAL_STATUSES, type TxStatus } from '../../../machines/transaction.machine.ts'
import type { OutgoingClaims } from '../../chain/outgoing-claims.repo.ts'
import {
  REFUND_MACHINE_VERSION,
  refundMachine,
  type RefundStatus,
  type Submission,
} from '../../../machines/refund.machine.ts'
import { isUniqueViolation } from '../../db/errors.ts'
import type { NetworkConfig, TokenConfig } from '../../chain/networks-config.ts'
import {
  checkAuthorizations,
  checkChainAndType,
  checkPaySignature,
  checkSendable,
  type ChainReader,
} from '../../chain/record-checks.ts'
import { payoutOf, readSignedTransaction } from '../../chain/signed-transaction.ts'
import type { Clock } from '../../lib/clock.ts'
import { newId } from '../../lib/ids.ts'
import { errorSummary, type Logger } from '../../lib/logger.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import { canonicalJson, type StoredResponse } from '../transactions/service.ts'
import type { TransactionRepo, TransactionRow } from '../transactions/transaction.repo.ts'
import { abandonable } from './abandonable.ts'
import { submissionOf, type RefundChanges } from './changes.ts'
import type { CreateRefundInput, RefundView } from './model.ts'
import { refundableLines } from './refundable.ts'
import type { RefundRepo, RefundRow } from './refund.repo.ts'
import { heldBy, paymentRoute } from './payment-checks.ts'
import { lineView, view, views } from './views.ts'

const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000
/** Refund idempotency keys share the table with creates; the prefix keeps the two apart. */
const KEY_PREFIX = 'refund:'

/**
 * Refunds (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md): a merchant refunds
 * what a finished transaction received, in the token it arrived in, to an address the customer
 * gives. The service records the refund; the merchant's treasury tool pays it (from the deposit
 * address while it holds enough, else from the gas account) after recording the signed payment
 * here; the chain follower watches that payment and completes the refund once it has the network's
 * confirmations, sending `refund.completed` (settlement.ts).
 *
 * This module holds the merchant's commands, the rules the HTTP API, the dashboard and the CLI
 * answer by: create, read, cancel, record the treasury tool's payment, mark unpayable, abandon a
 * payment that can no longer be mined. Every change is judged by the refund machine and
 * committed with its timeline note and webhook event (changes.ts).
 */
export function createRefundService(deps: {
  repo: RefundRepo
  changes: RefundChanges
  /** Which record holds each money-out transaction: a refund's payment is never also a sweep. */
  claims: OutgoingClaims
  /**
   * The networks' nodes now: what recorded payments are checked against, and whether each chain
   * runs EIP-7702.
   */
  chain: { eip7702(network: string): boolean | null; reader(network: string): ChainReader | null }
  transactions: Pick<TransactionRepo, 'find'>
  networks: readonly NetworkConfig[]
  clock: Clock
  logger: Logger
}) {
  const now = () => new Date(deps.clock.now())
  const networkOf = (name: string) => deps.networks.find((n) => n.name === name) ?? null
  const confirmationsOf = (name: string) => networkOf(name)?.confirmations ?? null
  const tokenOf = (network: string, symbol: string): TokenConfig | null =>
    networkOf(network)?.tokens.find((t) => t.symbol === symbol) ?? null

  async function scoped(caller: ProjectMode, id: string): Promise<RefundRow | null> {
    const row = /^rf_[A-Za-z0-9]{20}$/.test(id) ? await deps.repo.find(id) : null
    // Another project's or mode's refund is indistinguishable from none.
    return row && row.projectId === caller.projectId && row.mode === caller.mode ? row : null
  }

  /** Views of refunds, each with its arrivals (read in one query). */
  const viewsOf = (rows: readonly RefundRow[]) => views(deps.repo, rows)
  const viewWithArrivals = async (r: RefundRow) => (await viewsOf([r]))[0]!

  return {
    views: viewsOf,

    /**
     * Creates a pending refund of a finished transaction. Refused: an open transaction (409), an
     * address that is not one (400), a token or network the transaction never received (409),
     * nothing left to refund or more than is left (409). With an Idempotency-Key, the same key and
     * body within 24 hours return the first answer and create nothing.
     */
    async create(
      caller: ProjectMode,
      transactionId: string,
      input: CreateRefundInput,
      opts: { idempotencyKey?: string } = {},
    ): Promise<Outcome<StoredResponse>> {
      const transaction = await deps.transactions.find(caller, transactionId)
      if (!transaction) return deny('not_found', `No transaction ${transactionId}`)
      const address = input.address
      if (!isAddress(address, { strict: false }) || !/^0x[0-9a-fA-F]{40}$/.test(address)) {
        return deny(
          'invalid_request',
          'Invalid request body: address must be an EVM address (0x and 40 hex digits)',
          [{ path: 'address', message: 'must be an EVM address (0x and 40 hex digits)' }],
        )
      }
      if (
        address !== address.toLowerCase() &&
        address !== address.toUpperCase().replace('0X', '0x') &&
        !isAddress(address, { strict: true })
      ) {
        return deny(
          'invalid_request',
          'Invalid request body: address has mixed case that is not a valid EIP-55 checksum (a typo?)',
          [{ path: 'address', message: 'mixed case that is not a valid EIP-55 checksum' }],
        )
      }
      if (/^0x0{40}$/i.test(address))
        return deny(
          'invalid_request',
          'Invalid request body: address is the zero address: what is sent there is burnt',
          [{ path: 'address', message: 'is the zero address' }],
        )
      if (input.amount === '0' || (input.amount && /^0+$/.test(input.amount)))
        return deny('invalid_request', 'Invalid request body: amount must be greater than 0', [
          { path: 'amount', message: 'must be greater than 0' },
        ])
      const network = input.blockchain_network ?? transaction.blockchainNetwork
      const symbol = input.token_symbol ?? transaction.tokenSymbol
      if (!network || !symbol || !transaction.depositAddress)
        return deny(
          'conflict',
          'Nothing to refund: the customer never chose a token, so no deposit address received anything',
        )
      if (!(await deps.repo.hasDepositAddress(transaction.id)))
        return deny(
          'conflict',
          "This payment went over x402 to the project's x402 address (your treasury), not to a deposit address: refund it from that wallet",
        )
      if (!FINAL_STATUSES.includes(transaction.status as TxStatus)) {
        return deny(
          'conflict',
          `The transaction is still open (status ${transaction.status}); refund it once it has completed, failed, expired or been cancelled`,
        )
      }
      if (!networkOf(network))
        return deny(
          'conflict',
          `Network ${network} is not configured on this service, so a refund there cannot be paid or confirmed`,
        )
      if (!tokenOf(network, symbol))
        return deny('conflict', `Network ${network} has no token ${symbol} configured`)

      const key = opts.idempotencyKey
      if (key !== undefined && (key.length === 0 || key.length > 255))
        return deny('invalid_request', 'Idempotency-Key must be 1 to 255 characters', [
          { path: 'Idempotency-Key', message: 'must be 1 to 255 characters' },
        ])
      const requestHash =
        key === undefined
          ? ''
          : createHash('sha256')
              .update(canonicalJson({ transactionId, ...input }))
              .digest('hex')
      const replay = async (): Promise<Outcome<StoredResponse> | null> => {
        if (key === undefined) return null
        const prior = await deps.repo.idempotencyRecord({
          projectId: caller.projectId,
          mode: caller.mode,
          key: KEY_PREFIX + key,
        })
        if (!prior || prior.createdAt.getTime() < deps.clock.now() - IDEMPOTENCY_WINDOW_MS)
          return null
        if (prior.requestHash !== requestHash)
          return deny(
            'conflict',
            'This Idempotency-Key was already used with a different request body',
          )
        return ok({ status: prior.statusCode, body: prior.response, replayed: true })
      }
      const earlier = await replay()
      if (earlier) return earlier

      const at = now()
      const id = newId('rf')
      const n = networkOf(network)!
      const snapshot = refundMachine.getPersistedSnapshot(
        getInitialSnapshot(refundMachine, {
          refundId: id,
          requiredConfirmations: n.confirmations,
          ...(n.finality === 'confirmations' ? {} : { finality: n.finality }),
        }),
      ) as Record<string, unknown>
      let response: StoredResponse | null = null
      let created: Outcome<RefundRow>
      try {
        created = await deps.repo.create(transactionId, (facts) => {
          const line = refundableLines(facts, confirmationsOf).find(
            (l) => l.network === network && l.tokenSymbol === symbol,
          )
          const left = line?.refundable ?? 0n
          if (left === 0n) {
            return deny(
              'conflict',
              line && line.received > 0n
                ? `Nothing left to refund in ${symbol} on ${network}: ${line.received} received, all of it refunded`
                : `Nothing to refund in ${symbol} on ${network}: no confirmed transfer of it arrived at this transaction's deposit address`,
            )
          }
          const amount = input.amount ? BigInt(input.amount) : left
          if (amount > left)
            return deny(
              'conflict',
              `amount ${amount} exceeds what is left to refund in ${symbol} on ${network}: ${left} (smallest units)`,
            )
          const row: RefundRow = {
            id,
            transactionId,
            projectId: caller.projectId,
            mode: caller.mode,
            network,
            tokenSymbol: symbol,
            amount: amount.toString(),
            address: getAddress(address as Address),
            reason: input.reason ?? null,
            depositAddress: transaction.depositAddress!.toLowerCase(),
            status: 'pending',
            snapshot,
            machineVersion: REFUND_MACHINE_VERSION,
            paidFrom: null,
            sender: null,
            txHash: null,
            rawTransaction: null,
            txNonce: null,
            blockNumber: null,
            blockHash: null,
            confirmations: null,
            failureReason: null,
            failureDetail: null,
            version: 0,
            createdAt: at,
            updatedAt: at,
            submittedAt: null,
            completedAt: null,
          }
          response = {
            status: 200,
            body: JSON.stringify({
              success: true,
              refund: view(row, facts.arrivals, facts.transaction),
            }),
          }
          return ok({
            row,
            note: {
              cause: 'refund.created',
              details: {
                refund_id: id,
                amount: row.amount,
                token_symbol: symbol,
                blockchain_network: network,
                address: row.address,
              },
            },
            ...(key === undefined
              ? {}
              : {
                  idempotency: {
                    projectId: caller.projectId,
                    mode: caller.mode,
                    key: KEY_PREFIX + key,
                    requestHash,
                    statusCode: 200,
                    response: response.body,
                    createdAt: at,
                  },
                }),
          })
        })
      } catch (e) {
        // A concurrent request with the same key committed first: answer as it did.
        const again = await replay()
        if (again) return again
        throw e
      }
      if (!created.ok) return created
      return ok(response!)
    },

    /** Whose refund `id` is (the operator's CLI acts on any project's). */
    async ownerOf(id: string): Promise<ProjectMode | null> {
      const row = /^rf_[A-Za-z0-9]{20}$/.test(id) ? await deps.repo.find(id) : null
      return row ? { projectId: row.projectId, mode: row.mode } : null
    },

    async get(caller: ProjectMode, id: string): Promise<Outcome<RefundView>> {
      const row = await scoped(caller, id)
      return row ? ok(await viewWithArrivals(row)) : deny('not_found', `No refund ${id}`)
    },

    /** A transaction's refunds, oldest first, with what is left to refund per token. */
    async ofTransaction(caller: ProjectMode, transactionId: string) {
      const transaction = await deps.transactions.find(caller, transactionId)
      if (!transaction) return deny('not_found', `No transaction ${transactionId}`)
      const [rows, facts] = await Promise.all([
        deps.repo.ofTransaction(transactionId),
        deps.repo.facts(transaction),
      ])
      return ok({
        refunds: rows.map((r) => view(r, facts.arrivals, transaction)),
        refundable: refundableLines(facts, confirmationsOf).map(lineView),
      })
    },

    /**
     * What is left to refund of a transaction, per token and network (the dashboard's refund form).
     */
    async refundable(transaction: TransactionRow) {
      return refundableLines(await deps.repo.facts(transaction), confirmationsOf)
    },

    async list(
      caller: ProjectMode,
      filter: {
        status?: RefundStatus
        network?: string
        depositAddress?: string
        limit: number
        offset: number
      },
    ) {
      const { rows, total } = await deps.repo.page(caller, filter)
      return {
        refunds: await viewsOf(rows),
        pagination: {
          limit: filter.limit,
          offset: filter.offset,
          total,
          has_more: filter.offset + rows.length < total,
        },
      }
    },

    /** The merchant withdraws a refund not paid yet (409 once its payment is recorded). */
    async cancel(caller: ProjectMode, id: string): Promise<Outcome<RefundView>> {
      const row = await scoped(caller, id)
      if (!row) return deny('not_found', `No refund ${id}`)
      const r = await deps.changes.apply(id, { type: 'cancel.requested' })
      if (!r.ok)
        return r.code === 'conflict'
          ? deny(
              'conflict',
              `A refund in status ${row.status} cannot be cancelled: only a pending one can`,
            )
          : r
      return ok(await viewWithArrivals(r.value))
    },

    /**
     * The treasury tool found the refund cannot be paid (its transfer would revert): it fails, and
     * `refund.failed` is sent.
     */
    async refuse(caller: ProjectMode, id: string, reason: string): Promise<Outcome<RefundView>> {
      const row = await scoped(caller, id)
      if (!row) return deny('not_found', `No refund ${id}`)
      const r = await deps.changes.apply(id, { type: 'payment.refused', detail: reason })
      if (!r.ok)
        return r.code === 'conflict'
          ? deny(
              'conflict',
              `A refund in status ${row.status} cannot be marked unpayable: only a pending one can`,
            )
          : r
      return ok(await viewWithArrivals(r.value))
    },

    /**
     * The treasury tool records the signed payment before it sends it. It must pay exactly this
     * refund: DepositAccount's `pay` at the deposit address for this refund's id, token, address
     * and amount, signed by the deposit address; or a plain transfer of the amount to the address,
     * by the gas account or by the deposit address itself. And it must be mineable now, as the
     * network's node answers (src/chain/record-checks.ts): anything the service cannot verify would
     * hold the refund in `submitted` for good. The same payment recorded again is answered as
     * before; another one while the first is in flight is 409.
     */
    async recordPayment(
      caller: ProjectMode,
      id: string,
      raw: string,
    ): Promise<Outcome<RefundView>> {
      const row = await scoped(caller, id)
      if (!row) return deny('not_found', `No refund ${id}`)
      const read = await readSignedTransaction(raw)
      const bad = (message: string) =>
        deny('invalid_request', `Invalid request body: raw_transaction ${message}`, [
          { path: 'raw_transaction', message },
        ])
      if (!read.ok) return bad(read.message)
      const tx = read.tx
      if (row.txHash === tx.hash) return ok(await viewWithArrivals(row))
      if (row.status !== 'pending')
        return deny(
          'conflict',
          `This refund is ${row.status}${row.txHash ? ` with payment ${row.txHash}` : ''}; only a pending refund takes a payment`,
        )
      const network = networkOf(row.network)
      if (!network)
        return deny(
          'conflict',
          `Network ${row.network} is no longer configured here: its payment could not be watched`,
        )
      const wrongChain = checkChainAndType(tx, {
        chainId: network.chainId,
        network: row.network,
        eip7702: deps.chain.eip7702(row.network),
      })
      if (wrongChain) return bad(wrongChain)
      const token = tokenOf(row.network, row.tokenSymbol)
      const tokenAddress = token?.kind === 'erc20' ? token.address.toLowerCase() : null
      const payout = payoutOf(tx)
      const amount = BigInt(row.amount)
      const routed = paymentRoute(row, tx, payout, tokenAddress)
      if (!routed.ok) return bad(routed.problem)
      const route = routed.route
      const reader = deps.chain.reader(row.network)
      if (!reader) return deny('conflict', `Network ${row.network} is not followed here`)
      let problem: string | null
      try {
        problem =
          (await checkSendable(tx, raw as Hex, { reader })) ??
          (await checkAuthorizations(tx, {
            chainId: network.chainId,
            authorities: new Set([row.depositAddress]),
          })) ??
          (payout?.kind === 'deposit-account'
            ? await checkPaySignature(payout, {
                chainId: network.chainId,
                now: await reader.latestTimestamp(),
              })
            : null) ??
          // A plain token transfer can be mined only while its sender holds the amount (a native
          // one's value is in its balance check).
          (payout?.kind === 'erc20'
            ? await heldBy(reader, payout.token, tx.from, amount, row.tokenSymbol)
            : null)
      } catch (e) {
        return deny(
          'unavailable',
          `${row.network}'s node cannot be asked right now, so the payment cannot be verified (${errorSummary(e)}); try again in a moment`,
        )
      }
      if (problem) return bad(problem)
      let submission: Submission
      if (route === 'deposit') {
        // Where its Paid event can first be: the follower's height now (less a margin: it may lag
        // the node a little).
        const height = (await deps.repo.followedHeight(row.network)) ?? 0n
        const fromBlock = Number(height > 64n ? height - 64n : 0n)
        submission = {
          txHash: tx.hash,
          from: tx.from,
          nonce: tx.nonce,
          route,
          payUntil: Number((payout as { deadline: bigint }).deadline),
          fromBlock,
        }
      } else submission = { txHash: tx.hash, from: tx.from, nonce: tx.nonce, route }
      const paidFrom = route === 'gas' ? tx.from : row.depositAddress
      const held = await deps.claims.claim(row.network, tx.hash, 'refund', id)
      if (held)
        return deny(
          'conflict',
          `This transaction is recorded as sweep ${held.recordId}; one transaction is a sweep or a refund, never both`,
        )
      let r: Outcome<RefundRow>
      try {
        r = await deps.changes.apply(id, { type: 'submission.recorded', submission }, () => ({
          paidFrom,
          sender: tx.from,
          txHash: tx.hash,
          rawTransaction: raw.toLowerCase(),
          txNonce: tx.nonce,
          submittedAt: now(),
        }))
      } catch (e) {
        if (isUniqueViolation(e, 'refunds_payment_idx'))
          return deny(
            'conflict',
            'This transaction is already recorded as the payment of another refund',
          )
        throw e
      }
      if (!r.ok) return r
      return ok(await viewWithArrivals(r.value))
    },

    /**
     * Gives up a recorded payment that can no longer be mined, so the refund is pending again and
     * can be paid anew: a DepositAccount `pay` whose signature expired (at a block as final as a
     * payment must be) with the id unpaid, or a plain transfer whose nonce another transaction took
     * (at the network's depth). Anything that may still be mined is 409, saying until when.
     * The follower abandons such payments by itself as the chain moves; this asks now.
     */
    async abandon(caller: ProjectMode, id: string): Promise<Outcome<RefundView>> {
      const row = await scoped(caller, id)
      if (!row) return deny('not_found', `No refund ${id}`)
      const submission = submissionOf(row)
      if (row.status !== 'submitted' || !submission)
        return deny(
          'conflict',
          `A refund in status ${row.status} has no payment to abandon: only a submitted one has`,
        )
      const network = networkOf(row.network)
      const reader = deps.chain.reader(row.network)
      if (!network || !reader)
        return deny('conflict', `Network ${row.network} is not followed here`)
      let verdict: { abandon: true; detail: string } | { abandon: false; detail: string }
      try {
        verdict = await abandonable(row, submission, network, reader)
      } catch (e) {
        return deny(
          'unavailable',
          `${row.network}'s node cannot be asked right now (${errorSummary(e)}); try again in a moment`,
        )
      }
      if (!verdict.abandon)
        return deny(
          'conflict',
          `Refund ${id}'s payment ${submission.txHash} may still be mined: ${verdict.detail}`,
        )
      const r = await deps.changes.apply(id, {
        type: 'submission.abandoned',
        txHash: submission.txHash,
        detail: verdict.detail,
      })
      if (!r.ok) return r
      deps.logger.info('refund payment abandoned', {
        refundId: id,
        txHash: submission.txHash,
        detail: verdict.detail,
      })
      return ok(await viewWithArrivals(r.value))
    },
  }
}

export type RefundService = ReturnType<typeof createRefundService>
