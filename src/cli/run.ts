import { ConfigError, loadConfig, type Config } from '../config.ts'
import { humanText, parseArgs } from '../lib/command-line.ts'
import { sendAdminCommand } from '../server/admin-socket.ts'
import { lockDataDir } from '../server/data-dir-lock.ts'
import type { Services } from '../services.ts'
import { prepareCommand, runCommand, USAGE, type CommandResult, type Flags } from './commands.ts'

/** What one CLI run printed, and its exit code (0 done, 1 refused, 2 bad usage). */
export interface CliRun {
  code: number
  stdout: string
  stderr: string
}

/**
 * docs/decisions/0025-operator-cli.md: `npm run cli -- <command> [--json]`, given its arguments
 * and environment, to completion. It asks the server running on its DATA_DIR through its admin
 * socket; when none runs, it opens the database itself (PGlite, or PostgreSQL). src/cli/main.ts runs it for the process; tests run it in theirs.
 */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<CliRun> {
  const { words, flags } = parseArgs(argv)
  const json = flags.json === true
  if (flags.help) return { code: 0, stdout: `${USAGE}\n`, stderr: '' }
  let result: CommandResult
  try {
    // A bad command line is answered before any database is opened or created.
    const prepared = prepareCommand(words, flags)
    result = 'ok' in prepared ? prepared : await execute(loadConfig(env), words, flags)
  } catch (e) {
    const message =
      e instanceof ConfigError
        ? `Configuration error: ${e.message}`
        : `Failed: ${e instanceof Error ? e.message : String(e)}`
    result = { ok: false, usage: false, message }
  }
  return { code: result.ok ? 0 : result.usage ? 2 : 1, ...printed(result, json) }
}

async function execute(config: Config, words: string[], flags: Flags): Promise<CommandResult> {
  // A server running on this DATA_DIR answers for itself (its own readiness, its own state).
  const viaServer = await sendAdminCommand(config.dataDir, words, flags)
  if (viaServer) return viaServer
  if (!config.databaseUrl) {
    const lock = lockDataDir(config.dataDir, 'cli')
    if ('heldBy' in lock)
      return {
        ok: false,
        usage: false,
        message: `The embedded database is in use by ${lock.heldBy} and its admin socket does not answer.`,
      }
    try {
      return await withServices(config, true, words, flags)
    } finally {
      lock.release()
    }
  }
  return withServices(config, false, words, flags)
}

async function withServices(config: Config, embedded: boolean, words: string[], flags: Flags) {
  // Loaded only here: a command answered by the running server (or refused as bad usage) does
  // not pay for the database drivers and every service (about 0.2 s of each CLI call).
  const [
    { loadNetworksConfig },
    { openDatabase, pgliteDirOf },
    { systemClock },
    { createLogger },
    { createServices },
    { resolveSecretKey },
  ] = await Promise.all([
    import('../chain/networks-config.ts'),
    import('../db/client.ts'),
    import('../lib/clock.ts'),
    import('../lib/logger.ts'),
    import('../services.ts'),
    import('../server/secret-key.ts'),
  ])
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    pgliteDir: embedded ? pgliteDirOf(config.dataDir) : null,
    poolSize: 2,
  })
  let services: Services
  try {
    services = await createServices({
      database,
      clock: systemClock,
      logger: createLogger('warn'),
      baseUrl: '',
      secretKey: resolveSecretKey(config),
      webhookRetryScheduleMs: config.webhookRetryScheduleMs,
      allowPrivateTestEndpoints: config.allowPrivateTestEndpoints,
      webhookDisableAfterMs: config.webhookDisableAfterMs,
      // `status` reports who follows each configured network; the CLI itself follows none.
      networks: config.networksConfig ? loadNetworksConfig(config.networksConfig) : [],
      dataDir: config.dataDir,
      readyChainMaxLagMs: config.readyChainMaxLagMs,
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

/** What a result prints: JSON on one line with --json (stdout, or stderr for a refusal), else text. */
function printed(result: CommandResult, json: boolean): { stdout: string; stderr: string } {
  if (json) {
    const out = result.ok
      ? result.result
      : { error: { message: result.message, details: result.details ?? [] } }
    const line = `${JSON.stringify(out)}\n`
    return result.ok ? { stdout: line, stderr: '' } : { stdout: '', stderr: line }
  }
  if (!result.ok) return { stdout: '', stderr: `${result.message}\n` }
  return { stdout: `${humanText(result.result)}\n`, stderr: '' }
}
