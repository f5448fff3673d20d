import type { Denial } from '../../../lib/outcome.ts'
import type { Visit } from '../access/index.ts'
import type { DashboardDeps } from '../deps.ts'
import { denied, page, statusOf } from '../respond.ts'
import { transactionPage, type RefundForm } from './page.ts'

/**
 * A transaction's page again, saying why the action on it (cancel, retry, refund) was refused,
 * with the refund form as it was sent.
 */
export async function transactionWithError(
  deps: Pick<DashboardDeps, 'dashboard' | 'decimals'>,
  v: Pick<Visit, 'frame' | 'viewer'>,
  id: string,
  d: Denial,
  refundForm?: RefundForm,
): Promise<Response> {
  const r = await deps.dashboard.transaction(v.viewer, id)
  if (!r.ok) return denied(v.frame, 'transactions', r)
  const body = transactionPage(v.frame, r.value, deps.decimals, { error: d.message, refundForm })
  return page(body, statusOf(d.code))
}
