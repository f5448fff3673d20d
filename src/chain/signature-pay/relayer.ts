/**
 * The relayer (docs/decisions/0062-pay-by-signature.md): submits customers' EIP-3009
 * authorizations and pays their gas, so a customer holding no native coin can pay.
 *
 * Its key is the one private key this service may hold (RELAYER_KEY_FILE; on the devnet one of
 * anvil's funded accounts). It pays gas only: an authorization moves the customer's tokens
 * straight to the transaction's deposit address (or the project's x402 address), which the
 * merchant controls, so the relayer never holds a merchant's or customer's funds. Whoever steals
 * it can spend its native coin on gas and nothing else.
 *
 * It pays only for what will succeed, and a failure costs it at most once
 * (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md):
 * - a payer with code (an EIP-1271 contract wallet, an EIP-7702 delegated account) is not relayed
 *   for unless the network's rules allow it: such code can answer one way in a simulation and
 *   another on chain;
 * - every relay has a gas ceiling measured from the token's own transfer (gas-ceiling.ts);
 * - spend per network, per project and per payer, failures and relays in flight per project, and a
 *   cool-down after a revert for the payer, the transaction and the client (relay-limits.ts), all
 *   read from the records, so every instance and every restart sees the same;
 * - every relay is watched until its receipt (or until it can no longer be mined), and its
 *   outcome and real cost recorded.
 *
 * Every authorization is simulated (eth_call from the relayer) before anything is signed: one the
 * token would refuse (a used nonce, a closed window, a bad signature, a payer short of the
 * amount) costs no gas. The signed transaction is recorded before it is sent, so a crash between
 * the two sends the same bytes again; the payment itself is found by the network's follower like
 * any other transfer, confirmations and reorgs included.
 */
