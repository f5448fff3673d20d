import { ConfigError, loadConfig, type Config } from '../config.ts'
import { loadNetworksConfig } from '../chain/networks-config.ts'
import { openDatabase, pgliteDirOf } from '../db/client.ts'
import { systemClock } from '../lib/clock.ts'
import { createLogger } from '../lib/logger.ts'
import { sendAdminCommand } from '../server/admin-socket.ts'
import { lockDataDir } from '../server/data-dir-lock.ts'
import { createServices, type Services } from '../services.ts'
import { resolveSecretKey } from '../server/secret-key.ts'
import { parseArgs, prepareCommand, runCommand, USAGE, type CommandResult, type Flags } from './commands.ts'

/**
 * R25: `npm run cli -- <command> [--json]`. On PostgreSQL it opens the database itself; on the
 * embedded database it asks the running server through its admin socket, or opens PGlite when
 * no server runs. Exit codes: 0 done, 1 refused (for example not found), 2 bad usage.
 */
async function execute(words: string[], flags: Flags): Promise<CommandResult> {
  const config = loadConfig()
  if (!config.databaseUrl) {
    const viaServer = await sendAdminCommand(config.dataDir, words, flags)
    if (viaServer) return viaServer
    const lock = lockDataDir(config.dataDir, 'cli')
    if ('heldBy' in lock) return { ok: false, usage: false, message: `The embedded database is in use by ${lock.heldBy} and its admin socket does not answer.` }
    try {
      return await withServices(config, pgliteDirOf(config.dataDir), words, flags)
    } finally {
      lock.release()
    }
  }
  return withServices(config, null, words, flags)
}

async function withServices(config: Config, pgliteDir: string | null, words: string[], flags: Flags) {
  const database = await openDatabase({ databaseUrl: config.databaseUrl, pgliteDir, poolSize: 2 })
  let services: Services
  try {
    services = await createServices({
      database, clock: systemClock, logger: createLogger('warn'), baseUrl: '',
      secretKey: resolveSecretKey(config), webhookRetryScheduleMs: config.webhookRetryScheduleMs,
      allowPrivateTestEndpoints: config.allowPrivateTestEndpoints, webhookDisableAfterMs: config.webhookDisableAfterMs,
      // `status` reports who follows each configured network; the CLI itself follows none.
      networks: config.networksConfig ? loadNetworksConfig(config.networksConfig) : [], dataDir: config.dataDir, readyChainMaxLagMs: config.readyChainMaxLagMs,
    })
  } catch (e) {
    await database.close()
    throw e
  }
  try {
    return await runCommand(services, words, flags)
  } finally {
    await services.stop()
    await database.close()
  }
}

function print(result: CommandResult, json: boolean) {
  if (json) {
    const out = result.ok ? result.result : { error: { message: result.message, details: result.details ?? [] } }
    ;(result.ok ? console.log : console.error)(JSON.stringify(out))
    return
  }
  if (!result.ok) return console.error(result.message)
  console.log(humanText(result.result))
}

/** A cell of the human form: lists joined, nothing shown as a dash, objects as compact JSON. */
function cell(v: unknown): string {
  if (v === null || v === undefined) return '-'
  if (Array.isArray(v)) return v.every((x) => typeof x !== 'object' || x === null) ? v.join(',') || '-' : JSON.stringify(v)
  return typeof v === 'object' ? JSON.stringify(v) : String(v)
}

/** The human form: `key: value` lines, and every list of records as an aligned table under its name. */
export function humanText(result: Record<string, unknown>): string {
  const out: string[] = []
  for (const [k, v] of Object.entries(result)) {
    const rows = Array.isArray(v) && v.length > 0 && v.every((r) => r !== null && typeof r === 'object' && !Array.isArray(r)) ? (v as Record<string, unknown>[]) : null
    if (!rows) {
      out.push(`${k}: ${Array.isArray(v) && v.length === 0 ? '(none)' : cell(v)}`)
      continue
    }
    const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))]
    const cells = rows.map((r) => columns.map((c) => cell(r[c])))
    const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)))
    const line = (values: string[]) => values.map((x, i) => (i === values.length - 1 ? x : x.padEnd(widths[i]!))).join('  ')
    out.push(`${k}:`, line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line))
  }
  return out.join('\n')
}

const { words, flags } = parseArgs(process.argv.slice(2))
const json = flags.json === true
if (flags.help) {
  console.log(USAGE)
  process.exit(0)
}
try {
  // A bad command line is answered before any database is opened or created.
  const prepared = prepareCommand(words, flags)
  const result = 'ok' in prepared ? prepared : await execute(words, flags)
  print(result, json)
  process.exit(result.ok ? 0 : result.usage ? 2 : 1)
} catch (e) {
  const message = e instanceof ConfigError ? `Configuration error: ${e.message}` : `Failed: ${e instanceof Error ? e.message : String(e)}`
  print({ ok: false, usage: false, message }, json)
  process.exit(1)
}
