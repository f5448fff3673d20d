import { resolve } from 'node:path'
import type { Level } from './lib/logger.ts'

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

function leaseMs(env: Env): number {
  const raw = env.ACTOR_LEASE_MS
  if (raw === undefined || raw === '') return 10_000
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN
  if (!(n >= 300 && n <= 600_000)) throw new ConfigError('ACTOR_LEASE_MS', `must be milliseconds from 300 to 600000, got "${raw}"`)
  return n
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
  }
}
