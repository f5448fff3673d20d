import { Type, type Static } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { SWEEP_STATUSES } from '../../db/schema.ts'
import { principalOf, requireScope } from '../../http/api-gate.ts'
import { ApiError, ErrorResponse } from '../../http/errors.ts'
import { strictJsonBody } from '../../http/json-body.ts'
import { json } from '../../http/json-response.ts'
import { openApiParameters, strictParams } from '../../http/strict-params.ts'
import { StringEnum } from '../../lib/string-enum.ts'
import {
  DepositAddressList,
  DepositKeyResponse,
  NetworksResponse,
  RecordSweepBody,
  SweepList,
  SweepResponse,
} from './model.ts'
import type { TreasuryService } from './service.ts'

const AddressQuery = Type.Object(
  {
    blockchain_network: Type.Optional(
      Type.String({
        maxLength: 64,
        description: 'Only addresses quoted on this network, or that received anything seen on it.',
      }),
    ),
    address: Type.Optional(
      Type.String({
        pattern: '^0x[0-9a-fA-F]{40}$',
        maxLength: 42,
        description: 'Only this address.',
      }),
    ),
    after: Type.Optional(
      Type.Integer({
        minimum: -1,
        description: "Only derivation indexes above this (the previous page's `next_after`).",
      }),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1000,
        default: 500,
        description: 'Results per page, 1 to 1000.',
      }),
    ),
  },
  { additionalProperties: true },
)
const SweepQuery = Type.Object(
  {
    blockchain_network: Type.Optional(
      Type.String({ maxLength: 64, description: 'Only sweeps on this network.' }),
    ),
    status: Type.Optional(
      StringEnum(SWEEP_STATUSES, { description: 'Only sweeps in this status.' }),
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
const SweepParams = Type.Object({
  id: Type.String({ maxLength: 64, description: 'Sweep id (swp_...)' }),
})

const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((c) => [c, 'ErrorResponse'])) as Record<number, 'ErrorResponse'>

/**
 * Merchant API for the treasury tool
 * (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md): what it reads to sweep
 * deposit addresses and pay refunds, and where it records each sweep before sending it. The service
 * never sees a key.
 */
export function treasuryController(deps: { treasury: TreasuryService }) {
  return new Elysia({ name: 'treasury', prefix: '/api' })
    .model({
      ErrorResponse,
      NetworkList: NetworksResponse,
      DepositKey: DepositKeyResponse,
      DepositAddressPage: DepositAddressList,
      SweepResult: SweepResponse,
      SweepPage: SweepList,
      RecordSweepRequest: RecordSweepBody,
    })
    .get(
      '/networks',
      async ({ request, set }) =>
        json(set, { success: true, networks: await deps.treasury.networks(principalOf(request)) }),
      {
        transform: [requireScope('deposits:read')],
        response: { 200: 'NetworkList', ...errors(400, 401, 403, 413, 429, 500) },
        detail: {
          tags: ['Treasury'],
          operationId: 'listNetworks',
          summary: 'Networks of this mode',
          description:
            "The networks serving the key's mode (testnets for test keys, main networks for live ones), with their tokens' contract addresses, decimals and current USD prices. Scope `deposits:read`.",
        },
      },
    )
    .get(
      '/deposit-key',
      async ({ request, set }) => {
        const r = await deps.treasury.depositKey(principalOf(request))
        if (!r.ok) throw ApiError.from(r)
        return json(set, { success: true, ...r.value })
      },
      {
        transform: [requireScope('deposits:read')],
        response: { 200: 'DepositKey', ...errors(400, 401, 403, 404, 413, 429, 500) },
        detail: {
          tags: ['Treasury'],
          operationId: 'getDepositKey',
          summary: 'The deposit key of this mode',
          description:
            "What identifies the extended public key deposit addresses are derived from: its fingerprint, never the key (with any one deposit address's private key, an xpub gives them all). The treasury tool derives the xpub from the merchant's own key and refuses to act unless the fingerprints match. 404 when none is set. Scope `deposits:read`.",
        },
      },
    )
    .get(
      '/deposit-addresses',
      async ({ request, query, set }) => {
        const q = query as Static<typeof AddressQuery>
        const r = await deps.treasury.depositAddresses(principalOf(request), {
          after: q.after,
          limit: q.limit ?? 500,
          network: q.blockchain_network,
          address: q.address,
        })
        if (!r.ok) throw ApiError.from(r)
        return json(set, { success: true, ...r.value })
      },
      {
        transform: [requireScope('deposits:read'), strictParams('query', AddressQuery)],
        response: { 200: 'DepositAddressPage', ...errors(400, 401, 403, 413, 429, 500) },
        detail: {
          tags: ['Treasury'],
          operationId: 'listDepositAddresses',
          parameters: openApiParameters('query', AddressQuery),
          summary: 'Deposit addresses handed out',
          description:
            "The deposit addresses of the key's mode under its current deposit key, in derivation order: each with its derivation index, its transaction and status, what it received, and whether a confirmed sweep emptied it. Page with `after`. Scope `deposits:read`.",
        },
      },
    )
    .get(
      '/sweeps',
      async ({ request, query, set }) => {
        const q = query as Static<typeof SweepQuery>
        return json(set, {
          success: true,
          ...(await deps.treasury.sweeps(principalOf(request), {
            network: q.blockchain_network,
            status: q.status,
            limit: q.limit ?? 50,
            offset: q.offset ?? 0,
          })),
        })
      },
      {
        transform: [requireScope('deposits:read'), strictParams('query', SweepQuery)],
        response: { 200: 'SweepPage', ...errors(400, 401, 403, 413, 429, 500) },
        detail: {
          tags: ['Treasury'],
          operationId: 'listSweeps',
          parameters: openApiParameters('query', SweepQuery),
          summary: 'List sweeps',
          description: "Sweeps of the key's project and mode, newest first. Scope `deposits:read`.",
        },
      },
    )
    .get(
      '/sweeps/:id',
      async ({ request, params, set }) => {
        const r = await deps.treasury.sweep(principalOf(request), params.id)
        if (!r.ok) throw ApiError.from(r)
        return json(set, { success: true, sweep: r.value })
      },
      {
        transform: [requireScope('deposits:read'), strictParams('params', SweepParams)],
        response: { 200: 'SweepResult', ...errors(400, 401, 403, 404, 413, 429, 500) },
        detail: {
          tags: ['Treasury'],
          operationId: 'getSweep',
          parameters: openApiParameters('path', SweepParams),
          summary: 'Get a sweep',
          description:
            "One sweep of the key's project and mode; any other id is 404. Scope `deposits:read`.",
        },
      },
    )
    .post(
      '/sweeps',
      async ({ request, body, set }) => {
        const r = await deps.treasury.recordSweep(principalOf(request), body)
        if (!r.ok) throw ApiError.from(r)
        return json(set, { success: true, sweep: r.value })
      },
      {
        parse: 'none',
        transform: [requireScope('sweeps:write'), strictJsonBody(RecordSweepBody)],
        body: 'RecordSweepRequest',
        response: { 200: 'SweepResult', ...errors(400, 401, 403, 409, 413, 429, 500, 503) },
        detail: {
          tags: ['Treasury'],
          operationId: 'recordSweep',
          summary: 'Record a sweep before sending it',
          description:
            "The treasury tool records each signed sweep transaction before it sends it: a DepositAccount `batch` of `sweep` calls, each from a deposit address of the key's project and mode and signed by it, all to one treasury (a chain with EIP-7702), or a deposit address's own transfer of a configured token or of its native coin (a chain without). It must be mineable now, as the network's node answers: of a type the chain has, its sender's next nonce or at most 16 past it, its sender able to pay for it, every signature's deadline in the future and at most 2 hours ahead. Anything else is 400 with the reason; 503 when the node cannot be asked. The service then watches it on-chain until it has the network's confirmations, and reads what each address gave. The same transaction recorded again returns the first record. Scope `sweeps:write`.",
        },
      },
    )
}
