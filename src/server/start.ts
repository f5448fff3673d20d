import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError, type Config } from '../config.ts'
import type { Resolver } from '../webhooks/url-guard.ts'
import { resolveSecretKey } from './secret-key.ts'
import { startDevnet, type Devnet } from '../chain/devnet.ts'
import { relayerSettings } from './relayer-settings.ts'
import { loadNetworksConfig, type NetworkConfig } from '../chain/networks-config.ts'
import { NetworkMismatchError } from '../chain/network-verification.ts'
import { createTestWallet } from '../chain/test-wallet.ts'
import { type Database, openDatabase, pgliteDirOf } from '../db/client.ts'
import { createDevnetOwners } from '../instances/devnet-owner.repo.ts'
import { createInstanceRepo } from '../instances/instance.repo.ts'
import { createApp } from '../http/app.ts'
import { measured } from '../http/http-metrics.ts'
import { servedServers } from '../http/openapi-shape.ts'
import { httpsOriginFor, refuseInsecure, startingUp } from '../http/transport.ts'
import { systemClock, type Clock } from '../lib/clock.ts'
import { createLogger, type Logger } from '../lib/logger.ts'
import { createServices, type Services } from '../services.ts'
import { listenAdminSocket } from './admin-socket.ts'
import { lockDataDir } from './data-dir-lock.ts'
import { instanceIdOf } from './instance-id.ts'
import { ensureDemoProject, type Demo } from './demo.ts'
import { serve, type Listener } from './serve.ts'
import { loadTls } from './tls.ts'

export interface RunningServer {
  port: number
  httpPort: number | null
  baseUrl: string
  services: Services
  demo: Demo | null
  /**
   * The local devnet when NETWORKS_CONFIG is not set (its funded wallet pays test transactions).
   */
  devnet: Devnet | null
  stop(): Promise<void>
}

const PRUNE_EVERY_MS = 10 * 60_000

/**
 * docs/decisions/0024-start-and-configuration.md start-up, runtime-neutral: certificate -> database
 * (migrated) -> TLS listener (answering 503 until ready) -> services, with every active
 * transaction's actor restored -> app, plain-HTTP listener, admin socket, demo project. Stopping
 * runs the other way, listeners first.
 */
