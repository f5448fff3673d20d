/**
 * `bun bench/webhooks.ts`: webhook delivery costs (docs/decisions/0032-webhook-delivery-actors.md)
 * on PostgreSQL, with a bare baseline from the same run. The receiver is a Bun server in its own
 * process.
 *   1. Throughput: N outbox events fanned out to E endpoints, delivered with signing and
 *      persistence (delivery rows, attempt log, group commit), against a bare loop that signs
 *      and POSTs the same number of bodies to the same receiver with the same concurrency.
 *   2. Latency from transition commit to request received, healthy endpoint, paced load.
 *   3. The same latency while 1,000 endpoints fail (HTTP 500) on every event of 50 projects.
 * Env: BENCH_EVENTS (default 4000), BENCH_ENDPOINTS (default 5), BENCH_FAILING_RATE (events per
 * second to the failing projects, default 10: 200 new failing deliveries/s, each retried 5 times
 * on a 1 s schedule), DATABASE_URL.
 */
import { spawn } from 'node:child_process'
import { createHmac, randomBytes } from 'node:crypto'
import { cpus } from 'node:os'
import { openDatabase } from '../src/db/client.ts'
import { systemClock } from '../src/lib/clock.ts'
import { createLogger } from '../src/lib/logger.ts'
import { createServices, type Services } from '../src/services.ts'
import { freshPostgres } from '../test/helpers/databases.ts'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 4000)
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 5)
const FAILING_RATE = Number(process.env.BENCH_FAILING_RATE ?? 10)
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'

const receiver = spawn(
  process.execPath,
  [new URL('./webhook-receiver.ts', import.meta.url).pathname],
  { stdio: ['ignore', 'pipe', 'inherit'] },
)
const port = await new Promise<number>((resolve) => {
  let out = ''
  receiver.stdout!.on('data', (c) => {
    out += c
    const m = /listening (\d+)/.exec(out)
    if (m) resolve(Number(m[1]))
  })
})
const base = `http://127.0.0.1:${port}`
const stats = async (arrivals = false) =>
  (await (await fetch(`${base}/_stats${arrivals ? '?arrivals' : ''}`)).json()) as {
    count: number
    arrivals: { tx: string; event: string; at: number }[]
  }
const reset = () => fetch(`${base}/_reset`)
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}
async function until(pred: () => Promise<boolean>, timeoutMs: number) {
  const end = Date.now() + timeoutMs
  while (!(await pred())) {
    if (Date.now() > end) throw new Error('timed out')
    await Bun.sleep(5)
  }
}

const pg = await freshPostgres()
const database = await openDatabase({ databaseUrl: pg.url, pgliteDir: null, poolSize: 10 })
const services: Services = await createServices({
  database,
  clock: systemClock,
  logger: createLogger('silent'),
  baseUrl: 'https://localhost',
  secretKey: randomBytes(32),
  webhookRetryScheduleMs: [1000, 1000, 1000, 1000, 1000],
  // The receiver runs on this machine.
  allowPrivateTestEndpoints: true,
})
await services.lifecycle.start()
await services.dispatcher.start()

async function project(name: string) {
  const p = await services.projects.create(name)
  if (!p.ok) throw new Error(p.message)
  return p.value.id
}
async function endpoint(projectId: string, path: string, events = ['transaction.created']) {
  const r = await services.endpoints.create({
    projectId,
    mode: 'test',
    url: `${base}${path}`,
    eventTypes: events,
  })
  if (!r.ok) throw new Error(r.message)
  return r.value
}
async function createTx(projectId: string, amount = 10) {
  const r = await services.transactions.create({ projectId, mode: 'test' }, { amount })
  if (!r.ok) throw new Error(r.message)
  return JSON.parse(r.value.body).transaction.id as string
}
const lines: string[] = []
const report = (l: string) => {
  lines.push(l)
  console.error(l)
}

