import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { heapStats } from 'bun:jsc'
import { eq, sql } from 'drizzle-orm'
import { transactions } from '../../src/db/schema.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { EXPORT_COLUMNS } from '../../src/modules/transactions/export-model.ts'
import { backends } from '../helpers/databases.ts'
import { dashboardClient, memberOf, unescapeHtml } from '../helpers/dashboard.ts'
import { ROOT } from '../helpers/processes.ts'
import { run } from '../helpers/run.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

/**
 * GET /api/transactions/export and the dashboard's download
 * (docs/integrating/export.md, docs/decisions/0064-priced-in-the-merchants-currency.md): 10,000
 * transactions streamed page by page and parsed back to the same numbers, formula cells made
 * inert, filters, isolation by project and mode, and a client that leaves.
 */

const NOW = Date.parse('2030-06-01T12:00:00.000Z')
const BULK = 10_000
const PAGE = 500
/** The bulk rows' first `created_at`; every three rows share one, microseconds included. */
const T0 = Date.parse('2030-01-01T00:00:00.000Z')
const STEP_US = 1_000_007n

type Row = Record<(typeof EXPORT_COLUMNS)[number], string>

// What bulk row g holds, computed here independently of the service's code.
const PLACES: Record<string, number> = { EUR: 2, JPY: 0, KWD: 3, USD: 2 }
const currencyOf = (g: number) => ['EUR', 'JPY', 'KWD', 'USD'][g % 4]!
const minorOf = (g: number) => ((BigInt(g) * 7919n) % 1_000_000n) + 1n
const centsOf = (g: number) => ((BigInt(g) * 104729n) % 100_000_000n) + 1n
const statusOf = (g: number) =>
  (({ 0: 'expired', 1: 'failed', 2: 'cancelled' }) as Record<number, string>)[g % 10] ?? 'completed'
const tokenUnitsOf = (g: number) => BigInt(g) * 1_000_003n
const atParOf = (g: number) => currencyOf(g) === 'EUR' && g % 3 === 0
/** Exact decimal text of minor units with `places` decimals. */
function decimal(minor: bigint, places: number): string {
  if (places === 0) return minor.toString()
  const unit = 10n ** BigInt(places)
  return `${minor / unit}.${(minor % unit).toString().padStart(places, '0')}`
}
const createdAtOf = (g: number) =>
  new Date(T0 + Number((BigInt(Math.floor(g / 3)) * STEP_US) / 1000n)).toISOString()

const EUR_FEED = '0xb49f677943BC038e9857d61E7d053CaA2C1734C1'
const JPY_FEED = '0xBcE206caE7f0ec07b545EddE332A47C2F75bbeb3'
const USDC_FEED = '0x8fFfFfd4AfB6115b954Bd326cbe7B4BA576818f6'