export async function startServer(
  config: Config,
  opts: { clock?: Clock; logger?: Logger; resolver?: Resolver } = {},
): Promise<RunningServer> {
  const logger = opts.logger ?? createLogger(config.logLevel)
  const clock = opts.clock ?? systemClock
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const embedded = !config.databaseUrl
  const l = embedded
    ? lockDataDir(config.dataDir, 'server')
    : lockDataDir(config.dataDir, 'server', 'instance.lock')
  if ('heldBy' in l) {
    throw new Error(
      embedded
        ? `The embedded database in ${config.dataDir} is in use by ${l.heldBy}. Stop it or set another DATA_DIR.`
        : `DATA_DIR ${config.dataDir} is in use by ${l.heldBy}; every instance needs a DATA_DIR of its own.`,
    )
  }
  const lock: { release(): void } = l
  const cleanups: (() => Promise<void> | void)[] = []
  // Stopped first, so requests in flight finish before their services go away.
  const listeners: Listener[] = []
  let beginStop: (() => void) | null = null
  const stopAll = async () => {
    // A started server: readiness fails and event streams end first, and a balancer has
    // SHUTDOWN_DRAIN to notice.
    if (beginStop) {
      beginStop()
      if (config.shutdownDrainMs > 0)
        await new Promise((r) => setTimeout(r, config.shutdownDrainMs))
    }
    await Promise.all(listeners.map((l) => l.stop().catch(() => {})))
    await runCleanups(cleanups)
  }
  try {
    // Certificate problems are configuration errors: find them before touching the database.
    const tls = config.trustProxy
      ? undefined
      : await loadTls({
          certFile: config.tlsCertFile,
          keyFile: config.tlsKeyFile,
          dataDir: config.dataDir,
        })
    const database = await openDatabase({
      databaseUrl: config.databaseUrl,
      pgliteDir: embedded ? pgliteDirOf(config.dataDir) : null,
      warn: (message) => logger.warn(message),
    })
    cleanups.unshift(() => database.close())

    // Bind first (PORT=0 picks a free port), so the default BASE_URL can name the real port.
    let handler: (req: Request) => Response | Promise<Response> = startingUp
    const main: Listener = await listen(config, {
      port: config.port,
      tls,
      fetch: (req) => handler(req),
    })
    listeners.push(main)
    const baseUrl = config.baseUrl ?? `https://localhost:${main.port}`
    // Behind a proxy the public port is the proxy's; on our own TLS listener it is ours.
    const httpsOrigin = httpsOriginFor(
      config.baseUrl,
      config.trustProxy ? null : main.port,
      config.trustProxy,
    )

    const instanceId = instanceIdOf(config.dataDir)
    const networks = await loadNetworks(config, logger, cleanups, { database, instanceId, clock })
    const services = await createServices({
      database,
      clock,
      logger,
      baseUrl,
      leaseMs: config.actorLeaseMs,
      networks: networks.networks,
      instanceId,
      testWallet: networks.devnet
        ? createTestWallet({
            network: networks.devnet.networks[0],
            privateKey: networks.devnet.wallet.privateKey,
          })
        : null,
      secretKey: resolveSecretKey(config),
      webhookRetryScheduleMs: config.webhookRetryScheduleMs,
      resolver: opts.resolver,
      allowPrivateTestEndpoints: config.allowPrivateTestEndpoints,
      payLimits: config.payRateLimits,
      x402SettleLimits: config.x402SettleRateLimits,
      x402SettleWaitMs: config.x402SettleWaitMs,
      webhookDisableAfterMs: config.webhookDisableAfterMs,
      readyChainMaxLagMs: config.readyChainMaxLagMs,
      dataDir: config.dataDir,
      relayer: relayerSettings(config, networks.devnet?.relayerKey ?? null),
    })
    cleanups.unshift(() => services.stop())
    // Every network against its chain, before anything is quoted on it: a node that disagrees
    // with the config refuses the start; one that does not answer is checked again later.
    await services.chain.verify().catch((e) => {
      throw e instanceof NetworkMismatchError ? new ConfigError('NETWORKS_CONFIG', e.message) : e
    })
    // Recovery: every active transaction this instance may run gets its actor back; overdue
    // deadlines fire at once, the others keep their original time
    // (docs/decisions/0013-absolute-deadlines.md).
    await services.lifecycle.start()
    // Webhooks: this instance's unfinished deliveries, those nobody runs, and outbox events not
    // fanned out yet.
    await services.dispatcher.start()
    // A devnet whose kept chain was gone started a new chain: follow it from its head, as the new
    // chain it is (said once), rather than take its blocks for a reorg of the old one.
    const forgot =
      networks.devnet && !networks.devnet.restored ? await services.chain.forget('devnet') : null
    if (forgot?.ok && forgot.value.forgotten) {
      logger.warn(
        "the devnet's kept chain was missing, so it started a new chain; following that from its head (payments recorded on the old one keep their status)",
        { stateDir: join(config.dataDir, 'devnet') },
      )
    }
    // Stats: days that settled while the service was down (or before rollups existed) are rolled
    // up in the background, chunk by chunk (docs/decisions/0066-stats-from-settled-days.md).
    await services.rollups.settleAll()
    // Chains: each network's follower catches up from its cursor, then follows the head.
    await services.chain.start()
    // Signed payments recorded but perhaps not sent before a crash go out again (the same bytes),
    // and every relay whose outcome is not known yet is watched to its receipt.
    if (services.relayer) {
      await services.relayer.resume()
      logger.info(
        'relayer ready: payment by signature is offered on its networks (it pays gas only)',
        {
          address: services.relayer.address,
        },
      )
    }
    const app = createApp(services, {
      trustProxy: config.trustProxy,
      httpsOrigin,
      logger,
      metricsEnabled: config.metricsEnabled,
      metricsToken: config.metricsToken,
      servers: servedServers(baseUrl, config.apiUrl),
    })
    const handle = (req: Request) => app.handle(req)
    handler = config.metricsEnabled ? measured(handle, services.metrics, app.routes) : handle

    let plain: Listener | null = null
    if (config.httpPort !== 0 && !config.trustProxy) {
      plain = await listen(config, {
        port: config.httpPort,
        variable: 'HTTP_PORT',
        fetch: (req) => refuseInsecure(req, httpsOrigin),
      })
      listeners.push(plain)
    }
    // The CLI given this instance's DATA_DIR asks it (its `status` is then this instance's
    // readiness, as GET /readyz reports it); on the embedded database it is also the only way in.
    const admin = await listenAdminSocket(config.dataDir, services)
    cleanups.unshift(() => admin.close())
    const demo = embedded ? await ensureDemoProject(services) : null

    const timer = setInterval(
      () => services.prune().catch((e) => logger.warn('prune failed', { error: String(e) })),
      PRUNE_EVERY_MS,
    )
    ;(timer as { unref?: () => void }).unref?.()
    cleanups.unshift(() => clearInterval(timer))
    logger.info('listening', {
      port: main.port,
      httpPort: plain?.port ?? null,
      database: database.kind,
      tls: tls?.source ?? 'off (TRUST_PROXY)',
      actors: services.lifecycle.size,
    })

    beginStop = () => services.beginStop()
    let stopped: Promise<void> | null = null
    return {
      port: main.port,
      httpPort: plain?.port ?? null,
      baseUrl,
      services,
      demo,
      devnet: networks.devnet,
      stop: () => (stopped ??= stopAll().finally(() => lock.release())),
    }
  } catch (e) {
    await stopAll()
    lock.release()
    throw e
  }
}

