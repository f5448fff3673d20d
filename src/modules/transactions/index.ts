import { Type, type Static } from '@sinclair/typebox'
import { Elysia, t } from 'elysia'
import { principalOf, readWithGrant, requireScope } from '../../http/api-gate.ts'
import { ApiError, ErrorResponse } from '../../http/errors.ts'
import { json, respond, storedJson } from '../../http/json-response.ts'
import { strictJsonBody } from '../../http/json-body.ts'
import { openApiParameters, strictParams } from '../../http/strict-params.ts'
import {
  CreateTransactionBody,
  CreateTransactionResponse,
  createTransactionRules,
  GetTransactionResponse,
  ListTransactionsResponse,
  RetryWebhookResponse,
  STATUSES,
  TimelineResponse,
} from './model.ts'
import { StringEnum } from '../../lib/string-enum.ts'
import type { TransactionService } from './service.ts'
import { EXPORT_COLUMNS, EXPORT_FORMATS } from './export-model.ts'
import type { TransactionExport } from './export.ts'
import { DATE_RANGE } from '../stats/model.ts'
import type { WebhookService } from '../../webhooks/webhook.service.ts'

const IdParams = Type.Object({
  id: Type.String({ format: 'uuid', description: 'Transaction UUID' }),
})
const ProjectParams = Type.Object({
  projectId: Type.String({ description: 'The project of the API key.' }),
})
const ListQuery = Type.Object(
  {
    status: Type.Optional(
      StringEnum(STATUSES, { description: 'Only transactions in this status.' }),
    ),
    currency: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z]{3}$',
        description: 'Only transactions priced in this currency (ISO 4217, any case).',
      }),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        default: 50,
        description: 'Results per page, 1 to 100.',
      }),
    ),
    offset: Type.Optional(
      Type.Integer({ minimum: 0, default: 0, description: 'Results to skip.' }),
    ),
  },
  { additionalProperties: true },
)

const ExportQuery = Type.Object(
  {
    format: Type.Optional(
      StringEnum(EXPORT_FORMATS, {
        default: 'csv',
        description: '`csv` (RFC 4180) or `jsonl` (JSON lines, one object per line).',
      }),
    ),
    status: Type.Optional(
      StringEnum(STATUSES, {
        description: 'Only transactions in this status (each still followed by all its refunds).',
      }),
    ),
    currency: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z]{3}$',
        description: 'Only transactions priced in this currency (ISO 4217, any case).',
      }),
    ),
    ...DATE_RANGE,
  },
  { additionalProperties: true },
)
const EXPORT_ERRORS = [400, 401, 403, 413, 429, 500]

const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((c) => [c, 'ErrorResponse'])) as Record<number, 'ErrorResponse'>

/**
 * Merchant API: create, get, list and export transactions (docs/integrating/api.md,
 * docs/integrating/export.md; docs/decisions/0064-priced-in-the-merchants-currency.md;
 * docs/decisions/0005-create-request-bounds.md, docs/decisions/0006-idempotent-create.md,
 * docs/decisions/0007-full-transaction-object.md, docs/decisions/0008-list-order-and-paging.md,
 * docs/decisions/0009-keys-see-their-own-mode.md).
 */
