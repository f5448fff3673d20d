import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.ts'
import type { Scope } from '../../src/keys/api-key.ts'
import type { Mode } from '../../src/projects/mode.ts'
import { createLogger, type Logger } from '../../src/lib/logger.ts'
import type { Clock } from '../../src/lib/clock.ts'
import { startServer, type RunningServer } from '../../src/server/start.ts'
import type { Resolver } from '../../src/webhooks/url-guard.ts'
import { freshDataDir, freshPostgres, type Backend } from './databases.ts'
import { NO_NETWORKS } from './processes.ts'

export interface TestServer {
  backend: Backend
  url: string
  port: number
  httpPort: number | null
  dataDir: string
  databaseUrl: string | null
  /**
   * What a CLI process needs to reach this server's data (DATA_DIR, and DATABASE_URL with
   * SECRET_KEY on PostgreSQL).
   */
  cliEnv: Record<string, string>
  /** PEM of the server's certificate, to trust it instead of turning verification off. */
  ca: string
  server: RunningServer
  /** HTTPS fetch against this server, trusting its certificate. */
  fetch(path: string, init?: RequestInit): Promise<Response>
  /** A new project with a key; `limits` default to something no test reaches by accident. */
  project(opts?: {
    name?: string
    mode?: Mode
    scopes?: Scope[]
    limits?: { minute: number; hour: number; day: number }
  }): Promise<{ id: string; key: string; keyId: string }>
  key(projectId: string, mode: Mode, scopes?: Scope[]): Promise<{ key: string; keyId: string }>
  /**
   * A graceful stop, then (after `whileStopped`, if given) a new server on the same DATA_DIR and
   * database (a new port).
   */
  restart(whileStopped?: () => Promise<void>): Promise<void>
  stop(): Promise<void>
}

/** A real HTTPS server in this process on a free port, with its own database. */
export async function startTestServer(
  backend: Backend,
  env: Record<string, string> = {},
  opts: { clock?: Clock; resolver?: Resolver; logger?: Logger } = {},
): Promise<TestServer> {
  const dataDir = await freshDataDir()
  const pg = backend === 'postgres' ? await freshPostgres() : null
  const config = loadConfig({
    PORT: '0',
    HTTP_PORT: '0',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    NETWORKS_CONFIG: NO_NETWORKS,
    ...(pg ? pg.env : {}),
    ...env,
  })
  const serverOptions = {
    clock: opts.clock,
    logger: opts.logger ?? createLogger('silent'),
    resolver: opts.resolver,
  }
  const server = await startServer(config, serverOptions)
  const ca = config.trustProxy
    ? ''
    : readFileSync(config.tlsCertFile ?? join(dataDir, 'tls', 'cert.pem'), 'utf8')
  const scheme = config.trustProxy ? 'http' : 'https'
  const urlOf = (port: number) => `${scheme}://localhost:${port}`
  const t: TestServer = {
    backend,
    url: urlOf(server.port),
    port: server.port,
    httpPort: server.httpPort,
    dataDir,
    databaseUrl: pg?.url ?? null,
    cliEnv: { DATA_DIR: dataDir, ...(pg ? pg.env : {}) },
    ca,
    server,
    fetch: (path, init = {}) =>
      fetch(t.url + path, { ...init, tls: { ca }, redirect: 'manual' } as RequestInit),
    async key(projectId, mode, scopes) {
      const k = await t.server.services.keys.create({
        projectId,
        mode,
        name: `test ${mode} key`,
        scopes,
      })
      if (!k.ok) throw new Error(k.message)
      return { key: k.value.key, keyId: k.value.record.id }
    },
    async project(o = {}) {
      const p = await t.server.services.projects.create(o.name ?? 'Test project')
      if (!p.ok) throw new Error(p.message)
      const limits = await t.server.services.projects.setLimits(
        p.value.id,
        o.limits ?? { minute: 100_000, hour: 1_000_000, day: 10_000_000 },
      )
      if (!limits.ok) throw new Error(limits.message)
      const k = await t.key(p.value.id, o.mode ?? 'test', o.scopes)
      return { id: p.value.id, ...k }
    },
    async restart(whileStopped) {
      await t.server.stop()
      await whileStopped?.()
      t.server = await startServer(config, serverOptions)
      t.port = t.server.port
      t.httpPort = t.server.httpPort
      t.url = urlOf(t.server.port)
    },
    async stop() {
      await t.server.stop()
      await pg?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
  return t
}

/** JSON helpers for API calls with a key. */
export function api(t: TestServer, key: string | null) {
  const headers = (extra: Record<string, string> = {}) => ({
    ...(key ? { authorization: `Bearer ${key}` } : {}),
    ...extra,
  })
  return {
    post: (path: string, body: unknown, extra: Record<string, string> = {}) =>
      t.fetch(path, {
        method: 'POST',
        headers: headers({ 'content-type': 'application/json', ...extra }),
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    get: (path: string, extra: Record<string, string> = {}) =>
      t.fetch(path, { headers: headers(extra) }),
    create: (body: unknown, extra: Record<string, string> = {}) =>
      t.fetch('/api/transactions/create', {
        method: 'POST',
        headers: headers({ 'content-type': 'application/json', ...extra }),
        body: JSON.stringify(body),
      }),
    /** The merchant API's transaction object. */
    async transaction(id: string): Promise<any> {
      return ((await (await this.get(`/api/transactions/${id}`)).json()) as any).transaction
    },
    /**
     * A transaction of `amountUsd` whose customer chose `token` on `network` on the pay page:
     * its id, deposit address, amount due in smallest units, and the whole quote.
     */
    async quoted(
      amountUsd: number,
      token = 'TUSD',
      network = 'localchain',
    ): Promise<{ id: string; address: string; units: bigint; quote: any }> {
      const id = ((await (await this.create({ amount: amountUsd })).json()) as any).transaction
        .id as string
      const r = await t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: token, blockchain_network: network }),
      })
      if (r.status !== 200)
        throw new Error(`selecting ${token} on ${network}: ${r.status} ${await r.text()}`)
      const quote = ((await r.json()) as any).quote
      return { id, address: quote.deposit_address, units: BigInt(quote.token_amount), quote }
    },
  }
}
