import type { TSchema } from '@sinclair/typebox'
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../db/schema.ts'
import { WINDOWS } from '../limits/windows.ts'
import { StatsObject } from '../modules/stats/model.ts'
import {
  CREATE_TRANSACTION_DOCUMENTED,
  Pagination,
  TimelineEntry,
  TransactionObject,
  TransactionStatus,
} from '../modules/transactions/model.ts'
import {
  DELIVERY_HEADERS,
  EVENT_DESCRIPTIONS,
  eventSchemaName,
  WEBHOOK_SCHEMAS,
  webhookOperationId,
} from '../webhooks/event-model.ts'
import { MAX_BODY_BYTES } from './api-gate.ts'

/**
 * @elysiajs/swagger writes an OpenAPI 3.0 document from the routes' TypeBox models; this turns
 * it into the one the service publishes (OpenAPI 3.1, whose schemas are the JSON Schema TypeBox
 * writes): JSON bodies only, a description and the real headers on every response, schemas
 * named once and referenced, the webhooks the service sends, and the servers it answers on.
 * Pure: the input is not changed.
 */
// The document is walked as untyped JSON, any key at any depth.
// biome-ignore lint/suspicious/noExplicitAny: see above
export type Json = Record<string, any>
export interface ServerEntry {
  url: string
  description: string
  variables?: Record<string, { default: string; description: string }>
}

/** The servers a running service lists: its BASE_URL, and API_URL when set. */
export function servedServers(baseUrl: string, apiUrl: string | null): ServerEntry[] {
  const base = { url: baseUrl, description: 'This service (BASE_URL)' }
  return apiUrl && apiUrl !== baseUrl
    ? [base, { url: apiUrl, description: 'The alternative API address (API_URL): the same paths' }]
    : [base]
}

/** The committed document's server: a variable, since each deployment has its own. */
export const COMMITTED_SERVERS: ServerEntry[] = [
  {
    url: 'https://{host}',
    description:
      'Your deployment: its BASE_URL, or its API_URL (the same paths). A running service lists its own at /swagger/json.',
    variables: {
      host: { default: 'localhost:3000', description: 'Host (and port) of BASE_URL or API_URL.' },
    },
  },
]

/** Schemas written once under these names and referenced wherever they appear. */
const NAMED: Record<string, TSchema> = {
  Transaction: TransactionObject,
  TransactionStatus,
  Pagination,
  Stats: StatsObject,
  TimelineEntry,
  ...WEBHOOK_SCHEMAS,
}

/** The one operation outside /api: a transaction's x402_url (docs/decisions/0063-x402.md). */
export const X402_URL_OPERATION = 'payTransactionX402'

const STATUS_TEXT: Record<string, string> = {
  200: 'Success',
  400: 'Invalid request: `error.details` names each bad field',
  401: 'API key missing, malformed, unknown or revoked',
  403: 'Key lacks the scope, project inactive, IP not allowed, another project, or plain HTTP',
  404: 'No such transaction for this key (other projects and modes look the same)',
  402: 'Payment required (x402): `PAYMENT-REQUIRED` says what would be taken, and why a payment sent was refused',
  409: 'Conflict: Idempotency-Key reused with another body, or the transaction is not in a status that allows it',
  413: `Request body larger than ${MAX_BODY_BYTES / 1024} KiB`,
  429: 'Rate limit exceeded: wait Retry-After seconds; the X-RateLimit-* headers say which window',
  500: 'Internal error: quote `error.request_id`',
  503: 'The change could not be applied right now and nothing changed: retry',
}

/**
 * The Commerce API's operations (docs/decisions/0065-coinbase-commerce-drop-in.md): its errors are
 * Commerce's `{error: {type, message}}`, described in its terms.
 */
