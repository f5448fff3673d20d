/**
 * The relayer (docs/decisions/0062-pay-by-signature.md): submits customers' EIP-3009
 * authorizations and pays their gas, so a customer holding no native coin can pay.
 *
 * Its key is the one private key this service may hold (RELAYER_KEY_FILE; on the devnet one of
 * anvil's funded accounts). It pays gas only: an authorization moves the customer's tokens
 * straight to the transaction's deposit address, which the merchant's key controls, so the relayer
 * never holds a merchant's or customer's funds. Whoever steals it can spend its native coin on gas
 * and nothing else. Bounds: no fee above `maxFeePerGasWei`, and no more than `maxSpendPerHourWei`
 * (gas limit x max fee, counted before sending) per network per hour, counted in the database so
 * every instance and every restart sees the same spend.
 *
 * Every authorization is simulated (eth_call from the relayer) before anything is signed: one the
 * token would refuse (a used nonce, a closed window, a bad signature, a payer short of the
 * amount) costs no gas. The signed transaction is recorded before it is sent, so a crash between
 * the two sends the same bytes again; the payment itself is found by the network's follower like
 * any other transfer, confirmations and reorgs included.
 */
import { and, eq, gte, sql } from 'drizzle-orm'
import {
  type Address,
  BaseError,
  ContractFunctionRevertedError,
  encodeFunctionData,
  ExecutionRevertedError,
  formatGwei,
  type Hex,
  keccak256,
  type PrivateKeyAccount,
  type PublicClient,
  RawContractError,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
} from 'viem'
import type { Database } from '../db/client.ts'
import { isUniqueViolation } from '../db/errors.ts'
import { relayedAuthorizations } from '../db/schema.ts'
import type { Clock } from '../lib/clock.ts'
import { newId } from '../lib/ids.ts'
import type { Logger } from '../lib/logger.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import { eip3009Abi, type TransferAuthorization } from './eip3009.ts'

/** How long a balance read stays good for metrics and readiness. */
const BALANCE_MAX_AGE_MS = 15_000

export interface RelayerBounds {
  /** No transaction with a higher max fee per gas (RELAYER_MAX_FEE_GWEI). */
  maxFeePerGasWei: bigint
  /** Most gas (limit x max fee) per network per rolling hour (RELAYER_MAX_SPEND_PER_HOUR). */
  maxSpendPerHourWei: bigint
}

/** What the relayer needs of a network: its chain id and a client to read and send through. */
export interface RelayerNetwork {
  name: string
  chainId: number
  client: Pick<
    PublicClient,
    | 'call'
    | 'estimateGas'
    | 'estimateFeesPerGas'
    | 'getTransactionCount'
    | 'getBalance'
    | 'sendRawTransaction'
    | 'readContract'
    | 'getTransaction'
    | 'getTransactionReceipt'
  >
}

export interface RelayRequest {
  network: string
  token: Address
  authorization: TransferAuthorization
  signature: Hex
  /** The transaction it pays (null: a payment for a merchant's own resource). */
  transactionId: string | null
  projectId: string
  /**
   * Called once, when the relayer is about to record and send a first submission of this
   * authorization: makes the transaction it pays, whose id is recorded with it.
   */
  makeTransaction?: () => Promise<string>
}

/** The token call that carries out an authorization. */
function transferData(req: Pick<RelayRequest, 'authorization' | 'signature'>): Hex {
  const a = req.authorization
  return encodeFunctionData({
    abi: eip3009Abi,
    functionName: 'transferWithAuthorization',
    args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, req.signature],
  })
}

