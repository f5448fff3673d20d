import { Elysia } from 'elysia'
import { dashboardAccess } from '../access/index.ts'
import type { DashboardDeps } from '../deps.ts'
import { noticeOf, page } from '../respond.ts'
import { fundsPage, refundFilterOf } from './page.ts'

type Deps = Pick<DashboardDeps, 'sessions' | 'asset' | 'dashboard' | 'decimals' | 'native'>

/** Funds: what waits at deposit addresses, the sweeps, and refunds. */
export function fundsSection(deps: Deps) {
  const units = { decimals: deps.decimals, native: deps.native }
  return new Elysia({ name: 'dashboard-funds', prefix: '/:project/:mode' })
    .use(dashboardAccess(deps))
    .get(
      '/funds',
      async ({ frame, viewer, search }) => {
        const d = await deps.dashboard.funds(viewer, refundFilterOf(search.get('refunds')))
        return page(fundsPage(frame, d, units, { notice: noticeOf(search) }))
      },
      { signedIn: true },
    )
}
