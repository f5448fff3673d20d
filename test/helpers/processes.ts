import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The repository root: processes run there, as `npm start` and `npm run cli` do. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const BUN = join(ROOT, 'node_modules/.bin/bun')
export const DENO = join(ROOT, 'node_modules/.bin/deno')

export type Runtime = 'bun' | 'deno'

/**
 * Every variable the server or the CLI reads (docs/decisions/0024-start-and-configuration.md). A
 * child gets none of them from the test runner's environment: a PGlite test must not inherit the
 * DATABASE_URL of a PostgreSQL run.
 */
const CONFIG_VARS = [
  'PORT',
  'HTTP_PORT',
  'HOST',
  'BASE_URL',
  'DATABASE_URL',
  'DATA_DIR',
  'TLS_CERT_FILE',
  'TLS_KEY_FILE',
  'TRUST_PROXY',
  'NETWORKS_CONFIG',
  'SECRET_KEY',
  'WEBHOOK_RETRY_SCHEDULE',
  'LOG_LEVEL',
  'ACTOR_LEASE_MS',
  'WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS',
  'PAY_RATE_LIMITS',
  'METRICS',
  'METRICS_TOKEN',
  'WEBHOOK_DISABLE_AFTER',
  'READY_CHAIN_MAX_LAG',
  'SHUTDOWN_DRAIN',
]

function childEnv(env: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !CONFIG_VARS.includes(k)) out[k] = v
  return { ...out, ...env }
}

function argv(runtime: Runtime, script: string, args: string[]): [string, string[]] {
  return runtime === 'bun'
    ? [BUN, [script, ...args]]
    : [DENO, ['run', '--allow-all', script, ...args]]
}

/** Everything this module started and that has not exited yet; `killAllProcesses` ends them. */
const live = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

/**
 * Accumulated output of one stream, with waiting for a pattern driven by the data events (no
 * polling).
 */
class Output {
  text = ''
  private listeners = new Set<() => void>()
  push(chunk: string) {
    this.text += chunk
    for (const l of this.listeners) l()
  }
  onChange(l: () => void) {
    this.listeners.add(l)
    return () => this.listeners.delete(l)
  }
}

export interface Exit {
  code: number | null
  signal: NodeJS.Signals | null
}

/** A process started by a test. */
export interface Proc {
  pid: number
  stdout(): string
  stderr(): string
  /** Resolves once the stream contains a match; rejects when the process exits first. */
  waitFor(stream: 'stdout' | 'stderr', pattern: RegExp): Promise<RegExpMatchArray>
  kill(signal?: NodeJS.Signals): void
  exited: Promise<Exit>
}

