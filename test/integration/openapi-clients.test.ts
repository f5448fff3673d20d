import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@hey-api/openapi-ts'
import { backends } from '../helpers/databases.ts'
import { ROOT } from '../helpers/processes.ts'
import { run } from '../helpers/run.ts'
import { startTestServer, type TestServer } from '../helpers/server.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'

/**
 * What an integrator does with the service, with tools nobody on this project wrote: install
 * @crypto-pay/verify-webhook from its packed tarball, generate a client from the document a
 * running server serves with @hey-api/openapi-ts, compile both under `tsc --strict`, and use them
 * unmodified against that server; and openapi-fetch typed by the `paths` the package ships.
 */
const PACKAGE_DIR = join(ROOT, 'src/webhooks/verify-webhook')

/**
 * The hey-api client: every merchant operation, the base URL the generated client took from
 * `servers`.
 */
const HEY_API_PROGRAM = `import { readFileSync } from 'node:fs'
import { client } from './generated/client.gen'
import { cancelTransaction, createTransaction, getTransaction, getTransactionStats, getTransactionTimeline, listTransactions } from './generated/sdk.gen'
import type { Transaction, TransactionStatus } from './generated/types.gen'

const env = (name: string): string => {
  const value = process.env[name]
  if (!value) throw new Error(name + ' is not set')
  return value
}
const ca = readFileSync(env('API_CA_FILE'), 'utf8')
// No baseUrl here: the generated client has the one the document's servers named.
// Bun's fetch trusts the test server's self-signed certificate through its \`tls\` option.
client.setConfig({ auth: () => env('API_KEY'), fetch: ((request: Request) => fetch(request, { tls: { ca } })) as typeof fetch })

const created = await createTransaction({ body: { amount: 12.34, order_id: 'hey-api', metadata: { source: 'hey-api' } }, headers: { 'idempotency-key': 'hey-api-1' } })
if (!created.data) throw new Error('create failed: ' + JSON.stringify(created.error))
const transaction: Transaction = created.data.transaction
const id = transaction.id

const fetched = await getTransaction({ path: { id } })
const status: TransactionStatus | undefined = fetched.data?.transaction.status
const listed = await listTransactions({ path: { projectId: env('PROJECT_ID') }, query: { status: 'created', limit: 5 } })
const stats = await getTransactionStats({ query: { start_date: '2026-01-01' } })
const cancelled = await cancelTransaction({ path: { id } })
const timeline = await getTransactionTimeline({ path: { id } })
const first = timeline.data?.timeline[0]
const invalid = await createTransaction({ body: { amount: -1 } })

/** Never called: each line is wrong and must not compile. */
export function wrongCalls() {
  // @ts-expect-error amount is required
  createTransaction({ body: { order_id: 'x' } })
  // @ts-expect-error no such status
  listTransactions({ path: { projectId: 'p' }, query: { status: 'paid' } })
  // @ts-expect-error from_status is null on the first entry: test it before using it
  first!.from_status.toUpperCase()
  // @ts-expect-error error.type is the list of error types
  const type: 'oops' = invalid.error!.error.type
}

console.log(JSON.stringify({
  base_url: client.getConfig().baseUrl,
  created: { status: created.response.status, id, order_id: transaction.order_id, payment_url: created.data.payment_url },
  fetched: { status: fetched.response.status, transaction_status: status },
  listed: { status: listed.response.status, ids: listed.data?.transactions.map((t) => t.id), has_more: listed.data?.pagination.has_more },
  stats: { status: stats.response.status, total: stats.data?.stats.total_transactions, created: stats.data?.stats.by_status.created },
  cancelled: { status: cancelled.response.status, transaction_status: cancelled.data?.transaction.status },
  timeline: { status: timeline.response.status, entries: timeline.data?.timeline.map((e) => [e.from_status === null ? null : e.from_status.toUpperCase(), e.to_status]) },
  invalid: { status: invalid.response.status, type: invalid.error?.error.type, paths: invalid.error?.error.details?.map((d) => d.path) },
}))
`