/** 10,000 transactions of one project and mode in one statement. */
function bulkInsert(projectId: string) {
  return sql`
    INSERT INTO transactions (id, project_id, testing_mode, transaction_number, status, amount_usd,
      currency, amount_in_currency, usd_rate, quote_rates, order_id, token_symbol, token_amount,
      blockchain_network, transaction_hash, block_number, completed_at, expires_at, created_at,
      updated_at)
    SELECT md5(${projectId}::text || g)::uuid, ${projectId}, true, 'TX-EXP-' || g,
      coalesce((ARRAY['expired', 'failed', 'cancelled'])[g % 10 + 1], 'completed'),
      ((g::bigint * 104729) % 100000000 + 1)::numeric / 100,
      c.code, ((g::bigint * 7919) % 1000000 + 1)::numeric / power(10::numeric, c.places),
      c.rate, CASE WHEN g % 10 > 2 THEN
        CASE WHEN c.code = 'EUR' AND g % 3 = 0
          THEN jsonb_build_object('quotedAt', '2030-01-01T00:00:00.000Z', 'method', 'par',
            'tokenUsd', null, 'currencyUsd', null)
          ELSE jsonb_build_object('quotedAt', '2030-01-01T00:00:00.000Z', 'method', 'usd',
            'tokenUsd', jsonb_build_object('usd', '0.99990000', 'source', 'chainlink',
              'network', 'ethereum', 'feed', ${USDC_FEED}::text,
              'roundId', (36893488147419103233::numeric + g)::text,
              'updatedAt', '2029-12-31T23:58:00.000Z'),
            'currencyUsd', c.rate)
        END END,
      'order-' || g,
      CASE WHEN g % 10 > 2 THEN CASE WHEN c.code = 'EUR' AND g % 3 = 0 THEN 'EURC' ELSE 'USDC' END END,
      CASE WHEN g % 10 > 2 THEN g::numeric * 1000003 END,
      CASE WHEN g % 10 > 2 THEN 'ethereum' END,
      CASE WHEN g % 10 > 2 THEN '0x' || md5(g::text) || md5((g + 1)::text) END,
      CASE WHEN g % 10 > 2 THEN 19000000 + g END,
      CASE WHEN g % 10 > 2 THEN at + interval '5 minutes' END,
      at + interval '1 hour', at, at
    FROM generate_series(1, ${BULK}) g,
      LATERAL (SELECT timestamptz '2030-01-01T00:00:00Z'
        + (g / 3) * interval '1.000007 second' AS at) t,
      LATERAL (SELECT (ARRAY['EUR', 'JPY', 'KWD', 'USD'])[g % 4 + 1] AS code,
        (ARRAY[2, 0, 3, 2])[g % 4 + 1] AS places,
        CASE g % 4
          WHEN 0 THEN jsonb_build_object('usd', '1.08420000', 'source', 'chainlink',
            'network', 'ethereum', 'feed', ${EUR_FEED}::text,
            'roundId', (18446744073709551617::numeric + g)::text,
            'updatedAt', '2029-12-31T23:59:00.000Z')
          WHEN 1 THEN jsonb_build_object('usd', '0.00664000', 'source', 'chainlink',
            'network', 'ethereum', 'feed', ${JPY_FEED}::text, 'roundId', '18446744073709551999',
            'updatedAt', '2029-12-31T23:59:30.000Z')
          WHEN 2 THEN jsonb_build_object('usd', '3.25000000', 'source', 'fixed',
            'network', null, 'feed', null, 'roundId', null,
            'updatedAt', '2030-01-01T00:00:00.000Z')
        END AS rate) c`
}

/** Refunds as the treasury flow leaves them; `snapshot` is not read by the export. */
function refund(r: {
  id: string
  projectId: string
  transactionNumber: string
  token: string
  amount: bigint
  status: string
  createdAt: string
  completedAt?: string
  hash?: string
  block?: number
}) {
  return sql`
    INSERT INTO refunds (id, transaction_id, project_id, mode, network, token_symbol, amount,
      address, deposit_address, status, snapshot, machine_version, tx_hash, block_number,
      created_at, updated_at, completed_at)
    SELECT ${r.id}, id, ${r.projectId}, 'test', 'ethereum', ${r.token}, ${r.amount.toString()},
      '0x1111111111111111111111111111111111111111', '0x2222222222222222222222222222222222222222',
      ${r.status}, '{}'::jsonb, 1, ${r.hash ?? null}, ${r.block ?? null},
      ${r.createdAt}::timestamptz, ${r.createdAt}::timestamptz, ${r.completedAt ?? null}::timestamptz
    FROM transactions WHERE transaction_number = ${r.transactionNumber}`
}

/** RFC 4180, strictly: CRLF after every record, quotes only around a whole field. */
function parseCsv(text: string): string[][] {
  const records: string[][] = []
  let record: string[] = []
  let field = ''
  let quoted = false
  let i = 0
  while (i < text.length) {
    const c = text[i]!
    if (quoted) {
      if (c !== '"') field += c
      else if (text[i + 1] === '"') {
        field += '"'
        i++
      } else quoted = false
      i++
      continue
    }
    if (c === '"' && field === '') quoted = true
    else if (c === ',') {
      record.push(field)
      field = ''
    } else if (c === '\r' && text[i + 1] === '\n') {
      record.push(field)
      records.push(record)
      record = []
      field = ''
      i++
    } else if (c === '"' || c === '\r' || c === '\n') throw new Error(`bare ${c} at ${i}`)
    else field += c
    i++
  }
  if (quoted || field !== '' || record.length) throw new Error('the last record lacks its CRLF')
  return records
}

/** The CSV's records as objects keyed by its header row, which must be the documented columns. */
function csvRows(text: string): Row[] {
  const [header, ...records] = parseCsv(text)
  expect(header).toEqual([...EXPORT_COLUMNS])
  for (const r of records) expect(r.length).toBe(EXPORT_COLUMNS.length)
  return records.map((r) => Object.fromEntries(header!.map((h, i) => [h, r[i]!])) as Row)
}

