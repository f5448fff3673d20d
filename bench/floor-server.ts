import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Elysia } from 'elysia'
import { createActor } from 'xstate'
import { MACHINE_VERSION, transactionMachine } from '../machines/transaction.machine.ts'
import { createLifecycleRepo } from '../src/actors/lifecycle.repo.ts'
import { openDatabase } from '../src/db/client.ts'
import { setRateLimitHeaders } from '../src/http/api-gate.ts'
import { systemClock } from '../src/lib/clock.ts'
import { createEmbeddedRateLimiter, createRateLimiter } from '../src/limits/rate-limiter.ts'
import { createRateLimitRepo } from '../src/limits/rate-limit.repo.ts'
import type { CreateTransactionInput } from '../src/modules/transactions/model.ts'
import { newTransactionRow } from '../src/modules/transactions/service.ts'
import { centsToDecimal, usdToCents } from '../src/lib/money.ts'
import { webhookData } from '../src/webhooks/payload.ts'

/**
 * The floor: a bare Elysia app over HTTPS (same runtime, same certificate) that does one
 * statement per request on the same database the service uses, opened the same way
 * (src/db/client.ts: the same driver, pool and PGlite data directory).
 * - `GET /floor/:id`: one key read, the transaction row by primary key, returned as JSON.
 * - `POST /floor`: one insert, a transaction row from the JSON body, returned as JSON.
 * - `GET /limited/:id` and `POST /limited`: the same, after counting the request against a
 *   project's limits with the service's own rate limiter (docs/decisions/0023-rate-limits-exact.md: on PostgreSQL one shared
 *   statement per batch of waiting requests, exact across instances; on PGlite in memory), its
 *   nine headers on the response. What the API's contract asks of every request before any of the
 *   service's own work, so the most the service could reach.
 * - `POST /limited/create`: the rate limit, then the service's own create statement (its
 *   lifecycle repository: the transaction, its actor's snapshot, its first timeline entry and its
 *   outbox event in one statement) with one snapshot made at start. The database work of a create
 *   as the design draws it, without the running actor, the webhook fan-out or the API's checks.
 * The service's routes are measured against these in the same run (DATABASE_URL set:
 * PostgreSQL; else PGlite in DATA_DIR).
 */
const [certFile, keyFile] = [process.env.TLS_CERT_FILE!, process.env.TLS_KEY_FILE!]
const database = await openDatabase({
  databaseUrl: process.env.DATABASE_URL ?? null,
  pgliteDir: process.env.DATA_DIR ? `${process.env.DATA_DIR}/pglite` : null,
})
const projectId = 'proj_floor'
await database.query(
  `INSERT INTO projects (id, name) VALUES ($1, 'Floor') ON CONFLICT DO NOTHING`,
  [projectId],
)

const INSERT = `INSERT INTO transactions (id, project_id, testing_mode, transaction_number, status, amount_usd, amount_in_currency, order_id, metadata, expires_at, created_at, updated_at)
  VALUES ($1, $2, true, $3, 'created', $4, $4, $5, $6::jsonb, now() + interval '1 hour', now(), now()) RETURNING *`
const SELECT = 'SELECT * FROM transactions WHERE id = $1'

const rateLimitRepo = createRateLimitRepo(database)
const limiter =
  database.kind === 'pglite'
    ? createEmbeddedRateLimiter({ repo: rateLimitRepo, clock: systemClock })
    : createRateLimiter({ repo: rateLimitRepo, clock: systemClock })
/** Out of reach, as the bench sets the service's project limits. */
const LIMITS = { minute: 1_000_000_000, hour: 1_000_000_000, day: 1_000_000_000 }
/**
 * Counts the request against the project's limits and sets the nine headers, as the service's gate
 * does.
 */
async function limited(set: { headers: Record<string, string | number> }) {
  setRateLimitHeaders(set, await limiter.check(`project:${projectId}`, LIMITS))
}

let n = 0
const insert = (body: unknown) => {
  const b = body as { amount: number; order_id?: string; metadata?: unknown }
  return database.query(INSERT, [
    randomUUID(),
    projectId,
    `FL-${process.pid}-${++n}`,
    String(b.amount),
    b.order_id ?? null,
    JSON.stringify(b.metadata ?? null),
  ])
}
const lifecycle = createLifecycleRepo(database)
const SNAPSHOT = createActor(transactionMachine, {
  input: { transactionId: randomUUID(), expiresAt: Date.now() + 3_600_000 },
}).getPersistedSnapshot()
const app = new Elysia()
  .get('/floor/:id', async ({ params }) => {
    const [row] = await database.query(SELECT, [params.id])
    return { success: true, transaction: row }
  })
  .post('/floor', async ({ body }) => {
    const [row] = await insert(body)
    return { success: true, transaction: row }
  })
  .get('/limited/:id', async ({ params, set }) => {
    await limited(set)
    const [row] = await database.query(SELECT, [params.id])
    return { success: true, transaction: row }
  })
  .post('/limited', async ({ body, set }) => {
    await limited(set)
    const [row] = await insert(body)
    return { success: true, transaction: row }
  })
  .post('/limited/create', async ({ body, set }) => {
    await limited(set)
    // The row as the service builds it for a create.
    const input = body as CreateTransactionInput
    const amount = centsToDecimal(usdToCents(input.amount))
    const row = newTransactionRow(
      { projectId, mode: 'test' },
      input,
      { currency: 'USD', amountInCurrency: amount, amountUsd: amount, usdRate: null },
      new Date(),
    )
    await lifecycle.insertCreated({
      row,
      snapshot: SNAPSHOT,
      machineVersion: MACHINE_VERSION,
      owner: null,
      eventData: webhookData(row),
      timelineDetails: {
        amount_in_currency: row.amountInCurrency,
        currency: row.currency,
        amount_usd: row.amountUsd,
        expires_at: row.expiresAt.toISOString(),
      },
    })
    return { success: true, transaction: row }
  })
const [seed] = await database.query<{ id: string }>(INSERT, [
  randomUUID(),
  projectId,
  `FL-${process.pid}-seed`,
  '10',
  null,
  'null',
])
const server = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  tls: { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') },
  fetch: (req) => app.handle(req),
})
console.error(JSON.stringify({ msg: 'listening', port: server.port, seed: seed!.id }))
process.on('SIGTERM', async () => {
  server.stop(true)
  await limiter.flush()
  await database.close()
  process.exit(0)
})
