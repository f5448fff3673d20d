import { Elysia } from 'elysia'
import { decimalToUnits } from '../../../lib/money.ts'
import { dashboardAccess } from '../access/index.ts'
import type { DashboardDeps } from '../deps.ts'
import { base, type Frame, type Notice } from '../layout.ts'
import { denied, redirect, withNotice } from '../respond.ts'
import { transactionWithError } from '../transactions/error-page.ts'
import type { RefundForm } from '../transactions/page.ts'

type Deps = Pick<DashboardDeps, 'sessions' | 'asset' | 'dashboard' | 'decimals' | 'refunds'>

/** Back to the refunds of a transaction's page, with a notice. */
const toRefunds = (f: Frame, transactionId: string, notice: Notice) =>
  redirect(`${withNotice(base(f, `/transactions/${transactionId}`), notice)}#refunds`)

/** Refunds: created from a transaction's page, cancelled or given up from it. */
export function refundsSection(deps: Deps) {
  return new Elysia({ name: 'dashboard-refunds', prefix: '/:project/:mode' })
    .use(dashboardAccess(deps))
    .post(
      '/transactions/:id/refunds',
      async (v) => {
        const id = v.params.id
        const form: RefundForm = {
          asset: v.form.get('asset') ?? '',
          amount: (v.form.get('amount') ?? '').trim(),
          address: (v.form.get('address') ?? '').trim(),
          reason: (v.form.get('reason') ?? '').trim(),
        }
        const [network = '', symbol = ''] = form.asset.split('|')
        const decimals = deps.decimals(network, symbol)
        // People type token amounts ("12.5 TUSD"); the API takes smallest units: converted
        // exactly, never rounded.
        const amount =
          form.amount === '' || decimals === null ? null : decimalToUnits(form.amount, decimals)
        if (form.amount !== '' && amount === null) {
          const message =
            `Amount must be a number of ${symbol || 'tokens'} with at most ` +
            `${decimals ?? 0} decimal places, such as 12.5`
          return transactionWithError(
            deps,
            v,
            id,
            { ok: false, code: 'invalid_request', message },
            form,
          )
        }
        const r = await deps.refunds.create(v.viewer, id, {
          address: form.address,
          amount: amount?.toString() ?? null,
          reason: form.reason || null,
          token_symbol: symbol || null,
          blockchain_network: network || null,
        })
        if (!r.ok) return transactionWithError(deps, v, id, r, form)
        return toRefunds(v.frame, id, 'refund-created')
      },
      { csrf: true },
    )
    .post(
      '/refunds/:id/cancel',
      async ({ frame, viewer, params }) => {
        const r = await deps.refunds.cancel(viewer, params.id)
        if (!r.ok) return denied(frame, 'funds', r)
        return toRefunds(frame, r.value.transaction_id, 'refund-cancelled')
      },
      { csrf: true },
    )
    .post(
      '/refunds/:id/abandon',
      async (v) => {
        const r = await deps.refunds.abandon(v.viewer, v.params.id)
        if (r.ok) return toRefunds(v.frame, r.value.transaction_id, 'refund-abandoned')
        // Still mineable (or not in flight): its transaction's page, saying why.
        const known = r.code === 'conflict' ? await deps.refunds.get(v.viewer, v.params.id) : null
        return known?.ok
          ? transactionWithError(deps, v, known.value.transaction_id, r)
          : denied(v.frame, 'funds', r)
      },
      { csrf: true },
    )
}