// 1. Throughput.
{
  const projectId = await project('throughput')
  for (let i = 0; i < ENDPOINTS; i++) await endpoint(projectId, `/ok/${i}`)
  const txId = await createTx(projectId)
  await until(async () => (await stats()).count >= ENDPOINTS, 10_000)
  await reset()
  const total = EVENTS * ENDPOINTS
  const data = JSON.stringify({ transaction_id: txId, status: 'created' })
  const t0 = performance.now()
  await database.query(
    `INSERT INTO outbox (transaction_id, project_id, testing_mode, event_type, data, created_at)
     SELECT $1, $2, true, 'transaction.created', $3::jsonb, now() FROM generate_series(1, $4::int)`,
    [txId, projectId, data, EVENTS],
  )
  // Written behind the service's back: tell its dispatcher, as the service's own writers do.
  void services.dispatcher.wake('events')
  await until(async () => (await stats()).count >= total, 300_000)
  const sent = performance.now() - t0
  await until(async () => {
    const [r] = await database.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_deliveries WHERE project_id = $1 AND status = 'success'`,
      [projectId],
    )
    return r.n >= total + ENDPOINTS
  }, 300_000)
  const persisted = performance.now() - t0
  const [a] = await database.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.project_id = $1`,
    [projectId],
  )

  // Bare: sign and POST the same number of bodies, same receiver, same concurrency.
  await reset()
  const secret = `whsec_${'x'.repeat(40)}`
  const concurrency = Math.min(512, 16 * ENDPOINTS)
  let next = 0
  const b0 = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++
        const body = JSON.stringify({
          event: 'transaction.created',
          timestamp: new Date().toISOString(),
          data: JSON.parse(data),
        })
        const sig = createHmac('sha256', secret).update(body).digest('hex')
        const res = await fetch(`${base}/ok/${i % ENDPOINTS}`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', 'x-service-signature': sig },
        })
        await res.text()
      }
    }),
  )
  const bare = performance.now() - b0
  const rate = (total / persisted) * 1000
  const bareRate = (total / bare) * 1000
  report(
    `| 1. deliveries/s, ${EVENTS} events x ${ENDPOINTS} endpoints, sent + persisted | ${rate.toFixed(0)} | bare sign+POST loop ${bareRate.toFixed(0)} | ${((rate / bareRate) * 100).toFixed(1)}% | all sent after ${(sent / 1000).toFixed(2)} s, all logged after ${(persisted / 1000).toFixed(2)} s; ${a.n} attempt rows |`,
  )
}

// 2 and 3. Latency from commit to request received.
async function latency(label: string, projectId: string, count: number, perSecond: number) {
  await reset()
  const ids: string[] = []
  const start = Date.now()
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / perSecond
    if (due > Date.now()) await Bun.sleep(due - Date.now())
    ids.push(await createTx(projectId))
  }
  await until(async () => (await stats()).count >= count, 60_000)
  const { arrivals } = await stats(true)
  const rows = await database.query<{ transaction_id: string; created_at: string }>(
    `SELECT transaction_id, created_at FROM outbox WHERE transaction_id = ANY(string_to_array($1, ',')::uuid[]) AND event_type = 'transaction.created'`,
    [ids.join(',')],
  )
  const committed = new Map(rows.map((r) => [r.transaction_id, new Date(r.created_at).getTime()]))
  const lat = arrivals.filter((a) => committed.has(a.tx)).map((a) => a.at - committed.get(a.tx)!)
  report(
    `| ${label} | p50 ${pct(lat, 50)} ms | p99 ${pct(lat, 99)} ms | max ${Math.max(...lat)} ms | ${lat.length} events at ${perSecond}/s |`,
  )
}
const healthy = await project('healthy')
await endpoint(healthy, '/ok/healthy?record')
await latency('2. commit -> request received, healthy endpoint', healthy, 1000, 100)

{
  // 50 projects x 20 endpoints = 1,000 endpoints answering 500, every event retried on a 1 s
  // schedule.
  const failing: string[] = []
  for (let p = 0; p < 50; p++) {
    const id = await project(`failing ${p}`)
    failing.push(id)
    for (let e = 0; e < 20; e++) await endpoint(id, `/fail/${p}-${e}`)
  }
  let stop = false
  const load = (async () => {
    let i = 0
    const start = Date.now()
    while (!stop) {
      const due = start + (i * 1000) / FAILING_RATE
      if (due > Date.now()) await Bun.sleep(due - Date.now())
      await createTx(failing[i++ % failing.length])
    }
    return i
  })()
  await Bun.sleep(3000)
  await latency(
    `3. same, while 1,000 endpoints fail (${FAILING_RATE} events/s x 20 endpoints)`,
    healthy,
    1000,
    100,
  )
  stop = true
  const failingEvents = await load
  const [f] = await database.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id IN (SELECT id FROM webhook_endpoints WHERE url LIKE '%/fail/%')`,
    [],
  )
  report(
    `|   (failing side: ${failingEvents} events to 20 endpoints each, ${f.n} failed attempts made during the run) | | | | |`,
  )
}

console.log(
  `\nMachine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}, Bun ${Bun.version}, PostgreSQL (DATABASE_URL)\n`,
)
console.log('| measure | value | baseline / p99 | ratio / max | notes |\n|---|---:|---:|---:|---|')
for (const l of lines) console.log(l)
await services.stop()
await database.close()
await pg.drop()
receiver.kill()
process.exit(0)
