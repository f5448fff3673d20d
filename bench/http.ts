/**
 * `npm run bench`: throughput and latency of GET /api/transactions/{id} and
 * POST /api/transactions/create over HTTPS on Bun, against PGlite and PostgreSQL, and in the
 * same run a bare Elysia JSON route with the same load tool (wrk) and connection count, so
 * the ratios compare like with like on a noisy machine.
 *
 * Env: BENCH_SECONDS (default 10), BENCH_CONNECTIONS (32), DATABASE_URL (PostgreSQL server;
 * default postgres://postgres@127.0.0.1:5432/test, a fresh database is created and dropped).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { freshPostgres } from '../test/helpers/databases.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
const ROOT = new URL('..', import.meta.url).pathname
const BUN = process.execPath

interface Result { name: string; rps: number; p50: number; p99: number; errors: number }

/** Starts a server and resolves once it logs "listening" (and printed `banner` on stdout, if given). */
function startProcess(args: string[], env: Record<string, string>, banner?: string): Promise<{ proc: ChildProcess; port: number; stdout: () => string }> {
  const proc = spawn(BUN, args, { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening" line from ${args.join(' ')}:\n${err}`)), 60_000)
    const check = () => {
      const m = /"msg":"listening","port":(\d+)/.exec(err)
      if (m && (!banner || out.includes(banner))) {
        clearTimeout(timer)
        resolve({ proc, port: Number(m[1]), stdout: () => out })
      }
    }
    proc.stdout!.on('data', (d) => ((out += d), check()))
    proc.stderr!.on('data', (d) => ((err += d), check()))
    proc.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}:\n${err}`)))
  })
}

function cli(args: string[], env: Record<string, string>) {
  const r = spawnSync(BUN, ['src/cli/main.ts', ...args, '--json'], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`cli ${args.join(' ')}: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

function wrk(name: string, url: string, key: string | null, luaPost: string | null): Result {
  const args = ['-t1', `-c${CONNECTIONS}`, `-d${SECONDS}s`, '--latency']
  if (key) args.push('-H', `Authorization: Bearer ${key}`)
  if (luaPost) args.push('-s', luaPost)
  const r = spawnSync('wrk', [...args, url], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr}`)
  const out = r.stdout
  const ms = (label: string) => {
    const m = new RegExp(`${label}\\s+([\\d.]+)(us|ms|s)`).exec(out)
    if (!m) return NaN
    return Number(m[1]) * ({ us: 0.001, ms: 1, s: 1000 } as Record<string, number>)[m[2]]
  }
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0)
  const socketErrors = /Socket errors: (.*)/.exec(out)?.[1]
  const result = { name, rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0), p50: ms('50%'), p99: ms('99%'), errors: non2xx }
  console.error(`${name}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms${non2xx ? `, ${non2xx} non-2xx` : ''}${socketErrors ? `, socket errors ${socketErrors}` : ''}`)
  return result
}

async function serviceRun(backend: 'pglite' | 'postgres', lua: string): Promise<Result[]> {
  const dataDir = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-'))
  const pg = backend === 'postgres' ? await freshPostgres() : null
  const env: Record<string, string> = { DATA_DIR: dataDir, PORT: '0', HTTP_PORT: '0', ...(pg ? { DATABASE_URL: pg.url } : {}) }
  let server: Awaited<ReturnType<typeof startProcess>> | null = null
  try {
    if (pg) {
      // PostgreSQL has no demo project: make one before the server starts.
      const p = cli(['project', 'create', '--name', 'Bench'], env)
      env.BENCH_PROJECT = p.id
    }
    server = await startProcess(['src/main.ts'], env, 'Crypto Pay is running')
    const projectId = env.BENCH_PROJECT ?? /Demo project (proj_\w+)/.exec(server.stdout())![1]
    cli(['project', 'set-limits', '--project', projectId, '--minute', '1000000000', '--hour', '1000000000', '--day', '1000000000'], env)
    const key = cli(['key', 'create', '--project', projectId, '--mode', 'test', '--name', 'bench'], env).key as string
    const base = `https://127.0.0.1:${server.port}`
    const created = spawnSync('curl', ['-sk', `${base}/api/transactions/create`, '-H', `Authorization: Bearer ${key}`, '-H', 'Content-Type: application/json', '-d', '{"amount": 10}'], { encoding: 'utf8' })
    const id = JSON.parse(created.stdout).transaction.id
    return [
      wrk(`GET /api/transactions/{id} (${backend})`, `${base}/api/transactions/${id}`, key, null),
      wrk(`POST /api/transactions/create (${backend})`, `${base}/api/transactions/create`, key, lua),
    ]
  } finally {
    server?.proc.kill('SIGTERM')
    if (server) await new Promise((r) => server!.proc.once('exit', r))
    await pg?.drop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const work = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-cert-'))
const lua = join(work, 'post.lua')
writeFileSync(lua, `wrk.method = "POST"\nwrk.body = '{"amount": 25.5, "order_id": "bench", "metadata": {"k": "v"}}'\nwrk.headers["Content-Type"] = "application/json"\n`)
const { generate } = await import('selfsigned')
const pems = await generate([{ name: 'commonName', value: 'localhost' }], { keyType: 'ec', algorithm: 'sha256' } as any)
writeFileSync(join(work, 'cert.pem'), pems.cert)
writeFileSync(join(work, 'key.pem'), pems.private)

const results: Result[] = []
const bare = await startProcess(['bench/bare-server.ts'], { TLS_CERT_FILE: join(work, 'cert.pem'), TLS_KEY_FILE: join(work, 'key.pem') })
try {
  results.push(wrk('bare Elysia GET (baseline)', `https://127.0.0.1:${bare.port}/bare`, null, null))
} finally {
  bare.proc.kill('SIGTERM')
}
results.push(...(await serviceRun('pglite', lua)))
if (!process.env.DATABASE_URL) process.env.DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test'
results.push(...(await serviceRun('postgres', lua)))
rmSync(work, { recursive: true, force: true })

const baseline = results[0].rps
const bunVersion = spawnSync(BUN, ['--version'], { encoding: 'utf8' }).stdout.trim()
console.log(`\n${new Date().toISOString()} · Bun ${bunVersion} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · wrk -t1 -c${CONNECTIONS} -d${SECONDS}s, HTTPS keep-alive\n`)
console.log('| target | req/s | p50 ms | p99 ms | vs bare | non-2xx |')
console.log('|---|---:|---:|---:|---:|---:|')
for (const r of results) console.log(`| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${((100 * r.rps) / baseline).toFixed(1)}% | ${r.errors} |`)