/** Each JSON line parsed on its own; every value a string or null, the keys the CSV's columns. */
function jsonLines(text: string): Record<string, string | null>[] {
  expect(text.endsWith('\n')).toBe(true)
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => {
      const o = JSON.parse(line) as Record<string, unknown>
      expect(Object.keys(o)).toEqual([...EXPORT_COLUMNS])
      for (const v of Object.values(o)) expect(v === null || typeof v === 'string').toBe(true)
      return o as Record<string, string | null>
    })
}

/**
 * Watches the pages the export reads: each page's transactions, and whether the reading has
 * finished. `delayMs` slows each page down, so a client can leave well before the end.
 */
function watchPages(t: TestServer) {
  const service = t.server.services.transactionExport
  const original = service.pages
  const seen = {
    pages: [] as number[],
    finished: false,
    delayMs: 0,
    onPage: null as (() => void) | null,
  }
  service.pages = async function* (...args: Parameters<typeof original>) {
    try {
      for await (const page of original(...args)) {
        seen.pages.push(page.filter((r) => r.record_type === 'transaction').length)
        seen.onPage?.()
        yield page
        if (seen.delayMs) await Bun.sleep(seen.delayMs)
      }
    } finally {
      seen.finished = true
    }
  }
  return { seen, restore: () => void (service.pages = original) }
}

/** Downloads the export in a process of its own and prints its status and its size in bytes. */
const DOWNLOAD = `
const res = await fetch(process.env.URL, {
  headers: { authorization: 'Bearer ' + process.env.KEY },
  tls: { ca: process.env.CA },
})
let bytes = 0
for await (const chunk of res.body) bytes += chunk.byteLength
console.log(res.status, bytes)`

const heapNow = () => {
  Bun.gc(true)
  return heapStats().heapSize
}

