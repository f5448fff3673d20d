import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import { formatEther } from 'viem'
import type { TxStatus } from '../../machines/transaction.machine.ts'
import { createHttpRequestMetrics } from './http-requests.ts'

/**
 * The instance's Prometheus metrics (docs/decisions/0047-metrics-and-probes.md), one registry per
 * running service (tests run several in one process). Every label value is from a bounded set:
 * route templates, methods, status codes, statuses, network names from the configuration, result
 * words. Never an id, a key, a URL or a raw path.
 */

/** Request time buckets, seconds: from a cached key read to a slow create. */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
/** Event committed to first webhook attempt, seconds. */
const LAG_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]

/** Where a rate limit refused a request. */
export type LimitedSurface = 'api' | 'pay' | 'sign_in'
/** What failed when talking to a chain's RPC. */
/**
 * `rate_limited`: HTTP 429 or a JSON-RPC rate-limit answer (each one, also those a retry got past);
 * `log_range`: an eth_getLogs range the provider refused (split and asked again).
 */
export const RPC_ERROR_KINDS = [
  'timeout',
  'unreachable',
  'http',
  'rpc',
  'invalid_response',
  'rate_limited',
  'log_range',
  'other',
] as const
export type RpcErrorKind = (typeof RPC_ERROR_KINDS)[number]
/** The statuses `cryptopay_transactions_total` counts (machines/transaction.machine.ts). */
const TRANSACTION_STATUSES = [
  'created',
  'prepared',
  'pending',
  'processing',
  'confirming',
  'completed',
  'failed',
  'expired',
  'cancelled',
] as const satisfies readonly TxStatus[]

/** How a relayed transaction ended (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md). */
export const RELAY_OUTCOMES = ['succeeded', 'reverted', 'dropped'] as const
export type RelayOutcomeLabel = (typeof RELAY_OUTCOMES)[number]
/** Why the relayer refused to send, before any gas. */
export const RELAY_REFUSALS = [
  'contract_payer',
  'gas_ceiling',
  'fee_cap',
  'simulation',
  'cooldown',
  'failures',
  'in_flight',
  'network_budget',
  'project_budget',
  'payer_budget',
] as const
export type RelayRefusalLabel = (typeof RELAY_REFUSALS)[number]

/** Read at scrape time from whoever knows (the registry, the runner, the chain watcher). */
export interface MetricSources {
  activeByStatus(): Record<string, number>
  webhookPending(): number
  /** Pay-page event streams open on this instance. */
  payStreams(): number
  /**
   * The networks this instance follows; `halted`: a reorg deeper than the follower remembers
   * stopped it.
   */
  chains(): { network: string; head: bigint | null; synced: bigint | null; halted: boolean }[]
  /** The relayer's native balance per network, in wei (null: the node did not answer). */
  relayerBalances(): Promise<{ network: string; wei: bigint | null }[]>
  /** Each fiat currency's USD rate as it stands (src/chain/fx-rates.ts). */
  rates(): { mode: string; currency: string; roundAgeSeconds: number | null }[]
}

