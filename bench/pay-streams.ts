/**
 * `bun bench/pay-streams.ts` (docs/decisions/0053-speed-measured-against-a-floor.md): the pay
 * page's event streams at scale. One service (PGlite, then PostgreSQL) holds BENCH_STREAMS open
 * streams (default 5,000: ten per transaction), each a real TLS connection reading Server-Sent
 * Events like a browser's EventSource. Measured: the server's memory (RSS) with the streams open,
 * its CPU while they idle for BENCH_IDLE_SECONDS, and, as each transaction is cancelled in turn
 * through the pay page's own route, the time from sending that request to the `cancelled` state
 * arriving on each of its streams (the request's own round trip included; its median is shown
 * beside).
 *
 * Env: BENCH_STREAMS (5000), BENCH_PER_TRANSACTION (10), BENCH_IDLE_SECONDS (10),
 * DATABASE_URL (PostgreSQL server; default postgres://postgres@127.0.0.1:5432/test).
 */
import { readFileSync } from 'node:fs'
import { connect, type TLSSocket } from 'node:tls'
import { cpus, totalmem } from 'node:os'
import { liftRateLimits, startService, type BenchService } from './harness.ts'

const STREAMS = Number(process.env.BENCH_STREAMS ?? 5000)
const PER_TX = Number(process.env.BENCH_PER_TRANSACTION ?? 10)
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 10)
const pgServer = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
delete process.env.DATABASE_URL
const OUT_OF_REACH = '100000000/100000000/1000000000'
const HZ = 100

const cpuTicks = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return Number(f[11]) + Number(f[12])
}
const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024
const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))]!

interface Stream {
  socket: TLSSocket
  buffer: string
  opened: Promise<void>
  cancelledAt: number | null
  keepAlives: number
}

/** A raw HTTP/1.1 GET of the event stream over TLS; records when `cancelled` arrives. */
function openStream(port: number, id: string): Stream {
  const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false })
  const s: Stream = { socket, buffer: '', opened: null as never, cancelledAt: null, keepAlives: 0 }
  s.opened = new Promise((resolve, reject) => {
    socket.once('secureConnect', () =>
      socket.write(
        `GET /pay/${id}/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n\r\n`,
      ),
    )
    socket.on('data', (d: Buffer) => {
      s.buffer += d.toString('utf8')
      if (s.buffer.includes('event: state')) resolve()
      if (s.cancelledAt === null && s.buffer.includes('"status":"cancelled"'))
        s.cancelledAt = performance.now()
      if (d.includes(': keep-alive')) s.keepAlives++
      // Keep only the tail: enough to find the markers, not the whole history.
      if (s.buffer.length > 8192) s.buffer = s.buffer.slice(-4096)
    })
    socket.once('error', reject)
  })
  return s
}

async function until(ok: () => boolean, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`)
    await Bun.sleep(2)
  }
}

async function run(backend: 'pglite' | 'postgres'): Promise<string> {
  const svc: BenchService = await startService(backend, { PAY_RATE_LIMITS: OUT_OF_REACH })
  const pid = svc.server.proc.pid!
  const streams: Stream[] = []
  try {
    liftRateLimits(svc)
    const port = Number(new URL(svc.base).port)
    const call = (path: string, init: RequestInit = {}) =>
      fetch(`${svc.base}${path}`, { ...init, tls: { rejectUnauthorized: false } } as RequestInit)
    const ids: string[] = []
    for (let i = 0; i < Math.ceil(STREAMS / PER_TX); i++) {
      const r = await call('/api/transactions/create', {
        method: 'POST',
        headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json' },
        body: '{"amount": 10}',
      })
      ids.push(((await r.json()) as { transaction: { id: string } }).transaction.id)
    }
    const rssBefore = rssMiB(pid)
    const openStart = performance.now()
    for (let i = 0; i < STREAMS; i += 250) {
      const batch = Array.from({ length: Math.min(250, STREAMS - i) }, (_, k) =>
        openStream(port, ids[Math.floor((i + k) / PER_TX)]!),
      )
      streams.push(...batch)
      await Promise.all(batch.map((s) => s.opened))
    }
    const openSeconds = (performance.now() - openStart) / 1000
    Bun.gc(true)
    const rssOpen = rssMiB(pid)

    const idleTicks = cpuTicks(pid)
    const idleStart = performance.now()
    await Bun.sleep(IDLE_SECONDS * 1000)
    const idleCpu = (cpuTicks(pid) - idleTicks) / HZ / ((performance.now() - idleStart) / 1000)

    // One status change per transaction, one after another; each reaches its PER_TX streams.
    const latencies: number[] = []
    const posts: number[] = []
    for (const [i, id] of ids.entries()) {
      const mine = streams.slice(i * PER_TX, (i + 1) * PER_TX)
      const t0 = performance.now()
      const r = await call(`/pay/${id}/cancel`, { method: 'POST' })
      posts.push(performance.now() - t0)
      if (r.status !== 200) throw new Error(`cancel ${id}: ${r.status} ${await r.text()}`)
      await until(
        () => mine.every((s) => s.cancelledAt !== null),
        30_000,
        `cancelled on the streams of ${id}`,
      )
      for (const s of mine) latencies.push(s.cancelledAt! - t0)
    }
    latencies.sort((a, b) => a - b)
    posts.sort((a, b) => a - b)
    const f = (n: number) => n.toFixed(1)
    return `| ${backend === 'pglite' ? 'PGlite' : 'PostgreSQL'} | ${STREAMS.toLocaleString('en')} (${ids.length} transactions) | ${f(openSeconds)} s | ${f(rssBefore)} -> ${f(rssOpen)} MiB (${(((rssOpen - rssBefore) * 1024) / STREAMS).toFixed(1)} KiB per stream) | ${(idleCpu * 100).toFixed(1)}% of a core | ${f(pct(latencies, 0.5))} / ${f(pct(latencies, 0.99))} / ${f(latencies.at(-1)!)} ms | ${f(pct(posts, 0.5))} ms |`
  } finally {
    for (const s of streams) s.socket.destroy()
    await svc.stop()
  }
}

const rows: string[] = []
rows.push(await run('pglite'))
process.env.DATABASE_URL = pgServer
rows.push(await run('postgres'))
console.log(
  `\n${new Date().toISOString()} · Bun ${Bun.version} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · ${PER_TX} streams per transaction, idle ${IDLE_SECONDS} s\n`,
)
console.log(
  '| database | open streams | time to open all | server RSS before -> with the streams | server CPU while they idle | status change -> event on each stream, p50 / p99 / max | the change request itself, p50 |',
)
console.log('|---|---:|---:|---:|---:|---:|---:|')
for (const r of rows) console.log(r)
