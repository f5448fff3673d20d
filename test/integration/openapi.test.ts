import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createConfig, lintDocument, makeDocumentFromString, BaseResolver } from '@redocly/openapi-core'
import openapiTS, { astToString } from 'openapi-typescript'
import { backends } from '../helpers/databases.ts'
import { run } from '../helpers/run.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const ROOT = new URL('../..', import.meta.url).pathname
const COMMITTED_PATH = join(ROOT, 'openapi/openapi.json')
const committedText = readFileSync(COMMITTED_PATH, 'utf8')
const committed = JSON.parse(committedText) as OpenApi

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']
const ERROR_REF = '#/components/schemas/Error'

type Json = Record<string, any>
type OpenApi = { openapi: string; info: Json; paths: Record<string, Record<string, Json>>; components: Json; security?: Json[] }

/** Every operation of the document with its path and method. */
function operations(doc: OpenApi) {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).filter(([method]) => METHODS.includes(method)).map(([method, op]) => ({ path, method, op, name: `${method.toUpperCase()} ${path}` })),
  )
}

/** Every `$ref` string anywhere in the document. */
function refs(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) for (const v of node) refs(v, found)
  else if (node && typeof node === 'object') for (const [k, v] of Object.entries(node)) k === '$ref' && typeof v === 'string' ? found.push(v) : refs(v, found)
  return found
}

const resolvePointer = (doc: unknown, ref: string) =>
  ref.slice(2).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~')).reduce<any>((node, key) => node?.[key], doc)

/** Redocly's `struct` rule: the document against the OpenAPI 3.0 object model. */
async function structuralProblems() {
  const config = await createConfig({ rules: { struct: 'error' } })
  const problems = await lintDocument({
    document: makeDocumentFromString(committedText, COMMITTED_PATH),
    config: config.styleguide,
    externalRefResolver: new BaseResolver(),
  })
  return problems.map((p) => ({ pointer: p.location?.[0]?.pointer ?? '', message: p.message }))
}