import {
  type Address,
  BaseError,
  ContractFunctionRevertedError,
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
import type { RelayerRules } from '../networks-config.ts'
import type { Clock } from '../../lib/clock.ts'
import { newId } from '../../lib/ids.ts'
import type { Logger } from '../../lib/logger.ts'
import { type Denial, deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { Metrics, RelayRefusalLabel } from '../../metrics/metrics.ts'
import type { AuthorizationDomain, TransferAuthorization } from '../eip3009.ts'
import { createGasCeilings, gasLimitFor, transferWithAuthorizationData } from './gas-ceiling.ts'
import { COOLDOWN_MS, judgeRelay, LIMIT_WINDOW_MS, type RelayLimits } from './relay-limits.ts'
import type { RelayedRow, RelayerRepo, Submission } from './relayer.repo.ts'

/** How long a balance read stays good for metrics and readiness. */
const BALANCE_MAX_AGE_MS = 15_000
/** Past its `validBefore` (and this margin for a slow clock), an unmined relay can never be mined. */
const EXPIRY_MARGIN_S = 60n

/** What the relayer needs of a network. */
export interface RelayerNetwork {
  name: string
  chainId: number
  /** How often a relay's receipt is asked for (the network's poll interval). */
  pollIntervalMs: number
  rules: RelayerRules
  client: Pick<
    PublicClient,
    | 'call'
    | 'estimateGas'
    | 'estimateFeesPerGas'
    | 'getTransactionCount'
    | 'getBalance'
    | 'getCode'
    | 'sendRawTransaction'
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
  /** Who asked, for the cool-down after a revert (`clientKey`); null: the facilitator's caller. */
  client: string | null
  /**
   * Called once, when the relayer is about to record and send a first submission of this
   * authorization: makes the transaction it pays, whose id is recorded with it.
   */
  makeTransaction?: () => Promise<string>
}

/** A relay sent (now, or earlier for the same authorization: `repeated`). */
export interface Relayed {
  id: string
  hash: Hex
  repeated: boolean
}

/** How a relay ended, or `pending` while its receipt is not there yet. */
export type RelayOutcome = 'succeeded' | 'reverted' | 'dropped' | 'pending'

/**
 * The key a client's relays are cooled down by: its IP address, an IPv6 one by its /64 (one
 * subscriber's prefix); null when unknown.
 */
export function clientKey(ip: string | null): string | null {
  if (!ip) return null
  if (!ip.includes(':') || ip.startsWith('::ffff:')) return `ip:${ip.replace(/^::ffff:/, '')}`
  const [head, tail] = ip.toLowerCase().split('::')
  const left = head ? head.split(':') : []
  const right = tail === undefined ? [] : tail ? tail.split(':') : []
  const groups = [
    ...left,
    ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'),
    ...right,
  ]
  return `ip:${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`
}

export function createRelayer(deps: {
  account: PrivateKeyAccount
  networks: RelayerNetwork[]
  limits: RelayLimits
  repo: RelayerRepo
  /** Runs a section no other instance runs at once under the same key (Database.exclusive). */
  exclusive: <T>(key: string, fn: () => Promise<T>) => Promise<T>
  authorizationDomain: (network: string, token: string) => AuthorizationDomain | null
  clock: Clock
  logger: Logger
  metrics?: Pick<Metrics, 'relayEnded' | 'relayRefused'>
}) {
  const { repo } = deps
  const byName = new Map(deps.networks.map((n) => [n.name, n]))
  const sender = deps.account.address
  const ceilings = createGasCeilings({
    sender,
    clock: deps.clock,
    domain: deps.authorizationDomain,
  })
  const stopping = new AbortController()

  /** A refusal before any gas, counted by reason. */
  function refuse(
    network: string,
    reason: RelayRefusalLabel,
    code: Denial['code'],
    message: string,
    field?: string,
  ): Denial {
    deps.metrics?.relayRefused(network, reason)
    return deny(code, message, field ? [{ path: field, message }] : undefined)
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
      return (
        (reverted as ContractFunctionRevertedError).reason ??
        (reverted as BaseError).details ??
        (reverted as BaseError).shortMessage
      )
    }
  }

  /**
   * Refuses a payer with code (a contract wallet, an EIP-7702 delegated account) unless the
   * network's rules allow such payers: its code may answer the simulation one way and the chain
   * another. Whether the payer has code, when allowed.
   */
  async function payerCode(n: RelayerNetwork, from: Address): Promise<Outcome<boolean>> {
    const code = await n.client.getCode({ address: from })
    const has = !!code && code !== '0x'
    if (has && !n.rules.contractPayers)
      return refuse(
        n.name,
        'contract_payer',
        'invalid_request',
        `from: ${from} is a smart-contract account (or an EIP-7702 delegated one); on ${n.name} the relayer pays gas only for plain accounts, so pay by transfer`,
        'from',
      )
    return ok(has)
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

  async function receiptOf(n: RelayerNetwork, hash: Hex) {
    return n.client.getTransactionReceipt({ hash }).catch((e) => {
      if (e instanceof TransactionReceiptNotFoundError) return null
      throw e
    })
  }

  /**
   * Why another signed payment of the same transaction still stands (null: none does): one mined
   * and not reverted, or one the node still holds. Each is for the whole amount due, so a second
   * (a double click, a wallet's retry with a fresh nonce) would charge the customer twice. One a
   * reorg dropped and the node lost no longer stands.
   */
  async function earlierPayment(n: RelayerNetwork, req: RelayRequest): Promise<string | null> {
    if (!req.transactionId) return null
    const hashes = await repo.otherPayments(
      req.transactionId,
      req.network,
      req.authorization.nonce.toLowerCase(),
    )
    for (const h of hashes) {
      const hash = h as Hex
      const receipt = await receiptOf(n, hash)
      if (receipt?.status === 'success')
        return `this transaction was paid by an earlier signature (${hash})`
      if (receipt) continue
      if (await nodeHolds(n, hash))
        return `an earlier signature paying this transaction is being mined (${hash})`
    }
    return null
  }

  const identity = (req: Pick<RelayRequest, 'network' | 'token' | 'authorization'>) => ({
    network: req.network,
    token: req.token.toLowerCase(),
    payer: req.authorization.from.toLowerCase(),
    nonce: req.authorization.nonce.toLowerCase(),
  })

  /**
   * An earlier relay of this same authorization that still stands (mined, or held by the node):
   * it is answered again and nothing new is sent. Null when there is none, or it left the chain
   * (then it is sent again). Another project's record of it is a refusal.
   */
  async function repeatOf(
    n: RelayerNetwork,
    req: RelayRequest,
    before: RelayedRow | null,
  ): Promise<Outcome<Relayed> | null> {
    if (!before) return null
    if (before.projectId !== req.projectId)
      return deny('conflict', 'this authorization was submitted already')
    if (before.status === 'refused' || before.status === 'dropped') return null
    const hash = before.txHash as Hex
    if ((await receiptOf(n, hash)) || (await nodeHolds(n, hash)))
      return ok({ id: before.id, hash, repeated: true })
    return null
  }

  /** Limits as they stand for this relay (a cost of 0 before the gas is known). */
  async function limited(n: RelayerNetwork, req: RelayRequest, maxCostWei: bigint) {
    const now = deps.clock.now()
    const exposure = await repo.exposure({
      network: n.name,
      projectId: req.projectId,
      payer: req.authorization.from.toLowerCase(),
      transactionId: req.transactionId,
      client: req.client,
      since: new Date(now - LIMIT_WINDOW_MS),
      coolingSince: new Date(now - COOLDOWN_MS),
    })
    const refusal = judgeRelay(exposure, maxCostWei, deps.limits, n.name)
    return refusal ? refuse(n.name, refusal.reason, 'unavailable', refusal.message) : null
  }

  /**
   * Whether the token would take this authorization now, and the relayer would relay for its
   * payer: the payer-code rule and a simulation by the relayer; nothing is signed or sent.
   */
  async function check(
    req: Pick<RelayRequest, 'network' | 'token' | 'authorization' | 'signature'>,
  ): Promise<Outcome<void>> {
    const n = byName.get(req.network)
    if (!n) return deny('unavailable', `no relayer on ${req.network}`)
    const code = await payerCode(n, req.authorization.from)
    if (!code.ok) return code
    const refusal = await simulate(
      n,
      transferWithAuthorizationData(req.authorization, req.signature),
      req.token,
    )
    return refusal
      ? refuse(
          n.name,
          'simulation',
          'invalid_request',
          `the token would refuse this authorization: ${refusal}`,
        )
      : ok(undefined)
  }

  /** Relays being watched here, by record id and transaction: each watched once per process. */
  const watching = new Map<string, Promise<Exclude<RelayOutcome, 'pending'>>>()

  /** Waits `ms`, or less when the relayer stops. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        stopping.signal.removeEventListener('abort', done)
        resolve()
      }
      stopping.signal.addEventListener('abort', done)
    })

  /**
   * Watches the relay `id` (transaction `hash`) until it is mined or can no longer be: records its
   * outcome and cost once (whichever instance sees it first), counts it, and resolves with it.
   */
  function watch(n: RelayerNetwork, id: string, hash: Hex, validBefore: bigint) {
    const key = `${id}:${hash}`
    const held = watching.get(key)
    if (held) return held
    const run = (async (): Promise<Exclude<RelayOutcome, 'pending'>> => {
      for (;;) {
        const receipt = await receiptOf(n, hash).catch(() => null)
        if (receipt) {
          const status = receipt.status === 'success' ? 'succeeded' : 'reverted'
          const cost =
            receipt.gasUsed * receipt.effectiveGasPrice +
            ((receipt as { l1Fee?: bigint | null }).l1Fee ?? 0n)
          await settle(n, id, hash, status, receipt.gasUsed, cost)
          return status
        }
        const now = BigInt(Math.floor(deps.clock.now() / 1000))
        if (now > validBefore + EXPIRY_MARGIN_S && !(await nodeHolds(n, hash).catch(() => true))) {
          await settle(n, id, hash, 'dropped', null, 0n)
          return 'dropped'
        }
        const row = await repo.get(id).catch(() => undefined)
        // Resent under another hash (its transaction left the chain), or resolved elsewhere.
        if (row === null || (row && row.txHash !== hash)) return 'dropped'
        if (row && row.status !== 'sending' && row.status !== 'sent')
          return row.status as Exclude<RelayOutcome, 'pending'>
        if (stopping.signal.aborted) throw new Error('the relayer is stopping')
        await pause(Math.min(Math.max(n.pollIntervalMs, 100), 2000))
      }
    })().finally(() => watching.delete(key))
    run.catch(() => {}) // an unwatched failure (a stop) is not an unhandled rejection
    watching.set(key, run)
    return run
  }

  async function settle(
    n: RelayerNetwork,
    id: string,
    hash: Hex,
    status: 'succeeded' | 'reverted' | 'dropped',
    gasUsed: bigint | null,
    costWei: bigint,
  ) {
    const at = new Date(deps.clock.now())
    if (!(await repo.resolve(id, hash, { status, gasUsed, costWei, at }))) return
    deps.metrics?.relayEnded(n.name, status, costWei)
    const log = status === 'reverted' ? deps.logger.warn : deps.logger.info
    log.call(deps.logger, `relayer: transaction ${status}`, {
      network: n.name,
      hash,
      ...(gasUsed === null ? {} : { gasUsed: gasUsed.toString() }),
    })
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
    /** Whether the relayer would take this authorization now (the checks `relay` runs first). */
    check,

    /** The relayer's record of this authorization, if it was ever asked to send it. */
    find: (req: Pick<RelayRequest, 'network' | 'token' | 'authorization'>) =>
      repo.find(identity(req)),

    /**
     * The most one relay of `token` on `network` can cost now: its gas ceiling at the network's
     * current max fee, in wei.
     */
    async worstCost(network: string, token: Address): Promise<bigint> {
      const n = byName.get(network)
      if (!n) throw new Error(`no relayer on ${network}`)
      const [ceiling, fees] = await Promise.all([
        ceilings.ceiling(n.name, n.client, token),
        n.client.estimateFeesPerGas(),
      ])
      return ceiling * fees.maxFeePerGas
    },

    /** Marks a relay as answered with success to a settle; false when it was already. */
    markAnswered: (id: string) => repo.markAnswered(id, new Date(deps.clock.now())),

    /**
     * Checks the authorization and, when the token would take it and every limit allows, signs,
     * records and sends it. Resolves with the relayer's transaction hash once the node accepted it
     * (or with the earlier one, `repeated`, when this authorization was sent before and still
     * stands); `outcome` tells how it ends.
     */
    async relay(req: RelayRequest): Promise<Outcome<Relayed>> {
      const n = byName.get(req.network)
      if (!n) return deny('unavailable', `no relayer on ${req.network}`)
      const repeat = await repeatOf(n, req, await repo.find(identity(req)))
      if (repeat) return repeat
      // The cheap refusals first: limits read from the records, before asking the node anything.
      const early = await limited(n, req, 0n)
      if (early) return early
      const code = await payerCode(n, req.authorization.from)
      if (!code.ok) return code
      const data = transferWithAuthorizationData(req.authorization, req.signature)
      const refusal = await simulate(n, data, req.token)
      if (refusal)
        return refuse(
          n.name,
          'simulation',
          'invalid_request',
          `the token would refuse this authorization: ${refusal}`,
        )
      const [gas, fees, ceiling] = await Promise.all([
        n.client.estimateGas({ account: sender, to: req.token, data }),
        n.client.estimateFeesPerGas(),
        ceilings.ceiling(n.name, n.client, req.token),
      ])
      const maxGas = code.value ? ceiling + BigInt(n.rules.contractPayerGas) : ceiling
      if (gas > maxGas)
        return refuse(
          n.name,
          'gas_ceiling',
          'invalid_request',
          `this payment would take ${gas} gas, more than a transfer of this token does (at most ${maxGas}); pay by transfer`,
        )
      if (fees.maxFeePerGas > deps.limits.maxFeePerGasWei)
        return refuse(
          n.name,
          'fee_cap',
          'unavailable',
          `gas costs ${formatGwei(fees.maxFeePerGas)} gwei now, above the relayer's cap of ${formatGwei(deps.limits.maxFeePerGasWei)} gwei; pay by transfer, or try again later`,
        )
      const gasLimit = gasLimitFor(gas, maxGas)
      const maxCost = gasLimit * fees.maxFeePerGas
      // One submission at a time per network and relayer account, in this process and across
      // instances sharing the key: no two take one nonce of the account, see each other's earlier
      // payment of a transaction, or overspend a budget together.
      const sent = await deps.exclusive(
        `relayer:${req.network}:${sender.toLowerCase()}`,
        async (): Promise<Outcome<Relayed>> => {
          const before = await repo.find(identity(req))
          const again = await repeatOf(n, req, before)
          if (again) return again
          const earlier = await earlierPayment(n, req)
          if (earlier) return deny('conflict', earlier)
          // The payer's code is not asked again here: an account can take code (an EIP-7702
          // delegation) until the relay is mined, so no check before sending closes that window;
          // the gas ceiling and the failure limits bound what it costs.
          const over = await limited(n, req, maxCost)
          if (over) return over
          const txNonce = await n.client.getTransactionCount({
            address: sender,
            blockTag: 'pending',
          })
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
          const sending: Submission = {
            txNonce,
            rawTransaction: raw,
            txHash: hash,
            maxCostWei: maxCost.toString(),
            status: 'sending',
            createdAt: new Date(deps.clock.now()),
          }
          let id: string
          if (before) {
            id = before.id
            await repo.resubmit(id, sending)
            deps.logger.info(
              'relayer: an authorization whose transaction left the chain is sent again',
              {
                network: req.network,
                previous: before.txHash,
              },
            )
          } else {
            id = newId('rel')
            const a = req.authorization
            const transactionId = req.makeTransaction
              ? await req.makeTransaction()
              : req.transactionId
            const recorded = await repo.insert({
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
              client: req.client,
              ...sending,
            })
            // Another instance recorded it a moment ago.
            if (!recorded) return deny('conflict', 'this authorization was submitted already')
          }
          try {
            await n.client.sendRawTransaction({ serializedTransaction: raw })
          } catch (e) {
            await repo.setStatus(id, 'refused')
            deps.logger.warn('relayer: the node refused the transaction', {
              network: req.network,
              error: (e as BaseError).shortMessage ?? String(e),
            })
            return deny(
              'unavailable',
              `the network did not take the relayer's transaction: ${(e as BaseError).shortMessage ?? String(e)}`,
            )
          }
          await repo.setStatus(id, 'sent')
          deps.logger.info('relayer: authorization sent', {
            network: req.network,
            hash,
            transactionId: req.transactionId,
          })
          return ok({ id, hash, repeated: false })
        },
      )
      if (sent.ok) watch(n, sent.value.id, sent.value.hash, req.authorization.validBefore)
      return sent
    },

    /**
     * How the relay ends: its receipt's verdict, `dropped` once it can no longer be mined, or
     * `pending` when neither is known within `waitMs`.
     */
    async outcome(relayed: Pick<Relayed, 'id' | 'hash'>, waitMs: number): Promise<RelayOutcome> {
      const row = await repo.get(relayed.id)
      if (!row) return 'dropped'
      if (row.txHash === relayed.hash && !['sending', 'sent'].includes(row.status))
        return row.status === 'refused' ? 'dropped' : (row.status as RelayOutcome)
      const n = byName.get(row.network)
      if (!n) return 'pending'
      let timer: ReturnType<typeof setTimeout> | undefined
      const waited = new Promise<'pending'>((r) => {
        timer = setTimeout(() => r('pending'), waitMs)
      })
      try {
        return await Promise.race([
          watch(n, row.id, relayed.hash, row.validBefore).catch(() => 'pending' as const),
          waited,
        ])
      } finally {
        clearTimeout(timer)
      }
    },

    /**
     * At start: sends again what was recorded but perhaps never reached the node, while its
     * authorization is still valid (the same bytes: mined at most once), and watches every relay
     * whose outcome is not known yet.
     */
    async resume(): Promise<void> {
      const now = BigInt(Math.floor(deps.clock.now() / 1000))
      for (const row of await repo.unresolved()) {
        const n = byName.get(row.network)
        if (!n) continue
        if (row.status === 'sending') {
          if (row.validBefore > now)
            await n.client
              .sendRawTransaction({ serializedTransaction: row.rawTransaction as Hex })
              .catch(() => {}) // already mined or known: the same bytes, the same payment
          await repo.setStatus(row.id, 'sent')
        }
        watch(n, row.id, row.txHash as Hex, row.validBefore)
      }
    },

    /** Stops watching; what is unresolved is watched again at the next start. */
    async stop(): Promise<void> {
      stopping.abort()
      await Promise.allSettled([...watching.values()])
    },
  }
}

export type Relayer = ReturnType<typeof createRelayer>