/** A webhook handler: the installed package verifies real deliveries into hey-api's event type. */
const WEBHOOK_PROGRAM = `import { readFileSync } from 'node:fs'
import { constructEvent, WebhookVerificationError } from '@crypto-pay/verify-webhook'
import type { WebhookEvent } from './generated/types.gen'

const { deliveries, secret } = JSON.parse(readFileSync(process.env.DELIVERIES_FILE!, 'utf8')) as { deliveries: { body: string; headers: Record<string, string> }[]; secret: string }
const seen: unknown[] = []
for (const d of deliveries) {
  const event: WebhookEvent = constructEvent(d.body, d.headers, secret)
  switch (event.event) {
    case 'transaction.created': {
      // @ts-expect-error order_id may be null: test it for null first
      event.data.order_id.toUpperCase()
      const token: null = event.data.token_symbol
      seen.push({ event: event.event, id: event.data.transaction_id, order: event.data.order_id === null ? null : event.data.order_id.toUpperCase(), token })
      break
    }
    case 'transaction.payment_received': {
      // @ts-expect-error block_number may still be null at this stage
      event.data.block_number.toFixed(0)
      const hash: string = event.data.transaction_hash
      seen.push({ event: event.event, hash })
      break
    }
    case 'transaction.completed': {
      const block: number = event.data.block_number
      seen.push({ event: event.event, block })
      break
    }
    default:
      seen.push({ event: event.event, status: 'status' in event.data ? event.data.status : null })
  }
}
let refused = ''
try {
  // A body changed on the way (a test transaction passed off as live) is refused.
  constructEvent(deliveries[0].body.replace('"testing_mode":true', '"testing_mode":false'), deliveries[0].headers, secret)
} catch (e) {
  if (!(e instanceof WebhookVerificationError)) throw e
  refused = e.message
}
console.log(JSON.stringify({ seen, refused }))
`

/** openapi-fetch typed by the `paths` @crypto-pay/verify-webhook ships. */
const OPENAPI_FETCH_PROGRAM = `import { readFileSync } from 'node:fs'
import createClient from 'openapi-fetch'
import type { paths } from '@crypto-pay/verify-webhook'

const ca = readFileSync(process.env.API_CA_FILE!, 'utf8')
const client = createClient<paths>({
  baseUrl: process.env.API_URL!,
  headers: { Authorization: 'Bearer ' + process.env.API_KEY! },
  fetch: (request: Request) => fetch(request, { tls: { ca } }),
})
const created = await client.POST('/api/transactions/create', { params: { header: { 'idempotency-key': 'openapi-fetch-1' } }, body: { amount: 3.5 } })
if (!created.data) throw new Error('create failed: ' + JSON.stringify(created.error))
const fetched = await client.GET('/api/transactions/{id}', { params: { path: { id: created.data.transaction.id } } })
const stats = await client.GET('/api/transactions/stats')

export function wrongCalls() {
  // @ts-expect-error amount is a number
  client.POST('/api/transactions/create', { body: { amount: '10' } })
  // @ts-expect-error no such route
  client.GET('/api/transactions/{id}/refund', { params: { path: { id: 'x' } } })
}
console.log(JSON.stringify({ created: created.response.status, fetched: fetched.data?.transaction.id === created.data.transaction.id, stats: stats.data?.stats.total_transactions }))
`

/**
 * The integrator's project folder: the package installed from its tarball, nothing else of ours.
 */
let installed: Promise<string> | undefined
function integratorProject(): Promise<string> {
  installed ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'crypto-pay-integrator-'))
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'shop', private: true, type: 'module' }),
    )
    const pack = await run(['npm', 'pack', '--silent', '--pack-destination', dir, PACKAGE_DIR], {
      cwd: dir,
    })
    if (pack.code !== 0) throw new Error(`npm pack: ${pack.stderr}`)
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!
    const install = await run(
      ['npm', 'install', '--offline', '--no-audit', '--no-fund', `./${tarball}`],
      { cwd: dir },
    )
    if (install.code !== 0) throw new Error(`npm install: ${install.stderr}`)
    // The type and fetch libraries the programs use, from this project's install.
    for (const name of [
      'openapi-fetch',
      'openapi-typescript-helpers',
      'bun-types',
      '@types/node',
      'undici-types',
    ]) {
      mkdirSync(join(dir, 'node_modules', name, '..'), { recursive: true })
      symlinkSync(join(ROOT, 'node_modules', name), join(dir, 'node_modules', name), 'dir')
    }
    writeFileSync(join(dir, 'hey-api.ts'), HEY_API_PROGRAM)
    writeFileSync(join(dir, 'webhook.ts'), WEBHOOK_PROGRAM)
    writeFileSync(join(dir, 'openapi-fetch.ts'), OPENAPI_FETCH_PROGRAM)
    return dir
  })()
  return installed
}
afterAll(async () => {
  if (installed) rmSync(await installed, { recursive: true, force: true })
})

const TSC = [
  join(ROOT, 'node_modules/.bin/tsc'),
  '--noEmit',
  '--strict',
  '--target',
  'es2022',
  '--module',
  'esnext',
  '--moduleResolution',
  'bundler',
  '--types',
  'bun-types',
  '--skipLibCheck',
]