describe('openapi/openapi.json', () => {
  test('the committed openapi/openapi.json is what the app produces', async () => {
    // In a fresh process, exactly as `npm run openapi` runs, whatever else this test process did.
    const child = await run([process.execPath, '-e', "import { formatDocument, openapiDocument } from './src/http/openapi-document.ts'; process.stdout.write(formatDocument(await openapiDocument()))"], { cwd: ROOT })
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

  test('is an OpenAPI 3.0 document with a title, a version and every merchant operation', () => {
    expect(committed.openapi).toMatch(/^3\.0\.\d+$/)
    expect(committed.info.title).toBeTruthy()
    expect(committed.info.version).toBeTruthy()
    expect(operations(committed).map((o) => o.name).sort()).toEqual([
      'GET /api/transactions/project/{projectId}',
      'GET /api/transactions/stats',
      'GET /api/transactions/{id}',
      'GET /api/transactions/{id}/timeline',
      'POST /api/transactions/create',
      'POST /api/transactions/{id}/cancel',
      'POST /api/transactions/{id}/retry-webhook',
    ])
  })

  test('every operation has a unique operationId, a summary and a tag', () => {
    const ids = operations(committed).map(({ name, op }) => {
      expect(op.operationId, `${name} has no operationId`).toMatch(/^[A-Za-z][A-Za-z0-9]*$/)
      expect(op.summary, `${name} has no summary`).toBeTruthy()
      expect(op.tags?.length, `${name} has no tag`).toBeGreaterThan(0)
      return op.operationId
    })
    expect(new Set(ids).size).toBe(ids.length)
  })

  test('a bearer security requirement applies to every operation', () => {
    const schemes = committed.components.securitySchemes ?? {}
    const bearer = Object.keys(schemes).filter((n) => schemes[n].type === 'http' && schemes[n].scheme === 'bearer')
    expect(bearer.length).toBeGreaterThan(0)
    expect(committed.security?.some((req) => Object.keys(req).some((n) => bearer.includes(n)))).toBe(true)
    for (const { name, op } of operations(committed)) {
      // An operation-level `security` replaces the global one; `[]` would make it public.
      if (op.security !== undefined) expect(op.security.some((req: Json) => Object.keys(req).some((n) => bearer.includes(n))), `${name} overrides security`).toBe(true)
    }
  })

  test('every operation documents 400, 401, 429 and 500, and every error response is the Error schema', () => {
    for (const { name, op } of operations(committed)) {
      for (const status of ['200', '400', '401', '429', '500']) expect(Object.keys(op.responses), `${name} does not document ${status}`).toContain(status)
      for (const [status, res] of Object.entries<Json>(op.responses)) {
        if (Number(status) < 400) continue
        expect(res.content?.['application/json']?.schema?.$ref, `${name} ${status} is not the Error schema`).toBe(ERROR_REF)
      }
    }
  })

  test('every response has a description and a JSON body', () => {
    for (const { name, op } of operations(committed)) {
      for (const [status, res] of Object.entries<Json>(op.responses)) {
        expect(typeof res.description === 'string' && res.description.length > 0, `${name} ${status} has no description`).toBe(true)
        expect(Object.keys(res.content ?? {}), `${name} ${status}`).toEqual(['application/json'])
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
    for (const ref of all) expect(resolvePointer(committed, ref), `${ref} does not resolve`).toBeDefined()
  })

  test('the document passes Redocly\'s OpenAPI 3.0 structural lint', async () => {
    expect(await structuralProblems()).toEqual([])
  })
})

/**
 * What a merchant would write: openapi-fetch typed with `paths` generated from the committed
 * document. The `@ts-expect-error` lines prove the generated types are not `any`; the program
 * prints what it got so the test can check the server agreed.
 */
const CLIENT_PROGRAM = `import { readFileSync } from 'node:fs'
import createClient from 'openapi-fetch'
import type { paths } from './api-schema'

const env = (name: string): string => {
  const value = process.env[name]
  if (!value) throw new Error(name + ' is not set')
  return value
}
const ca = readFileSync(env('API_CA_FILE'), 'utf8')
const projectId = env('PROJECT_ID')
const client = createClient<paths>({
  baseUrl: env('API_URL'),
  headers: { Authorization: 'Bearer ' + env('API_KEY') },
  // Bun's fetch trusts the test server's self-signed certificate through its \`tls\` option.
  fetch: (request: Request) => fetch(request, { tls: { ca } }),
})

const created = await client.POST('/api/transactions/create', {
  params: { header: { 'idempotency-key': 'generated-client-1' } },
  body: { amount: 12.34, order_id: 'generated-client', metadata: { source: 'openapi-fetch' } },
})
if (!created.data) throw new Error('create failed: ' + JSON.stringify(created.error))
const id: string = created.data.transaction.id
const paymentUrl: string = created.data.payment_url

const fetched = await client.GET('/api/transactions/{id}', { params: { path: { id } } })
const status: 'created' | 'prepared' | 'pending' | 'processing' | 'confirming' | 'completed' | 'failed' | 'expired' | 'cancelled' | undefined = fetched.data?.transaction.status

const listed = await client.GET('/api/transactions/project/{projectId}', { params: { path: { projectId }, query: { status: 'created', limit: 5 } } })
const listedIds: string[] = listed.data?.transactions.map((t) => t.id) ?? []
const hasMore: boolean | undefined = listed.data?.pagination.has_more

const stats = await client.GET('/api/transactions/stats')
const total: number | undefined = stats.data?.stats.total_transactions
const createdCount: number | undefined = stats.data?.stats.by_status.created

const invalid = await client.POST('/api/transactions/create', { body: { amount: -1 } })
const invalidDetails: { path: string; message: string }[] | undefined = invalid.error?.error.details
const invalidSuccess: false | undefined = invalid.error?.success

/** Never called: each call is wrong and must not compile. */
export function wrongCalls() {
  // @ts-expect-error amount is required
  client.POST('/api/transactions/create', { body: { order_id: 'x' } })
  // @ts-expect-error amount is a number
  client.POST('/api/transactions/create', { body: { amount: '10' } })
  // @ts-expect-error no such status
  client.GET('/api/transactions/project/{projectId}', { params: { path: { projectId }, query: { status: 'paid' } } })
  // @ts-expect-error the id path parameter is required
  client.GET('/api/transactions/{id}', {})
  // @ts-expect-error no such route
  client.GET('/api/transactions/{id}/refund', { params: { path: { id: 'x' } } })
}

console.log(JSON.stringify({
  created: { status: created.response.status, id, payment_url: paymentUrl, order_id: created.data.transaction.order_id },
  fetched: { status: fetched.response.status, id: fetched.data?.transaction.id, transaction_status: status },
  listed: { status: listed.response.status, ids: listedIds, has_more: hasMore, limit: listed.data?.pagination.limit },
  stats: { status: stats.response.status, total, created: createdCount },
  invalid: { status: invalid.response.status, success: invalidSuccess, type: invalid.error?.error.type, paths: invalidDetails?.map((d) => d.path) },
}))
`

/**
 * A temp directory with types generated from the committed document, the client program and a
 * node_modules link to this project's packages. Made once and shared by every backend.
 */
let generated: Promise<{ dir: string; types: string }> | undefined
function generatedClient() {
  generated ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'crypto-pay-openapi-client-'))
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir')
    // defaultNonNullable: false, because openapi-typescript (7.13) otherwise makes a property with
    // a `default` required even in a request body when the body is a $ref to components/schemas
    // (openapi-ts/openapi-typescript#1903, #2012): `expires_in_minutes` would become mandatory.
    const types = astToString(await openapiTS(committedText, { defaultNonNullable: false }))
    writeFileSync(join(dir, 'api-schema.ts'), types)
    writeFileSync(join(dir, 'client.ts'), CLIENT_PROGRAM)
    return { dir, types }
  })()
  return generated
}
afterAll(async () => {
  if (generated) rmSync((await generated).dir, { recursive: true, force: true })
})