export function createRelayer(deps: {
  account: PrivateKeyAccount
  networks: RelayerNetwork[]
  bounds: RelayerBounds
  database: Database
  clock: Clock
  logger: Logger
}) {
  const { db } = deps.database
  const byName = new Map(deps.networks.map((n) => [n.name, n]))
  const sender = deps.account.address
  async function spentThisHour(network: string): Promise<bigint> {
    const since = new Date(deps.clock.now() - 3_600_000)
    const [row] = await db
      .select({ total: sql<string>`coalesce(sum(${relayedAuthorizations.maxCostWei}), 0)::text` })
      .from(relayedAuthorizations)
      .where(
        and(
          eq(relayedAuthorizations.network, network),
          gte(relayedAuthorizations.createdAt, since),
          sql`${relayedAuthorizations.status} <> 'refused'`,
        ),
      )
    return BigInt(row?.total ?? '0')
  }

  /**
   * Why the token would refuse this authorization now, from a simulation by the relayer (null:
   * it would go through).
   */
  async function simulate(n: RelayerNetwork, data: Hex, token: Address): Promise<string | null> {
    try {
      await n.client.call({ account: sender, to: token, data })
      return null
    } catch (e) {
      // Only a revert is the token's refusal; anything else (a node that could not be asked) is
      // an error, and the authorization may be good.
      const reverted =
        e instanceof BaseError
          ? e.walk(
              (x) =>
                x instanceof ContractFunctionRevertedError ||
                x instanceof ExecutionRevertedError ||
                x instanceof RawContractError,
            )
          : null
      if (!reverted) throw e
      const reason =
        (reverted as ContractFunctionRevertedError).reason ??
        (reverted as BaseError).details ??
        (reverted as BaseError).shortMessage
      return reason
    }
  }

  /**
   * Why another signed payment of the same transaction still stands (null: none does): one mined
   * and not reverted, or one the node still holds. Each is for the whole amount due, so a second
   * (a double click, a wallet's retry with a fresh nonce) would charge the customer twice. One a
   * reorg dropped and the node lost no longer stands.
   */
  async function earlierPayment(n: RelayerNetwork, req: RelayRequest): Promise<string | null> {
    if (!req.transactionId) return null
    const rows = await db
      .select({ txHash: relayedAuthorizations.txHash })
      .from(relayedAuthorizations)
      .where(
        and(
          eq(relayedAuthorizations.transactionId, req.transactionId),
          eq(relayedAuthorizations.network, req.network),
          sql`${relayedAuthorizations.status} <> 'refused'`,
          sql`${relayedAuthorizations.nonce} <> ${req.authorization.nonce.toLowerCase()}`,
        ),
      )
    for (const { txHash } of rows) {
      const hash = txHash as Hex
      const receipt = await n.client.getTransactionReceipt({ hash }).catch((e) => {
        if (e instanceof TransactionReceiptNotFoundError) return null
        throw e
      })
      if (receipt?.status === 'success')
        return `this transaction was paid by an earlier signature (${hash})`
      if (receipt) continue
      if (await nodeHolds(n, hash))
        return `an earlier signature paying this transaction is being mined (${hash})`
    }
    return null
  }

  /** Whether the node knows the transaction: pending, or mined on its chain. */
  async function nodeHolds(n: RelayerNetwork, hash: Hex): Promise<boolean> {
    return n.client.getTransaction({ hash }).then(
      () => true,
      (e) => {
        if (e instanceof TransactionNotFoundError) return false
        throw e
      },
    )
  }

  /** The record of an earlier submission of the same authorization, if any. */
  async function recorded(req: RelayRequest) {
    const a = req.authorization
    const [row] = await db
      .select({ id: relayedAuthorizations.id, txHash: relayedAuthorizations.txHash })
      .from(relayedAuthorizations)
      .where(
        and(
          eq(relayedAuthorizations.network, req.network),
          eq(relayedAuthorizations.token, req.token.toLowerCase()),
          eq(relayedAuthorizations.payer, a.from.toLowerCase()),
          eq(relayedAuthorizations.nonce, a.nonce.toLowerCase()),
        ),
      )
    return row ?? null
  }

  /**
   * The same authorization was relayed before, yet the simulation just now says the token has not
   * used it: the earlier transaction is not on chain. While the node still holds it (pending, or
   * back in its pool after a reorg) it may yet be mined, so nothing is sent; once the node has
   * lost it (a reorg whose transactions were not taken back), the record is replaced by this new
   * transaction, so the customer's signature still pays. Its id, or the refusal.
   */
  async function sendAgain(
    n: RelayerNetwork,
    req: RelayRequest,
    before: { id: string; txHash: string },
    sending: Pick<
      typeof relayedAuthorizations.$inferInsert,
      'txNonce' | 'rawTransaction' | 'txHash' | 'maxCostWei' | 'status' | 'createdAt'
    >,
  ): Promise<Outcome<string>> {
    if (await nodeHolds(n, before.txHash as Hex))
      return deny('conflict', 'this authorization was submitted already and waits to be mined')
    await db
      .update(relayedAuthorizations)
      .set(sending)
      .where(eq(relayedAuthorizations.id, before.id))
    deps.logger.info('relayer: an authorization whose transaction left the chain is sent again', {
      network: req.network,
      previous: before.txHash,
    })
    return ok(before.id)
  }

  /**
   * Whether the token would take this authorization now, by a simulation from the relayer;
   * nothing is signed or sent.
   */
  async function check(
    req: Omit<RelayRequest, 'transactionId' | 'projectId'>,
  ): Promise<Outcome<void>> {
    const n = byName.get(req.network)
    if (!n) return deny('unavailable', `no relayer on ${req.network}`)
    const refusal = await simulate(n, transferData(req), req.token)
    return refusal
      ? deny('invalid_request', `the token would refuse this authorization: ${refusal}`)
      : ok(undefined)
  }

  /** Balances read lately, so a scrape or a readiness probe does not ask the node each time. */
  const balanceCache = new Map<string, { wei: bigint | null; at: number }>()

  return {
    address: sender,
    /**
     * The relayer's native balance on each network, in wei (null: the node did not answer), read
     * at most every BALANCE_MAX_AGE_MS.
     */
    async balances(): Promise<{ network: string; wei: bigint | null }[]> {
      const now = deps.clock.now()
      return Promise.all(
        deps.networks.map(async (n) => {
          const cached = balanceCache.get(n.name)
          if (cached && now - cached.at < BALANCE_MAX_AGE_MS)
            return { network: n.name, wei: cached.wei }
          const wei = await n.client.getBalance({ address: sender }).catch(() => null)
          balanceCache.set(n.name, { wei, at: now })
          return { network: n.name, wei }
        }),
      )
    },
    /** Networks the relayer can submit on. */
    offers: (network: string) => byName.has(network),
    /** Whether the token would take this authorization now (the simulation `relay` runs first). */
    check,
    /**
     * Checks the authorization by simulation and, when the token would take it and the bounds
     * allow, signs, records and sends it. Resolves with the relayer's transaction hash once the
     * node accepted it.
     */
    async relay(req: RelayRequest): Promise<Outcome<{ hash: Hex }>> {
      const n = byName.get(req.network)
      if (!n) return deny('unavailable', `no relayer on ${req.network}`)
      const a = req.authorization
      const data = transferData(req)
      // Asked of the node before taking the lock: none of it depends on another submission.
      const checked = await check(req)
      if (!checked.ok) return checked
      const [gas, fees] = await Promise.all([
        n.client.estimateGas({ account: sender, to: req.token, data }),
        n.client.estimateFeesPerGas(),
      ])
      if (fees.maxFeePerGas > deps.bounds.maxFeePerGasWei)
        return deny(
          'unavailable',
          `gas costs ${formatGwei(fees.maxFeePerGas)} gwei now, above the relayer's cap of ${formatGwei(deps.bounds.maxFeePerGasWei)} gwei; pay by transfer, or try again later`,
        )
      // A margin over the estimate: the authorization's storage writes are fixed, but a node may
      // estimate low.
      const gasLimit = (gas * 6n) / 5n
      // One submission at a time per network and relayer account, in this process and across
      // instances sharing the key: no two take one nonce of the account, see each other's earlier
      // payment of a transaction, or overspend the hour's budget together.
      return deps.database.exclusive(
        `relayer:${req.network}:${sender.toLowerCase()}`,
        async (): Promise<Outcome<{ hash: Hex }>> => {
          const earlier = await earlierPayment(n, req)
          if (earlier) return deny('conflict', earlier)
          const txNonce = await n.client.getTransactionCount({
            address: sender,
            blockTag: 'pending',
          })
          const maxCost = gasLimit * fees.maxFeePerGas
          const spent = await spentThisHour(req.network)
          if (spent + maxCost > deps.bounds.maxSpendPerHourWei)
            return deny(
              'unavailable',
              `the relayer has spent its gas allowance for this hour on ${req.network}; pay by transfer, or try again later`,
            )
          const raw = await deps.account.signTransaction({
            type: 'eip1559',
            chainId: n.chainId,
            nonce: txNonce,
            to: req.token,
            data,
            gas: gasLimit,
            maxFeePerGas: fees.maxFeePerGas,
            maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
            value: 0n,
          })
          const hash = keccak256(raw)
          const sending = {
            txNonce,
            rawTransaction: raw,
            txHash: hash,
            maxCostWei: maxCost.toString(),
            status: 'sending' as const,
            createdAt: new Date(deps.clock.now()),
          }
          const before = await recorded(req)
          let id: string
          if (before) {
            const again = await sendAgain(n, req, before, sending)
            if (!again.ok) return again
            id = before.id
          } else {
            id = newId('rel')
            const transactionId = req.makeTransaction
              ? await req.makeTransaction()
              : req.transactionId
            try {
              await db.insert(relayedAuthorizations).values({
                id,
                transactionId,
                projectId: req.projectId,
                network: req.network,
                token: req.token.toLowerCase(),
                payer: a.from.toLowerCase(),
                payTo: a.to.toLowerCase(),
                value: a.value.toString(),
                validBefore: a.validBefore,
                nonce: a.nonce.toLowerCase(),
                sender: sender.toLowerCase(),
                ...sending,
              })
            } catch (e) {
              // Another instance recorded it a moment ago.
              if (isUniqueViolation(e, 'relayed_authorizations_nonce'))
                return deny('conflict', 'this authorization was submitted already')
              throw e
            }
          }
          try {
            await n.client.sendRawTransaction({ serializedTransaction: raw })
          } catch (e) {
            await db
              .update(relayedAuthorizations)
              .set({ status: 'refused' })
              .where(eq(relayedAuthorizations.id, id))
            deps.logger.warn('relayer: the node refused the transaction', {
              network: req.network,
              error: (e as BaseError).shortMessage ?? String(e),
            })
            return deny(
              'unavailable',
              `the network did not take the relayer's transaction: ${(e as BaseError).shortMessage ?? String(e)}`,
            )
          }
          await db
            .update(relayedAuthorizations)
            .set({ status: 'sent' })
            .where(eq(relayedAuthorizations.id, id))
          deps.logger.info('relayer: authorization sent', {
            network: req.network,
            hash,
            transactionId: req.transactionId,
          })
          return ok({ hash })
        },
      )
    },

    /**
     * After a crash: sends again what was recorded but perhaps never reached the node, while its
     * authorization is still valid (the same bytes: mined at most once).
     */
    async resume(): Promise<void> {
      const pending = await db
        .select()
        .from(relayedAuthorizations)
        .where(eq(relayedAuthorizations.status, 'sending'))
      const now = BigInt(Math.floor(deps.clock.now() / 1000))
      for (const row of pending) {
        const n = byName.get(row.network)
        if (n && row.validBefore > now)
          await n.client
            .sendRawTransaction({ serializedTransaction: row.rawTransaction as Hex })
            .catch(() => {}) // already mined or known: the same bytes, the same payment
        // Counted as spent either way: the hour's budget errs on the side of spending less.
        await db
          .update(relayedAuthorizations)
          .set({ status: 'sent' })
          .where(eq(relayedAuthorizations.id, row.id))
      }
    },
  }
}

export type Relayer = ReturnType<typeof createRelayer>
