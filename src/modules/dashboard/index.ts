/**
 * The merchant dashboard at /dashboard (docs/decisions/0035-merchant-dashboard.md): server-rendered
 * pages over the same services the API and the CLI use, one Elysia plugin per section. Every page
 * under `/dashboard/{project}/{mode}` checks the session, the membership and the mode first
 * (`signedIn`); every form post also checks its CSRF token (`csrf`): see ./access.
 */
import { fileURLToPath } from 'node:url'
import { Elysia } from 'elysia'
import type { DashboardDeps } from './deps.ts'
import { fundsSection } from './funds/index.ts'
import { keysSection } from './keys/index.ts'
import { overviewSection } from './overview/index.ts'
import { refundsSection } from './refunds/index.ts'
import { settingsSection } from './settings/index.ts'
import { signInSection } from './sign-in/index.ts'
import { transactionsSection } from './transactions/index.ts'
import { webhooksSection } from './webhooks/index.ts'

export type { DashboardDeps } from './deps.ts'
export { dashboardNotFound, dashboardRefused } from './respond.ts'

/** The dashboard's CSS and bundled scripts (built from ./client by scripts/build-assets.ts). */
export const DASHBOARD_ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url))

export function dashboardController(deps: DashboardDeps) {
  return new Elysia({ name: 'dashboard', prefix: '/dashboard' })
    .use(signInSection(deps))
    .use(overviewSection(deps))
    .use(transactionsSection(deps))
    .use(refundsSection(deps))
    .use(fundsSection(deps))
    .use(keysSection(deps))
    .use(webhooksSection(deps))
    .use(settingsSection(deps))
}
