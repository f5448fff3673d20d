import { afterAll, beforeAll } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { NetworkConfig } from '../../src/chain/networks-config.ts'
import { startDevnet, type Devnet, type DevnetOptions } from '../../src/chain/devnet.ts'
import { startManualChain, writeNetworksFile, type ManualChain } from './chain.ts'
import type { Backend } from './databases.ts'
import { startRpcProxy, type RpcProxy } from './rpc-proxy.ts'
import { api, startTestServer, type TestServer } from './server.ts'
import { startTreasuryChain, type TreasuryChain } from './treasury.ts'

/**
 * What a test runs against, started in one call: a chain (mined by hand, the treasury tests'
 * or the devnet of `npm start`), optionally an RPC proxy between it and the service, the
 * networks file naming them, a server on `backend` following it, and a project with a key.
 */
export interface StackOptions {
  /** A chain mined by hand (startManualChain), with these options (true: the defaults). */
  chain?: true | Parameters<typeof startManualChain>[0]
  /**
   * The treasury tests' chain (a block per transaction, customer and gas wallets), with these
   * options.
   */
  treasury?: true | Parameters<typeof startTreasuryChain>[0]
  /**
   * The devnet `npm start` runs (anvil mining on its own, TUSD and ETH priced), with these options.
   */
  devnet?: DevnetOptions
  /** An RPC proxy between the server and the chain, so a test can hold or break what it sees. */
  proxy?: boolean
  /** Overrides for the chain's network entry (the default one network followed). */
  network?: Partial<NetworkConfig>
  /**
   * The networks the server follows, when the default one entry is not it. Other nodes it needs
   * are started here too, each stop handed to `defer` (run after the server has stopped).
   */
  networks?: (s: {
    chain?: ManualChain
    treasury?: TreasuryChain
    devnet?: Devnet
    /** The chain's or devnet's RPC URL as the server is to use it (through the proxy if any). */
    rpcUrl?: string
    defer(stop: () => unknown): void
  }) => NetworkConfig[] | Promise<NetworkConfig[]>
  /** More environment for the server; NETWORKS_CONFIG is set from the networks above. */
  env?: Record<string, string>
  /** A clock, DNS resolver or logger for the server. */
  server?: Parameters<typeof startTestServer>[2]
  /** The test's project; false: none is made. */
  project?: false | Parameters<TestServer['project']>[0]
}

export interface Stack {
  t: TestServer
  /** The project's API key ('' when none was made). */
  key: string
  projectId: string
  /** The NETWORKS_CONFIG file the server was given (null: no networks). */
  networksFile: string | null
  /** A temporary directory for the test's own files too; stop removes it. */
  dir: string
  /** JSON helpers for API calls with the project's key. */
  api: ReturnType<typeof api>
  /** Stops everything it started, the server first, and removes its files. */
  stop(): Promise<void>
}

/** The parts a stack has, given what it was asked for. */
export type StackOf<O extends StackOptions> = Stack &
  (O extends { chain: true | object } ? { chain: ManualChain } : unknown) &
  (O extends { treasury: true | object } ? { treasury: TreasuryChain } : unknown) &
  (O extends { devnet: object } ? { devnet: Devnet } : unknown) &
  (O extends { proxy: true } ? { proxy: RpcProxy } : unknown)

/** Starts a stack (see StackOptions); on a failure part-way, what was started is stopped again. */
export async function startStack<O extends StackOptions>(
  backend: Backend,
  options: O = {} as O,
): Promise<StackOf<O>> {
  const stops: (() => unknown)[] = []
  const stop = async () => {
    for (const s of stops.splice(0).reverse()) await s()
  }
  try {
    const chain = options.chain
      ? await startManualChain(options.chain === true ? {} : options.chain)
      : undefined
    if (chain) stops.push(() => chain.stop())
    const treasury = options.treasury
      ? await startTreasuryChain(options.treasury === true ? {} : options.treasury)
      : undefined
    if (treasury) stops.push(() => treasury.stop())
    const devnet = options.devnet ? await startDevnet(options.devnet) : undefined
    if (devnet) stops.push(() => devnet.stop())
    const upstream = (chain ?? treasury ?? devnet)?.rpcUrl
    const proxy = options.proxy && upstream ? await startRpcProxy(upstream) : undefined
    if (proxy) stops.push(() => proxy.close())
    const rpcUrl = proxy?.url ?? upstream
    const dir = mkdtempSync(join(tmpdir(), 'crypto-pay-stack-'))
    stops.push(() => rmSync(dir, { recursive: true, force: true }))
    const defer = (stop: () => unknown) => stops.push(stop)
    const one = chain ?? treasury
    const networks =
      (await options.networks?.({ chain, treasury, devnet, rpcUrl, defer })) ??
      (one ? [one.network({ rpcUrl, ...options.network })] : undefined) ??
      devnet?.networks.map((n) => ({ ...n, rpcUrl: rpcUrl!, ...options.network }))
    const networksFile = networks ? writeNetworksFile(dir, networks) : null
    const t = await startTestServer(
      backend,
      { ...(networksFile ? { NETWORKS_CONFIG: networksFile } : {}), ...options.env },
      options.server,
    )
    stops.push(() => t.stop())
    const project = options.project === false ? null : await t.project(options.project)
    return {
      t,
      key: project?.key ?? '',
      projectId: project?.id ?? '',
      networksFile,
      dir,
      api: api(t, project?.key ?? null),
      stop,
      ...(chain ? { chain } : {}),
      ...(treasury ? { treasury } : {}),
      ...(devnet ? { devnet } : {}),
      ...(proxy ? { proxy } : {}),
    } as StackOf<O>
  } catch (e) {
    await stop()
    throw e
  }
}

/**
 * Starts a stack before the tests of the enclosing describe (handing it to `ready`, which may
 * finish setting up) and stops it after them.
 */
export function useStack<O extends StackOptions>(
  backend: Backend,
  options: O,
  ready: (stack: StackOf<O>) => unknown,
): void {
  let stack: Stack | undefined
  beforeAll(async () => {
    const started = await startStack(backend, options)
    stack = started
    await ready(started)
  })
  afterAll(() => stack?.stop())
}