export function createMetrics() {
  const registry = new Registry()
  // The runtime's metrics under prom-client's standard names (process_cpu_seconds_total,
  // nodejs_eventloop_lag_seconds, ...), which stock Node.js dashboards and alerts look for; the
  // service's own metrics carry the cryptopay_ prefix.
  collectDefaultMetrics({ register: registry })
  let sources: MetricSources | null = null
  const registers = [registry]

  const http = createHttpRequestMetrics(HTTP_BUCKETS)
  const transactionsTotal = new Counter({
    name: 'cryptopay_transactions_total',
    help: 'Transactions entering each status (creations and transitions committed by this instance)',
    labelNames: ['status'] as const,
    registers,
  })
  const deliveries = new Counter({
    name: 'cryptopay_webhook_deliveries_total',
    help: 'Webhook attempts made by this instance, by result (success: a 2xx answer)',
    labelNames: ['result'] as const,
    registers,
  })
  const deliveryLag = new Histogram({
    name: 'cryptopay_webhook_delivery_lag_seconds',
    help: 'From the event being committed to the first attempt of its delivery',
    buckets: LAG_BUCKETS,
    registers,
  })
  const endpointsDisabled = new Counter({
    name: 'cryptopay_webhook_endpoints_disabled_total',
    help: 'Webhook endpoints disabled automatically, by reason (gone: answered 410; failing: every delivery failed for WEBHOOK_DISABLE_AFTER)',
    labelNames: ['reason'] as const,
    registers,
  })
  const rpcErrors = new Counter({
    name: 'cryptopay_rpc_errors_total',
    help: 'Failed chain follower ticks, rate-limit answers and refused log ranges, by network and kind',
    labelNames: ['network', 'kind'] as const,
    registers,
  })
  const rateLimited = new Counter({
    name: 'cryptopay_rate_limited_total',
    help: 'Requests refused by a rate limit (429), by surface',
    labelNames: ['surface'] as const,
    registers,
  })
  const deepReorgs = new Counter({
    name: 'cryptopay_chain_deep_reorgs_total',
    help: 'Reorgs deeper than the block hashes the follower remembers, each of which halted its network (the operator must act)',
    labelNames: ['network'] as const,
    registers,
  })
  const reorgsAfterFinal = new Counter({
    name: 'cryptopay_reorgs_after_final_total',
    help: 'Payments taken back by a reorg after their transaction reached a final status (the operator must act)',
    labelNames: ['network'] as const,
    registers,
  })

  const relays = new Counter({
    name: 'cryptopay_relayer_relays_total',
    help: "The relayer's transactions by how they ended, per network: succeeded, reverted (gas spent for nothing), dropped (never mined, no gas spent)",
    labelNames: ['network', 'outcome'] as const,
    registers,
  })
  const relayGas = new Counter({
    name: 'cryptopay_relayer_spent_total',
    help: 'Gas the relayer paid, in whole native coins (ETH on Ethereum), per network and outcome (succeeded or reverted), as its receipts say',
    labelNames: ['network', 'outcome'] as const,
    registers,
  })
  const relayRefusals = new Counter({
    name: 'cryptopay_relayer_refusals_total',
    help: 'Payments by signature the relayer refused before spending anything, per network and reason',
    labelNames: ['network', 'reason'] as const,
    registers,
  })

  new Gauge({
    name: 'cryptopay_transactions_active',
    help: 'Active transactions whose actors run on this instance, by status',
    labelNames: ['status'] as const,
    registers,
    collect() {
      this.reset()
      for (const [status, n] of Object.entries(sources?.activeByStatus() ?? {}))
        this.set({ status }, n)
    },
  })
  new Gauge({
    name: 'cryptopay_webhook_pending',
    help: 'Unfinished webhook deliveries run by this instance (waiting for an attempt or a retry)',
    registers,
    collect() {
      this.set(sources?.webhookPending() ?? 0)
    },
  })
  new Gauge({
    name: 'cryptopay_pay_streams_open',
    help: 'Pay-page event streams (Server-Sent Events) open on this instance',
    registers,
    collect() {
      this.set(sources?.payStreams() ?? 0)
    },
  })
  new Gauge({
    name: 'cryptopay_chain_head_block',
    help: 'Latest block number the RPC reported, per network this instance follows',
    labelNames: ['network'] as const,
    registers,
    collect() {
      this.reset()
      for (const c of sources?.chains() ?? [])
        if (c.head !== null) this.set({ network: c.network }, Number(c.head))
    },
  })
  new Gauge({
    name: 'cryptopay_chain_follower_lag_blocks',
    help: 'Blocks between the head and the last block processed, per network this instance follows',
    labelNames: ['network'] as const,
    registers,
    collect() {
      this.reset()
      for (const c of sources?.chains() ?? []) {
        if (c.head !== null && c.synced !== null)
          this.set({ network: c.network }, Number(c.head > c.synced ? c.head - c.synced : 0n))
      }
    },
  })

  new Gauge({
    name: 'cryptopay_chain_halted',
    help: '1 while a network this instance follows is halted by a reorg deeper than it remembers (nothing on it completes until an operator runs network resume), else 0',
    labelNames: ['network'] as const,
    registers,
    collect() {
      this.reset()
      for (const c of sources?.chains() ?? []) this.set({ network: c.network }, c.halted ? 1 : 0)
    },
  })

  new Gauge({
    name: 'cryptopay_fx_rate_age_seconds',
    help: "Age of the round of each fiat currency's USD rate as last read, per mode; absent until first read. Past the feed's maxAgeSeconds, transactions in that currency are refused with 503",
    labelNames: ['mode', 'currency'] as const,
    registers,
    collect() {
      this.reset()
      for (const r of sources?.rates() ?? [])
        if (r.roundAgeSeconds !== null)
          this.set({ mode: r.mode, currency: r.currency }, r.roundAgeSeconds)
    },
  })

  new Gauge({
    name: 'cryptopay_relayer_balance',
    help: "The relayer's native-coin balance per network, in whole coins (ETH on Ethereum), as last read (at most 15 s old); absent while its node does not answer",
    labelNames: ['network'] as const,
    registers,
    async collect() {
      this.reset()
      for (const b of (await sources?.relayerBalances()) ?? [])
        if (b.wei !== null) this.set({ network: b.network }, Number(formatEther(b.wei)))
    },
  })

  // Every counter's series exists from the start at zero, so an alert on `increase(...) > 0`
  // fires on the first event too (a series born at 1 shows no increase).
  for (const result of ['success', 'failure']) deliveries.inc({ result }, 0)
  for (const reason of ['gone', 'failing']) endpointsDisabled.inc({ reason }, 0)
  for (const surface of ['api', 'pay', 'sign_in']) rateLimited.inc({ surface }, 0)
  for (const status of TRANSACTION_STATUSES) transactionsTotal.inc({ status }, 0)

  return {
    /** The networks followed: their counters' series at zero before any event. */
    networksKnown(networks: string[]) {
      for (const network of networks) {
        reorgsAfterFinal.inc({ network }, 0)
        deepReorgs.inc({ network }, 0)
        for (const kind of RPC_ERROR_KINDS) rpcErrors.inc({ network, kind }, 0)
      }
    },
    /** Tells the gauges where to read (the services, once wired). */
    setSources(s: MetricSources) {
      sources = s
    },
    httpRequest: http.record,
    transactionEntered: (status: string) => transactionsTotal.inc({ status }),
    webhookAttempt: (success: boolean) =>
      deliveries.inc({ result: success ? 'success' : 'failure' }),
    webhookFirstAttemptLag: (seconds: number) => deliveryLag.observe(Math.max(0, seconds)),
    endpointDisabled: (reason: 'gone' | 'failing') => endpointsDisabled.inc({ reason }),
    rpcError: (network: string, kind: RpcErrorKind) => rpcErrors.inc({ network, kind }),
    rateLimited: (surface: LimitedSurface) => rateLimited.inc({ surface }),
    reorgAfterFinal: (network: string) => reorgsAfterFinal.inc({ network }),
    deepReorg: (network: string) => deepReorgs.inc({ network }),
    /** Every relayer series of `networks` at zero, so a first event is an increase. */
    relayerNetworks(networks: string[]) {
      for (const network of networks) {
        for (const outcome of RELAY_OUTCOMES) relays.inc({ network, outcome }, 0)
        for (const outcome of ['succeeded', 'reverted'] as const)
          relayGas.inc({ network, outcome }, 0)
        for (const reason of RELAY_REFUSALS) relayRefusals.inc({ network, reason }, 0)
      }
    },
    relayEnded: (network: string, outcome: RelayOutcomeLabel, costWei: bigint) => {
      relays.inc({ network, outcome })
      if (costWei > 0n) relayGas.inc({ network, outcome }, Number(formatEther(costWei)))
    },
    relayRefused: (network: string, reason: RelayRefusalLabel) =>
      relayRefusals.inc({ network, reason }),
    /** The exposition text and its content type. */
    async scrape(): Promise<{ body: string; contentType: string }> {
      return {
        body: `${await registry.metrics()}\n${http.text()}`,
        contentType: registry.contentType,
      }
    },
  }
}

