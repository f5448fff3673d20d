import { Type } from '@sinclair/typebox'
import { closed, STATUSES } from '../transactions/model.ts'
import { DATE_BOUND_PATTERN } from './service.ts'

/**
 * `start_date` and `end_date` as stats and the export take them (docs/decisions/0010-stats.md):
 * on `created_at`, inclusive.
 */
export const DATE_RANGE = {
  start_date: Type.Optional(
    Type.String({
      pattern: DATE_BOUND_PATTERN,
      description: 'YYYY-MM-DD or ISO 8601 timestamp; inclusive, on created_at.',
      examples: ['2026-01-01'],
    }),
  ),
  end_date: Type.Optional(
    Type.String({
      pattern: DATE_BOUND_PATTERN,
      description: 'YYYY-MM-DD (covers that whole UTC day) or ISO 8601 timestamp; inclusive.',
      examples: ['2026-01-31'],
    }),
  ),
}

export const StatsObject = Type.Object(
  {
    total_transactions: Type.Integer(),
    total_volume_usd: Type.Number({
      description:
        'Sum of amount_usd of completed transactions: each at its USD value when it was created.',
    }),
    volume_by_currency: Type.Record(Type.String({ pattern: '^[A-Z]{3}$' }), Type.Number(), {
      description:
        'Sum of amount_in_currency of completed transactions, per currency they were priced in (ISO 4217 code to amount); currencies without completed transactions are left out.',
      examples: [{ USD: 1250.5, EUR: 310 }],
    }),
    completed_transactions: Type.Integer(),
    conversion_rate: Type.Number({
      description: 'completed / total * 100, two decimals; 0 when there are none.',
      examples: [94.67],
    }),
    by_status: Type.Object(Object.fromEntries(STATUSES.map((s) => [s, Type.Integer()])), {
      description: 'Every status, zeros included.',
      ...closed,
    }),
  },
  closed,
)

export const StatsResponse = Type.Object(
  { success: Type.Literal(true), stats: StatsObject },
  closed,
)
