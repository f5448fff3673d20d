import { Type, type Static } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { principalOf, requireScope } from '../../http/api-gate.ts'
import { ApiError, ErrorResponse } from '../../http/errors.ts'
import { json } from '../../http/json-response.ts'
import { openApiParameters, strictParams } from '../../http/strict-params.ts'
import { DATE_RANGE, StatsResponse } from './model.ts'
import type { StatsService } from './service.ts'

const StatsQuery = Type.Object(
  {
    ...DATE_RANGE,
    testing_mode: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'Live keys: also count test transactions. Test keys always count test transactions only.',
      }),
    ),
  },
  { additionalProperties: true },
)

/**
 * Merchant API: transaction statistics (docs/integrating/api.md#lists-and-statistics;
 * docs/decisions/0009-keys-see-their-own-mode.md, docs/decisions/0010-stats.md).
 */
export function statsController(deps: { stats: StatsService }) {
  return new Elysia({ name: 'stats' }).model({ ErrorResponse, StatsResult: StatsResponse }).get(
    '/api/transactions/stats',
    async ({ request, query, set }) => {
      const result = await deps.stats.stats(
        principalOf(request),
        query as Static<typeof StatsQuery>,
      )
      if (!result.ok) throw ApiError.from(result)
      return json(set, { success: true, stats: result.value })
    },
    {
      transform: [requireScope('stats:read'), strictParams('query', StatsQuery)],
      response: {
        200: 'StatsResult',
        400: 'ErrorResponse',
        401: 'ErrorResponse',
        403: 'ErrorResponse',
        413: 'ErrorResponse',
        429: 'ErrorResponse',
        500: 'ErrorResponse',
      },
      detail: {
        tags: ['Statistics'],
        operationId: 'getTransactionStats',
        parameters: openApiParameters('query', StatsQuery),
        summary: 'Transaction statistics',
        description:
          'Counts by status, completed volume in USD and conversion rate, over transactions created in the date range. Scope `stats:read`.',
      },
    },
  )
}
