import { Elysia } from 'elysia'
import { respond } from '../../../http/json-response.ts'
import type { TransactionExport } from '../../transactions/export.ts'
import { dashboardAccess } from '../access/index.ts'
import type { DashboardDeps } from '../deps.ts'
import { base } from '../layout.ts'
import { denied, noticeOf, page, redirect, statusOf, withNotice } from '../respond.ts'
import { transactionWithError } from './error-page.ts'
import { transactionPage, transactionsPage } from './page.ts'

type Deps = Pick<
  DashboardDeps,
  'sessions' | 'asset' | 'dashboard' | 'decimals' | 'transactions' | 'webhooks'
>

/** The transactions list, one transaction's page, and cancelling it or retrying its webhook. */
export function transactionsSection(deps: Deps) {
  return new Elysia({ name: 'dashboard-transactions', prefix: '/:project/:mode/transactions' })
    .use(dashboardAccess(deps))
    .get(
      '',
      async ({ frame, viewer, search }) => {
        const q = {
          status: search.get('status') ?? '',
          orderId: (search.get('order_id') ?? '').slice(0, 255),
        }
        const r = await deps.dashboard.transactions(viewer, {
          ...q,
          page: Number(search.get('page') ?? '1'),
        })
        if (!r.ok)
          return page(transactionsPage(frame, q, null, { error: r.message }), statusOf(r.code))
        return page(transactionsPage(frame, q, r.value, {}))
      },
      { signedIn: true },
    )
    .get(
      '/:id',
      async ({ frame, viewer, search, params }) => {
        const r = await deps.dashboard.transaction(viewer, params.id)
        if (!r.ok) return denied(frame, 'transactions', r)
        return page(transactionPage(frame, r.value, deps.decimals, { notice: noticeOf(search) }))
      },
      { signedIn: true },
    )
    .post(
      '/:id/cancel',
      async (v) => {
        const r = await deps.transactions.cancel(v.viewer, v.params.id)
        if (!r.ok) return transactionWithError(deps, v, v.params.id, r)
        return redirect(withNotice(base(v.frame, `/transactions/${v.params.id}`), 'cancelled'))
      },
      { csrf: true },
    )
    .post(
      '/:id/retry-webhook',
      async (v) => {
        const r = await deps.webhooks.retryCompleted(v.viewer, v.params.id)
        if (!r.ok) return transactionWithError(deps, v, v.params.id, r)
        const to = base(v.frame, `/transactions/${v.params.id}`)
        return redirect(withNotice(to, 'webhook-retried'))
      },
      { csrf: true },
    )
}

/**
 * The list's "Download" links: the export (docs/integrating/export.md) of the signed-in member's
 * project and mode, narrowed by the list's filters, from the same service as the API's, without
 * an API key. A GET that changes nothing, so no CSRF token; the session, the membership and the
 * mode are checked as for every page (`signedIn`). Mounted by the app beside the dashboard, with
 * the export service the other sections do not need.
 */
export function transactionsExportSection(
  deps: Pick<DashboardDeps, 'sessions' | 'asset'> & { transactionExport: TransactionExport },
) {
  return new Elysia({
    name: 'dashboard-transactions-export',
    prefix: '/dashboard/:project/:mode/transactions',
  })
    .use(dashboardAccess(deps))
    .get(
      '/export',
      async ({ frame, viewer, search, request, set }) => {
        const r = await deps.transactionExport.open(
          viewer,
          {
            format: search.get('format') ?? undefined,
            status: search.get('status') || undefined,
            orderIdPrefix: (search.get('order_id') ?? '').slice(0, 255).trim() || undefined,
          },
          request.signal,
        )
        if (!r.ok) return denied(frame, 'transactions', r)
        return respond(set, r.value.body, 200, {
          'content-type': r.value.contentType,
          'content-disposition': `attachment; filename="${r.value.filename}"`,
          'cache-control': 'no-store',
        })
      },
      { signedIn: true },
    )
}
