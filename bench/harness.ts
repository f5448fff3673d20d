import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** What the HTTP benchmarks share: starting the service and the CLI, and running wrk. */
/**
 * The tree whose service and CLI run: this one, or BENCH_SERVER_ROOT (another checkout, with its
 * own node_modules or a link to these), to measure the code before a change in the same run.
 */
const ROOT = process.env.BENCH_SERVER_ROOT ?? new URL('..', import.meta.url).pathname
const BUN = process.execPath

export interface BenchProcess {
  proc: ChildProcess
  port: number
  stdout: () => string
  stderr: () => string
}

/**
 * Starts `bun <args>` and resolves once it logs "listening" (and printed `banner` on stdout, if
 * given).
 */
export function startProcess(
  args: string[],
  env: Record<string, string>,
  banner?: string,
): Promise<BenchProcess> {
  const proc = spawn(BUN, args, {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no "listening" line from ${args.join(' ')}:\n${err}`)),
      60_000,
    )
    const check = () => {
      const m = /"msg":"listening","port":(\d+)/.exec(err)
      if (m && (!banner || out.includes(banner))) {
        clearTimeout(timer)
        resolve({ proc, port: Number(m[1]), stdout: () => out, stderr: () => err })
      }
    }
    proc.stdout!.on('data', (d) => ((out += d), check()))
    proc.stderr!.on('data', (d) => ((err += d), check()))
    proc.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}:\n${err}`)))
  })
}

/** SIGTERM and wait for the exit. */
export async function stopProcess(p: { proc: ChildProcess } | null): Promise<void> {
  if (!p || p.proc.exitCode !== null) return
  const exited = new Promise((r) => p.proc.once('exit', r))
  p.proc.kill('SIGTERM')
  await exited
}

/** The operator CLI with `--json`, parsed. */
export function cli(args: string[], env: Record<string, string>) {
  const r = spawnSync(BUN, ['src/cli/main.ts', ...args, '--json'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
  })
  if (r.status !== 0) throw new Error(`cli ${args.join(' ')}: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** One wrk run, parsed. */
export interface WrkResult {
  name: string
  rps: number
  p50: number
  p99: number
  errors: number
  requests: number
}

/**
 * `wrk -t1 -c<connections> -d<seconds>s --latency [extra] url` (Debian's wrk 4.x; see
 * docs/development.md#benchmarks for why not autocannon), parsed into req/s, p50/p99 in ms and
 * non-2xx count; logs a line.
 */
export function wrk(
  name: string,
  url: string,
  opts: { seconds: number; connections: number; extraArgs?: string[] },
): WrkResult {
  const args = [
    '-t1',
    `-c${opts.connections}`,
    `-d${opts.seconds}s`,
    '--latency',
    ...(opts.extraArgs ?? []),
  ]
  const r = spawnSync('wrk', [...args, url], { encoding: 'utf8' })
  if (r.error)
    throw new Error(`wrk could not run (${r.error.message}): install it with apt-get install wrk`)
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr}`)
  const out = r.stdout
  const ms = (label: string) => {
    const m = new RegExp(`${label}\\s+([\\d.]+)(us|ms|s)`).exec(out)
    if (!m) return NaN
    return Number(m[1]) * ({ us: 0.001, ms: 1, s: 1000 } as Record<string, number>)[m[2]!]!
  }
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0)
  const socketErrors = /Socket errors: (.*)/.exec(out)?.[1]
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0)
  const result = {
    name,
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0),
    p50: ms('50%'),
    p99: ms('99%'),
    errors: non2xx,
    requests,
  }
  console.error(
    `${name}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms, ${requests} requests${non2xx ? `, ${non2xx} non-2xx` : ''}${socketErrors ? `, socket errors ${socketErrors}` : ''}`,
  )
  return result
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** One wrk target: its label, URL and extra wrk arguments (headers, a Lua script). */
export interface WrkTarget {
  name: string
  url: string
  args: string[]
}

/**
 * Seconds of unmeasured load on a target before it is measured (BENCH_WARMUP, default 10): the
 * service's JIT compiles a route's code under load for that long. Measured on
 * 2026-11-27 (compiler threads' CPU in /proc while wrk ran): GET /api/transactions/{id} kept the
 * compiler busy ~16% of a core in its first 4 s and served 7,600 req/s, then 8,800-9,600; a
 * create ~20% in its first 4 s and ~6% in the next, serving 2,400 then 2,900-3,000.
 * The bare and floor servers have next to nothing to compile.
 */
