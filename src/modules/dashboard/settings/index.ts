import { Elysia } from 'elysia'
import { dashboardAccess } from '../access/index.ts'
import type { DashboardDeps } from '../deps.ts'
import { denied, page } from '../respond.ts'
import { settingsPage } from './page.ts'

/** Settings: the project's name, limits and deposit-address keys, read only. */
export function settingsSection(deps: Pick<DashboardDeps, 'sessions' | 'asset' | 'dashboard'>) {
  return new Elysia({ name: 'dashboard-settings', prefix: '/:project/:mode' })
    .use(dashboardAccess(deps))
    .get(
      '/settings',
      async ({ frame, viewer }) => {
        const r = await deps.dashboard.settings(viewer)
        return r.ok ? page(settingsPage(frame, r.value)) : denied(frame, 'settings', r)
      },
      { signedIn: true },
    )
}
