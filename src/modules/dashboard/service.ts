import type { DepositService } from '../../chain/deposit.service.ts'
import type { Mode } from '../../projects/mode.ts'
import type { KeyService } from '../../keys/key.service.ts'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { ProjectService } from '../../projects/project.service.ts'
import type { EndpointService } from '../../webhooks/endpoint.service.ts'
import type { WebhookService } from '../../webhooks/webhook.service.ts'
import type { StatsService } from '../stats/service.ts'
import { STATUSES, type Status } from '../transactions/model.ts'
import type { TransactionService } from '../transactions/service.ts'
import type { RefundService } from '../refunds/service.ts'
import type { TreasuryService } from '../treasury/service.ts'
import type { RefundStatus } from '../../../machines/refund.machine.ts'
import type { RefundFilter } from './funds/page.ts'

/** The refund statuses each filter of the Funds page shows. */
const REFUND_STATUS_OF: Record<RefundFilter, RefundStatus[] | null> = {
  open: ['pending', 'submitted', 'confirming'],
  completed: ['completed'],
  failed: ['failed'],
  cancelled: ['cancelled'],
  all: null,
}
const FUNDS_ROWS = 50

/** A signed-in member looking at one project in one mode: everything they see is narrowed to it. */
export interface Viewer {
  projectId: string
  mode: Mode
}

export const TRANSACTIONS_PER_PAGE = 25
export const DELIVERIES_PER_PAGE = 50
/** The overview's default range: the last 30 days, today included. */
export const DEFAULT_RANGE_DAYS = 30

/**
 * What the dashboard's pages show, read through the same services the API and the CLI use
 * (one implementation, three front doors), each call narrowed to the viewer's project and mode.
 */
export function createDashboardService(deps: {
  transactions: TransactionService
  webhooks: WebhookService
  endpoints: EndpointService
  keys: KeyService
  stats: StatsService
  deposits: DepositService
  projects: ProjectService
  refunds: RefundService
  treasury: TreasuryService
}) {
  return {
    /**
     * The stats (docs/integrating/api.md#lists-and-statistics) for a date range, and the same
     * selection per day for the chart.
     */
    async overview(v: Viewer, range: { start_date: string; end_date: string }) {
      // Both from one read of the range (docs/decisions/0066-stats-from-settled-days.md).
      const r = await deps.stats.overview(v, range)
      return r.ok ? ok({ stats: r.value.stats as OverviewStats, daily: r.value.daily }) : r
    },

    async transactions(v: Viewer, q: { status?: string; orderId?: string; page: number }) {
      if (q.status && !(STATUSES as readonly string[]).includes(q.status))
        return deny('invalid_request', `status must be one of ${STATUSES.join(', ')}`)
      const page = Number.isInteger(q.page) && q.page >= 1 ? q.page : 1
      const r = await deps.transactions.list(v, v.projectId, {
        status: (q.status || undefined) as Status | undefined,
        orderIdPrefix: q.orderId?.trim() || undefined,
        limit: TRANSACTIONS_PER_PAGE,
        offset: (page - 1) * TRANSACTIONS_PER_PAGE,
      })
      return r.ok ? ok({ ...r.value, page }) : r
    },

    /**
     * Every field, the timeline, the deliveries it caused and every transfer seen for it (late ones
     * too).
     */
    async transaction(v: Viewer, id: string) {
      const tx = await deps.transactions.get(v, id)
      if (!tx.ok) return tx
      const [timeline, deliveries, endpoints, transfers, refunds] = await Promise.all([
        deps.transactions.timeline(v, id),
        deps.webhooks.listDeliveries(v, { transactionId: id, limit: 100 }),
        deps.endpoints.list(v.projectId, v.mode),
        deps.deposits.transfersTo(id),
        deps.refunds.ofTransaction(v, id),
      ])
      if (!timeline.ok) return timeline
      if (!deliveries.ok) return deliveries
      if (!refunds.ok) return refunds
      return ok({
        transaction: tx.value,
        timeline: timeline.value,
        deliveries: deliveries.value,
        endpoints,
        transfers,
        refunds: refunds.value.refunds,
        refundable: refunds.value.refundable,
      })
    },

    /**
     * The Funds page: what waits at deposit addresses, the latest sweeps, and refunds by status.
     */
    async funds(v: Viewer, filter: RefundFilter) {
      const statuses = REFUND_STATUS_OF[filter]
      const [waiting, sweeps, refunds] = await Promise.all([
        deps.treasury.waiting(v),
        deps.treasury.sweeps(v, { limit: FUNDS_ROWS, offset: 0 }),
        statuses === null
          ? deps.refunds.list(v, { limit: FUNDS_ROWS, offset: 0 }).then((r) => r.refunds)
          : Promise.all(
              statuses.map((status) =>
                deps.refunds
                  .list(v, { status, limit: FUNDS_ROWS, offset: 0 })
                  .then((r) => r.refunds),
              ),
            ).then((lists) =>
              lists
                .flat()
                .sort((a, b) => b.created_at.localeCompare(a.created_at))
                .slice(0, FUNDS_ROWS),
            ),
      ])
      return { waiting, sweeps: sweeps.sweeps, refunds, filter }
    },

    keys: (v: Viewer) => deps.keys.list(v.projectId, v.mode),

    endpoints: (v: Viewer) => deps.endpoints.list(v.projectId, v.mode),

    async endpoint(v: Viewer, id: string, q: { status?: string; before?: string }) {
      const endpoint = await deps.endpoints.get(id, v)
      if (!endpoint.ok) return endpoint
      const deliveries = await deps.webhooks.listDeliveries(v, {
        endpointId: id,
        status: q.status || undefined,
        before: q.before || undefined,
        limit: DELIVERIES_PER_PAGE,
      })
      return deliveries.ok
        ? ok({ endpoint: endpoint.value, deliveries: deliveries.value })
        : deliveries
    },

    async deliveries(v: Viewer, q: { status?: string; endpointId?: string; before?: string }) {
      const [endpoints, deliveries] = await Promise.all([
        deps.endpoints.list(v.projectId, v.mode),
        deps.webhooks.listDeliveries(v, {
          status: q.status || undefined,
          endpointId: q.endpointId || undefined,
          before: q.before || undefined,
          limit: DELIVERIES_PER_PAGE,
        }),
      ])
      return deliveries.ok ? ok({ endpoints, deliveries: deliveries.value }) : deliveries
    },

    delivery: (v: Viewer, id: string) => deps.webhooks.getDelivery(id, v),

    async settings(v: Viewer): Promise<
      Outcome<{
        project: NonNullable<Awaited<ReturnType<ProjectService['get']>>>
        xpubs: Awaited<ReturnType<DepositService['xpubs']>>
      }>
    > {
      const [project, xpubs] = await Promise.all([
        deps.projects.get(v.projectId),
        deps.deposits.xpubs(v.projectId),
      ])
      if (!project) return deny('not_found', `No project ${v.projectId}`)
      return ok({ project, xpubs })
    },
  }
}

export interface OverviewStats {
  total_transactions: number
  total_volume_usd: number
  /** Completed volume per currency the transactions were priced in. */
  volume_by_currency: Record<string, number>
  completed_transactions: number
  conversion_rate: number
  by_status: Record<Status, number>
}

export type DashboardService = ReturnType<typeof createDashboardService>