async function runCleanups(cleanups: (() => Promise<void> | void)[]) {
  for (const c of cleanups) {
    try {
      await c()
    } catch {}
  }
}

/** Binds a listener; a failure names the variables to change (HOST, PORT or HTTP_PORT). */
async function listen(
  config: Config,
  o: {
    port: number
    variable?: string
    tls?: { cert: string; key: string }
    fetch: (req: Request) => Response | Promise<Response>
  },
): Promise<Listener> {
  try {
    return await serve({ port: o.port, host: config.host, tls: o.tls, fetch: o.fetch })
  } catch (e) {
    throw new ConfigError(
      `HOST/${o.variable ?? 'PORT'}`,
      `cannot listen on ${config.host}:${o.port}: ${e instanceof Error ? e.message : String(e)}`,
    )
  }
}

/**
 * docs/decisions/0016-networks-config-and-devnet.md: the networks of NETWORKS_CONFIG (validated,
 * every problem named), or without it a local devnet: anvil with a test stablecoin and price feed,
 * stopped with the server.
 */
async function loadNetworks(
  config: Config,
  logger: Logger,
  cleanups: (() => Promise<void> | void)[],
  shared: { database: Database; instanceId: string; clock: Clock },
): Promise<{ networks: NetworkConfig[]; devnet: Devnet | null }> {
  if (config.networksConfig) {
    try {
      return { networks: loadNetworksConfig(config.networksConfig), devnet: null }
    } catch (e) {
      throw new ConfigError('NETWORKS_CONFIG', e instanceof Error ? e.message : String(e))
    }
  }
  // Kept in DATA_DIR, so a restart finds the same chain and the payments made on it.
  const stateDir = join(config.dataDir, 'devnet')
  const start = async () => {
    const devnet = await startDevnet({ logger, stateDir })
    cleanups.unshift(() => devnet.stop())
    return { networks: devnet.networks, devnet }
  }
  // The embedded database is one process's: its devnet is too. On PostgreSQL, one instance runs
  // the database's devnet; another without NETWORKS_CONFIG would follow a chain of its own that
  // payments through the first never reach, so it is refused, told where the devnet is.
  if (!config.databaseUrl) return start()
  const owners = createDevnetOwners(shared.database)
  return shared.database.exclusive('devnet-owner', async () => {
    const now = shared.clock.now()
    const other = await owners.liveOther(shared.instanceId, new Date(now))
    if (other)
      throw new ConfigError(
        'NETWORKS_CONFIG',
        `is unset, and instance ${other.instanceId} already runs this database's devnet (anvil at ${other.rpcUrl}); set NETWORKS_CONFIG=${other.networksFile} (that devnet as a networks file) to follow the same chain, or run one instance on the devnet`,
      )
    const started = await start()
    await owners.claim({
      instanceId: shared.instanceId,
      rpcUrl: started.devnet.rpcUrl,
      networksFile: join(stateDir, 'networks.json'),
    })
    // Live from now (its lease proper starts with the services): another instance starting at
    // this moment sees the owner.
    await createInstanceRepo(shared.database.leaseDb).renew(
      shared.instanceId,
      new Date(now + Math.max(config.actorLeaseMs, 30_000)),
      new Date(now),
    )
    return started
  })
}