export function transactionsController(deps: {
  transactions: TransactionService
  webhooks: WebhookService
  transactionExport: TransactionExport
}) {
  return new Elysia({ name: 'transactions', prefix: '/api/transactions' })
    .model({
      ErrorResponse,
      CreateTransactionRequest: CreateTransactionBody,
      // Not named <OperationId>Response: generators name their own aliases so and would append a 2.
      CreateTransactionResult: CreateTransactionResponse,
      TransactionResult: GetTransactionResponse,
      TransactionList: ListTransactionsResponse,
      TransactionTimeline: TimelineResponse,
      RetryWebhookResult: RetryWebhookResponse,
    })
    .post(
      '/create',
      async ({ request, body, headers, set }) => {
        const caller = principalOf(request)
        const result = await deps.transactions.create(caller, body, {
          idempotencyKey: headers['idempotency-key'],
        })
        if (!result.ok) throw ApiError.from(result)
        return storedJson(set, result.value)
      },
      {
        parse: 'none',
        transform: [
          requireScope('transactions:write'),
          strictJsonBody(CreateTransactionBody, createTransactionRules),
        ],
        body: 'CreateTransactionRequest',
        headers: t.Object(
          {
            'idempotency-key': t.Optional(
              t.String({
                minLength: 1,
                maxLength: 255,
                description:
                  'Retries with the same key and body within 24 h return the first response and create nothing.',
              }),
            ),
          },
          { additionalProperties: true },
        ),
        response: { 200: 'CreateTransactionResult', ...errors(400, 401, 403, 409, 413, 429, 500) },
        detail: {
          tags: ['Transactions'],
          operationId: 'createTransaction',
          summary: 'Create a transaction',
          description:
            "Creates a transaction in status `created` for an amount in `currency` (USD when omitted) and returns its `payment_url`, where the customer chooses a token. `amount_usd` is the amount's USD value now, at the rate shown in `usd_rate`. Scope `transactions:write`. Test keys create test transactions.",
        },
      },
    )
    .get(
      '/export',
      async ({ request, query, set }) => {
        const caller = principalOf(request)
        const q = query as Static<typeof ExportQuery>
        const result = await deps.transactionExport.open(caller, q, request.signal)
        if (!result.ok) throw ApiError.from(result)
        const { body, contentType, filename } = result.value
        return respond(set, body, 200, {
          'content-type': contentType,
          'content-disposition': `attachment; filename="${filename}"`,
        })
      },
      {
        transform: [requireScope('transactions:read'), strictParams('query', ExportQuery)],
        detail: {
          tags: ['Transactions'],
          operationId: 'exportTransactions',
          parameters: openApiParameters('query', ExportQuery),
          summary: 'Export transactions and refunds',
          description:
            "Every transaction of the key's project and mode, oldest first (`created_at`, then `id`), each followed by its refunds, as CSV or JSON lines, streamed: the response starts at once and is read from the database page by page as it is sent, whatever its size. Sent as an attachment (`Content-Disposition`) named `transactions-<mode>-<date>.csv` or `.jsonl`. Amounts are exact decimal strings with the currency's places, token amounts in smallest units. CSV cells that a spreadsheet would take for a formula (starting with `=`, `+`, `-`, `@`, tab or carriage return) begin with an added `'`. Columns: docs/integrating/export.md. Scope `transactions:read`.",
          // Written out: the plugin would offer the body as JSON, and this one is not.
          responses: {
            200: {
              description: 'The export',
              content: {
                'text/csv': {
                  schema: {
                    type: 'string',
                    description: `UTF-8, CRLF line ends, a header row naming the columns: ${EXPORT_COLUMNS.join(', ')}.`,
                  },
                },
                'application/jsonl': {
                  schema: {
                    type: 'string',
                    description:
                      "One JSON object per line (LF), with the CSV header row's names as keys and every value a string or null.",
                  },
                },
              },
            },
            ...Object.fromEntries(
              EXPORT_ERRORS.map((c) => [
                c,
                {
                  description: 'Error',
                  content: {
                    'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } },
                  },
                },
              ]),
            ),
          },
        },
      },
    )
    .get(
      '/:id',
      async ({ request, params, set }) => {
        const result = await deps.transactions.get(
          principalOf(request),
          params.id,
          readWithGrant(request, params.id),
        )
        if (!result.ok) throw ApiError.from(result)
        return json(set, { success: true, transaction: result.value })
      },
      {
        transform: [requireScope('transactions:read'), strictParams('params', IdParams)],
        response: { 200: 'TransactionResult', ...errors(400, 401, 403, 404, 413, 429, 500) },
        detail: {
          tags: ['Transactions'],
          operationId: 'getTransaction',
          parameters: openApiParameters('path', IdParams),
          summary: 'Get a transaction',
          description:
            "Returns one transaction of the key's project and mode; any other id is 404. Scope `transactions:read`.",
        },
      },
    )
    .post(
      '/:id/cancel',
      async ({ request, params, set }) => {
        const result = await deps.transactions.cancel(principalOf(request), params.id)
        if (!result.ok) throw ApiError.from(result)
        return json(set, { success: true, transaction: result.value })
      },
      {
        parse: 'none',
        transform: [requireScope('transactions:write'), strictParams('params', IdParams)],
        response: {
          200: 'TransactionResult',
          ...errors(400, 401, 403, 404, 409, 413, 429, 500, 503),
        },
        detail: {
          tags: ['Transactions'],
          operationId: 'cancelTransaction',
          summary: 'Cancel a transaction',
          parameters: openApiParameters('path', IdParams),
          description:
            'Moves a transaction in status `created`, `prepared` or `pending` to `cancelled`; any other status is 409. Subscribed endpoints receive `transaction.cancelled`. Scope `transactions:write`. Takes no body: a body sent anyway is not read (one declared larger than 64 KiB is refused with 413).',
        },
      },
    )
    .post(
      '/:id/retry-webhook',
      async ({ request, params, set }) => {
        const result = await deps.webhooks.retryCompleted(principalOf(request), params.id)
        if (!result.ok) throw ApiError.from(result)
        const n = result.value.endpoints
        const message =
          n === 0
            ? 'No enabled webhook endpoint of this project and mode receives transaction.completed; nothing was sent'
            : `transaction.completed queued for ${n} endpoint${n === 1 ? '' : 's'}`
        return json(set, {
          success: true,
          message,
          transaction_id: params.id,
          event_type: 'transaction.completed',
        })
      },
      {
        parse: 'none',
        transform: [requireScope('webhooks:write'), strictParams('params', IdParams)],
        response: { 200: 'RetryWebhookResult', ...errors(400, 401, 403, 404, 409, 413, 429, 500) },
        detail: {
          tags: ['Transactions'],
          operationId: 'retryWebhook',
          summary: 'Send the transaction.completed webhook again',
          parameters: openApiParameters('path', IdParams),
          description:
            "Sends a fresh `transaction.completed` delivery with the current data to every enabled endpoint of the key's project and mode that selected that event, also after automatic retries are exhausted. A transaction that is not `completed` is 409: a false completed signal could make a merchant ship unpaid goods. Scope `webhooks:write`. Takes no body: a body sent anyway is not read (one declared larger than 64 KiB is refused with 413).",
        },
      },
    )
    .get(
      '/:id/timeline',
      async ({ request, params, set }) => {
        const result = await deps.transactions.timeline(principalOf(request), params.id)
        if (!result.ok) throw ApiError.from(result)
        return json(set, { success: true, transaction_id: params.id, timeline: result.value })
      },
      {
        transform: [requireScope('transactions:read'), strictParams('params', IdParams)],
        response: { 200: 'TransactionTimeline', ...errors(400, 401, 403, 404, 413, 429, 500) },
        detail: {
          tags: ['Transactions'],
          operationId: 'getTransactionTimeline',
          summary: 'Timeline of a transaction',
          parameters: openApiParameters('path', IdParams),
          description:
            'Every status transition of the transaction, oldest first, with its cause and details. Scope `transactions:read`.',
        },
      },
    )
    .get(
      '/project/:projectId',
      async ({ request, params, query, set }) => {
        const q = query as Static<typeof ListQuery>
        const result = await deps.transactions.list(principalOf(request), params.projectId, {
          status: q.status,
          currency: q.currency?.toUpperCase(),
          limit: q.limit ?? 50,
          offset: q.offset ?? 0,
        })
        if (!result.ok) throw ApiError.from(result)
        return json(set, { success: true, ...result.value })
      },
      {
        transform: [requireScope('transactions:read'), strictParams('query', ListQuery)],
        response: { 200: 'TransactionList', ...errors(400, 401, 403, 413, 429, 500) },
        detail: {
          tags: ['Transactions'],
          operationId: 'listTransactions',
          parameters: [
            ...openApiParameters('path', ProjectParams),
            ...openApiParameters('query', ListQuery),
          ],
          summary: 'List transactions',
          description:
            "Transactions of the key's mode, newest first (`created_at` desc, then `id` desc). Another project's id is 403. Scope `transactions:read`.",
        },
      },
    )
}
