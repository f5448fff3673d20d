import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  createConfig,
  lintDocument,
  makeDocumentFromString,
  BaseResolver,
} from '@redocly/openapi-core'
import { Document, Spectral } from '@stoplight/spectral-core'
import * as Parsers from '@stoplight/spectral-parsers'
import { oas } from '@stoplight/spectral-rulesets'
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { apiTypes } from '../../scripts/openapi-types.ts'
import { WEBHOOK_EVENT_TYPES } from '../../src/db/schema.ts'
import { ERROR_TYPES } from '../../src/http/errors.ts'
import { STATUSES } from '../../src/modules/transactions/model.ts'
import { backends } from '../helpers/databases.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import { schemaProblems } from '../helpers/openapi-validator.ts'
import { ROOT } from '../helpers/processes.ts'
import { run } from '../helpers/run.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const COMMITTED_PATH = join(ROOT, 'openapi/openapi.json')
const TYPES_PATH = join(ROOT, 'src/webhooks/verify-webhook/api.d.mts')
const committedText = readFileSync(COMMITTED_PATH, 'utf8')
const committed = JSON.parse(committedText) as OpenApi

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']
const ERROR_REF = '#/components/schemas/ErrorResponse'

type Json = Record<string, any>
type OpenApi = {
  openapi: string
  info: Json
  servers: Json[]
  paths: Record<string, Record<string, Json>>
  webhooks: Record<string, Record<string, Json>>
  components: Json
  security?: Json[]
}

/** Every operation of the document (or of its webhooks) with its path and method. */
function operations(doc: OpenApi, section: 'paths' | 'webhooks' = 'paths') {
  return Object.entries(doc[section]).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ path, method, op, name: `${method.toUpperCase()} ${path}` })),
  )
}
const operation = (id: string) => operations(committed).find((o) => o.op.operationId === id)!.op
/**
 * A transaction's x402_url, the one operation outside /api (docs/decisions/0063-x402.md): public
 * (the transaction's id authorises it, as on the pay page), limited per client IP without the
 * X-RateLimit-* headers, and answering 402 with x402's own body and header. Checked on its own
 * below; the API's rules apply to every other operation.
 */
const X402_URL = 'payTransactionX402'
/**
 * The Coinbase Commerce API (docs/decisions/0065-coinbase-commerce-drop-in.md): its own key
 * header and error shape, checked on their own below; and a checkout's page, opened by people.
 */
const CHECKOUT_PAGE = 'commerceOpenCheckout'
const isCommerce = (o: { path: string }) => o.path.startsWith('/commerce/')
const apiOperations = (doc: OpenApi) => operations(doc).filter((o) => o.path.startsWith('/api/'))
const commerceOperations = (doc: OpenApi) => operations(doc).filter(isCommerce)
const COMMERCE_ERROR_REF = '#/components/schemas/CommerceError'

/** Every `$ref` string anywhere in the document. */
function refs(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) for (const v of node) refs(v, found)
  else if (node && typeof node === 'object')
    for (const [k, v] of Object.entries(node))
      k === '$ref' && typeof v === 'string' ? found.push(v) : refs(v, found)
  return found
}

const resolvePointer = (doc: unknown, ref: string) =>
  ref
    .slice(2)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<any>((node, key) => node?.[key], doc)
const deref = (node: Json): Json => (node?.$ref ? resolvePointer(committed, node.$ref) : node)
/** Every object anywhere in the document, nested ones included. */
const objects = (node: unknown): Json[] =>
  Array.isArray(node)
    ? node.flatMap(objects)
    : node && typeof node === 'object'
      ? [node as Json, ...Object.values(node).flatMap(objects)]
      : []

/**
 * The warnings the linters may still give, each for a reason (errors: none):
 * - WebhookEvent is the union receivers parse into; no operation returns it, so it is "unused".
 * - The two paths are the merchant contract's; a transaction id is a UUID, never "project". The
 *   refunds of a transaction (docs/decisions/0038-refunds.md) sit under it the same way, as the issue names them.
 * - A self-hosted service has no one contact or licence to name: each deployment has its operator.
 * - A checkout's page answers people with a redirect (303) to the charge it made, never a 2xx.
 */