export const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP ?? 10)

/**
 * Targets measured in alternating rounds, after a warm-up of each (WARMUP_SECONDS); the order
 * reverses every round, so the machine's drift falls on all alike. Returns each target's rounds.
 */
export function alternateRounds(
  targets: WrkTarget[],
  o: { rounds: number; seconds: number; connections: number },
): WrkResult[][] {
  const run = (t: WrkTarget, seconds = o.seconds) =>
    wrk(t.name, t.url, { seconds, connections: o.connections, extraArgs: t.args })
  if (WARMUP_SECONDS > 0) for (const t of targets) run(t, WARMUP_SECONDS)
  const rs: WrkResult[][] = targets.map(() => [])
  const order = targets.map((_, i) => i)
  for (let r = 0; r < o.rounds; r++) {
    for (const i of r % 2 === 0 ? order : [...order].reverse()) rs[i]!.push(run(targets[i]!))
  }
  return rs
}

/** The median round of several (req/s, p50 and p99 each), with the errors and requests of all. */
export function medianRound(name: string, rounds: WrkResult[]): WrkResult {
  return {
    name,
    rps: median(rounds.map((x) => x.rps)),
    p50: median(rounds.map((x) => x.p50)),
    p99: median(rounds.map((x) => x.p99)),
    errors: rounds.reduce((n, x) => n + x.errors, 0),
    requests: rounds.reduce((n, x) => n + x.requests, 0),
  }
}

export interface BenchService {
  server: BenchProcess
  /** `https://127.0.0.1:PORT` */
  base: string
  projectId: string
  /** A test-mode key of that project. */
  key: string
  /** What a CLI call against this service's data needs. */
  env: Record<string, string>
  stop(): Promise<void>
}

/**
 * `src/main.ts` on PGlite (fresh DATA_DIR) or on a fresh PostgreSQL database, with a project
 * (the demo project on PGlite) and a test key. `stop()` removes everything it made.
 */
export async function startService(
  backend: 'pglite' | 'postgres',
  extraEnv: Record<string, string> = {},
  /** The URL the service reaches its fresh PostgreSQL database by (a counting proxy). */
  via: (databaseUrl: string) => string = (url) => url,
): Promise<BenchService> {
  const { freshPostgres } = await import('../test/helpers/databases.ts')
  const dataDir = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-'))
  const pg = backend === 'postgres' ? await freshPostgres() : null
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    PORT: '0',
    HTTP_PORT: '0',
    ...extraEnv,
    ...(pg ? { ...pg.env, DATABASE_URL: via(pg.url) } : {}),
  }
  let server: BenchProcess | null = null
  const stop = async () => {
    await stopProcess(server)
    await pg?.drop()
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    // PostgreSQL has no demo project: make one before the server starts.
    const made = pg ? (cli(['project', 'create', '--name', 'Bench'], env).id as string) : null
    // BENCH_BUN_ARGS: runtime flags for the service, e.g. "--cpu-prof-md --cpu-prof-dir=/tmp/prof"
    // (the profile is written on its graceful stop).
    const runtimeArgs = process.env.BENCH_BUN_ARGS ? process.env.BENCH_BUN_ARGS.split(/\s+/) : []
    server = await startProcess([...runtimeArgs, 'src/main.ts'], env, 'Crypto Pay is running')
    const projectId = made ?? /Demo project (proj_\w+)/.exec(server.stdout())![1]!
    const key = cli(
      ['key', 'create', '--project', projectId, '--mode', 'test', '--name', 'bench'],
      env,
    ).key as string
    return { server, base: `https://127.0.0.1:${server.port}`, projectId, key, env, stop }
  } catch (e) {
    await stop()
    throw e
  }
}

/**
 * A self-signed localhost certificate written to `dir` (cert.pem, key.pem), and the service's
 * environment naming it.
 */
export async function selfSignedTls(
  dir: string,
): Promise<{ TLS_CERT_FILE: string; TLS_KEY_FILE: string }> {
  const { generate } = await import('selfsigned')
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    algorithm: 'sha256',
  } as any)
  const { writeFileSync } = await import('node:fs')
  writeFileSync(join(dir, 'cert.pem'), pems.cert)
  writeFileSync(join(dir, 'key.pem'), pems.private)
  return { TLS_CERT_FILE: join(dir, 'cert.pem'), TLS_KEY_FILE: join(dir, 'key.pem') }
}

