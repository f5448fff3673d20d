import { Elysia } from 'elysia'
import { dashboardAccess } from '../access/index.ts'
import type { DashboardDeps } from '../deps.ts'
import { page, statusOf } from '../respond.ts'
import { DEFAULT_RANGE_DAYS } from '../service.ts'
import { overviewPage } from './page.ts'

const DAY_MS = 86_400_000
const DATE = /^\d{4}-\d{2}-\d{2}$/
const isoDate = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/** The overview: a range of days' numbers and chart (the last 30 days unless chosen). */
export function overviewSection(
  deps: Pick<DashboardDeps, 'sessions' | 'asset' | 'dashboard' | 'clock'>,
) {
  return new Elysia({ name: 'dashboard-overview', prefix: '/:project/:mode' })
    .use(dashboardAccess(deps))
    .get(
      '',
      async ({ frame, viewer, search }) => {
        const now = deps.clock.now()
        const start = search.get('start_date') || isoDate(now - (DEFAULT_RANGE_DAYS - 1) * DAY_MS)
        const end = search.get('end_date') || isoDate(now)
        const range = { start, end }
        // Checked before anything is read: the chart has a point per day.
        if (!DATE.test(start) || !DATE.test(end))
          return page(overviewPage(frame, range, null, 'Dates must be YYYY-MM-DD'), 400)
        if (Date.parse(end) - Date.parse(start) > 3660 * DAY_MS)
          return page(overviewPage(frame, range, null, 'Choose a range of at most ten years'), 400)
        const r = await deps.dashboard.overview(viewer, { start_date: start, end_date: end })
        if (!r.ok) return page(overviewPage(frame, range, null, r.message), statusOf(r.code))
        return page(overviewPage(frame, range, r.value, null))
      },
      { signedIn: true },
    )
}