const isCommerce = (operationId: string) => operationId.startsWith('commerce')
/** A checkout's page: people open it without a key; counted per client IP, like the pay page. */
export const CHECKOUT_PAGE_OPERATION = 'commerceOpenCheckout'
const COMMERCE_STATUS_TEXT: Record<string, string> = {
  200: 'Success',
  201: 'Created',
  303: "To the new charge's pay page",
  400: 'Invalid request: `error.type` is param_required (a field is missing), validation_error (a field is wrong) or invalid_request',
  401: 'X-CC-Api-Key missing, unknown or revoked (authentication_error)',
  403: 'Key lacks the scope, project inactive, IP not allowed, or plain HTTP (authentication_error)',
  404: 'Nothing of that id for this key (other projects and modes look the same)',
  413: `Request body larger than ${MAX_BODY_BYTES / 1024} KiB`,
  429: 'Rate limit exceeded (rate_limit_exceeded): wait Retry-After seconds',
  500: 'Internal error (internal_server_error)',
  503: 'Not available right now (service_unavailable): retry',
}

const title = (w: string) => w[0].toUpperCase() + w.slice(1)
const RATE_LIMIT_HEADERS = WINDOWS.flatMap(
  (w) =>
    [
      [
        `X-RateLimit-Limit-${title(w)}`,
        {
          description: `Requests allowed in the current ${w} window (per project; per client IP without a valid key).`,
          schema: { type: 'integer', minimum: 0 },
        },
      ],
      [
        `X-RateLimit-Remaining-${title(w)}`,
        {
          description: `Requests left in the current ${w} window.`,
          schema: { type: 'integer', minimum: 0 },
        },
      ],
      [
        `X-RateLimit-Reset-${title(w)}`,
        {
          description: `When the current ${w} window ends (windows are aligned to UTC).`,
          schema: { type: 'string', format: 'date-time' },
        },
      ],
    ] as const,
)

/**
 * Every header an /api response can carry, under `components.headers`. A header every response
 * naming it carries says `required: true` here: OpenAPI 3.1 tools ignore any key beside a `$ref`,
 * so at the responses each header is a plain `$ref` and whether it is always sent lives in what
 * it points to.
 */
const ALWAYS: Record<string, Json> = {
  'X-Request-Id': {
    description:
      "This request's id; error bodies repeat it as `error.request_id`. Quote it when reporting a problem.",
    schema: { type: 'string' },
  },
  ...Object.fromEntries(RATE_LIMIT_HEADERS),
  'Retry-After': {
    description: 'Seconds until the exhausted window resets.',
    schema: { type: 'integer', minimum: 1 },
  },
  'Cache-Control': {
    description: 'Always `no-store`: API responses are not cached.',
    schema: { type: 'string', enum: ['no-store'] },
  },
  'Strict-Transport-Security': {
    description: 'HTTPS only, for a year.',
    schema: { type: 'string' },
  },
  'X-Content-Type-Options': { description: '`nosniff`.', schema: { type: 'string' } },
  'Referrer-Policy': { description: '`no-referrer`.', schema: { type: 'string' } },
  'X-Frame-Options': { description: '`DENY`.', schema: { type: 'string' } },
}
/** Named `<header>.optional`: the rate-limit headers on the answers refused before the limiter. */
const OPTIONAL_SUFFIX = '.optional'
const HEADERS: Record<string, Json> = {
  ...Object.fromEntries(
    Object.entries(ALWAYS).map(([name, header]) => [name, { ...header, required: true }]),
  ),
  ...Object.fromEntries(
    RATE_LIMIT_HEADERS.map(([name, header]) => [
      `${name}${OPTIONAL_SUFFIX}`,
      {
        ...header,
        description: `${header.description} Absent when the request was refused before the rate limiter (no Host, plain HTTP).`,
      },
    ]),
  ),
  'PAYMENT-REQUIRED': {
    description:
      'x402 v2: base64 of the JSON `X402PaymentRequired` (the same as the body): what would be taken, and why a payment was refused if one was.',
    schema: { type: 'string' },
    required: true,
  },
  'PAYMENT-RESPONSE': {
    description:
      "x402 v2: base64 of the JSON settlement (`success`, `transaction`: the relayer's transaction hash, `network`, `payer`), when this request paid the transaction.",
    schema: { type: 'string' },
  },
  'Idempotent-Replayed': {
    description:
      'Present, as `true`, when an Idempotency-Key replayed the response of an earlier request instead of creating a transaction.',
    schema: { type: 'string', enum: ['true'] },
  },
}
const SECURITY_HEADERS = [
  'Cache-Control',
  'Strict-Transport-Security',
  'X-Content-Type-Options',
  'Referrer-Policy',
  'X-Frame-Options',
]

