/**
 * `npm run bench`: throughput and latency of GET /api/transactions/{id} and
 * POST /api/transactions/create over HTTPS on Bun, against PGlite and PostgreSQL, and in the
 * same run a bare Elysia JSON route with the same load tool (wrk) and connection count, so
 * the ratios compare like with like on a noisy machine.
 *
 * Env: BENCH_SECONDS (default 10), BENCH_CONNECTIONS (32), DATABASE_URL (PostgreSQL server;
 * default postgres://postgres@127.0.0.1:5432/test, a fresh database is created and dropped).
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { cli, startProcess, startService, stopProcess, wrk as runWrk, type WrkResult } from './harness.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
const BUN = process.execPath

type Result = WrkResult


function wrk(name: string, url: string, key: string | null, luaPost: string | null): Result {
  const extraArgs = [...(key ? ['-H', `Authorization: Bearer ${key}`] : []), ...(luaPost ? ['-s', luaPost] : [])]
  return runWrk(name, url, { seconds: SECONDS, connections: CONNECTIONS, extraArgs })
}

async function serviceRun(backend: 'pglite' | 'postgres', lua: string): Promise<Result[]> {
  const svc = await startService(backend)
  try {
    const { base, key } = svc
    cli(['project', 'set-limits', '--project', svc.projectId, '--minute', '1000000000', '--hour', '1000000000', '--day', '1000000000'], svc.env)
    const created = spawnSync('curl', ['-sk', `${base}/api/transactions/create`, '-H', `Authorization: Bearer ${key}`, '-H', 'Content-Type: application/json', '-d', '{"amount": 10}'], { encoding: 'utf8' })
    const id = JSON.parse(created.stdout).transaction.id
    return [
      wrk(`GET /api/transactions/{id} (${backend})`, `${base}/api/transactions/${id}`, key, null),
      wrk(`POST /api/transactions/create (${backend})`, `${base}/api/transactions/create`, key, lua),
    ]
  } finally {
    await svc.stop()
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