/** Starts `script` (relative to the repository root) under Bun or Deno. */
export function startProcess(
  script: string,
  opts: { env?: Record<string, string>; runtime?: Runtime; args?: string[] } = {},
): Proc {
  const [cmd, args] = argv(opts.runtime ?? 'bun', script, opts.args ?? [])
  const child = spawn(cmd, args, {
    cwd: ROOT,
    env: childEnv(opts.env ?? {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  live.add(child)
  const out = { stdout: new Output(), stderr: new Output() }
  child.stdout!.setEncoding('utf8').on('data', (c: string) => out.stdout.push(c))
  child.stderr!.setEncoding('utf8').on('data', (c: string) => out.stderr.push(c))
  let done: Exit | null = null
  const exited = new Promise<Exit>((resolve) => {
    // 'close' comes after both pipes are drained, so the output is complete by then.
    child.on('close', (code, signal) => {
      live.delete(child)
      done = { code, signal }
      resolve(done)
      for (const o of [out.stdout, out.stderr]) o.push('')
    })
    child.on('error', (e) => out.stderr.push(`\n[spawn error] ${e.message}\n`))
  })
  return {
    pid: child.pid!,
    stdout: () => out.stdout.text,
    stderr: () => out.stderr.text,
    waitFor(stream, pattern) {
      const o = out[stream]
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = o.text.match(pattern)
          if (m) {
            off()
            resolve(m)
          } else if (done) {
            off()
            reject(
              new Error(
                `process ${child.pid} exited (${done.code ?? done.signal}) before ${stream} matched ${pattern}\n--- stdout ---\n${out.stdout.text}\n--- stderr ---\n${out.stderr.text}`,
              ),
            )
          }
        }
        const off = o.onChange(check)
        check()
      })
    },
    kill(signal = 'SIGTERM') {
      if (!done) child.kill(signal)
    },
    exited,
  }
}

/** A server process that has logged its "listening" line. */
export interface ServerProcess extends Proc {
  port: number
  httpPort: number | null
  /** `https://localhost:PORT` (`http://` under TRUST_PROXY). */
  url: string
  /**
   * PEM of the certificate it serves (TLS_CERT_FILE, else DATA_DIR/tls/cert.pem); '' under
   * TRUST_PROXY.
   */
  ca: string
  /** The parsed "listening" log line. */
  listening: Record<string, unknown>
  /** Fetch against this server, trusting its certificate; redirects are not followed. */
  fetch(path: string, init?: RequestInit): Promise<Response>
  /** SIGTERM and wait for the exit; SIGKILL if it has not gone after `graceMs` (cleanup only). */
  stop(graceMs?: number): Promise<Exit>
}

/**
 * A networks file listing no network: servers under test take no payments unless a test configures
 * a chain.
 */
export const NO_NETWORKS = join(tmpdir(), 'crypto-pay-test-no-networks.json')
writeFileSync(NO_NETWORKS, '[]\n')

const LISTENING_RE = /^\{.*"msg":"listening".*\}$/m

/**
 * `bun src/main.ts` (or Deno) with `env`, resolved once it logs `{"msg":"listening",...}` on
 * stderr, so LOG_LEVEL must let info through. Throws with the output when it exits first.
 */
export async function spawnServer(
  env: Record<string, string>,
  opts: { runtime?: Runtime } = {},
): Promise<ServerProcess> {
  // No chain unless the test asks for one (NETWORKS_CONFIG: '' runs the real devnet).
  const proc = startProcess('src/main.ts', {
    env: { NETWORKS_CONFIG: NO_NETWORKS, ...env },
    runtime: opts.runtime,
  })
  let listening: Record<string, unknown>
  try {
    listening = JSON.parse((await proc.waitFor('stderr', LISTENING_RE))[0])
  } catch (e) {
    proc.kill('SIGKILL')
    throw e
  }
  const port = Number(listening.port)
  const trustProxy = ['1', 'true', 'yes'].includes((env.TRUST_PROXY ?? '').toLowerCase())
  const certFile = env.TLS_CERT_FILE || (env.DATA_DIR ? join(env.DATA_DIR, 'tls', 'cert.pem') : '')
  const ca = !trustProxy && certFile && existsSync(certFile) ? readFileSync(certFile, 'utf8') : ''
  const url = `${trustProxy ? 'http' : 'https'}://localhost:${port}`
  return {
    ...proc,
    port,
    httpPort: listening.httpPort == null ? null : Number(listening.httpPort),
    url,
    ca,
    listening,
    fetch: (path, init = {}) =>
      fetch(url + path, {
        redirect: 'manual',
        ...init,
        ...(ca ? { tls: { ca } } : {}),
      } as RequestInit),
    stop: (graceMs = 15_000) => stopProcess(proc, graceMs),
  }
}

/** SIGTERM, then SIGKILL when the process outlives `graceMs`; resolves with the exit. */
export async function stopProcess(proc: Proc, graceMs = 15_000): Promise<Exit> {
  proc.kill('SIGTERM')
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs)
  try {
    return await proc.exited
  } finally {
    clearTimeout(timer)
  }
}

/** Ends every process this module started that is still running (use in afterAll). */
export async function killAllProcesses(): Promise<void> {
  const waits: Promise<unknown>[] = []
  for (const child of [...live]) {
    waits.push(new Promise((r) => child.once('close', r)))
    child.kill('SIGKILL')
  }
  await Promise.all(waits)
}

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
  /** The JSON object printed with --json: stdout on success, stderr on failure; null if none. */
  json: any
}

/**
 * The operator's CLI with `args` to completion: in this process (src/cli/run.ts, what
 * src/cli/main.ts runs for its process), or as its own process under Bun or Deno when asked
 * (`process: true`, or `runtime`), where what the process itself does (its exit code, its two
 * streams) is what is tested.
 */
export async function runCli(
  args: string[],
  opts: { env?: Record<string, string>; runtime?: Runtime; process?: boolean } = {},
): Promise<CliResult> {
  if (opts.process || opts.runtime) return runScript('src/cli/main.ts', args, opts)
  const { runCli: run } = await import('../../src/cli/run.ts')
  const r = await run(args, childEnv(opts.env ?? {}))
  return { ...r, json: outputJson(r.code, r.stdout, r.stderr) }
}

/**
 * `bun src/treasury/main.ts ...args` (or under Deno) to completion: the merchant's treasury tool.
 */
export const runTreasuryTool = (
  args: string[],
  opts: { env?: Record<string, string>; runtime?: Runtime } = {},
) => runScript('src/treasury/main.ts', args, opts)

/** A command-line script to completion, with what it printed. */
export async function runScript(
  script: string,
  args: string[],
  opts: { env?: Record<string, string>; runtime?: Runtime } = {},
): Promise<CliResult> {
  const proc = startProcess(script, { env: opts.env, runtime: opts.runtime, args })
  const { code } = await proc.exited
  const stdout = proc.stdout()
  const stderr = proc.stderr()
  return { code, stdout, stderr, json: outputJson(code, stdout, stderr) }
}

/** The JSON object printed with --json: stdout on success, stderr on failure; null if none. */
const outputJson = (code: number | null, stdout: string, stderr: string) =>
  parseJson(code === 0 ? stdout : stderr) ?? parseJson(stdout) ?? parseJson(stderr)

function parseJson(text: string): any {
  const t = text.trim()
  if (!t.startsWith('{')) return null
  try {
    return JSON.parse(t)
  } catch {
    return null
  }
}

/** A TCP port nobody listens on right now (for HTTP_PORT, where 0 means "disabled"). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number }
      srv.close(() => resolve(port))
    })
  })
}
