import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createLifecycleRepo } from '../../src/actors/lifecycle.repo.ts'
import { createTransactionRepo } from '../../src/modules/transactions/transaction.repo.ts'
import { backends } from '../helpers/databases.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const R7_FIELDS = [
  'id',
  'transaction_number',
  'status',
  'amount_usd',
  'currency',
  'amount_in_currency',
  'usd_rate',
  'quote_rates',
  'payment_url',
  'x402_url',
  'testing_mode',
  'created_at',
  'expires_at',
  'updated_at',
  'order_id',
  'order_description',
  'customer_email',
  'customer_name',
  'metadata',
  'success_url',
  'cancel_url',
  'token_symbol',
  'token_amount',
  'blockchain_network',
  'deposit_address',
  'amount_received',
  'transaction_hash',
  'block_number',
  'confirmations',
  'required_confirmations',
  'confirmed_at',
  'completed_at',
  // docs/decisions/0043-finality-per-network.md: what completes the payment (null until a token is
  // selected).
  'finality',
  // What transaction_hash is the hash of: the paying transaction, or only the block (null with it).
  'transaction_hash_names',
].sort()

for (const backend of backends()) {
  describe(`POST /api/transactions/create [${backend}]`, () => {
    let t: TestServer
    let key: string
    let liveKey: string
    beforeAll(async () => {
      t = await startTestServer(backend)
      const p = await t.project()
      key = p.key
      liveKey = (await t.key(p.id, 'live')).key
    })
    afterAll(() => t?.stop())

    describe('happy', () => {
      test('creates a transaction in status created with every docs/decisions/0007-full-transaction-object.md field and the payment URL', async () => {
        const res = await api(t, key).create({
          amount: 49.99,
          customer_email: 'ada@example.com',
          customer_name: 'Ada',
          order_id: 'order-1',
          order_description: 'Two coffees',
          success_url: 'https://shop.example/ok',
          cancel_url: 'https://shop.example/cancel',
          expires_in_minutes: 30,
          metadata: { cart: 'c-1', items: 2 },
        })
        expect(res.status).toBe(200)
        expect(res.headers.get('x-request-id')).toMatch(/^req_/)
        const body = await res.json()
        expect(body.success).toBe(true)
        const tx = body.transaction
        expect(Object.keys(tx).sort()).toEqual(R7_FIELDS)
        expect(tx.id).toMatch(/^[0-9a-f-]{36}$/)
        expect(tx.transaction_number).toMatch(/^TX-[2-9A-HJ-NP-TV-Z]{4}-[2-9A-HJ-NP-TV-Z]{4}$/)
        expect(tx.status).toBe('created')
        expect(tx.amount_usd).toBe(49.99)
        expect(tx.currency).toBe('USD')
        expect(tx.amount_in_currency).toBe(49.99)
        expect(tx.usd_rate).toBeNull()
        expect(tx.quote_rates).toBeNull()
        expect(tx.testing_mode).toBe(true)
        expect(tx.payment_url).toBe(`${t.url}/pay/${tx.id}`)
        expect(tx.x402_url).toBe(`${t.url}/pay/${tx.id}/x402`)
        expect(body.payment_url).toBe(tx.payment_url)
        expect(tx.metadata).toEqual({ cart: 'c-1', items: 2 })
        expect(Date.parse(tx.expires_at) - Date.parse(tx.created_at)).toBe(30 * 60_000)
        for (const k of [
          'token_symbol',
          'token_amount',
          'blockchain_network',
          'deposit_address',
          'transaction_hash',
          'block_number',
          'confirmed_at',
          'completed_at',
        ]) {
          expect(tx[k]).toBeNull()
        }
      })

      test('optional fields may be omitted or null; expiry defaults to 60 minutes', async () => {
        const res = await api(t, key).create({
          amount: 1,
          customer_email: null,
          metadata: null,
          expires_in_minutes: null,
        })
        expect(res.status).toBe(200)
        const { transaction: tx } = await res.json()
        expect(tx.customer_email).toBeNull()
        expect(tx.metadata).toBeNull()
        expect(Date.parse(tx.expires_at) - Date.parse(tx.created_at)).toBe(60 * 60_000)
      })

      test('the bounds of docs/decisions/0005-create-request-bounds.md are accepted', async () => {
        const res = await api(t, key).create({
          amount: 1_000_000,
          customer_email: `${'a'.repeat(64)}@${'b'.repeat(180)}.com`,
          customer_name: 'n'.repeat(255),
          order_id: 'o'.repeat(255),
          order_description: 'd'.repeat(1000),
          success_url: `https://x.example/${'p'.repeat(2020)}`,
          expires_in_minutes: 10080,
          metadata: Object.fromEntries(
            Array.from({ length: 50 }, (_, i) => [`k${i}`.padEnd(40, 'x'), 'v'.repeat(500)]),
          ),
        })
        expect(res.status).toBe(200)
        expect((await res.json()).transaction.amount_usd).toBe(1_000_000)
      })

      test('a live key creates a live transaction', async () => {
        const res = await api(t, liveKey).create({ amount: 10 })
        expect((await res.json()).transaction.testing_mode).toBe(false)
      })

      test('amounts keep their cents exactly', async () => {
        for (const amount of [0.01, 0.1, 0.29, 19.99, 999999.99]) {
          const res = await api(t, key).create({ amount })
          expect((await res.json()).transaction.amount_usd).toBe(amount)
        }
      })
    })

    describe('errors', () => {
      const cases: [string, Record<string, unknown>, string][] = [
        ['amount missing', {}, 'amount'],
        ['amount zero', { amount: 0 }, 'amount'],
        ['amount negative', { amount: -5 }, 'amount'],
        ['amount above 1,000,000', { amount: 1_000_000.01 }, 'amount'],
        ['amount with 3 decimals', { amount: 10.001 }, 'amount'],
        ['amount 19.999', { amount: 19.999 }, 'amount'],
        ['amount as a string', { amount: '10' }, 'amount'],
        ['amount null', { amount: null }, 'amount'],
        ['customer_email invalid', { amount: 1, customer_email: 'not-an-email' }, 'customer_email'],
        [
          'customer_email too long',
          { amount: 1, customer_email: `${'a'.repeat(250)}@b.co` },
          'customer_email',
        ],
        ['customer_name too long', { amount: 1, customer_name: 'n'.repeat(256) }, 'customer_name'],
        ['order_id too long', { amount: 1, order_id: 'o'.repeat(256) }, 'order_id'],
        ['order_id a number', { amount: 1, order_id: 5 }, 'order_id'],
        [
          'order_description too long',
          { amount: 1, order_description: 'd'.repeat(1001) },
          'order_description',
        ],
        ['success_url relative', { amount: 1, success_url: '/ok' }, 'success_url'],
        [
          'success_url not http(s)',
          { amount: 1, success_url: 'javascript:alert(1)' },
          'success_url',
        ],
        ['cancel_url ftp', { amount: 1, cancel_url: 'ftp://x.example/' }, 'cancel_url'],
        [
          'cancel_url too long',
          { amount: 1, cancel_url: `https://x.example/${'p'.repeat(2040)}` },
          'cancel_url',
        ],
        ['expires_in_minutes zero', { amount: 1, expires_in_minutes: 0 }, 'expires_in_minutes'],
        [
          'expires_in_minutes above a week',
          { amount: 1, expires_in_minutes: 10081 },
          'expires_in_minutes',
        ],
        [
          'expires_in_minutes fractional',
          { amount: 1, expires_in_minutes: 1.5 },
          'expires_in_minutes',
        ],
        [
          'expires_in_minutes as a string',
          { amount: 1, expires_in_minutes: '5' },
          'expires_in_minutes',
        ],
        ['metadata an array', { amount: 1, metadata: ['a'] }, 'metadata'],
        [
          'metadata with 51 keys',
          {
            amount: 1,
            metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])),
          },
          'metadata',
        ],
        [
          'metadata key of 41 characters',
          { amount: 1, metadata: { ['k'.repeat(41)]: 'v' } },
          'metadata',
        ],
        [
          'metadata value of 501 characters',
          { amount: 1, metadata: { k: 'v'.repeat(501) } },
          'metadata.k',
        ],
        ['metadata nested object', { amount: 1, metadata: { k: { deep: 1 } } }, 'metadata.k'],
        ['an unknown field', { amount: 1, currency: 'EUR' }, 'currency'],
      ]
      for (const [name, body, path] of cases) {
        test(`400 for ${name}, naming ${path}`, async () => {
          const res = await api(t, key).create(body)
          expect(res.status).toBe(400)
          const err = await res.json()
          expect(err.success).toBe(false)
          expect(err.error.type).toBe('invalid_request_error')
          expect(typeof err.message).toBe('string')
          expect(err.error.details.map((d: { path: string }) => d.path)).toContain(path)
        })
      }

      test('400 for a body that is not JSON, or not an object', async () => {
        for (const raw of ['{bad', '[]', '"x"', '']) {
          const res = await api(t, key).post('/api/transactions/create', raw)
          expect(res.status).toBe(400)
          expect((await res.json()).error.type).toBe('invalid_request_error')
        }
      })

      test('400 when the content type is not JSON', async () => {
        const res = await t.fetch('/api/transactions/create', {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
          body: '{"amount":1}',
        })
        expect(res.status).toBe(400)
      })

      test('413 for a body over 64 KiB, declared or streamed', async () => {
        const big = JSON.stringify({ amount: 1, order_description: 'x'.repeat(70_000) })
        const declared = await api(t, key).post('/api/transactions/create', big)
        expect(declared.status).toBe(413)
        expect((await declared.json()).error.type).toBe('invalid_request_error')
        const stream = new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode(big))
            c.close()
          },
        })
        const streamed = await t.fetch('/api/transactions/create', {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: stream,
          duplex: 'half',
        } as RequestInit)
        expect(streamed.status).toBe(413)
      })

      test('nothing is created by a refused request', async () => {
        const before = (await (await api(t, key).get('/api/transactions/stats')).json()).stats
          .total_transactions
        await api(t, key).create({ amount: -1 })
        await api(t, key).create({ amount: 1, bogus: true })
        const after = (await (await api(t, key).get('/api/transactions/stats')).json()).stats
          .total_transactions
        expect(after).toBe(before)
      })
    })

    test('a transaction number already taken is reported and writes nothing, so create draws another', async () => {
      const first = (await (await api(t, key).create({ amount: 1 })).json()).transaction
      const repo = createTransactionRepo(t.server.services.database, t.server.services.rollups)
      const row = (await repo.find(
        { projectId: (await t.server.services.keys.authenticate(key))!.projectId, mode: 'test' },
        first.id,
      ))!
      const clash = { ...row, id: crypto.randomUUID() }
      const outcome = await createLifecycleRepo(t.server.services.database).insertCreated({
        row: clash,
        snapshot: {},
        machineVersion: 1,
        owner: null,
        timelineDetails: {},
        eventData: {},
      })
      expect(outcome).toBe('number_taken')
      expect(await repo.find({ projectId: row.projectId, mode: 'test' }, clash.id)).toBeNull()
    })

    describe('idempotency (docs/decisions/0006-idempotent-create.md)', () => {
      test('the same key and body returns the first response and creates nothing', async () => {
        const body = { amount: 12.34, order_id: 'idem-1' }
        const first = await api(t, key).create(body, { 'idempotency-key': 'idem-key-1' })
        const firstText = await first.text()
        const again = await api(t, key).create(
          { order_id: 'idem-1', amount: 12.34 },
          { 'idempotency-key': 'idem-key-1' },
        )
        expect(again.status).toBe(first.status)
        expect(await again.text()).toBe(firstText)
        const list = await (
          await api(t, key).get(
            `/api/transactions/project/${(await t.server.services.keys.authenticate(key))!.projectId}?limit=100`,
          )
        ).json()
        expect(
          list.transactions.filter((x: { order_id: string }) => x.order_id === 'idem-1'),
        ).toHaveLength(1)
      })

      test('the same key with a different body is a 409', async () => {
        await api(t, key).create({ amount: 5 }, { 'idempotency-key': 'idem-key-2' })
        const res = await api(t, key).create({ amount: 6 }, { 'idempotency-key': 'idem-key-2' })
        expect(res.status).toBe(409)
        expect((await res.json()).error.type).toBe('conflict_error')
      })

      test('keys are scoped per mode: a live key may reuse a test key value', async () => {
        const a = await (
          await api(t, key).create({ amount: 7 }, { 'idempotency-key': 'idem-key-3' })
        ).json()
        const b = await (
          await api(t, liveKey).create({ amount: 7 }, { 'idempotency-key': 'idem-key-3' })
        ).json()
        expect(b.transaction.id).not.toBe(a.transaction.id)
        expect(b.transaction.testing_mode).toBe(false)
      })

      test('an Idempotency-Key over 255 characters is a 400', async () => {
        const res = await api(t, key).create({ amount: 1 }, { 'idempotency-key': 'k'.repeat(256) })
        expect(res.status).toBe(400)
      })

      test('two identical concurrent requests create one transaction', async () => {
        const body = { amount: 3.21, order_id: 'concurrent-idem' }
        const responses = await Promise.all(
          Array.from({ length: 8 }, () =>
            api(t, key).create(body, { 'idempotency-key': 'idem-concurrent' }),
          ),
        )
        const ids = new Set<string>()
        for (const r of responses) {
          expect(r.status).toBe(200)
          ids.add((await r.json()).transaction.id)
        }
        expect(ids.size).toBe(1)
      })
    })
  })
}