/**
 * The headers of one response. The rate-limit headers are on every response that passed the
 * limiter; a 400 for a request with no Host and the 403 for plain HTTP (TRUST_PROXY) are refused
 * before it, so there they may be absent.
 */
function responseHeaders(operationId: string, status: string): Json {
  const ref = (name: string, component = name) => [
    name,
    { $ref: `#/components/headers/${component}` },
  ]
  // A transaction's x402_url: no API key, so no X-RateLimit-* (its limit is the pay page's, per
  // client IP); x402's own headers instead.
  if (operationId === X402_URL_OPERATION || operationId === CHECKOUT_PAGE_OPERATION)
    return Object.fromEntries([
      ref('X-Request-Id'),
      ...(status === '200' && operationId === X402_URL_OPERATION ? [ref('PAYMENT-RESPONSE')] : []),
      ...(status === '402' ? [ref('PAYMENT-REQUIRED')] : []),
      ...(status === '429' ? [ref('Retry-After')] : []),
      ...SECURITY_HEADERS.map((name) => ref(name)),
    ])
  const limited = status !== '400' && status !== '403'
  return Object.fromEntries([
    ref('X-Request-Id'),
    ...RATE_LIMIT_HEADERS.map(([name]) => ref(name, limited ? name : `${name}${OPTIONAL_SUFFIX}`)),
    ...(status === '429' ? [ref('Retry-After')] : []),
    ...(operationId === 'createTransaction' && status === '200'
      ? [ref('Idempotent-Replayed')]
      : []),
    ...SECURITY_HEADERS.map((name) => ref(name)),
  ])
}

/** The headers of every delivery, as parameters of the webhook operations. */
const DELIVERY_PARAMETERS = Object.fromEntries(
  DELIVERY_HEADERS.map((h) => [
    headerParameterName(h.name),
    {
      name: h.name,
      in: 'header',
      required: h.required,
      description: h.description,
      schema: h.schema,
    },
  ]),
)
function headerParameterName(header: string) {
  return header.split('-').map(title).join('')
}

const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v))
const eventRef = (event: WebhookEventType) => `#/components/schemas/${eventSchemaName(event)}`