/** Creates one transaction of 10 USD through the service's API (curl); returns its id. */
export function createOne(svc: Pick<BenchService, 'base' | 'key'>): string {
  const created = spawnSync(
    'curl',
    [
      '-sk',
      `${svc.base}/api/transactions/create`,
      '-H',
      `Authorization: Bearer ${svc.key}`,
      '-H',
      'Content-Type: application/json',
      '-d',
      '{"amount": 10}',
    ],
    { encoding: 'utf8' },
  )
  return JSON.parse(created.stdout).transaction.id as string
}

/** Raises the service's project limits out of the way, so a benchmark measures work, not 429s. */
export function liftRateLimits(svc: Pick<BenchService, 'projectId' | 'env'>): void {
  const lots = '1000000000'
  cli(
    [
      'project',
      'set-limits',
      '--project',
      svc.projectId,
      '--minute',
      lots,
      '--hour',
      lots,
      '--day',
      lots,
    ],
    svc.env,
  )
}

/**
 * Median and p99 of `runs` calls of `f`, in µs, after `warm` calls. An async `f` is awaited,
 * so its whole work is timed; a sync one is timed as it runs.
 */
export async function timeCalls(
  f: () => unknown,
  runs: number,
  warm: number,
): Promise<{ median: number; p99: number }> {
  const t: number[] = []
  for (let i = 0; i < warm + runs; i++) {
    const s = Bun.nanoseconds()
    const r = f()
    if (r instanceof Promise) await r
    if (i >= warm) t.push((Bun.nanoseconds() - s) / 1000)
  }
  t.sort((a, b) => a - b)
  return { median: t[Math.floor(runs / 2)]!, p99: t[Math.min(runs - 1, Math.floor(runs * 0.99))]! }
}

/** A plan as a chain of node types, outermost first: "Limit → Sort → Seq Scan on t". */
export function planChain(node: any): string {
  const parts: string[] = []
  for (
    let n = node;
    n;
    n = n.Plans?.find((c: any) => c['Parent Relationship'] !== 'InitPlan') ?? n.Plans?.[0]
  ) {
    const on = n['Index Name']
      ? ` using ${n['Index Name']}`
      : n['Relation Name']
        ? ` on ${n['Relation Name']}`
        : ''
    const key = n['Sort Key'] ? ` (${n['Sort Key'].join(', ')})` : ''
    if (
      !['Gather Merge', 'Gather', 'Finalize Aggregate', 'Partial Aggregate'].includes(
        n['Node Type'],
      )
    )
      parts.push(`${n['Node Type']}${on}${key}`)
  }
  return parts.join(' → ')
}

const insecure = { tls: { rejectUnauthorized: false } } as Record<string, unknown>

/**
 * fetch over loopback (the service's certificate is self-signed); redirects are not followed, and
 * a request still unanswered after `timeoutMs` (if given) is aborted.
 */
export async function loopbackCall(
  url: string,
  init: RequestInit = {},
  timeoutMs?: number,
): Promise<{ status: number; headers: Headers; body: string }> {
  const res = await fetch(url, {
    ...init,
    redirect: 'manual',
    ...(timeoutMs ? { signal: AbortSignal.timeout(timeoutMs) } : {}),
    ...insecure,
  })
  return { status: res.status, headers: res.headers, body: await res.text() }
}

/** Throws naming what failed, with the answer's status and the start of its body. */
export const failWith = (what: string, r: { status: number; body: string }): never => {
  throw new Error(`${what}: ${r.status} ${r.body.slice(0, 400)}`)
}

/** The dashboard's sign-in as a browser does it (GET the form, POST it): the session token. */
export async function dashboardSignIn(
  base: string,
  email: string,
  password: string,
  call: typeof loopbackCall = loopbackCall,
): Promise<string> {
  const form = await call(`${base}/dashboard/sign-in`)
  const pre = /__Host-cp_signin=([^;]+)/.exec(form.headers.get('set-cookie') ?? '')?.[1]
  const csrf = /name="csrf" value="([^"]+)"/.exec(form.body)?.[1]
  if (form.status !== 200 || !pre || !csrf) failWith('sign-in form', form)
  const r = await call(`${base}/dashboard/sign-in`, {
    method: 'POST',
    headers: {
      cookie: `__Host-cp_signin=${pre}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ email, password, csrf: csrf!, next: '/dashboard' }),
  })
  const token = r.headers
    .getSetCookie()
    .map((c) => /^__Host-cp_session=([^;]+)/.exec(c)?.[1])
    .find(Boolean)
  if (r.status !== 303 || !token) failWith('sign-in', r)
  return token!
}
