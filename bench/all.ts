/**
 * `npm run bench:all`: runs every benchmark one after another, then writes one dated table of
 * all their results at the top of bench/RESULTS.md (newest first; older sections stay). Each
 * benchmark prints Markdown tables; every row becomes one row here: the benchmark, the row's
 * first cell, and its other cells labelled by their column headers. A benchmark that fails
 * is listed with its exit code and the others still run.
 *
 * Env: what each benchmark reads (DATABASE_URL, BENCH_SECONDS, ...); BENCH_ONLY=http,actors
 * runs only those.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { join } from 'node:path'

const ROOT = new URL('..', import.meta.url).pathname
const BENCHES: { name: string; script: string; measures: string }[] = [
  {
    name: 'http',
    script: 'http.ts',
    measures: 'API GET and create over HTTPS against the floor (bare Elysia + one statement)',
  },
  {
    name: 'db-pool',
    script: 'db-pool.ts',
    measures:
      "the PostgreSQL driver's pool under steady load: its default with the queue fixed against max_pipeline 1",
  },
  {
    name: 'pay-page',
    script: 'pay-page.ts',
    measures: 'the pay page, its state, QR code and script against a bare server of the same bytes',
  },
  {
    name: 'pay-streams',
    script: 'pay-streams.ts',
    measures: '5,000 open event streams: memory, idle CPU, change-to-event latency',
  },
  { name: 'dashboard', script: 'dashboard.ts', measures: 'dashboard pages and sign-in' },
  { name: 'history', script: 'history.ts', measures: 'stats and lists at 100k and 1M rows' },
  {
    name: 'webhooks',
    script: 'webhooks.ts',
    measures: 'webhook deliveries/s and commit-to-request latency',
  },
  {
    name: 'actors',
    script: 'actors.ts',
    measures: 'transaction actors: memory, recovery, transitions/s',
  },
  {
    name: 'chain-latency',
    script: 'chain-latency.ts',
    measures: 'block mined -> processing committed',
  },
  { name: 'chain-scan', script: 'chain-scan.ts', measures: 'block follower scanning' },
  {
    name: 'cursor-save',
    script: 'cursor-save.ts',
    measures: "the follower cursor's size and write time per window (what bounds confirmations)",
  },
  {
    name: 'chain-rpc',
    script: 'chain-rpc.ts',
    measures:
      'JSON-RPC calls per block followed: one and three instances, polling and WebSocket heads',
  },
  {
    name: 'signature-payment',
    script: 'signature-payment.ts',
    measures:
      'paying by signature against a plain transfer: sent -> processing, gas per payment, settles/s on one instance',
  },
  { name: 'currency-create', script: 'currency-create.ts', measures: 'EUR create vs USD create' },
  {
    name: 'commerce',
    script: 'commerce.ts',
    measures: 'the Commerce API reading a charge and a page of 100 against the native reads',
  },
  { name: 'metrics', script: 'metrics.ts', measures: 'metrics on vs off on the GET hot path' },
  {
    name: 'sweep',
    script: 'sweep.ts',
    measures:
      "gas per swept address against a plain transfer (EIP-7702 batches, and the top-up route of a chain without it), and the treasury tool's wall time for 200 addresses",
  },
]
const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim())

/** Every data row of every Markdown table in `out`, as "first cell" and "header: cell · …". */
function tableRows(out: string): { measure: string; result: string }[] {
  const lines = out.split('\n').map((l) => l.trim())
  const cells = (l: string) =>
    l
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim())
  const rows: { measure: string; result: string }[] = []
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.startsWith('|') || !/^\|[-:| ]+\|$/.test(lines[i + 1]!)) continue
    const header = cells(lines[i]!)
    let j = i + 2
    for (; j < lines.length && lines[j]!.startsWith('|'); j++) {
      const c = cells(lines[j]!)
      rows.push({
        measure: c[0]!,
        result: c
          .slice(1)
          .map((v, k) => `${header[k + 1] ?? ''}: ${v}`)
          .join(' · '),
      })
    }
    i = j - 1
  }
  return rows
}

const started = new Date()
const table: string[] = []
const runs: string[] = []
for (const b of BENCHES) {
  if (only && !only.includes(b.name)) continue
  console.error(`\n== ${b.name} (${b.measures})`)
  const t0 = performance.now()
  const r = spawnSync(process.execPath, [join('bench', b.script)], {
    cwd: ROOT,
    env: process.env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 2 ** 20,
  })
  const seconds = Math.round((performance.now() - t0) / 1000)
  process.stdout.write(r.stdout ?? '')
  const rows = r.status === 0 ? tableRows(r.stdout) : []
  if (r.status !== 0)
    table.push(`| ${b.name} | failed (exit ${r.status ?? r.signal}) | see its output |`)
  for (const row of rows) table.push(`| ${b.name} | ${row.measure} | ${row.result} |`)
  runs.push(`${b.name} ${seconds} s`)
}

const bun = spawnSync(process.execPath, ['--version'], { encoding: 'utf8' }).stdout.trim()
const section = `## \`npm run bench:all\`, ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC

${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Bun ${bun}, PostgreSQL on the same machine. Each benchmark's own section below explains its method; ratios are against the baseline measured in the same run. Durations: ${runs.join(', ')}.

| benchmark | measure | result |
|---|---|---|
${table.join('\n')}

`
const file = join(ROOT, 'bench', 'RESULTS.md')
const old = readFileSync(file, 'utf8')
const at = old.indexOf('\n## ')
writeFileSync(
  file,
  at < 0 ? `${old}\n${section}` : `${old.slice(0, at + 1)}${section}${old.slice(at + 1)}`,
)
console.error(`\nbench/RESULTS.md: a dated table of ${table.length} rows added`)
