import { Elysia } from 'elysia'
import { dashboardAccess } from '../access/index.ts'
import type { DashboardDeps } from '../deps.ts'
import { base, type Frame, type Notice } from '../layout.ts'
import { denied, noticeOf, page, redirect, statusOf, withNotice } from '../respond.ts'
import { keysPage } from './page.ts'

type Deps = Pick<DashboardDeps, 'sessions' | 'asset' | 'dashboard' | 'keys'>

const toKeys = (f: Frame, notice: Notice) => redirect(withNotice(base(f, '/keys'), notice))

/** API keys: listed, created (the key shown once), revoked and deleted. */
export function keysSection(deps: Deps) {
  return new Elysia({ name: 'dashboard-keys', prefix: '/:project/:mode/keys' })
    .use(dashboardAccess(deps))
    .get(
      '',
      async ({ frame, viewer, search }) =>
        page(keysPage(frame, await deps.dashboard.keys(viewer), { notice: noticeOf(search) })),
      { signedIn: true },
    )
    .post(
      '',
      async ({ frame, viewer, form }) => {
        const input = { name: form.get('name') ?? '', scopes: form.getAll('scopes') }
        const r = await deps.keys.create({
          projectId: viewer.projectId,
          mode: viewer.mode,
          name: input.name,
          scopes: input.scopes,
        })
        const keys = await deps.dashboard.keys(viewer)
        if (!r.ok)
          return page(keysPage(frame, keys, { form: input, error: r.message }), statusOf(r.code))
        const created = { key: r.value.key, name: r.value.record.name }
        return page(keysPage(frame, keys, { created }), 201)
      },
      { csrf: true },
    )
    .post(
      '/:id/revoke',
      async ({ frame, viewer, params }) => {
        const r = await deps.keys.revoke(params.id, viewer)
        return r.ok ? toKeys(frame, 'key-revoked') : denied(frame, 'keys', r)
      },
      { csrf: true },
    )
    .post(
      '/:id/delete',
      async ({ frame, viewer, params }) => {
        const r = await deps.keys.delete(params.id, viewer)
        return r.ok ? toKeys(frame, 'key-deleted') : denied(frame, 'keys', r)
      },
      { csrf: true },
    )
}
