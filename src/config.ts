import { resolve } from 'node:path'
import type { Level } from './lib/logger.ts'
import { parseSecretKey } from './lib/secret-box.ts'

/** Validated operator configuration (R24). Every variable is listed in the README. */
export interface Config {
  port: number
  /** Plain-HTTP listener that rejects /api and redirects the rest (R3); 0 disables it. */
  httpPort: number
  host: string
  /** Public origin from BASE_URL; null means `https://localhost:PORT` once the port is known. */
  baseUrl: string | null
  databaseUrl: string | null
  dataDir: string
  tlsCertFile: string | null
  tlsKeyFile: string | null
  /** Behind a TLS-terminating proxy: listen in plain HTTP and trust X-Forwarded-* (R3). */
  trustProxy: boolean
  logLevel: Level
  /** How long an instance holds its transactions' actors without renewing (several instances). */
  actorLeaseMs: number
  /** SECRET_KEY as given (32 bytes, hex or base64); null: a key generated under DATA_DIR (embedded database only). */
  secretKey: Buffer | null
  /** R19: delays between automatic webhook attempts, in ms. */
  webhookRetryScheduleMs: number[]
  /** R16: path of the networks JSON; null runs a local devnet (anvil). */
  networksConfig: string | null
  /** R26: requests per client IP to the pay page and its endpoints; null: the default (300/5000/50000). */
  payRateLimits: { minute: number; hour: number; day: number } | null
}

export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`)
  }
}

type Env = Record<string, string | undefined>

function port(env: Env, name: string, fallback: number, allowZero: boolean): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a port number, got "${raw}"`)
  const n = Number(raw)
  if (n > 65535 || (n === 0 && !allowZero)) throw new ConfigError(name, `must be between ${allowZero ? 0 : 1} and 65535, got ${n}`)
  return n
}

function flag(env: Env, name: string): boolean {
  const raw = (env[name] ?? '').toLowerCase()
  if (['', '0', 'false', 'no'].includes(raw)) return false
  if (['1', 'true', 'yes'].includes(raw)) return true
  throw new ConfigError(name, `must be 1 or 0, got "${env[name]}"`)
}

/** `PAY_RATE_LIMITS`: `minute/hour/day`, default `300/5000/50000` (a page polls and streams). */
export function parsePayRateLimits(raw: string | undefined): Config['payRateLimits'] {
  if (raw === undefined || raw === '') return null
  const m = /^(\d{1,9})\/(\d{1,9})\/(\d{1,10})$/.exec(raw.trim())
  const [minute, hour, day] = m ? [Number(m[1]), Number(m[2]), Number(m[3])] : []
  if (!m || !(minute! > 0 && minute! <= hour! && hour! <= day!)) {
    throw new ConfigError('PAY_RATE_LIMITS', `must be three positive request counts minute/hour/day, each no larger than the next (like 300/5000/50000), got "${raw}"`)
  }
  return { minute: minute!, hour: hour!, day: day! }
}

function leaseMs(env: Env): number {
  const raw = env.ACTOR_LEASE_MS
  if (raw === undefined || raw === '') return 10_000
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN
  if (!(n >= 300 && n <= 600_000)) throw new ConfigError('ACTOR_LEASE_MS', `must be milliseconds from 300 to 600000, got "${raw}"`)
  return n
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000 }

/** R19: `WEBHOOK_RETRY_SCHEDULE`, comma-separated delays with units s, m, h (default `1m,5m,30m,2h,8h`). */
export function parseRetrySchedule(raw: string | undefined): number[] {
  const text = raw === undefined || raw.trim() === '' ? '1m,5m,30m,2h,8h' : raw
  const parts = text.split(',').map((p) => p.trim())
  if (parts.length > 20) throw new ConfigError('WEBHOOK_RETRY_SCHEDULE', `at most 20 delays, got ${parts.length}`)
  return parts.map((p) => {
    const m = /^(\d{1,6})(s|m|h)$/.exec(p)
    if (!m || Number(m[1]) === 0) throw new ConfigError('WEBHOOK_RETRY_SCHEDULE', `each delay is a positive number with a unit s, m or h (like 30s, 5m, 2h), got "${p}"`)
    return Number(m[1]) * UNIT_MS[m[2]]
  })
}

const LEVELS: Level[] = ['debug', 'info', 'warn', 'error', 'silent']

/** Reads and validates the environment once at start-up; throws ConfigError naming the variable. */
export function loadConfig(env: Env = process.env): Config {
  const p = port(env, 'PORT', 3000, true)
  const tlsCertFile = env.TLS_CERT_FILE || null
  const tlsKeyFile = env.TLS_KEY_FILE || null
  if (!!tlsCertFile !== !!tlsKeyFile) {
    throw new ConfigError(tlsCertFile ? 'TLS_KEY_FILE' : 'TLS_CERT_FILE', 'TLS_CERT_FILE and TLS_KEY_FILE must be set together')
  }
  const logLevel = (env.LOG_LEVEL || 'info') as Level
  if (!LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LEVELS.join(', ')}`)
  const databaseUrl = env.DATABASE_URL || null
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must be a postgres:// or postgresql:// URL')
  }
  let baseUrl: string | null = null
  if (env.BASE_URL) {
    try {
      const u = new URL(env.BASE_URL)
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error()
      baseUrl = u.origin + u.pathname.replace(/\/+$/, '')
    } catch {
      throw new ConfigError('BASE_URL', `must be an absolute http(s) URL, got "${env.BASE_URL}"`)
    }
  }
  let secretKey: Buffer | null = null
  if (env.SECRET_KEY) {
    secretKey = parseSecretKey(env.SECRET_KEY)
    if (!secretKey) throw new ConfigError('SECRET_KEY', 'must be 32 random bytes as 64 hex characters or base64 (for example: openssl rand -hex 32)')
  } else if (databaseUrl) {
    // Every instance must open the secrets the others sealed, so the key cannot be made up locally.
    throw new ConfigError('SECRET_KEY', 'is required with DATABASE_URL, the same in every instance (generate one with: openssl rand -hex 32)')
  }
  return {
    port: p,
    httpPort: port(env, 'HTTP_PORT', 3080, true),
    host: env.HOST || '127.0.0.1',
    baseUrl,
    databaseUrl,
    dataDir: resolve(env.DATA_DIR || './.data'),
    tlsCertFile,
    tlsKeyFile,
    trustProxy: flag(env, 'TRUST_PROXY'),
    logLevel,
    actorLeaseMs: leaseMs(env),
    secretKey,
    webhookRetryScheduleMs: parseRetrySchedule(env.WEBHOOK_RETRY_SCHEDULE),
    networksConfig: env.NETWORKS_CONFIG ? resolve(env.NETWORKS_CONFIG) : null,
    payRateLimits: parsePayRateLimits(env.PAY_RATE_LIMITS),
  }
}
