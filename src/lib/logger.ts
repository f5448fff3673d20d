/**
 * Structured one-line JSON logs. Callers never pass secrets; `redact` strips known secret shapes
 * anyway.
 */
export type Level = 'debug' | 'info' | 'warn' | 'error' | 'silent'
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 99 }

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
}

const SECRET_RE = /\b(sk_(?:test|live)_)[A-Za-z0-9]{8,}/g
export const redact = (s: string) => s.replace(SECRET_RE, '$1[redacted]')

export function createLogger(
  level: Level = 'info',
  write: (line: string) => void = (l) => console.error(l),
): Logger {
  const min = ORDER[level] ?? ORDER.info
  const log = (lvl: Level) => (msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < min) return
    write(redact(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...fields })))
  }
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') }
}

/**
 * An error's first line, for a log field or an operator's message (stacks and multi-line RPC dumps
 * left out). viem's first line is its own generic one ("Invalid parameters were provided to the RPC
 * method."); what the node said is in `details`, which follows in parentheses (its first line).
 * URLs in it are left out: a runtime's fetch error may name the RPC URL, and RPC URLs carry API
 * keys.
 */
export function errorSummary(e: unknown): string {
  if (!(e instanceof Error)) return String(e)
  const first = e.message.split('\n')[0]!
  const details = (e as { details?: unknown }).details
  const said =
    typeof details === 'string'
      ? details.split('\n')[0]!.replace(URL_RE, '[url]').slice(0, 300)
      : ''
  return said && !first.includes(said) ? `${first} (${said})` : first
}

const URL_RE = /\b[a-z][a-z0-9+.-]*:\/\/[^\s)"']+/gi