for (const backend of backends()) {
  describe(`an integrator's generated client and webhook handler against a running server [${backend}]`, () => {
    let t: TestServer
    let sink: WebhookSink
    let dir: string
    beforeAll(async () => {
      ;[t, sink, dir] = await Promise.all([
        startTestServer(backend),
        startWebhookSink(),
        integratorProject(),
      ])
      // Generated from what this server serves: its servers name its own base URL.
      const generated = join(dir, `generated-${backend}`)
      writeFileSync(
        join(dir, `served-${backend}.json`),
        await (await t.fetch('/swagger/json')).text(),
      )
      await createClient({
        input: join(dir, `served-${backend}.json`),
        output: generated,
        logs: { level: 'silent' },
      })
      rmSync(join(dir, 'generated'), { force: true, recursive: true })
      symlinkSync(generated, join(dir, 'generated'), 'dir')
    })
    afterAll(async () => {
      await t?.stop()
      await sink?.stop()
    })

    test('the hey-api client and the webhook handler compile under tsc --strict, the wrong calls do not', async () => {
      const tsc = await run([...TSC, 'hey-api.ts', 'webhook.ts', 'openapi-fetch.ts'], { cwd: dir })
      expect(tsc.stdout + tsc.stderr).toBe('')
      expect(tsc.code).toBe(0)
    })

    test('the generated client creates, reads, lists, counts, cancels and reads the timeline; the handler verifies and types the deliveries', async () => {
      const project = await t.project()
      const endpoint = await t.server.services.endpoints.create({
        projectId: project.id,
        mode: 'test',
        url: sink.url('/shop'),
        eventTypes: ['transaction.created', 'transaction.cancelled'],
      })
      if (!endpoint.ok) throw new Error(endpoint.message)
      await sink.configure('/shop', { secret: endpoint.value.secret, mode: 'ok' })
      const caFile = join(dir, `ca-${backend}.pem`)
      writeFileSync(caFile, t.ca)

      const out = await run([process.execPath, 'hey-api.ts'], {
        cwd: dir,
        env: { API_KEY: project.key, PROJECT_ID: project.id, API_CA_FILE: caFile },
      })
      expect(out.stderr).toBe('')
      expect(out.code).toBe(0)
      const r = JSON.parse(out.stdout)
      expect(r.base_url).toBe(t.url)
      expect(r.created).toEqual({
        status: 200,
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        order_id: 'hey-api',
        payment_url: `${t.url}/pay/${r.created.id}`,
      })
      expect(r.fetched).toEqual({ status: 200, transaction_status: 'created' })
      expect(r.listed.status).toBe(200)
      expect(r.listed.ids).toContain(r.created.id)
      expect(r.listed.has_more).toBe(false)
      expect(r.stats).toEqual({ status: 200, total: 1, created: 1 })
      expect(r.cancelled).toEqual({ status: 200, transaction_status: 'cancelled' })
      expect(r.timeline).toEqual({
        status: 200,
        entries: [
          [null, 'created'],
          ['CREATED', 'cancelled'],
        ],
      })
      expect(r.invalid).toEqual({ status: 400, type: 'invalid_request_error', paths: ['amount'] })

      const got = await sink.waitFor('/shop', (rs) => rs.length >= 2)
      const deliveriesFile = join(dir, `deliveries-${backend}.json`)
      writeFileSync(
        deliveriesFile,
        JSON.stringify({
          secret: endpoint.value.secret,
          deliveries: got.map((d) => ({ body: d.body, headers: d.headers })),
        }),
      )
      const handled = await run([process.execPath, 'webhook.ts'], {
        cwd: dir,
        env: { DELIVERIES_FILE: deliveriesFile },
      })
      expect(handled.stderr).toBe('')
      expect(handled.code).toBe(0)
      const h = JSON.parse(handled.stdout)
      expect(h.seen).toContainEqual({
        event: 'transaction.created',
        id: r.created.id,
        order: 'HEY-API',
        token: null,
      })
      expect(h.seen).toContainEqual({ event: 'transaction.cancelled', status: 'cancelled' })
      expect(h.refused).toContain('x-service-signature')

      // The same package under Node, as plain JavaScript.
      const node = await run(
        [
          process.env.NODE_BIN ?? 'node',
          '--input-type=module',
          '-e',
          `
        import { readFileSync } from 'node:fs'
        import { constructEvent } from '@crypto-pay/verify-webhook'
        const { deliveries, secret } = JSON.parse(readFileSync(${JSON.stringify(deliveriesFile)}, 'utf8'))
        console.log(JSON.stringify(deliveries.map((d) => constructEvent(d.body, d.headers, secret).event).sort()))
      `,
        ],
        { cwd: dir },
      )
      expect(node.stderr).toBe('')
      expect(JSON.parse(node.stdout)).toEqual(['transaction.cancelled', 'transaction.created'])
    })

    test("openapi-fetch typed by the package's paths drives the same server", async () => {
      const project = await t.project()
      const caFile = join(dir, `ca-${backend}.pem`)
      writeFileSync(caFile, t.ca)
      const out = await run([process.execPath, 'openapi-fetch.ts'], {
        cwd: dir,
        env: { API_URL: t.url, API_KEY: project.key, API_CA_FILE: caFile },
      })
      expect(out.stderr).toBe('')
      expect(JSON.parse(out.stdout)).toEqual({ created: 200, fetched: true, stats: 1 })
    })
  })
}
