import { resolve } from 'node:path'
import { Kind, Type, type Static, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import type { Level } from './lib/logger.ts'
import { parseSecretKey } from './lib/secret-box.ts'
import { StringEnum } from './lib/string-enum.ts'
import { explainErrors } from './lib/typebox-errors.ts'

/**
 * Validated operator configuration (docs/decisions/0024-start-and-configuration.md). Every variable
 * is listed in the README.
 */
export interface Config {
  port: number
  /**
   * Plain-HTTP listener that rejects /api and redirects the rest
   * (docs/decisions/0003-https-only.md); 0 disables it.
   */
  httpPort: number
  host: string
  /** Public origin from BASE_URL; null means `https://localhost:PORT` once the port is known. */
  baseUrl: string | null
  /**
   * API_URL: another origin that serves the same /api paths (say, behind another name); the OpenAPI
   * document lists it.
   */
  apiUrl: string | null
  databaseUrl: string | null
  dataDir: string
  tlsCertFile: string | null
  tlsKeyFile: string | null
  /**
   * Behind a TLS-terminating proxy: listen in plain HTTP and trust X-Forwarded-*
   * (docs/decisions/0003-https-only.md).
   */
  trustProxy: boolean
  logLevel: Level
  /**
   * How long an instance's lease lasts without renewal: it covers its transaction and delivery
   * actors and the networks it follows.
   */
  actorLeaseMs: number
  /**
   * SECRET_KEY as given (32 bytes, hex or base64); null: a key generated under DATA_DIR (embedded
   * database only).
   */
  secretKey: Buffer | null
  /** docs/decisions/0019-retry-schedule.md: delays between automatic webhook attempts, in ms. */
  webhookRetryScheduleMs: number[]
  /**
   * docs/decisions/0021-webhook-endpoints-and-private-addresses.md: test endpoints may target
   * loopback and private addresses (default: only with the embedded database).
   */
  allowPrivateTestEndpoints: boolean
  /**
   * docs/decisions/0016-networks-config-and-devnet.md: path of the networks JSON; null runs a local
   * devnet (anvil).
   */
  networksConfig: string | null
  /**
   * docs/decisions/0026-pay-page-endpoints.md: requests per client IP to the pay page and its
   * endpoints; null: the default (300/5000/50000).
   */
  payRateLimits: { minute: number; hour: number; day: number } | null
  /** GET /metrics and the HTTP request metrics (METRICS, default on). */
  metricsEnabled: boolean
  /** Bearer token GET /metrics requires; null: only loopback clients may scrape. */
  metricsToken: string | null
  /**
   * An endpoint whose every attempt failed for this long is disabled (WEBHOOK_DISABLE_AFTER,
   * default 5d).
   */
  webhookDisableAfterMs: number
  /**
   * Readiness fails when a network's follower here is out of step with the head this long
   * (READY_CHAIN_MAX_LAG, default 120s).
   */
  readyChainMaxLagMs: number
  /**
   * On SIGTERM, readiness fails this long before the listeners close, so a balancer drains the
   * instance (SHUTDOWN_DRAIN, default 0s).
   */
  shutdownDrainMs: number
  /**
   * docs/decisions/0062-pay-by-signature.md: the relayer's private key file (RELAYER_KEY_FILE);
   * null: no relayer (on the devnet, one of its funded accounts). It pays gas only.
   */
  relayerKeyFile: string | null
  /**
   * The relayer's bounds (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md): max fee
   * per gas (gwei); gas per rolling hour (native coin) per network, per project on a network and
   * per payer on a network; relays of one project on one network that may revert in an hour and
   * that may be unmined at once; and the balance (native coin) below which readiness warns.
   */
  relayer: {
    maxFeeGwei: string
    maxSpendPerHour: string
    projectSpendPerHour: string
    payerSpendPerHour: string
    failuresPerHour: number
    inFlight: number
    minBalance: string
  }
  /**
   * Settles (and verifies) per API key of the x402 facilitator, per minute/hour/day
   * (X402_SETTLE_RATE_LIMITS); null: the default (60/1000/10000).
   */
  x402SettleRateLimits: { minute: number; hour: number; day: number } | null
  /**
   * How long an x402 settle (the facilitator's, or a transaction's x402_url) waits for the
   * relayer's receipt before answering `settlement_pending` (X402_SETTLE_WAIT, default 60s).
   */
  x402SettleWaitMs: number
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`)
  }
}

type Env = Record<string, string | undefined>

const LEVELS: Level[] = ['debug', 'info', 'warn', 'error', 'silent']
/** A positive duration with a unit: 90s, 15m, 12h, 5d. */
const DURATION = '^(?=\\d*[1-9])\\d{1,6}[smhd]$'
/** A positive decimal with at most 18 places: an amount of a chain's native coin, or gwei. */
const DECIMAL = '^(?=[0-9.]*[1-9])[0-9]{1,12}(\\.[0-9]{1,18})?$'
const Port = Type.Integer({ minimum: 0, maximum: 65535 })
const text = () => Type.Optional(Type.String())

/**
 * The variables, each as the type `readEnv` reads it as; unset ones take their defaults in
 * `loadConfig`. When several are wrong the first in this order is reported, so keep it.
 */
const EnvSchema = Type.Object({
  PORT: Type.Optional(Port),
  TLS_CERT_FILE: text(),
  TLS_KEY_FILE: text(),
  LOG_LEVEL: Type.Optional(StringEnum(LEVELS)),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  BASE_URL: text(),
  API_URL: text(),
  SECRET_KEY: text(),
  HTTP_PORT: Type.Optional(Port),
  TRUST_PROXY: Type.Optional(Type.Boolean()),
  ACTOR_LEASE_MS: Type.Optional(Type.Integer({ minimum: 300, maximum: 600_000 })),
  // The lookahead asks for a non-zero digit: a delay of 0s would retry at once.
  WEBHOOK_RETRY_SCHEDULE: Type.Optional(
    Type.Array(Type.String({ pattern: '^(?=\\d*[1-9])\\d{1,6}[smh]$' }), { maxItems: 20 }),
  ),
  WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: Type.Optional(Type.Boolean()),
  PAY_RATE_LIMITS: Type.Optional(Type.String({ pattern: '^\\s*\\d{1,9}/\\d{1,9}/\\d{1,10}\\s*$' })),
  HOST: text(),
  DATA_DIR: text(),
  NETWORKS_CONFIG: text(),
  METRICS: Type.Optional(Type.Boolean()),
  // At least 16 characters of token68 (RFC 9110 11.2), so a bearer header carries it unchanged.
  METRICS_TOKEN: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._~+/-]{16,200}=*$' })),
  WEBHOOK_DISABLE_AFTER: Type.Optional(Type.String({ pattern: DURATION })),
  READY_CHAIN_MAX_LAG: Type.Optional(Type.String({ pattern: DURATION })),
  SHUTDOWN_DRAIN: Type.Optional(Type.String({ pattern: '^\\d{1,4}s$' })),
  X402_SETTLE_WAIT: Type.Optional(Type.String({ pattern: '^(?=\\d*[1-9])\\d{1,3}s$' })),
  RELAYER_KEY_FILE: text(),
  RELAYER_MAX_FEE_GWEI: Type.Optional(Type.String({ pattern: DECIMAL })),
  RELAYER_MAX_SPEND_PER_HOUR: Type.Optional(Type.String({ pattern: DECIMAL })),
  RELAYER_MIN_BALANCE: Type.Optional(Type.String({ pattern: DECIMAL })),
  RELAYER_PROJECT_SPEND_PER_HOUR: Type.Optional(Type.String({ pattern: DECIMAL })),
  RELAYER_PAYER_SPEND_PER_HOUR: Type.Optional(Type.String({ pattern: DECIMAL })),
  RELAYER_FAILURES_PER_HOUR: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
  RELAYER_IN_FLIGHT: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
  X402_SETTLE_RATE_LIMITS: Type.Optional(
    Type.String({ pattern: '^\\s*\\d{1,9}/\\d{1,9}/\\d{1,10}\\s*$' }),
  ),
})
type Vars = Static<typeof EnvSchema>
type Variable = keyof Vars
const VARIABLES = Object.keys(EnvSchema.properties) as Variable[]
const checkEnv = TypeCompiler.Compile(EnvSchema)

/**
 * The environment holds only strings: each is read as the type its schema asks for, and text
 * that does not read as one is left as it is, for the check to refuse. Empty means unset.
 */
function readEnv(env: Env): Record<string, unknown> {
  const vars: Record<string, unknown> = {}
  for (const name of VARIABLES) {
    const raw = env[name]
    const value =
      raw === undefined || raw === '' ? undefined : readAs(EnvSchema.properties[name], raw)
    if (value !== undefined) vars[name] = value
  }
  return vars
}

function readAs(schema: TSchema, raw: string): unknown {
  switch (schema[Kind]) {
    case 'Integer':
      return /^\d+$/.test(raw) ? Number(raw) : raw
    case 'Boolean': {
      const word = raw.toLowerCase()
      return ['1', 'true', 'yes'].includes(word)
        ? true
        : ['0', 'false', 'no'].includes(word)
          ? false
          : raw
    }
    case 'Array': // a blank list is unset too, so its default applies
      return raw.trim() === '' ? undefined : raw.split(',').map((item) => item.trim())
    default:
      return raw
  }
}

/** How a schema error reads, given the variable's text as set. */
type Explain = (e: ValueError, raw: string) => string
const portMessage: Explain = (e, raw) =>
  e.type === ValueErrorType.Integer
    ? `must be a port number, got "${raw}"`
    : `must be between ${e.schema.minimum} and ${e.schema.maximum}, got ${e.value}`
const payRateLimitsMessage = (raw: string) =>
  `must be three positive request counts minute/hour/day, each no larger than the next (like 300/5000/50000), got "${raw}"`
const EXPLAIN: Partial<Record<Variable, Explain>> = {
  PORT: portMessage,
  HTTP_PORT: portMessage,
  LOG_LEVEL: () => `must be one of ${LEVELS.join(', ')}`,
  DATABASE_URL: () => 'must be a postgres:// or postgresql:// URL',
  TRUST_PROXY: (_, raw) => `must be 1 or 0, got "${raw}"`,
  WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: (_, raw) => `must be 1 or 0, got "${raw}"`,
  ACTOR_LEASE_MS: (e, raw) =>
    `must be milliseconds from ${e.schema.minimum} to ${e.schema.maximum}, got "${raw}"`,
  WEBHOOK_RETRY_SCHEDULE: (e) =>
    e.type === ValueErrorType.ArrayMaxItems
      ? `at most ${e.schema.maxItems} delays, got ${(e.value as string[]).length}`
      : `each delay is a positive number with a unit s, m or h (like 30s, 5m, 2h), got "${e.value}"`,
  PAY_RATE_LIMITS: (_, raw) => payRateLimitsMessage(raw),
  METRICS: (_, raw) => `must be 1 or 0, got "${raw}"`,
  RELAYER_MAX_FEE_GWEI: (_, raw) =>
    `must be a positive decimal number of gwei (like 50 or 0.5), got "${raw}"`,
  RELAYER_MAX_SPEND_PER_HOUR: (_, raw) =>
    `must be a positive decimal amount of the native coin (like 0.05), got "${raw}"`,
  RELAYER_MIN_BALANCE: (_, raw) =>
    `must be a positive decimal amount of the native coin (like 0.02), got "${raw}"`,
  RELAYER_PROJECT_SPEND_PER_HOUR: (_, raw) =>
    `must be a positive decimal amount of the native coin (like 0.01), got "${raw}"`,
  RELAYER_PAYER_SPEND_PER_HOUR: (_, raw) =>
    `must be a positive decimal amount of the native coin (like 0.002), got "${raw}"`,
  RELAYER_FAILURES_PER_HOUR: (e, raw) =>
    `must be a whole number from ${e.schema.minimum} to ${e.schema.maximum}, got "${raw}"`,
  RELAYER_IN_FLIGHT: (e, raw) =>
    `must be a whole number from ${e.schema.minimum} to ${e.schema.maximum}, got "${raw}"`,
  X402_SETTLE_RATE_LIMITS: (_, raw) => payRateLimitsMessage(raw),
  METRICS_TOKEN: () =>
    'must be 16 to 200 characters of letters, digits and ._~+/- (for example: openssl rand -hex 32)',
  WEBHOOK_DISABLE_AFTER: (_, raw) =>
    `must be a positive duration with a unit s, m, h or d (like 5d or 36h), got "${raw}"`,
  READY_CHAIN_MAX_LAG: (_, raw) =>
    `must be a positive duration with a unit s, m, h or d (like 120s or 5m), got "${raw}"`,
  SHUTDOWN_DRAIN: (_, raw) => `must be whole seconds like 0s or 15s, got "${raw}"`,
  X402_SETTLE_WAIT: (_, raw) => `must be whole seconds from 1s to 999s, like 60s, got "${raw}"`,
}

const TLS_PAIR = 'TLS_CERT_FILE and TLS_KEY_FILE must be set together'

/**
 * What the schema cannot say. A rule runs only if its own variable passed the schema; it reads
 * others (DATABASE_URL, the TLS pair) for whether they are set, nothing more.
 */
const RULES: [Variable, (v: Vars) => string | undefined][] = [
  ['TLS_CERT_FILE', (v) => (v.TLS_KEY_FILE && !v.TLS_CERT_FILE ? TLS_PAIR : undefined)],
  ['TLS_KEY_FILE', (v) => (v.TLS_CERT_FILE && !v.TLS_KEY_FILE ? TLS_PAIR : undefined)],
  [
    'BASE_URL',
    (v) =>
      v.BASE_URL !== undefined && httpOrigin(v.BASE_URL) === null
        ? `must be an absolute http(s) URL, got "${v.BASE_URL}"`
        : undefined,
  ],
  [
    'API_URL',
    (v) =>
      v.API_URL !== undefined && httpOrigin(v.API_URL) === null
        ? `must be an absolute http(s) URL, got "${v.API_URL}"`
        : undefined,
  ],
  [
    'SECRET_KEY',
    (v) => {
      if (v.SECRET_KEY !== undefined) {
        return parseSecretKey(v.SECRET_KEY)
          ? undefined
          : 'must be 32 random bytes as 64 hex characters or base64 (for example: openssl rand -hex 32)'
      }
      // Every instance must open the secrets the others sealed, so the key cannot be made up
      // locally.
      if (v.DATABASE_URL !== undefined)
        return 'is required with DATABASE_URL, the same in every instance (generate one with: openssl rand -hex 32)'
    },
  ],
  ['PAY_RATE_LIMITS', (v) => orderedLimits(v.PAY_RATE_LIMITS)],
  ['X402_SETTLE_RATE_LIMITS', (v) => orderedLimits(v.X402_SETTLE_RATE_LIMITS)],
]

/** Limits minute/hour/day must be positive and each no larger than the next. */
function orderedLimits(raw: string | undefined): string | undefined {
  if (raw === undefined) return
  const { minute, hour, day } = rateLimits(raw)
  return minute > 0 && minute <= hour && hour <= day ? undefined : payRateLimitsMessage(raw)
}

/** The variables of `env`, read and checked; throws ConfigError naming the first one at fault. */
function validated(env: Env): Vars {
  const vars = readEnv(env)
  const problems = new Map<Variable, string>()
  const explained = explainErrors(checkEnv.Errors(vars), vars, {
    word: (e, [name]) => EXPLAIN[name as Variable]?.(e, env[name as Variable]!),
  })
  for (const { at, message } of explained) {
    const name = at[0] as Variable
    if (!problems.has(name)) problems.set(name, message)
  }
  for (const [name, rule] of RULES) {
    const message = problems.has(name) ? undefined : rule(vars as Vars)
    if (message) problems.set(name, message)
  }
  const first = VARIABLES.find((name) => problems.has(name))
  if (first) throw new ConfigError(first, problems.get(first)!)
  return vars as Vars
}

function httpOrigin(text: string): string | null {
  const u = URL.parse(text)
  if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:')) return null
  return u.origin + u.pathname.replace(/\/+$/, '')
}

const rateLimits = (text: string) => {
  const [minute, hour, day] = text.trim().split('/').map(Number) as [number, number, number]
  return { minute, hour, day }
}

const DEFAULT_RETRY_SCHEDULE = '1m,5m,30m,2h,8h'
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const durationMs = (d: string) => Number(d.slice(0, -1)) * UNIT_MS[d.slice(-1)]
/**
 * docs/decisions/0019-retry-schedule.md: `WEBHOOK_RETRY_SCHEDULE` as milliseconds (default
 * `1m,5m,30m,2h,8h`).
 */
const retryScheduleMs = (delays = DEFAULT_RETRY_SCHEDULE.split(',')) => delays.map(durationMs)

/** Reads and validates the environment once at start-up; throws ConfigError naming the variable. */
export function loadConfig(env: Env = process.env): Config {
  const v = validated(env)
  return {
    port: v.PORT ?? 3000,
    httpPort: v.HTTP_PORT ?? 3080,
    host: v.HOST ?? '127.0.0.1',
    baseUrl: v.BASE_URL === undefined ? null : httpOrigin(v.BASE_URL),
    apiUrl: v.API_URL === undefined ? null : httpOrigin(v.API_URL),
    databaseUrl: v.DATABASE_URL ?? null,
    dataDir: resolve(v.DATA_DIR ?? './.data'),
    tlsCertFile: v.TLS_CERT_FILE ?? null,
    tlsKeyFile: v.TLS_KEY_FILE ?? null,
    trustProxy: v.TRUST_PROXY ?? false,
    logLevel: v.LOG_LEVEL ?? 'info',
    actorLeaseMs: v.ACTOR_LEASE_MS ?? 10_000,
    secretKey: v.SECRET_KEY === undefined ? null : parseSecretKey(v.SECRET_KEY),
    webhookRetryScheduleMs: retryScheduleMs(v.WEBHOOK_RETRY_SCHEDULE),
    // A merchant's receiver on their own machine is the embedded database's use; a shared
    // deployment (DATABASE_URL) keeps dashboard members off the operator's network by default.
    allowPrivateTestEndpoints:
      v.WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS ?? v.DATABASE_URL === undefined,
    networksConfig: v.NETWORKS_CONFIG === undefined ? null : resolve(v.NETWORKS_CONFIG),
    payRateLimits: v.PAY_RATE_LIMITS === undefined ? null : rateLimits(v.PAY_RATE_LIMITS),
    metricsEnabled: v.METRICS ?? true,
    metricsToken: v.METRICS_TOKEN ?? null,
    webhookDisableAfterMs: durationMs(v.WEBHOOK_DISABLE_AFTER ?? '5d'),
    readyChainMaxLagMs: durationMs(v.READY_CHAIN_MAX_LAG ?? '120s'),
    shutdownDrainMs: durationMs(v.SHUTDOWN_DRAIN ?? '0s'),
    x402SettleWaitMs: durationMs(v.X402_SETTLE_WAIT ?? '60s'),
    relayerKeyFile: v.RELAYER_KEY_FILE === undefined ? null : resolve(v.RELAYER_KEY_FILE),
    relayer: {
      maxFeeGwei: v.RELAYER_MAX_FEE_GWEI ?? '200',
      maxSpendPerHour: v.RELAYER_MAX_SPEND_PER_HOUR ?? '0.05',
      projectSpendPerHour: v.RELAYER_PROJECT_SPEND_PER_HOUR ?? '0.01',
      payerSpendPerHour: v.RELAYER_PAYER_SPEND_PER_HOUR ?? '0.002',
      failuresPerHour: v.RELAYER_FAILURES_PER_HOUR ?? 3,
      inFlight: v.RELAYER_IN_FLIGHT ?? 4,
      minBalance: v.RELAYER_MIN_BALANCE ?? '0.02',
    },
    x402SettleRateLimits:
      v.X402_SETTLE_RATE_LIMITS === undefined ? null : rateLimits(v.X402_SETTLE_RATE_LIMITS),
  }
}
