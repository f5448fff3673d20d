import { TypeCompiler } from '@sinclair/typebox/compiler'
import { CreateTransactionBody } from './src/modules/transactions/model.ts'
const c = TypeCompiler.Compile(CreateTransactionBody)
for (const b of [{ amount: 1, foo: 1 }, { amount: '2' }, {}, { amount: 5, customer_email: 'x' }, { amount: 5, expires_in_minutes: 0 }, { amount: 5, metadata: { a: { b: 1 } } }, { amount: 5, order_id: 'x'.repeat(256) }])
  console.log(JSON.stringify(b).slice(0, 40), [...c.Errors(b)].map(e => [e.type, e.path, e.message]))
