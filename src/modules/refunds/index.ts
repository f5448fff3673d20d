import { Type, type Static } from '@sinclair/typebox'
import { Elysia, t } from 'elysia'
import { REFUND_STATUSES } from '../../../machines/refund.machine.ts'
import { principalOf, requireScope } from '../../http/api-gate.ts'
import { ApiError, ErrorResponse } from '../../http/errors.ts'
import { strictJsonBody } from '../../http/json-body.ts'
import { json, storedJson, type Gathered } from '../../http/json-response.ts'
import { openApiParameters, strictParams } from '../../http/strict-params.ts'
import { StringEnum } from '../../lib/string-enum.ts'
import {
  CreateRefundBody,
  RecordPaymentBody,
  RefundListResponse,
  RefundResponse,
  RefuseRefundBody,
  TransactionRefundsResponse,
} from './model.ts'
import type { RefundService } from './service.ts'

const TransactionParams = Type.Object({
  id: Type.String({ format: 'uuid', description: 'Transaction UUID' }),
})
const RefundParams = Type.Object({
  id: Type.String({ maxLength: 64, description: 'Refund id (rf_...)' }),
})
const ListQuery = Type.Object(
  {
    status: Type.Optional(
      StringEnum(REFUND_STATUSES, {
        description: 'Only refunds in this status (pending: waiting for the treasury tool).',
      }),
    ),
    blockchain_network: Type.Optional(
      Type.String({ maxLength: 64, description: 'Only refunds on this network.' }),
    ),
    deposit_address: Type.Optional(
      Type.String({
        pattern: '^0x[0-9a-fA-F]{40}$',
        maxLength: 42,
        description: 'Only refunds of the transaction whose deposit address this is.',
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

const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((c) => [c, 'ErrorResponse'])) as Record<number, 'ErrorResponse'>
const refunded = (
  set: Gathered,
  r: { ok: true; value: unknown } | Parameters<typeof ApiError.from>[0],
) => {
  if (!r.ok) throw ApiError.from(r)
  return json(set, { success: true, refund: r.value })
}

/**
 * Merchant API: refunds of finished transactions (docs/decisions/0038-refunds.md), paid by the
 * merchant's treasury tool and confirmed on-chain.
 */
export function refundsController(deps: { refunds: RefundService }) {
  return new Elysia({ name: 'refunds' })
    .model({
      ErrorResponse,
      CreateRefundRequest: CreateRefundBody,
      RefundResult: RefundResponse,
      TransactionRefunds: TransactionRefundsResponse,
      RefundList: RefundListResponse,
      RecordRefundPaymentRequest: RecordPaymentBody,
      RefuseRefundRequest: RefuseRefundBody,
    })
    .post(
      '/api/transactions/:id/refunds',
      async ({ request, params, body, headers, set }) => {
        const r = await deps.refunds.create(principalOf(request), params.id, body, {
          idempotencyKey: headers['idempotency-key'],
        })
        if (!r.ok) throw ApiError.from(r)
        return storedJson(set, r.value)
      },
      {
        parse: 'none',
        transform: [
          requireScope('refunds:write'),
          strictParams('params', TransactionParams),
          strictJsonBody(CreateRefundBody),
        ],
        body: 'CreateRefundRequest',
        headers: t.Object(
          {
            'idempotency-key': t.Optional(
              t.String({
                minLength: 1,
                maxLength: 255,
                description:
                  'Retries with the same key and body within 24 h return the first response and refund nothing more.',
              }),
            ),
          },
          { additionalProperties: true },
        ),
        response: { 200: 'RefundResult', ...errors(400, 401, 403, 404, 409, 413, 429, 500) },
        detail: {
          tags: ['Refunds'],
          operationId: 'createRefund',
          parameters: openApiParameters('path', TransactionParams),
          summary: 'Refund a transaction',
          description:
            "Creates a pending refund of money a finished transaction (completed, failed, expired or cancelled) received: all or part of its payment, an overpayment, a late payment, or another asset that arrived (give its `token_symbol` and `blockchain_network`). Only confirmed arrivals count, less earlier refunds not failed or cancelled. The merchant's treasury tool pays it (`treasury refunds pay`); once its payment has the network's confirmations the refund completes and `refund.completed` is sent. 400: a bad address or amount. 409: the transaction is still open, nothing is left to refund, or the amount is more than is left. Scope `refunds:write`.",
        },
      },
    )
    .get(
      '/api/transactions/:id/refunds',
      async ({ request, params, set }) => {
        const r = await deps.refunds.ofTransaction(principalOf(request), params.id)
        if (!r.ok) throw ApiError.from(r)
        return json(set, { success: true, transaction_id: params.id, ...r.value })
      },
      {
        transform: [requireScope('refunds:read'), strictParams('params', TransactionParams)],
        response: { 200: 'TransactionRefunds', ...errors(400, 401, 403, 404, 413, 429, 500) },
        detail: {
          tags: ['Refunds'],
          operationId: 'listTransactionRefunds',
          parameters: openApiParameters('path', TransactionParams),
          summary: 'Refunds of a transaction',
          description:
            "The transaction's refunds, oldest first, and what is left to refund per token and network. Scope `refunds:read`.",
        },
      },
    )
    .get(
      '/api/refunds',
      async ({ request, query, set }) => {
        const q = query as Static<typeof ListQuery>
        return json(set, {
          success: true,
          ...(await deps.refunds.list(principalOf(request), {
            status: q.status,
            network: q.blockchain_network,
            depositAddress: q.deposit_address,
            limit: q.limit ?? 50,
            offset: q.offset ?? 0,
          })),
        })
      },
      {
        transform: [requireScope('refunds:read'), strictParams('query', ListQuery)],
        response: { 200: 'RefundList', ...errors(400, 401, 403, 413, 429, 500) },
        detail: {
          tags: ['Refunds'],
          operationId: 'listRefunds',
          parameters: openApiParameters('query', ListQuery),
          summary: 'List refunds',
          description: "Refunds of the key's project and mode, newest first. Scope `refunds:read`.",
        },
      },
    )
    .get(
      '/api/refunds/:id',
      async ({ request, params, set }) =>
        refunded(set, await deps.refunds.get(principalOf(request), params.id)),
      {
        transform: [requireScope('refunds:read'), strictParams('params', RefundParams)],
        response: { 200: 'RefundResult', ...errors(400, 401, 403, 404, 413, 429, 500) },
        detail: {
          tags: ['Refunds'],
          operationId: 'getRefund',
          parameters: openApiParameters('path', RefundParams),
          summary: 'Get a refund',
          description:
            "One refund of the key's project and mode; any other id is 404. Scope `refunds:read`.",
        },
      },
    )
    .post(
      '/api/refunds/:id/cancel',
      async ({ request, params, set }) =>
        refunded(set, await deps.refunds.cancel(principalOf(request), params.id)),
      {
        parse: 'none',
        transform: [requireScope('refunds:write'), strictParams('params', RefundParams)],
        response: { 200: 'RefundResult', ...errors(400, 401, 403, 404, 409, 413, 429, 500) },
        detail: {
          tags: ['Refunds'],
          operationId: 'cancelRefund',
          parameters: openApiParameters('path', RefundParams),
          summary: 'Cancel a refund',
          description:
            'Withdraws a pending refund; once its payment is recorded it is 409. Takes no body. Scope `refunds:write`.',
        },
      },
    )
    .post(
      '/api/refunds/:id/payment',
      async ({ request, params, body, set }) =>
        refunded(
          set,
          await deps.refunds.recordPayment(principalOf(request), params.id, body.raw_transaction),
        ),
      {
        parse: 'none',
        transform: [
          requireScope('refunds:pay'),
          strictParams('params', RefundParams),
          strictJsonBody(RecordPaymentBody),
        ],
        body: 'RecordRefundPaymentRequest',
        response: { 200: 'RefundResult', ...errors(400, 401, 403, 404, 409, 413, 429, 500, 503) },
        detail: {
          tags: ['Refunds'],
          operationId: 'recordRefundPayment',
          parameters: openApiParameters('path', RefundParams),
          summary: "Record a refund's payment before sending it",
          description:
            "The treasury tool records the signed transaction that pays a pending refund before it sends it (the refund becomes `submitted`); the service then watches it on-chain. It must be DepositAccount's `pay` at the transaction's deposit address for this refund, signed by that address, or a plain transfer of exactly the amount to the refund's address (by the gas account, or by the deposit address itself on a chain without EIP-7702). And it must be mineable now, as the network's node answers: of a type the chain has, its sender's next nonce or at most 16 past it, its sender able to pay for it, its signature's deadline in the future and at most 2 hours ahead. Anything else is 400 with the reason. Recording the same transaction again answers as before; another while one is in flight is 409; 503 when the node cannot be asked. Scope `refunds:pay`.",
        },
      },
    )
    .post(
      '/api/refunds/:id/unpayable',
      async ({ request, params, body, set }) =>
        refunded(set, await deps.refunds.refuse(principalOf(request), params.id, body.reason)),
      {
        parse: 'none',
        transform: [
          requireScope('refunds:pay'),
          strictParams('params', RefundParams),
          strictJsonBody(RefuseRefundBody),
        ],
        body: 'RefuseRefundRequest',
        response: { 200: 'RefundResult', ...errors(400, 401, 403, 404, 409, 413, 429, 500) },
        detail: {
          tags: ['Refunds'],
          operationId: 'markRefundUnpayable',
          parameters: openApiParameters('path', RefundParams),
          summary: 'Mark a refund as impossible to pay',
          description:
            "The treasury tool found that the refund's transfer would revert (the token refuses the address, say): the pending refund fails with reason `unpayable` and `refund.failed` is sent. Scope `refunds:pay`.",
        },
      },
    )
    .post(
      '/api/refunds/:id/abandon',
      async ({ request, params, set }) =>
        refunded(set, await deps.refunds.abandon(principalOf(request), params.id)),
      {
        parse: 'none',
        transform: [requireScope('refunds:pay'), strictParams('params', RefundParams)],
        response: { 200: 'RefundResult', ...errors(400, 401, 403, 404, 409, 413, 429, 500, 503) },
        detail: {
          tags: ['Refunds'],
          operationId: 'abandonRefundPayment',
          parameters: openApiParameters('path', RefundParams),
          summary: "Abandon a refund's payment that can no longer be mined",
          description:
            "Gives up the recorded payment of a `submitted` refund once the chain shows it can never be mined: a DepositAccount `pay` whose signature expired unpaid (at a block as final as a payment must be), or a plain transfer whose nonce another transaction took (at the network's depth). The refund is `pending` again and can be paid anew. The service does this by itself as the chain moves; this asks now. 409, saying until when, while it may still be mined. Takes no body. Scope `refunds:pay`.",
        },
      },
    )
}