export type Metrics = ReturnType<typeof createMetrics>

/** What the classifiers below read of an error and of each cause under it. */
interface ErrorLink {
  name?: string
  message?: string
  details?: string
  status?: number
  headers?: Headers
  cause?: unknown
}

/** The error and the causes under it (viem nests several), at most six deep. */
export function errorChain(e: unknown): ErrorLink[] {
  const chain: ErrorLink[] = []
  for (
    let c = e as ErrorLink | undefined;
    c && typeof c === 'object' && chain.length < 6;
    c = c.cause as ErrorLink | undefined
  )
    chain.push(c)
  return chain
}

/** A kind for a failed RPC exchange, from viem's error names and the causes under them. */
export function rpcErrorKind(e: unknown): RpcErrorKind {
  const text = errorChain(e)
    .map((c) => `${c.name ?? ''} ${c.message ?? ''}`)
    .join(' | ')
  if (isRateLimit(e)) return 'rate_limited'
  if (/Timeout|timed out/i.test(text)) return 'timeout'
  if (
    /ECONNREFUSED|ECONNRESET|ENOTFOUND|Unable to connect|fetch failed|socket|ConnectionRefused/i.test(
      text,
    )
  )
    return 'unreachable'
  if (/HttpRequestError/.test(text)) return 'http'
  if (/RpcRequestError|RpcError|InternalRpcError|LimitExceeded/.test(text)) return 'rpc'
  if (/not a hex quantity|returned .*not a list|must link|does not match|invalid/i.test(text))
    return 'invalid_response'
  return 'other'
}

/**
 * HTTP 429, or a JSON-RPC answer saying the caller is over its rate (-32005 is also "limit
 * exceeded" for too many results).
 */
export function isRateLimit(e: unknown): boolean {
  return errorChain(e).some(
    (c) => c.status === 429 || RATE_LIMIT.test(`${c.message ?? ''} ${c.details ?? ''}`),
  )
}
const RATE_LIMIT =
  /rate.?limit|too many requests|exceeded .*(capacity|rate)|requests per second|\b429\b/i

/** The seconds a 429 asked to wait (`Retry-After`), when it said. */
export function retryAfterMs(e: unknown): number | null {
  for (const c of errorChain(e)) {
    const value = c.headers?.get?.('retry-after')
    if (value) {
      const seconds = Number(value)
      if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds, 3600) * 1000
      const at = Date.parse(value)
      if (!Number.isNaN(at)) return Math.min(Math.max(0, at - Date.now()), 3_600_000)
    }
  }
  return null
}
