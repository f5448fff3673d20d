import { Type } from '@sinclair/typebox'
import { closed, STATUSES } from '../transactions/model.ts'

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