const JUSTIFIED = {
  redocly: [
    'operation-2xx-response #/paths/~1checkout~1{id}/get/responses',
    'no-unused-components #/components/schemas/WebhookEvent',
    'no-ambiguous-paths #/paths/~1api~1transactions~1project~1{projectId}',
    'no-ambiguous-paths #/paths/~1api~1transactions~1{id}~1refunds',
    'info-license #/info',
  ],
  spectral: ['oas3-unused-component components.schemas.WebhookEvent', 'info-contact info'],
}

describe('openapi/openapi.json', () => {
  test('the committed openapi/openapi.json is what the app produces', async () => {
    // In a fresh process, exactly as `npm run openapi` runs, whatever else this test process did.
    const child = await run(
      [
        process.execPath,
        '-e',
        "import { formatDocument, openapiDocument } from './src/http/openapi-document.ts'; process.stdout.write(formatDocument(await openapiDocument()))",
      ],
      { cwd: ROOT },
    )
    expect(child.stderr).toBe('')
    expect(child.code).toBe(0)
    const produced = child.stdout
    if (produced !== committedText) {
      const a = produced.split('\n')
      const b = committedText.split('\n')
      const line = a.findIndex((l, i) => l !== b[i])
      throw new Error(
        `openapi/openapi.json is stale: it differs from the document the app serves at /swagger/json, first at line ${line + 1}\n` +
          `  app:       ${a[line] ?? '(end of file)'}\n  committed: ${b[line] ?? '(end of file)'}\n` +
          'Run `npm run openapi` and commit openapi/openapi.json.',
      )
    }
    expect(produced).toBe(committedText)
  })

  test('the types @crypto-pay/verify-webhook ships are generated from the committed document', async () => {
    if (readFileSync(TYPES_PATH, 'utf8') !== (await apiTypes(committedText))) {
      throw new Error(
        'src/webhooks/verify-webhook/api.d.mts is stale: run `npm run openapi` and commit it.',
      )
    }
  })

  test('is an OpenAPI 3.1 document with every merchant operation and every webhook the service sends', () => {
    expect(committed.openapi).toBe('3.1.0')
    expect(committed.info.title).toBeTruthy()
    expect(committed.info.version).toBeTruthy()
    expect(
      operations(committed)
        .map((o) => o.name)
        .sort(),
    ).toEqual(
      [
        'GET /api/deposit-addresses',
        'GET /api/deposit-key',
        'GET /api/networks',
        'GET /api/refunds',
        'GET /api/refunds/{id}',
        'GET /api/sweeps',
        'GET /api/sweeps/{id}',
        'GET /api/transactions/project/{projectId}',
        'GET /api/transactions/export',
        'GET /api/transactions/stats',
        'GET /api/transactions/{id}',
        'GET /api/transactions/{id}/refunds',
        'GET /api/transactions/{id}/timeline',
        'POST /api/refunds/{id}/abandon',
        'POST /api/refunds/{id}/cancel',
        'POST /api/refunds/{id}/payment',
        'POST /api/refunds/{id}/unpayable',
        'POST /api/sweeps',
        'POST /api/transactions/create',
        'POST /api/transactions/{id}/cancel',
        'POST /api/transactions/{id}/refunds',
        'POST /api/transactions/{id}/retry-webhook',
        'GET /api/x402/pay-to',
        'GET /api/x402/supported',
        'POST /api/x402/settle',
        'POST /api/x402/verify',
        'GET /pay/{id}/x402',
        'GET /commerce/charges',
        'GET /commerce/charges/{id}',
        'GET /commerce/checkouts',
        'GET /commerce/checkouts/{id}',
        'GET /commerce/events',
        'GET /commerce/events/{id}',
        'POST /commerce/charges',
        'POST /commerce/charges/{id}/cancel',
        'POST /commerce/charges/{id}/resolve',
        'POST /commerce/checkouts',
        'PUT /commerce/checkouts/{id}',
        'DELETE /commerce/checkouts/{id}',
        'GET /checkout/{id}',
      ].sort(),
    )
    expect(Object.keys(committed.webhooks).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort())
  })

  test('the committed document names its server with a variable: each deployment has its own', () => {
    expect(committed.servers).toHaveLength(1)
    const [server] = committed.servers
    expect(server.url).toBe('https://{host}')
    expect(server.variables.host.default).toBe('localhost:3000')
  })

  test('every operation and webhook has a unique operationId, a summary and a tag', () => {
    const ids = [...operations(committed), ...operations(committed, 'webhooks')].map(
      ({ name, op }) => {
        expect(op.operationId, `${name} has no operationId`).toMatch(/^[A-Za-z][A-Za-z0-9]*$/)
        expect(op.summary, `${name} has no summary`).toBeTruthy()
        expect(op.tags?.length, `${name} has no tag`).toBeGreaterThan(0)
        return op.operationId
      },
    )
    expect(new Set(ids).size).toBe(ids.length)
  })

  test('a bearer security requirement applies to every operation; webhooks are signed instead', () => {
    const schemes = committed.components.securitySchemes ?? {}
    const bearer = Object.keys(schemes).filter(
      (n) => schemes[n].type === 'http' && schemes[n].scheme === 'bearer',
    )
    expect(bearer.length).toBeGreaterThan(0)
    expect(
      committed.security?.some((req) => Object.keys(req).some((n) => bearer.includes(n))),
    ).toBe(true)
    for (const { name, op } of apiOperations(committed)) {
      // An operation-level `security` replaces the global one; `[]` would make it public.
      if (op.security !== undefined)
        expect(
          op.security.some((req: Json) => Object.keys(req).some((n) => bearer.includes(n))),
          `${name} overrides security`,
        ).toBe(true)
    }
    for (const { name, op } of operations(committed, 'webhooks'))
      expect(op.security, name).toEqual([])
    expect(operation(X402_URL).security).toEqual([])
    expect(operation(CHECKOUT_PAGE).security).toEqual([])
  })

  test('the Commerce API: its key header on every operation, every error in its shape, the rate-limit headers', () => {
    expect(committed.components.securitySchemes.CommerceApiKey).toEqual({
      type: 'apiKey',
      in: 'header',
      name: 'X-CC-Api-Key',
      description: expect.any(String),
    })
    const ops = commerceOperations(committed)
    expect(ops).toHaveLength(12)
    for (const { name, op } of ops) {
      expect(op.security, name).toEqual([{ CommerceApiKey: [] }])
      expect(op.tags, name).toEqual(['Coinbase Commerce'])
      const statuses = Object.keys(op.responses)
      expect(
        statuses.filter((st) => Number(st) < 400),
        name,
      ).toHaveLength(1)
      for (const status of ['400', '401', '403', '404', '413', '429', '500'])
        expect(statuses, `${name} does not document ${status}`).toContain(status)
      for (const [status, res] of Object.entries<Json>(op.responses)) {
        const headers = Object.keys(res.headers)
        expect(headers, `${name} ${status}`).toContain('X-Request-Id')
        expect(headers, `${name} ${status}`).toContain('X-RateLimit-Remaining-Minute')
        if (Number(status) >= 400)
          expect(res.content['application/json'].schema.$ref, `${name} ${status}`).toBe(
            COMMERCE_ERROR_REF,
          )
      }
    }
    const page = operation(CHECKOUT_PAGE)
    expect(Object.keys(page.responses).sort()).toEqual(['303', '404', '429', '503'])
    for (const res of Object.values<Json>(page.responses))
      expect(Object.keys(res.headers).some((h) => h.startsWith('X-RateLimit'))).toBe(false)
  })

  test('every operation documents 400, 401, 403, 413, 429 and 500 with the ErrorResponse schema, whose type is the list of error types', () => {
    for (const { name, op } of apiOperations(committed)) {
      for (const status of ['200', '400', '401', '403', '413', '429', '500'])
        expect(Object.keys(op.responses), `${name} does not document ${status}`).toContain(status)
      for (const [status, res] of Object.entries<Json>(op.responses)) {
        if (Number(status) < 400) continue
        expect(
          res.content?.['application/json']?.schema?.$ref,
          `${name} ${status} is not the ErrorResponse schema`,
        ).toBe(ERROR_REF)
      }
    }
    // The x402_url: 402 is x402's own body; its other errors are the API's.
    const x402 = operation(X402_URL)
    expect(Object.keys(x402.responses).sort()).toEqual(
      ['200', '402', '404', '409', '429', '500', '503'].sort(),
    )
    for (const [status, res] of Object.entries<Json>(x402.responses))
      if (Number(status) > 402)
        expect(res.content['application/json'].schema.$ref, status).toBe(ERROR_REF)
    expect(x402.responses['402'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/X402PaymentRequired',
    )
    expect(committed.components.schemas.Error).toBeUndefined()
    expect(
      [...committed.components.schemas.ErrorResponse.properties.error.properties.type.enum].sort(),
    ).toEqual([...ERROR_TYPES].sort())
  })

  test('every response has a description, a JSON body and declared headers: X-Request-Id always, the rate limits, Retry-After on 429', () => {
    // The x402_url: X-Request-Id, x402's headers, Retry-After on 429; no X-RateLimit-*.
    const x402 = operation(X402_URL)
    const headersOf = (status: string) => Object.keys(x402.responses[status].headers)
    expect(headersOf('402')).toContain('PAYMENT-REQUIRED')
    expect(deref(x402.responses['402'].headers['PAYMENT-REQUIRED']).required).toBe(true)
    expect(headersOf('200')).toContain('PAYMENT-RESPONSE')
    expect(headersOf('429')).toContain('Retry-After')
    for (const status of Object.keys(x402.responses)) {
      expect(headersOf(status)).toContain('X-Request-Id')
      expect(headersOf(status).some((h) => h.startsWith('X-RateLimit'))).toBe(false)
    }
    expect(x402.parameters.find((p: Json) => p.name === 'PAYMENT-SIGNATURE')).toMatchObject({
      in: 'header',
      required: false,
    })
    for (const { name, op } of apiOperations(committed)) {
      for (const [status, res] of Object.entries<Json>(op.responses)) {
        expect(
          typeof res.description === 'string' && res.description.length > 0,
          `${name} ${status} has no description`,
        ).toBe(true)
        // The export's file is CSV or JSON lines (docs/integrating/export.md); errors are JSON.
        expect(Object.keys(res.content ?? {}), `${name} ${status}`).toEqual(
          op.operationId === 'exportTransactions' && status === '200'
            ? ['text/csv', 'application/jsonl']
            : ['application/json'],
        )
        const headers = Object.fromEntries(
          Object.entries<Json>(res.headers ?? {}).map(([h, v]) => [h.toLowerCase(), v]),
        )
        // At the response a header is a plain $ref (3.1 tools ignore keys beside one); whether
        // it is always sent is in the header it points to.
        for (const [h, v] of Object.entries<Json>(headers))
          expect(Object.keys(v), `${name} ${status} ${h}`).toEqual(['$ref'])
        expect(deref(headers['x-request-id']!).required, `${name} ${status} X-Request-Id`).toBe(
          true,
        )
        for (const w of ['minute', 'hour', 'day']) {
          for (const kind of ['limit', 'remaining', 'reset']) {
            const h = headers[`x-ratelimit-${kind}-${w}`]
            expect(h, `${name} ${status} x-ratelimit-${kind}-${w}`).toBeDefined()
            // Refused before the limiter: no Host (400), plain HTTP (403).
            expect(
              deref(h).required ?? false,
              `${name} ${status} x-ratelimit-${kind}-${w} required`,
            ).toBe(status !== '400' && status !== '403')
          }
        }
        if (status === '429')
          expect(deref(headers['retry-after']!).required, `${name} 429 Retry-After`).toBe(true)
        for (const h of Object.values(headers))
          expect(deref(h).schema, `${name} ${status}`).toBeDefined()
      }
    }
  })

  test('every path parameter is declared and required, and every $ref resolves', () => {
    for (const { name, path, op } of operations(committed)) {
      const inPath = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort()
      const declared = (op.parameters ?? []).filter((p: Json) => p.in === 'path')
      expect(declared.map((p: Json) => p.name).sort(), name).toEqual(inPath)
      for (const p of declared) expect(p.required, `${name} path parameter ${p.name}`).toBe(true)
    }
    const all = refs(committed)
    expect(all).toContain(ERROR_REF)
    for (const ref of all)
      expect(resolvePointer(committed, ref), `${ref} does not resolve`).toBeDefined()
  })

  test('Transaction, TransactionStatus, Pagination and Stats are each written once and referenced', () => {
    const all = refs(committed)
    for (const name of [
      'Transaction',
      'TransactionStatus',
      'Pagination',
      'Stats',
      'TimelineEntry',
    ]) {
      expect(committed.components.schemas[name], name).toBeDefined()
      expect(
        all.filter((r) => r === `#/components/schemas/${name}`).length,
        `${name} is referenced`,
      ).toBeGreaterThan(0)
    }
    // No copies: the list of statuses appears once in the whole document, and so does a
    // transaction's field list.
    expect(
      objects(committed).filter((o) => JSON.stringify(o.enum) === JSON.stringify(STATUSES)),
    ).toHaveLength(1)
    const fields = (schema: Json) => JSON.stringify(Object.keys(schema.properties ?? {}).sort())
    const transactionFields = fields(committed.components.schemas.Transaction)
    expect(
      objects(committed).filter((o) => o.properties && fields(o) === transactionFields),
    ).toHaveLength(1)
    expect(committed.components.schemas.TransactionResult.properties.transaction).toEqual({
      $ref: '#/components/schemas/Transaction',
    })
    expect(committed.components.schemas.TransactionList.properties.pagination).toEqual({
      $ref: '#/components/schemas/Pagination',
    })
    expect(committed.components.schemas.StatsResult.properties.stats).toEqual({
      $ref: '#/components/schemas/Stats',
    })
    // Not <OperationId>Response: generators give their own aliases those names and would append a
    // 2.
    for (const { op } of operations(committed))
      expect(
        committed.components.schemas[
          `${op.operationId[0].toUpperCase()}${op.operationId.slice(1)}Response`
        ],
      ).toBeUndefined()
  })

  test('types tell the truth: a nullable status admits null, and request rules are as strict as the server', () => {
    const entry = {
      from_status: null,
      to_status: 'created',
      cause: 'transaction.created',
      details: {},
      at: '2026-01-01T00:00:00.000Z',
    }
    expect(schemaProblems('TimelineEntry', entry)).toEqual([])
    expect(schemaProblems('TimelineEntry', { ...entry, from_status: 'paid' })).not.toEqual([])

    const create = (body: Json) => schemaProblems('CreateTransactionRequest', body)
    expect(
      create({
        amount: 49.99,
        success_url: 'https://shop.example/ok',
        metadata: { cart: 'c-1' },
        expires_in_minutes: null,
      }),
    ).toEqual([])
    // Two decimal places is the server's rule, stated in words: JSON Schema's `multipleOf: 0.01`
    // is tested in binary floating point by the validators integrators use, which then refuse
    // valid prices (see the Ajv test below).
    const amount = committed.components.schemas.CreateTransactionRequest.properties.amount
    expect(amount.type).toBe('number')
    expect(amount.description).toContain("at most the currency's decimal places (2 for USD")
    expect(objects(committed).filter((o) => 'multipleOf' in o)).toEqual([])
    expect(create({ amount: 0 })).not.toEqual([])
    expect(create({ amount: 10, success_url: 'ftp://shop.example/ok' })).not.toEqual([])
    expect(create({ amount: 10, cancel_url: 'javascript:alert(1)' })).not.toEqual([])
    expect(create({ amount: 10, metadata: { ['k'.repeat(41)]: 'v' } })).not.toEqual([])
    expect(create({ amount: 10, metadata: { '': 'v' } })).not.toEqual([])
    expect(create({ amount: 10, metadata: { k: 'v'.repeat(501) } })).not.toEqual([])
    expect(create({ amount: 10, surprise: true })).not.toEqual([])

    const idempotencyKey = operation('createTransaction').parameters.find(
      (p: Json) => p.name.toLowerCase() === 'idempotency-key',
    )
    expect(idempotencyKey.schema.minLength).toBe(1)
    for (const name of ['start_date', 'end_date']) {
      const pattern = new RegExp(
        operation('getTransactionStats').parameters.find((p: Json) => p.name === name).schema
          .pattern,
      )
      expect(
        ['2026-01-01', '2026-01-01T10:00:00Z', '2026-01-01T10:00:00.123+02:00'].every((v) =>
          pattern.test(v),
        ),
        name,
      ).toBe(true)
      expect(
        ['tomorrow', '2026-1-1', '2026-01-01 10:00', '2026-01-01T10:00:00'].some((v) =>
          pattern.test(v),
        ),
        name,
      ).toBe(false)
    }
  })

  test('an operation that takes no body says so and what becomes of one sent anyway', () => {
    for (const id of ['cancelTransaction', 'retryWebhook']) {
      expect(operation(id).requestBody, id).toBeUndefined()
      expect(operation(id).description, id).toContain('Takes no body')
    }
  })

  test("every webhook: its body schema, the stage table's nullability (keys always present) and its signed headers", () => {
    const mapping = committed.components.schemas.WebhookEvent.discriminator.mapping
    expect(Object.keys(mapping).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort())
    for (const [event, item] of Object.entries(committed.webhooks)) {
      const body = item.post.requestBody.content['application/json'].schema
      expect(body.$ref, event).toBe(mapping[event])
      const schema = deref(body)
      expect(schema.required, event).toEqual(['event', 'timestamp', 'data'])
      expect(schema.properties.event.const).toBe(event)
      const data = deref(schema.properties.data)
      expect([...data.required].sort(), `${event}: every key of data is always present`).toEqual(
        Object.keys(data.properties).sort(),
      )
      const headers = item.post.parameters.map((p: Json) => deref(p))
      for (const h of [
        'x-service-signature',
        'x-service-event-id',
        'x-service-sequence',
        'webhook-id',
        'webhook-timestamp',
        'webhook-signature',
      ]) {
        expect(
          headers.find((p: Json) => p.name === h),
          `${event} ${h}`,
        ).toMatchObject({ in: 'header', required: true })
      }
    }
    const at = (event: string) =>
      deref(
        deref(committed.webhooks[event].post.requestBody.content['application/json'].schema)
          .properties.data,
      ).properties
    const nullable = (s: Json) =>
      s.type === 'null' || (s.anyOf ?? []).some((v: Json) => v.type === 'null')
    const onlyNull = (s: Json) => s.type === 'null'
    // The stage table: token fields null at creation; set from payment_received; all set at
    // completion.
    for (const f of [
      'token_symbol',
      'token_amount',
      'blockchain_network',
      'transaction_hash',
      'block_number',
      'confirmed_at',
    ])
      expect(onlyNull(at('transaction.created')[f]), `created ${f}`).toBe(true)
    for (const f of ['token_symbol', 'token_amount', 'blockchain_network', 'transaction_hash'])
      expect(nullable(at('transaction.payment_received')[f]), `payment_received ${f}`).toBe(false)
    expect(nullable(at('transaction.payment_received').block_number)).toBe(true)
    expect(onlyNull(at('transaction.confirming').confirmed_at)).toBe(true)
    for (const f of [
      'token_symbol',
      'token_amount',
      'blockchain_network',
      'transaction_hash',
      'block_number',
      'confirmed_at',
    ])
      expect(nullable(at('transaction.completed')[f]), `completed ${f}`).toBe(false)
    for (const f of ['customer_ip_address', 'order_id', 'metadata'])
      expect(nullable(at('transaction.completed')[f]), `completed ${f}`).toBe(true)
    expect(at('transaction.failed').failure_reason.enum).toEqual([
      'underpaid',
      'reverted',
      'wrong_asset',
    ])
  })

  test('Ajv with its defaults (the validator of Fastify and Prism) takes prices such as 19.99, 0.29, 0.07 and 1234.56', () => {
    const ajv = new Ajv2020()
    addFormats(ajv)
    const valid = ajv.compile(committed.components.schemas.CreateTransactionRequest)
    for (const amount of [19.99, 0.29, 0.07, 1234.56, 0.01, 49.99, 999_999.99, 1_000_000]) {
      valid({ amount, order_id: 'order-1' })
      expect({ amount, errors: valid.errors ?? null }).toEqual({ amount, errors: null })
    }
    // The bound that binds is the USD value at creation (1,000,000), the server's rule; the schema
    // states the largest amount any currency may give.
    for (const amount of [0, -1, 1_000_000_000_001])
      expect(valid({ amount }), String(amount)).toBe(false)
  })

  test("Redocly's recommended rules: no error, and only the justified warnings", async () => {
    const config = await createConfig({ extends: ['recommended'] })
    const problems = await lintDocument({
      document: makeDocumentFromString(committedText, COMMITTED_PATH),
      config,
      externalRefResolver: new BaseResolver(),
    })
    expect(
      problems
        .filter((p) => p.severity === 'error')
        .map((p) => `${p.ruleId} ${p.location?.[0]?.pointer}: ${p.message}`),
    ).toEqual([])
    // A key beside a $ref (a header's `required`, say) is one no OpenAPI 3.1 tool reads.
    expect(problems.filter((p) => p.ruleId === 'spec-ref-siblings')).toEqual([])
    expect(problems.map((p) => `${p.ruleId} ${p.location?.[0]?.pointer}`).sort()).toEqual(
      [...JUSTIFIED.redocly].sort(),
    )
  })

  test("Spectral's spectral:oas rules: no error, and only the justified warnings", async () => {
    const spectral = new Spectral()
    spectral.setRuleset({ extends: [[oas as never, 'recommended']] } as never)
    const results = await spectral.run(new Document(committedText, Parsers.Json, COMMITTED_PATH))
    // Severity 0 is an error.
    expect(
      results
        .filter((r) => r.severity === 0)
        .map((r) => `${r.code} ${r.path.join('.')}: ${r.message}`),
    ).toEqual([])
    expect(results.map((r) => `${r.code} ${r.path.join('.')}`).sort()).toEqual(
      [...JUSTIFIED.spectral].sort(),
    )
  })
})

/**
 * Headers of the HTTP exchange itself, which OpenAPI leaves out (and says to ignore for
 * Content-Type).
 */
const FRAMING = new Set([
  'content-type',
  'content-length',
  'date',
  'connection',
  'keep-alive',
  'transfer-encoding',
])

for (const backend of backends()) {
  describe(`the committed OpenAPI document against a running server [${backend}]`, () => {
    let t: TestServer
    beforeAll(async () => {
      t = await startTestServer(backend, { API_URL: 'https://api.shop.example' })
    })
    afterAll(() => t?.stop())

    test('/swagger/json serves the committed document, but for servers: its BASE_URL and API_URL', async () => {
      const res = await t.fetch('/swagger/json')
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toContain('application/json')
      const { servers, ...served } = (await res.json()) as OpenApi
      const { servers: _, ...rest } = committed
      expect(served).toEqual(rest)
      expect(servers).toEqual([
        { url: t.url, description: 'This service (BASE_URL)' },
        {
          url: 'https://api.shop.example',
          description: 'The alternative API address (API_URL): the same paths',
        },
      ])
    })

    // Elysia writes `additionalProperties: false` into response models in place when it compiles
    // a route's checks (elysia/dist/schema.mjs); the models state it themselves so nothing changes.
    test('/swagger/json is the same document before and after the API served requests', async () => {
      const served = async () => (await t.fetch('/swagger/json')).json()
      const before = await served()
      const project = await t.project()
      const a = api(t, project.key)
      const created = await (await a.create({ amount: 1 })).json()
      for (const path of [
        `/api/transactions/${created.transaction.id}`,
        `/api/transactions/project/${project.id}`,
        '/api/transactions/stats',
      ])
        await (await a.get(path)).text()
      await (await a.create({ amount: -1 })).text()
      expect(await served()).toEqual(before)
    })

    test('every header of every /api response is declared for its operation and status, and every body matches its schema', async () => {
      const project = await t.project()
      const a = api(t, project.key)
      const readOnly = await t.key(project.id, 'test', ['transactions:read'])
      const r = api(t, readOnly.key)
      const none = api(t, null)
      const limited = await t.project({ limits: { minute: 1, hour: 100, day: 100 } })
      const l = api(t, limited.key)
      const id = (await (await a.create({ amount: 5 })).json()).transaction.id as string
      const completed = (await (await a.create({ amount: 6 })).json()).transaction.id as string
      for (const e of PATH_TO.completed)
        if (!(await t.server.services.lifecycle.apply(completed, e)).ok)
          throw new Error('could not complete')
      const big = JSON.stringify({ amount: 1, order_description: 'x'.repeat(70_000) })
      const post = (client: ReturnType<typeof api>, path: string) => client.post(path, '')
      const unknown = randomUUID()

      const cases: [string, number, () => Promise<Response>][] = [
        [
          'createTransaction',
          200,
          () => a.create({ amount: 7 }, { 'idempotency-key': 'headers-1' }),
        ],
        [
          'createTransaction',
          200,
          () => a.create({ amount: 7 }, { 'idempotency-key': 'headers-1' }),
        ], // a replay
        ['createTransaction', 400, () => a.create({ amount: 1.234 })],
        ['createTransaction', 401, () => none.create({ amount: 1 })],
        ['createTransaction', 403, () => r.create({ amount: 1 })],
        [
          'createTransaction',
          409,
          () => a.create({ amount: 8 }, { 'idempotency-key': 'headers-1' }),
        ],
        ['createTransaction', 413, () => a.post('/api/transactions/create', big)],
        ['getTransaction', 200, () => a.get(`/api/transactions/${id}`)],
        ['getTransaction', 400, () => a.get('/api/transactions/not-a-uuid')],
        ['getTransaction', 404, () => a.get(`/api/transactions/${unknown}`)],
        ['getTransactionTimeline', 200, () => a.get(`/api/transactions/${id}/timeline`)],
        ['getTransactionTimeline', 404, () => a.get(`/api/transactions/${unknown}/timeline`)],
        ['listTransactions', 200, () => a.get(`/api/transactions/project/${project.id}?limit=2`)],
        ['listTransactions', 400, () => a.get(`/api/transactions/project/${project.id}?limit=0`)],
        ['listTransactions', 403, () => a.get(`/api/transactions/project/${limited.id}`)],
        ['getTransactionStats', 200, () => a.get('/api/transactions/stats?start_date=2026-01-01')],
        ['getTransactionStats', 400, () => a.get('/api/transactions/stats?start_date=tomorrow')],
        ['cancelTransaction', 200, () => post(a, `/api/transactions/${id}/cancel`)],
        ['cancelTransaction', 409, () => post(a, `/api/transactions/${completed}/cancel`)],
        ['cancelTransaction', 413, () => a.post(`/api/transactions/${id}/cancel`, big)],
        ['retryWebhook', 200, () => post(a, `/api/transactions/${completed}/retry-webhook`)],
        ['retryWebhook', 409, () => post(a, `/api/transactions/${id}/retry-webhook`)],
        ['retryWebhook', 403, () => post(r, `/api/transactions/${completed}/retry-webhook`)],
        // The second request of a project allowed one a minute.
        [
          'getTransaction',
          429,
          () =>
            l.get(`/api/transactions/${unknown}`).then(() => l.get(`/api/transactions/${unknown}`)),
        ],
      ]

      const problems: string[] = []
      const replayed: (string | null)[] = []
      for (const [operationId, status, send] of cases) {
        const res = await send()
        const body = await res.json()
        const label = `${operationId} ${status}`
        if (res.status !== status) {
          problems.push(`${label}: answered ${res.status} ${JSON.stringify(body)}`)
          continue
        }
        const declared = operation(operationId).responses[String(status)]
        const names = Object.keys(declared.headers ?? {}).map((h) => h.toLowerCase())
        for (const h of res.headers.keys())
          if (!FRAMING.has(h) && !names.includes(h))
            problems.push(`${label}: header ${h} is sent but not declared`)
        for (const [h, v] of Object.entries<Json>(declared.headers))
          if (deref(v).required && !res.headers.has(h))
            problems.push(`${label}: required header ${h} is missing`)
        const schema = declared.content['application/json'].schema.$ref.split('/').pop()
        for (const p of schemaProblems(schema, body)) problems.push(`${label}: body ${p}`)
        if (operationId === 'createTransaction' && status === 200)
          replayed.push(res.headers.get('idempotent-replayed'))
      }
      expect(problems).toEqual([])
      expect(replayed).toEqual([null, 'true'])
    })
  })
}