export function shapeDocument(
  input: Json,
  opts: { servers: ServerEntry[]; info: Json; tags: Json[] },
): Json {
  const plugin = clone(input)
  const named = Object.fromEntries(
    Object.entries(NAMED).map(([name, schema]) => [name, clone(schema)]),
  )
  const byText = new Map(
    Object.entries(named).map(([name, schema]) => [JSON.stringify(schema), name]),
  )
  /**
   * Replaces every subtree equal to a named schema (but `self`, the schema being named) with its
   * $ref.
   */
  const refer = (node: unknown, self?: string): unknown => {
    if (Array.isArray(node)) return node.map((v) => refer(v))
    if (!node || typeof node !== 'object') return node
    const name = byText.get(JSON.stringify(node))
    if (name && name !== self) return { $ref: `#/components/schemas/${name}` }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, refer(v)]))
  }

  const paths: Json = {}
  for (const [path, item] of Object.entries<Json>(plugin.paths)) {
    paths[path] = {}
    for (const [method, op] of Object.entries<Json>(item)) {
      const { responses, requestBody, parameters, ...rest } = op
      paths[path][method] = {
        ...rest,
        ...(parameters
          ? { parameters: parameters.map((p: Json) => ({ ...p, schema: refer(p.schema) })) }
          : {}),
        ...(requestBody
          ? { requestBody: { ...requestBody, content: jsonOnly(requestBody.content) } }
          : {}),
        responses: Object.fromEntries(
          Object.entries<Json>(responses).map(([status, res]) => [
            status,
            {
              description:
                (isCommerce(op.operationId) ? COMMERCE_STATUS_TEXT : STATUS_TEXT)[status] ??
                'Response',
              headers: responseHeaders(op.operationId, status),
              content: jsonOnly(res.content),
            },
          ]),
        ),
      }
    }
  }

  const schemas: Json = {}
  for (const [name, schema] of Object.entries<Json>({ ...plugin.components.schemas, ...named }))
    schemas[name] = refer(schema, name)
  for (const [field, rules] of Object.entries(CREATE_TRANSACTION_DOCUMENTED)) {
    const property = schemas.CreateTransactionRequest.properties[field]
    Object.assign(property.anyOf?.find((v: Json) => v.type !== 'null') ?? property, rules)
  }
  schemas.WebhookEvent = {
    description: 'Any webhook body the service sends, told apart by `event`.',
    oneOf: WEBHOOK_EVENT_TYPES.map((e) => ({ $ref: eventRef(e) })),
    discriminator: {
      propertyName: 'event',
      mapping: Object.fromEntries(WEBHOOK_EVENT_TYPES.map((e) => [e, eventRef(e)])),
    },
  }

  return schemaFor31({
    openapi: '3.1.0',
    info: opts.info,
    servers: opts.servers,
    tags: opts.tags,
    security: plugin.security,
    paths,
    webhooks: Object.fromEntries(
      WEBHOOK_EVENT_TYPES.map((event) => [event, { post: webhookOperation(event) }]),
    ),
    components: {
      schemas,
      headers: HEADERS,
      parameters: DELIVERY_PARAMETERS,
      securitySchemes: plugin.components.securitySchemes,
    },
  }) as Json
}

function webhookOperation(event: WebhookEventType): Json {
  return {
    operationId: webhookOperationId(event),
    summary: event,
    description: `${EVENT_DESCRIPTIONS[event]} Verify \`x-service-signature\` (or the Standard Webhooks headers) over the raw body before trusting it.`,
    tags: ['Webhooks'],
    // The service signs these requests; it sends no API key.
    security: [],
    parameters: Object.keys(DELIVERY_PARAMETERS).map((name) => ({
      $ref: `#/components/parameters/${name}`,
    })),
    requestBody: {
      required: true,
      content: { 'application/json': { schema: { $ref: eventRef(event) } } },
    },
    responses: {
      '200': {
        description:
          'Received: answer any 2xx status quickly and process later. Any other answer, or none within the time-out, is retried on the schedule; 410 Gone disables the endpoint.',
      },
    },
  }
}

/**
 * The plugin offers every body as JSON, form data and text: the API reads and writes JSON only,
 * but for a body a route declares in media types of its own (the export's CSV and JSON lines).
 */
function jsonOnly(content: Json | undefined) {
  if (content && !('application/json' in content) && !('multipart/form-data' in content))
    return content
  const schema = content && Object.values<Json>(content)[0]?.schema
  return schema ? { 'application/json': { schema } } : undefined
}

/**
 * OpenAPI 3.1 schemas are JSON Schema 2020-12, which TypeBox writes; what is left is the
 * plugin's `$id`s and the 3.0 spelling of a record (`patternProperties` of any key, which
 * generators read better as `additionalProperties`).
 */
function schemaFor31(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(schemaFor31)
  if (!node || typeof node !== 'object') return node
  const o = Object.fromEntries(
    Object.entries(node)
      .filter(([k]) => k !== '$id')
      .map(([k, v]) => [k, schemaFor31(v)]),
  ) as Json
  if (o.patternProperties && typeof o.patternProperties === 'object' && o.type === 'object') {
    const [value] = Object.values(o.patternProperties)
    o.additionalProperties = value
    delete o.patternProperties
  }
  return o
}
