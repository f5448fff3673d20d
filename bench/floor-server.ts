import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Elysia } from 'elysia'
import { openDatabase } from '../src/db/client.ts'

/**
 * The floor: a bare Elysia app over HTTPS (same runtime, same certificate) that does one
 * statement per request on the same database the service uses, opened the same way
 * (src/db/client.ts: the same driver, pool and PGlite data directory).
 * - `GET /floor/:id`: one key read, the transaction row by primary key, returned as JSON.
 * - `POST /floor`: one insert, a transaction row from the JSON body, returned as JSON.
 * The service's routes are measured against these in the same run (DATABASE_URL set:
 * PostgreSQL; else PGlite in DATA_DIR).
 */
const [certFile, keyFile] = [process.env.TLS_CERT_FILE!, process.env.TLS_KEY_FILE!]
const database = await openDatabase({ databaseUrl: process.env.DATABASE_URL ?? null, pgliteDir: process.env.DATA_DIR ? `${process.env.DATA_DIR}/pglite` : null })
const projectId = 'proj_floor'
await database.query(`INSERT INTO projects (id, name) VALUES ($1, 'Floor') ON CONFLICT DO NOTHING`, [projectId])

const INSERT = `INSERT INTO transactions (id, project_id, testing_mode, transaction_number, status, amount_usd, order_id, metadata, expires_at, created_at, updated_at)
  VALUES ($1, $2, true, $3, 'created', $4, $5, $6::jsonb, now() + interval '1 hour', now(), now()) RETURNING *`
const SELECT = 'SELECT * FROM transactions WHERE id = $1'

let n = 0
const app = new Elysia()
  .get('/floor/:id', async ({ params }) => {
    const [row] = await database.query(SELECT, [params.id])
    return { success: true, transaction: row }
  })
  .post('/floor', async ({ body }) => {
    const b = body as { amount: number; order_id?: string; metadata?: unknown }
    const [row] = await database.query(INSERT, [randomUUID(), projectId, `FL-${process.pid}-${++n}`, String(b.amount), b.order_id ?? null, JSON.stringify(b.metadata ?? null)])
    return { success: true, transaction: row }
  })
const [seed] = await database.query<{ id: string }>(INSERT, [randomUUID(), projectId, `FL-${process.pid}-seed`, '10', null, 'null'])
const server = Bun.serve({ port: 0, hostname: '127.0.0.1', tls: { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') }, fetch: (req) => app.handle(req) })
console.error(JSON.stringify({ msg: 'listening', port: server.port, seed: seed!.id }))
process.on('SIGTERM', async () => {
  server.stop(true)
  await database.close()
  process.exit(0)
})