describe('a client generated from the committed document', () => {
  test('openapi-typescript generates paths for the merchant operations', async () => {
    const { types } = await generatedClient()
    for (const path of ['/api/transactions/create', '/api/transactions/{id}', '/api/transactions/project/{projectId}', '/api/transactions/stats', '/api/transactions/{id}/cancel', '/api/transactions/{id}/timeline']) {
      expect(types).toContain(`"${path}": {`)
    }
    expect(types).toContain('createTransaction: {')
  })

  test('type-checks with tsc --strict: the generated types fit the create, get, list and stats calls', async () => {
    const { dir } = await generatedClient()
    const tsc = await run(
      [join(ROOT, 'node_modules/.bin/tsc'), '--noEmit', '--strict', '--target', 'es2022', '--module', 'esnext', '--moduleResolution', 'bundler', '--types', 'bun-types', '--skipLibCheck', 'client.ts'],
      { cwd: dir },
    )
    expect(tsc.stdout + tsc.stderr).toBe('')
    expect(tsc.code).toBe(0)
  })
})

for (const backend of backends()) {
  describe(`the committed OpenAPI document against a running server [${backend}]`, () => {
    let t: TestServer
    beforeAll(async () => {
      t = await startTestServer(backend)
    })
    afterAll(() => t?.stop())

    test('/swagger/json serves the committed info, security and operations', async () => {
      const res = await t.fetch('/swagger/json')
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toContain('application/json')
      const served = (await res.json()) as OpenApi
      expect(served.openapi).toBe(committed.openapi)
      expect(served.info).toEqual(committed.info)
      expect(served.security).toEqual(committed.security!)
      expect(served.components.securitySchemes).toEqual(committed.components.securitySchemes)
      expect(served.paths).toEqual(committed.paths)
      expect(Object.keys(served.components.schemas).sort()).toEqual(Object.keys(committed.components.schemas).sort())
    })

    // Elysia writes `additionalProperties: false` into response models in place when it compiles
    // a route's checks (elysia/dist/schema.mjs); the models state it themselves so nothing changes.
    test('/swagger/json is the committed document, before and after the API served requests', async () => {
      const served = async () => (await t.fetch('/swagger/json')).json()
      const before = await served()
      const project = await t.project()
      const a = api(t, project.key)
      const created = await (await a.create({ amount: 1 })).json()
      for (const path of [`/api/transactions/${created.transaction.id}`, `/api/transactions/project/${project.id}`, '/api/transactions/stats']) await (await a.get(path)).text()
      await (await a.create({ amount: -1 })).text()
      const after = await served()
      expect({ before, after }).toEqual({ before: committed, after: committed })
    })

    test('a client generated from the committed document drives create, get, list and stats', async () => {
      const { dir } = await generatedClient()
      const project = await t.project()
      const caFile = join(dir, `ca-${backend}.pem`)
      writeFileSync(caFile, t.ca)
      const out = await run([process.execPath, 'client.ts'], {
        cwd: dir,
        env: { API_URL: t.url, API_KEY: project.key, PROJECT_ID: project.id, API_CA_FILE: caFile },
      })
      expect(out.stderr).toBe('')
      expect(out.code).toBe(0)
      const r = JSON.parse(out.stdout)

      expect(r.created.status).toBe(200)
      expect(r.created.id).toMatch(/^[0-9a-f-]{36}$/)
      expect(r.created.payment_url).toBe(`${t.url}/pay/${r.created.id}`)
      expect(r.created.order_id).toBe('generated-client')

      expect(r.fetched).toEqual({ status: 200, id: r.created.id, transaction_status: 'created' })

      expect(r.listed.status).toBe(200)
      expect(r.listed.ids).toContain(r.created.id)
      expect(r.listed.limit).toBe(5)
      expect(r.listed.has_more).toBe(false)

      expect(r.stats.status).toBe(200)
      expect(r.stats.total).toBeGreaterThanOrEqual(1)
      expect(r.stats.created).toBeGreaterThanOrEqual(1)

      expect(r.invalid).toEqual({ status: 400, success: false, type: 'invalid_request_error', paths: ['amount'] })
    })
  })
}