for (const backend of backends()) {
  describe(`GET /api/transactions/export [${backend}]`, () => {
    const clock = manualClock(NOW)
    let t: TestServer
    /** The bulk project: 10,000 test transactions and four refunds. */
    let bulk: { id: string; key: string }
    /** A small project: five test transactions, one live, one refund. */
    let shop: { id: string; key: string }
    let shopLive: string
    let shopIds: Record<'b1' | 'b2' | 'b3' | 'b4' | 'b5' | 'live', string>
    const get = (key: string, query = '') => api(t, key).get(`/api/transactions/export${query}`)
    const exported = async (key: string, query = '') => {
      const res = await get(key, query)
      expect(res.status).toBe(200)
      return csvRows(await res.text())
    }
    const idsOf = (rows: Row[]) => rows.map((r) => `${r.record_type}:${r.transaction_id}`)

    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
      bulk = await t.project({ name: 'Bulk shop' })
      shop = await t.project({ name: 'Small shop' })
      shopLive = (await t.key(shop.id, 'live')).key
      const db = t.server.services.database
      await db.rows(bulkInsert(bulk.id))
      const refunds = [
        // JPY, in the quoted token: a third of it.
        {
          id: 'rf_exp_13',
          g: 13,
          token: 'USDC',
          amount: tokenUnitsOf(13) / 3n,
          status: 'completed',
        },
        // USD: part in the quoted token, and coin that arrived in another asset.
        { id: 'rf_exp_23a', g: 23, token: 'USDC', amount: 1_000_003n, status: 'pending' },
        { id: 'rf_exp_23b', g: 23, token: 'ETH', amount: 5_000_000_000_000_000n, status: 'failed' },
        // KWD, all of it.
        {
          id: 'rf_exp_9998',
          g: 9998,
          token: 'USDC',
          amount: tokenUnitsOf(9998),
          status: 'completed',
        },
      ]
      for (const [i, r] of refunds.entries()) {
        const done = r.status === 'completed'
        await db.rows(
          refund({
            ...r,
            projectId: bulk.id,
            transactionNumber: `TX-EXP-${r.g}`,
            createdAt: `2030-02-01T00:00:0${i}.000Z`,
            completedAt: done ? `2030-02-01T01:00:0${i}.000Z` : undefined,
            hash: done ? `0x${String(i).repeat(64)}` : undefined,
            block: done ? 20_000_000 + i : undefined,
          }),
        )
      }

      const at = async (iso: string, key: string, body: Record<string, unknown>) => {
        clock.set(Date.parse(iso))
        const res = await api(t, key).create({ amount: 10, ...body })
        expect(res.status).toBe(200)
        return ((await res.json()) as any).transaction.id as string
      }
      shopIds = {
        b1: await at('2030-05-01T00:00:00.000Z', shop.key, { amount: 10.1, order_id: 'plain' }),
        b2: await at('2030-05-01T23:59:59.999Z', shop.key, { amount: 20.2 }),
        b3: await at('2030-05-02T08:00:00.000Z', shop.key, { order_id: 'a,b "c"\r\nd' }),
        b4: await at('2030-05-03T00:00:00.000Z', shop.key, {
          order_id: '=HYPERLINK("http://attacker.example")',
        }),
        b5: await at('2030-05-03T10:00:00.000Z', shop.key, { order_id: '@SUM(A1)' }),
        live: await at('2030-05-01T10:00:00.000Z', shopLive, { order_id: '+1-1' }),
      }
      clock.set(NOW)
      const set = (id: string, values: Partial<typeof transactions.$inferInsert>) =>
        db.db.update(transactions).set(values).where(eq(transactions.id, id))
      await set(shopIds.b1, { status: 'completed', tokenSymbol: 'USDC', tokenAmount: '10100000' })
      await set(shopIds.b2, { status: 'completed', currency: 'EUR', amountInCurrency: '20.200' })
      await set(shopIds.b3, { status: 'failed' })
      await db.rows(
        refund({
          id: 'rf_exp_shop',
          projectId: shop.id,
          transactionNumber: (await api(t, shop.key).transaction(shopIds.b1)).transaction_number,
          token: 'USDC',
          amount: 2_525_000n,
          status: 'pending',
          createdAt: '2030-05-05T00:00:00.000Z',
        }),
      )
    })
    afterAll(() => t?.stop())

    test('10,000 transactions are read in pages of 500 and arrive in several chunks that parse back to the same numbers', async () => {
      const watch = watchPages(t)
      let chunks = 0
      let text = ''
      try {
        const res = await get(bulk.key)
        expect(res.status).toBe(200)
        expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8')
        expect(res.headers.get('content-disposition')).toBe(
          'attachment; filename="transactions-test-2030-06-01.csv"',
        )
        expect(res.headers.get('cache-control')).toBe('no-store')
        expect(res.headers.get('x-request-id')).toBeTruthy()
        const decoder = new TextDecoder()
        const reader = res.body!.getReader()
        for (let read = await reader.read(); !read.done; read = await reader.read()) {
          chunks++
          text += decoder.decode(read.value, { stream: true })
        }
      } finally {
        watch.restore()
      }
      expect(watch.seen.pages).toEqual(Array(BULK / PAGE).fill(PAGE))
      expect(watch.seen.finished).toBe(true)
      expect(chunks).toBeGreaterThan(5)

      const rows = csvRows(text)
      const txRows = rows.filter((r) => r.record_type === 'transaction')
      expect(txRows).toHaveLength(BULK)
      // Oldest first, ties (three rows share each created_at) broken by id: the database's order.
      const order = await t.server.services.database.rows<{ id: string }>(
        sql`SELECT id FROM transactions WHERE project_id = ${bulk.id} ORDER BY created_at, id`,
      )
      expect(txRows.map((r) => r.transaction_id)).toEqual(order.map((r) => r.id))

      let centsTotal = 0n
      for (const r of txRows) {
        const g = Number(r.transaction_number.slice('TX-EXP-'.length))
        const currency = currencyOf(g)
        const paid = statusOf(g) === 'completed'
        expect(r.status).toBe(statusOf(g))
        expect(r.testing_mode).toBe('true')
        expect(r.created_at).toBe(createdAtOf(g))
        expect(r.order_id).toBe(`order-${g}`)
        expect(r.currency).toBe(currency)
        expect(r.amount_in_currency).toBe(decimal(minorOf(g), PLACES[currency]!))
        expect(r.amount_usd).toBe(decimal(centsOf(g), 2))
        centsTotal += BigInt(r.amount_usd.replace('.', ''))
        expect(r.usd_rate).toBe(
          { EUR: '1.08420000', JPY: '0.00664000', KWD: '3.25000000', USD: '' }[currency]!,
        )
        expect(r.usd_rate_source).toBe(
          { EUR: 'chainlink', JPY: 'chainlink', KWD: 'fixed', USD: '' }[currency]!,
        )
        expect(r.usd_rate_feed).toBe(
          { EUR: `${EUR_FEED}@ethereum`, JPY: `${JPY_FEED}@ethereum`, KWD: '', USD: '' }[currency]!,
        )
        expect(r.usd_rate_round_id).toBe(
          currency === 'EUR'
            ? (18446744073709551617n + BigInt(g)).toString()
            : currency === 'JPY'
              ? '18446744073709551999'
              : '',
        )
        expect(r.token_amount).toBe(paid ? tokenUnitsOf(g).toString() : '')
        expect(r.block_number).toBe(paid ? String(19_000_000 + g) : '')
        expect(r.token_symbol).toBe(paid ? (atParOf(g) ? 'EURC' : 'USDC') : '')
        expect(r.quote_method).toBe(paid ? (atParOf(g) ? 'par' : 'usd') : '')
        const throughUsd = paid && !atParOf(g)
        expect(r.token_usd_price).toBe(throughUsd ? '0.99990000' : '')
        expect(r.token_usd_feed).toBe(throughUsd ? `${USDC_FEED}@ethereum` : '')
        expect(r.token_usd_round_id).toBe(
          throughUsd ? (36893488147419103233n + BigInt(g)).toString() : '',
        )
        expect(r.currency_usd_rate).toBe(throughUsd ? r.usd_rate : '')
        expect(r.currency_usd_round_id).toBe(throughUsd ? r.usd_rate_round_id : '')
      }
      const [sum] = await t.server.services.database.rows<{ cents: string }>(
        sql`SELECT (sum(amount_usd) * 100)::bigint::text AS cents FROM transactions WHERE project_id = ${bulk.id}`,
      )
      expect(centsTotal.toString()).toBe(sum!.cents)

      // Each refund right after its transaction, stated in its currency pro rata to the quote.
      const after = (n: number) => {
        const i = rows.findIndex((r) => r.transaction_number === `TX-EXP-${n}`)
        const next = rows.findIndex((r, j) => j > i && r.record_type === 'transaction')
        return rows.slice(i + 1, next < 0 ? rows.length : next)
      }
      const share = (g: number, units: bigint) =>
        decimal((units * minorOf(g)) / tokenUnitsOf(g), PLACES[currencyOf(g)]!)
      expect(after(13)).toEqual([
        expect.objectContaining({
          record_type: 'refund',
          refund_id: 'rf_exp_13',
          transaction_number: 'TX-EXP-13',
          status: 'completed',
          created_at: '2030-02-01T00:00:00.000Z',
          completed_at: '2030-02-01T01:00:00.000Z',
          order_id: 'order-13',
          currency: 'JPY',
          amount_in_currency: share(13, tokenUnitsOf(13) / 3n),
          amount_usd: '',
          usd_rate: '',
          token_symbol: 'USDC',
          token_amount: (tokenUnitsOf(13) / 3n).toString(),
          blockchain_network: 'ethereum',
          transaction_hash: `0x${'0'.repeat(64)}`,
          block_number: '20000000',
          quote_method: '',
        }),
      ])
      expect(
        after(23).map((r) => [r.refund_id, r.status, r.amount_in_currency, r.token_amount]),
      ).toEqual([
        ['rf_exp_23a', 'pending', share(23, 1_000_003n), '1000003'],
        ['rf_exp_23b', 'failed', '', '5000000000000000'],
      ])
      expect(after(9998).map((r) => [r.refund_id, r.currency, r.amount_in_currency])).toEqual([
        ['rf_exp_9998', 'KWD', decimal(minorOf(9998), 3)],
      ])
      expect(rows.filter((r) => r.record_type === 'refund')).toHaveLength(4)
    })

    test('the same export as JSON lines parses line by line to the same values', async () => {
      const res = await get(bulk.key, '?format=jsonl')
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toBe('application/jsonl; charset=utf-8')
      expect(res.headers.get('content-disposition')).toBe(
        'attachment; filename="transactions-test-2030-06-01.jsonl"',
      )
      const lines = jsonLines(await res.text())
      expect(lines).toHaveLength(BULK + 4)
      const csv = await exported(bulk.key)
      // The CSV's empty cells are the lines' nulls; nothing else differs (no formula here).
      expect(lines).toEqual(
        csv.map((r) =>
          Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v === '' ? null : v])),
        ),
      )
    })

    test('memory stays flat while 10,000 transactions stream: the heap does not grow with what has been sent', async () => {
      // The client is another process, so the heap measured here is the server's alone.
      const download = () =>
        run([process.execPath, '-e', DOWNLOAD], {
          env: { URL: `${t.url}/api/transactions/export`, KEY: bulk.key, CA: t.ca },
        })
      await download() // warm up: code paths, statements and buffers, once
      const watch = watchPages(t)
      const growth: number[] = []
      const before = heapNow()
      watch.seen.onPage = () => growth.push(heapNow() - before)
      let child: Awaited<ReturnType<typeof download>>
      try {
        child = await download()
      } finally {
        watch.restore()
      }
      const [status, sent] = child.stdout.trim().split(' ').map(Number)
      expect(status).toBe(200)
      expect(sent).toBeGreaterThan(4_000_000)
      expect(growth).toHaveLength(BULK / PAGE)
      // Sampled after a full collection as each page is read. By the third page the first is
      // sent, the second is in flight and the third is read: what streaming holds from then on.
      // The other 17 pages carry 17/20 of the export; had they been kept (a buffered export
      // holds every page until its last byte is out), the heap would have grown by at least
      // their text, one byte per character and more as rows or records, which is four times
      // the bound here. And at no point does the heap hold anything near the whole export.
      const settled = growth[2]!
      expect(Math.max(...growth.slice(2)) - settled).toBeLessThan((sent! * 17) / 20 / 4)
      expect(Math.max(...growth)).toBeLessThan(sent!)
    })

    test('a client that disconnects mid-stream stops the reading', async () => {
      const watch = watchPages(t)
      watch.seen.delayMs = 100
      try {
        const abort = new AbortController()
        const res = await t.fetch('/api/transactions/export', {
          headers: { authorization: `Bearer ${bulk.key}` },
          signal: abort.signal,
        })
        const reader = res.body!.getReader()
        expect((await reader.read()).done).toBe(false)
        abort.abort()
        await reader.read().catch(() => null)
        for (let i = 0; i < 100 && !watch.seen.finished; i++) await Bun.sleep(20)
        expect(watch.seen.finished).toBe(true)
        const read = watch.seen.pages.length
        expect(read).toBeLessThan(BULK / PAGE / 2)
        await Bun.sleep(300)
        expect(watch.seen.pages.length).toBe(read)
      } finally {
        watch.restore()
      }
    })

    test('cells a spreadsheet would evaluate are exported inert, and commas, quotes and line breaks round-trip', async () => {
      const res = await get(shop.key)
      const text = await res.text()
      const rows = csvRows(text)
      const orderOf = (id: string) => rows.find((r) => r.transaction_id === id)!.order_id
      expect(orderOf(shopIds.b4)).toBe(`'=HYPERLINK("http://attacker.example")`)
      expect(orderOf(shopIds.b5)).toBe(`'@SUM(A1)`)
      expect(orderOf(shopIds.b3)).toBe('a,b "c"\r\nd')
      expect(orderOf(shopIds.b1)).toBe('plain')
      expect(text).toContain(`,"'=HYPERLINK(""http://attacker.example"")",`)
      // No cell of the file starts with a formula character.
      for (const r of rows) for (const v of Object.values(r)) expect(v).not.toMatch(/^[=+\-@\t\r]/)
      // JSON lines are for programs: the text as the merchant sent it.
      const lines = jsonLines(await (await get(shop.key, '?format=jsonl')).text())
      expect(lines.find((l) => l.transaction_id === shopIds.b4)!.order_id).toBe(
        '=HYPERLINK("http://attacker.example")',
      )
      expect(lines.find((l) => l.transaction_id === shopIds.b3)!.order_id).toBe('a,b "c"\r\nd')
      // The live one, with its own mode's key.
      const live = await exported(shopLive)
      expect(live.map((r) => r.order_id)).toEqual([`'+1-1`])
    })

    test('filters: status, currency (any case), date range as the stats read it; refunds follow their transaction', async () => {
      const { b1, b2, b3, b4, b5 } = shopIds
      const tx = (...ids: string[]) => ids.map((id) => `transaction:${id}`)
      expect(idsOf(await exported(shop.key))).toEqual([
        ...tx(b1),
        `refund:${b1}`,
        ...tx(b2, b3, b4, b5),
      ])
      expect(idsOf(await exported(shop.key, '?status=completed'))).toEqual([
        ...tx(b1),
        `refund:${b1}`,
        ...tx(b2),
      ])
      expect(idsOf(await exported(shop.key, '?status=failed'))).toEqual(tx(b3))
      expect(idsOf(await exported(shop.key, '?currency=eur'))).toEqual(tx(b2))
      expect(idsOf(await exported(shop.key, '?currency=USD&status=created'))).toEqual(tx(b4, b5))
      expect(idsOf(await exported(shop.key, '?currency=GBP'))).toEqual([])
      // A date-only end covers its whole UTC day; a timestamp end is inclusive.
      const range = (q: string) =>
        exported(shop.key, q).then((rows) =>
          rows.filter((r) => r.record_type === 'transaction').map((r) => r.transaction_id),
        )
      expect(await range('?start_date=2030-05-01&end_date=2030-05-01')).toEqual([b1, b2])
      expect(await range('?start_date=2030-05-02')).toEqual([b3, b4, b5])
      expect(await range('?end_date=2030-05-02T08:00:00Z')).toEqual([b1, b2, b3])
      expect(await range('?start_date=2030-05-01T23:59:59.999Z&end_date=2030-05-03')).toEqual([
        b2,
        b3,
        b4,
        b5,
      ])
      expect(await range('?start_date=2030-05-03&end_date=2030-05-03&status=created')).toEqual([
        b4,
        b5,
      ])
      const eur = (await exported(shop.key, '?currency=EUR'))[0]!
      expect([eur.currency, eur.amount_in_currency, eur.amount_usd]).toEqual([
        'EUR',
        '20.20',
        '20.20',
      ])
      // A header row and nothing else when nothing matches.
      expect(await (await get(shop.key, '?start_date=2031-01-01')).text()).toBe(
        `${EXPORT_COLUMNS.join(',')}\r\n`,
      )
      expect(await (await get(shop.key, '?start_date=2031-01-01&format=jsonl')).text()).toBe('')
    })

    test("the key's project and mode only: another project's rows and the other mode's never appear", async () => {
      const shopRows = await exported(shop.key)
      expect(shopRows.every((r) => r.testing_mode === 'true')).toBe(true)
      expect(shopRows.map((r) => r.transaction_id)).not.toContain(shopIds.live)
      expect(shopRows.some((r) => r.transaction_number.startsWith('TX-EXP-'))).toBe(false)
      const live = await exported(shopLive)
      expect(live.map((r) => [r.transaction_id, r.testing_mode])).toEqual([[shopIds.live, 'false']])
      // The bulk project's live mode has nothing; its test mode has nothing of the shop's.
      const bulkLive = (await t.key(bulk.id, 'live')).key
      expect(await exported(bulkLive)).toEqual([])
      const bulkIds = new Set((await exported(bulk.key)).map((r) => r.transaction_id))
      for (const id of Object.values(shopIds)) expect(bulkIds.has(id)).toBe(false)
      expect(bulkIds.size).toBe(BULK)
    })

    test('/export is its own route, not a transaction id; the others still answer', async () => {
      const res = await get(shop.key)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8')
      const one = await api(t, shop.key).get(`/api/transactions/${shopIds.b1}`)
      expect(((await one.json()) as any).transaction.id).toBe(shopIds.b1)
      const bad = await api(t, shop.key).get('/api/transactions/exports')
      expect(bad.status).toBe(400)
      expect(((await bad.json()) as any).error.details).toEqual([
        { path: 'id', message: 'must be a UUID' },
      ])
    })

    test('bad input is 400 with the usual error body, naming the parameter', async () => {
      const refused = async (query: string, path: string, message: unknown) => {
        const res = await get(shop.key, query)
        expect(res.status).toBe(400)
        expect(res.headers.get('content-type')).toContain('application/json')
        const body = (await res.json()) as any
        expect(body.success).toBe(false)
        expect(body.error.type).toBe('invalid_request_error')
        expect(body.error.details).toEqual([{ path, message }])
      }
      await refused('?format=xml', 'format', 'must be one of: csv, jsonl')
      await refused('?format=csv&format=jsonl', 'format', 'must be given once')
      await refused('?status=paid', 'status', expect.stringContaining('must be one of: created'))
      await refused('?currency=EURO', 'currency', 'must be a three-letter ISO 4217 code')
      await refused(
        '?start_date=2030-02-30',
        'start_date',
        'must be YYYY-MM-DD or an ISO 8601 timestamp',
      )
      await refused('?end_date=tomorrow', 'end_date', 'must be YYYY-MM-DD or an ISO 8601 timestamp')
      await refused(
        '?start_date=2030-05-03&end_date=2030-05-02',
        'start_date',
        'must not be after end_date',
      )
    })

    test('needs transactions:read and a key', async () => {
      const statsOnly = (await t.key(shop.id, 'test', ['stats:read'])).key
      const denied = await get(statsOnly)
      expect(denied.status).toBe(403)
      expect(((await denied.json()) as any).error.message).toContain('transactions:read')
      expect((await api(t, null).get('/api/transactions/export')).status).toBe(401)
    })

    test('docs/integrating/export.md documents every column', () => {
      const doc = readFileSync(join(ROOT, 'docs/integrating/export.md'), 'utf8')
      for (const c of EXPORT_COLUMNS) expect(doc, c).toContain(`| \`${c}\` |`)
    })
  })

  describe(`the dashboard's download [${backend}]`, () => {
    const clock = manualClock(NOW)
    let t: TestServer
    let member: Awaited<ReturnType<typeof memberOf>>
    let other: { id: string; key: string }
    let paid: string
    let open: string

    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
      member = await memberOf(t)
      other = await t.project({ name: 'Someone else' })
      const create = async (key: string, order: string) =>
        ((await (await api(t, key).create({ amount: 12.5, order_id: order })).json()) as any)
          .transaction.id as string
      paid = await create(member.project.key, 'mine-paid')
      clock.advance(1000)
      open = await create(member.project.key, 'mine-open')
      await create(other.key, 'theirs')
      await t.server.services.database.db
        .update(transactions)
        .set({ status: 'completed' })
        .where(eq(transactions.id, paid))
    })
    afterAll(() => t?.stop())

    test("the list links to the export with its filters; the link downloads the signed-in project's CSV", async () => {
      const client = dashboardClient(t)
      expect((await client.signIn(member.email, member.password)).status).toBe(303)
      const list = await client.page(
        `/dashboard/${member.project.id}/test/transactions?status=completed&order_id=mine`,
      )
      expect(list.status).toBe(200)
      const links = [...list.text.matchAll(/href="([^"]*\/transactions\/export[^"]*)"/g)].map((m) =>
        unescapeHtml(m[1]!),
      )
      const base = `/dashboard/${member.project.id}/test/transactions/export`
      expect(links).toEqual([
        `${base}?format=csv&status=completed&order_id=mine`,
        `${base}?format=jsonl&status=completed&order_id=mine`,
      ])

      const csv = await client.get(links[0]!)
      expect(csv.status).toBe(200)
      expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8')
      expect(csv.headers.get('content-disposition')).toBe(
        'attachment; filename="transactions-test-2030-06-01.csv"',
      )
      expect(csvRows(csv.text).map((r) => [r.transaction_id, r.order_id, r.status])).toEqual([
        [paid, 'mine-paid', 'completed'],
      ])
      const everything = await client.get(`${base}?format=jsonl`)
      expect(everything.headers.get('content-type')).toBe('application/jsonl; charset=utf-8')
      expect(jsonLines(everything.text).map((l) => l.transaction_id)).toEqual([paid, open])
      // Unfiltered, the page's links carry only the format.
      const plain = await client.page(`/dashboard/${member.project.id}/test/transactions`)
      expect(plain.text).toContain(`href="${base}?format=csv"`)
    })

    test("the dashboard's access rules hold: signed in, a member, a mode; bad filters are a 400 page", async () => {
      const anonymous = dashboardClient(t)
      const path = `/dashboard/${member.project.id}/test/transactions/export`
      const out = await anonymous.get(path)
      expect(out.status).toBe(303)
      expect(out.location).toStartWith('/dashboard/sign-in?next=')

      const client = dashboardClient(t)
      await client.signIn(member.email, member.password)
      expect((await client.get(`/dashboard/${other.id}/test/transactions/export`)).status).toBe(404)
      expect(
        (await client.get(`/dashboard/${member.project.id}/staging/transactions/export`)).status,
      ).toBe(404)
      const live = await client.get(`/dashboard/${member.project.id}/live/transactions/export`)
      expect(live.status).toBe(200)
      expect(csvRows(live.text)).toEqual([])
      const bad = await client.get(`${path}?format=xml`)
      expect(bad.status).toBe(400)
      expect(bad.headers.get('content-type')).toContain('text/html')
      expect(bad.text).toContain('format must be one of: csv, jsonl')
    })
  })
}
