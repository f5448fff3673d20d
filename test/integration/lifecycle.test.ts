import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { waitFor } from 'xstate'
import { asc, eq } from 'drizzle-orm'
import { outbox, transactionActors, transactionEvents } from '../../src/db/schema.ts'
import { REFIRE_MS } from '../../src/actors/deadline-timer.ts'
import { createInstanceLease } from '../../src/instances/lease.ts'
import { createInstanceRepo } from '../../src/instances/instance.repo.ts'
import { createLifecycleRepo } from '../../src/actors/lifecycle.repo.ts'
import { createScheduler } from '../../src/actors/scheduler.ts'
import { createTransactionRegistry } from '../../src/actors/transaction-registry.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { createTransactionRepo } from '../../src/modules/transactions/transaction.repo.ts'
import { createRollups } from '../../src/modules/transactions/rollups.ts'
import { createTransactionService } from '../../src/modules/transactions/service.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { backends } from '../helpers/databases.ts'
import { PATH_TO, quote, TX_HASH } from '../helpers/lifecycle.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

for (const backend of backends()) {
  describe(`transaction lifecycle [${backend}]`, () => {
    const clock = manualClock(Date.parse('2030-06-01T12:00:00.000Z'))
    let t: TestServer
    let p: { id: string; key: string }
    const create = async (body: Record<string, unknown> = {}) =>
      (await (await api(t, p.key).create({ amount: 25, ...body })).json()).transaction
    const drive = async (id: string, status: keyof typeof PATH_TO) => {
      for (const e of PATH_TO[status]) {
        const r = await t.server.services.lifecycle.apply(id, e)
        if (!r.ok) throw new Error(`${e.type}: ${r.message}`)
      }
    }
    const timeline = async (id: string) =>
      await (await api(t, p.key).get(`/api/transactions/${id}/timeline`)).json()
    const outboxOf = (id: string) =>
      t.server.services.database.db
        .select()
        .from(outbox)
        .where(eq(outbox.transactionId, id))
        .orderBy(asc(outbox.id))
    const eventsOf = (id: string) =>
      t.server.services.database.db
        .select()
        .from(transactionEvents)
        .where(eq(transactionEvents.transactionId, id))
        .orderBy(asc(transactionEvents.id))

    beforeAll(async () => {
      t = await startTestServer(backend, {}, { clock })
      p = await t.project()
    })
    afterAll(() => t?.stop())

    test('creating a transaction starts its actor and records the creation with its event, atomically', async () => {
      const tx = await create({ order_id: 'life-1', metadata: { k: 'v' } })
      expect(t.server.services.lifecycle.statusOf(tx.id)).toBe('created')
      const tl = await timeline(tx.id)
      expect(tl.success).toBe(true)
      expect(tl.timeline).toEqual([
        {
          from_status: null,
          to_status: 'created',
          cause: 'transaction.created',
          details: {
            amount_in_currency: '25.00',
            currency: 'USD',
            amount_usd: '25.00',
            expires_at: tx.expires_at,
          },
          at: tx.created_at,
        },
      ])
      const [event] = await outboxOf(tx.id)
      expect(event.eventType).toBe('transaction.created')
      expect(event.data).toEqual({
        transaction_id: tx.id,
        transaction_number: tx.transaction_number,
        status: 'created',
        amount_in_currency: 25,
        currency: 'USD',
        created_at: tx.created_at,
        testing_mode: true,
        token_symbol: null,
        token_amount: null,
        blockchain_network: null,
        transaction_hash: null,
        block_number: null,
        customer_ip_address: null,
        order_id: 'life-1',
        metadata: { k: 'v' },
        confirmed_at: null,
      })
    })

    test('the merchant cancels a created, prepared or pending transaction; it is recorded and announced', async () => {
      for (const status of ['created', 'prepared', 'pending'] as const) {
        const tx = await create()
        if (status !== 'created') await drive(tx.id, status)
        const res = await api(t, p.key).post(`/api/transactions/${tx.id}/cancel`, '')
        expect(res.status).toBe(200)
        const body = await res.json()
        expect(body.transaction.status).toBe('cancelled')
        expect(body.transaction.id).toBe(tx.id)
        expect(t.server.services.lifecycle.statusOf(tx.id)).toBeNull()
        const last = (await timeline(tx.id)).timeline.at(-1)
        expect(last).toMatchObject({
          from_status: status,
          to_status: 'cancelled',
          cause: 'cancel.requested',
          details: { by: 'merchant' },
        })
        expect((await outboxOf(tx.id)).map((o) => o.eventType).at(-1)).toBe('transaction.cancelled')
        expect(
          await t.server.services.database.db
            .select()
            .from(transactionActors)
            .where(eq(transactionActors.transactionId, tx.id)),
        ).toEqual([])
      }
    })

    test('cancelling in any other status is 409 and changes nothing', async () => {
      for (const status of ['processing', 'confirming', 'completed'] as const) {
        const tx = await create()
        await drive(tx.id, status)
        const before = await eventsOf(tx.id)
        const res = await api(t, p.key).post(`/api/transactions/${tx.id}/cancel`, '')
        expect(res.status).toBe(409)
        expect((await res.json()).error.type).toBe('conflict_error')
        expect(await eventsOf(tx.id)).toEqual(before)
        expect(
          (await (await api(t, p.key).get(`/api/transactions/${tx.id}`)).json()).transaction.status,
        ).toBe(status)
      }
      const cancelled = await create()
      await api(t, p.key).post(`/api/transactions/${cancelled.id}/cancel`, '')
      expect(
        (await api(t, p.key).post(`/api/transactions/${cancelled.id}/cancel`, '')).status,
      ).toBe(409)
    })

    test('cancel and timeline: 404 for other projects and modes, 403 without the scope, 400 for a bad id', async () => {
      const tx = await create()
      const other = await t.project({ name: 'Other' })
      const live = await t.key(p.id, 'live')
      const readOnly = await t.key(p.id, 'test', ['transactions:read'])
      expect((await api(t, other.key).post(`/api/transactions/${tx.id}/cancel`, '')).status).toBe(
        404,
      )
      expect((await api(t, live.key).post(`/api/transactions/${tx.id}/cancel`, '')).status).toBe(
        404,
      )
      expect((await api(t, other.key).get(`/api/transactions/${tx.id}/timeline`)).status).toBe(404)
      expect(
        (await api(t, readOnly.key).post(`/api/transactions/${tx.id}/cancel`, '')).status,
      ).toBe(403)
      expect((await api(t, p.key).post('/api/transactions/nope/cancel', '')).status).toBe(400)
      expect(
        (await api(t, p.key).get('/api/transactions/00000000-0000-4000-8000-000000000000/timeline'))
          .status,
      ).toBe(404)
      expect(t.server.services.lifecycle.statusOf(tx.id)).toBe('created')
    })

    test('a paid transaction walks to completed; each status change has one timeline entry and one event', async () => {
      const tx = await create()
      await drive(tx.id, 'completed')
      const got = (await (await api(t, p.key).get(`/api/transactions/${tx.id}`)).json()).transaction
      expect(got).toMatchObject({
        status: 'completed',
        token_symbol: 'USDC',
        token_amount: '25000000',
        blockchain_network: 'devnet',
        deposit_address: quote.depositAddress,
        amount_received: '25000000',
        transaction_hash: TX_HASH,
        block_number: 1234,
        confirmations: 3,
        required_confirmations: 3,
        confirmed_at: '2030-01-01T00:00:00.000Z',
      })
      expect(got.completed_at).not.toBeNull()
      expect(
        (await timeline(tx.id)).timeline.map((e: { to_status: string }) => e.to_status),
      ).toEqual(['created', 'prepared', 'pending', 'processing', 'confirming', 'completed'])
      const events = await outboxOf(tx.id)
      expect(events.map((e) => e.eventType)).toEqual([
        'transaction.created',
        'transaction.payment_received',
        'transaction.confirming',
        'transaction.completed',
      ])
      // The stage table (docs/integrating/webhooks.md#events): payment_received has hash and token;
      // confirming adds the block; completed has everything.
      const [, received, confirming, completed] = events.map(
        (e) => e.data as Record<string, unknown>,
      )
      expect(received).toMatchObject({
        status: 'processing',
        token_symbol: 'USDC',
        token_amount: '25000000',
        blockchain_network: 'devnet',
        transaction_hash: TX_HASH,
        confirmed_at: null,
      })
      expect(confirming).toMatchObject({
        status: 'confirming',
        block_number: 1234,
        confirmed_at: null,
      })
      expect(completed).toMatchObject({
        status: 'completed',
        block_number: 1234,
        confirmed_at: '2030-01-01T00:00:00.000Z',
      })
      expect(t.server.services.lifecycle.statusOf(tx.id)).toBeNull()
    })

    test('list and stats follow the actors', async () => {
      const tx = await create({ order_id: 'follow' })
      await drive(tx.id, 'completed')
      const list = await (
        await api(t, p.key).get(`/api/transactions/project/${p.id}?status=completed&limit=100`)
      ).json()
      expect(list.transactions.map((x: { id: string }) => x.id)).toContain(tx.id)
      const stats = (await (await api(t, p.key).get('/api/transactions/stats')).json()).stats
      expect(stats.by_status.completed).toBe(list.pagination.total)
      expect(stats.total_volume_usd).toBe(25 * list.pagination.total)
    })

    test('expiry fires at the absolute deadline and not before (docs/decisions/0013-absolute-deadlines.md)', async () => {
      const tx = await create({ expires_in_minutes: 1 })
      const partial = await create({ expires_in_minutes: 1 })
      await drive(partial.id, 'pending')
      await t.server.services.lifecycle.apply(partial.id, {
        type: 'payment.detected',
        txHash: '0xpart',
        amount: '1000',
      })
      clock.advance(59_999)
      t.server.services.scheduler.runDue()
      expect(t.server.services.lifecycle.statusOf(tx.id)).toBe('created')
      clock.advance(1)
      t.server.services.scheduler.runDue()
      const status = async (id: string) =>
        (await (await api(t, p.key).get(`/api/transactions/${id}`)).json()).transaction.status
      for (
        let i = 0;
        i < 200 && ((await status(tx.id)) !== 'expired' || (await status(partial.id)) !== 'failed');
        i++
      )
        await Bun.sleep(10)
      expect(await status(tx.id)).toBe('expired')
      expect(await status(partial.id)).toBe('failed')
      expect((await timeline(partial.id)).timeline.at(-1)).toMatchObject({
        to_status: 'failed',
        cause: 'expiry.reached',
        details: { reason: 'underpaid' },
      })
      expect((await outboxOf(tx.id)).map((e) => e.eventType).at(-1)).toBe('transaction.expired')
      expect((await outboxOf(partial.id)).map((e) => e.eventType).at(-1)).toBe('transaction.failed')
    })

    test('concurrent cancel and payment on one transaction resolve to exactly one outcome', async () => {
      for (let i = 0; i < 10; i++) {
        const tx = await create()
        await drive(tx.id, 'pending')
        const [cancel, pay] = await Promise.all([
          api(t, p.key).post(`/api/transactions/${tx.id}/cancel`, ''),
          t.server.services.lifecycle.apply(tx.id, {
            type: 'payment.detected',
            txHash: `0x${i}`,
            amount: '25000000',
          }),
        ])
        const final = (await (await api(t, p.key).get(`/api/transactions/${tx.id}`)).json())
          .transaction.status
        if (cancel.status === 200) {
          expect(pay.ok).toBe(false)
          expect(final).toBe('cancelled')
        } else {
          expect(cancel.status).toBe(409)
          expect(pay.ok).toBe(true)
          expect(final).toBe('processing')
        }
        const after = (await eventsOf(tx.id)).filter((e) => e.fromStatus === 'pending')
        expect(after).toHaveLength(1)
      }
    })

    test('a second instance applying the same event first leaves the owner unable to apply it twice', async () => {
      const database = t.server.services.database
      const logger = createLogger('silent')
      // Another instance that does not run the actor (its lease is not even taken): it judges on
      // the stored snapshot.
      const other = createTransactionRegistry({
        database,
        repo: createLifecycleRepo(database),
        lease: createInstanceLease({
          repo: createInstanceRepo(database.db),
          clock,
          logger,
          instanceId: 'inst_other',
          leaseMs: 10_000,
        }),
        clock,
        logger,
        scheduler: createScheduler(clock),
        singleInstance: false,
      })
      for (let i = 0; i < 5; i++) {
        const tx = await create()
        await drive(tx.id, 'prepared')
        const [first, second] = await Promise.all([
          other.apply(tx.id, { type: 'customer.confirmed' }),
          t.server.services.lifecycle.apply(tx.id, { type: 'customer.confirmed' }),
        ])
        expect([first.ok, second.ok].filter(Boolean)).toHaveLength(1)
        expect((await eventsOf(tx.id)).filter((e) => e.toStatus === 'pending')).toHaveLength(1)
        // The owner's live actor ends up where the database is.
        for (let j = 0; j < 100 && t.server.services.lifecycle.statusOf(tx.id) !== 'pending'; j++)
          await Bun.sleep(5)
        expect(t.server.services.lifecycle.statusOf(tx.id)).toBe('pending')
      }
    })

    test('an expiry whose commit fails (database away) is retried by the timer, not lost', async () => {
      const database = t.server.services.database
      const logger = createLogger('silent')
      const realRepo = createLifecycleRepo(database)
      let failures = 1
      const flaky = {
        ...realRepo,
        commitTransition: (arg: Parameters<typeof realRepo.commitTransition>[0]) =>
          failures-- > 0
            ? Promise.reject(new Error('connection reset'))
            : realRepo.commitTransition(arg),
      }
      const ownClock = manualClock(clock.now())
      const scheduler = createScheduler(ownClock)
      const lease = createInstanceLease({
        repo: createInstanceRepo(database.db),
        clock: ownClock,
        logger,
        instanceId: 'inst_flaky',
        leaseMs: 10_000,
      })
      await lease.start()
      const registry = createTransactionRegistry({
        database,
        repo: flaky,
        lease,
        clock: ownClock,
        logger,
        scheduler,
        singleInstance: false,
      })
      const service = createTransactionService({
        repo: createTransactionRepo(database, createRollups({ database, clock: ownClock })),
        lifecycle: registry,
        clock: ownClock,
        baseUrl: 'https://localhost',
      })
      const created = await service.create(
        { projectId: p.id, mode: 'test' },
        { amount: 25, expires_in_minutes: 1 },
      )
      if (!created.ok) throw new Error(created.message)
      const id = JSON.parse(created.value.body).transaction.id as string
      const status = async () =>
        (await (await api(t, p.key).get(`/api/transactions/${id}`)).json()).transaction.status
      for (let i = 0; i < 100 && registry.statusOf(id) === null; i++) await Bun.sleep(2)
      expect(registry.statusOf(id)).toBe('created')
      ownClock.advance(60_000)
      scheduler.runDue()
      // The first commit fails: the transaction stays active, and its timer fires again later.
      for (let i = 0; i < 100 && failures === 1; i++) await Bun.sleep(5)
      expect(failures).toBe(0)
      expect(await status()).toBe('created')
      expect(registry.statusOf(id)).toBe('created')
      ownClock.advance(REFIRE_MS)
      scheduler.runDue()
      for (let i = 0; i < 200 && (await status()) !== 'expired'; i++) await Bun.sleep(5)
      expect(await status()).toBe('expired')
      expect(failures).toBe(-1)
      expect(registry.statusOf(id)).toBeNull()
      await registry.stop()
      await lease.stop()
      scheduler.stop()
    })

    test('running actors can be subscribed to, waited for and inspected; they only ever show committed states', async () => {
      const database = t.server.services.database
      const logger = createLogger('silent')
      const ownClock = manualClock(clock.now())
      const scheduler = createScheduler(ownClock)
      const lease = createInstanceLease({
        repo: createInstanceRepo(database.db),
        clock: ownClock,
        logger,
        instanceId: 'inst_inspected',
        leaseMs: 10_000,
      })
      await lease.start()
      const inspected: { type: string; event?: string; value?: unknown }[] = []
      // Commits and what the actor shows, in the order they happen.
      const order: string[] = []
      const realRepo = createLifecycleRepo(database)
      const repo = {
        ...realRepo,
        commitTransition: async (c: Parameters<typeof realRepo.commitTransition>[0]) => {
          const row = await realRepo.commitTransition(c)
          order.push(`committed ${c.patch.status}`)
          return row
        },
      }
      const registry = createTransactionRegistry({
        database,
        repo,
        lease,
        clock: ownClock,
        logger,
        scheduler,
        singleInstance: false,
        inspect: (e) =>
          inspected.push({
            type: e.type,
            event: 'event' in e ? (e.event as { type: string }).type : undefined,
            value:
              e.type === '@xstate.snapshot' ? (e.snapshot as { value?: unknown }).value : undefined,
          }),
      })
      const service = createTransactionService({
        repo: createTransactionRepo(database, createRollups({ database, clock: ownClock })),
        lifecycle: registry,
        clock: ownClock,
        baseUrl: 'https://localhost',
      })
      const created = await service.create({ projectId: p.id, mode: 'test' }, { amount: 25 })
      if (!created.ok) throw new Error(created.message)
      const id = JSON.parse(created.value.body).transaction.id as string
      for (let i = 0; i < 100 && registry.actorOf(id) === null; i++) await Bun.sleep(2)
      const actor = registry.actorOf(id)!
      actor.subscribe((s) => order.push(`actor ${String(s.value)}`))
      const applied = Promise.all(PATH_TO.pending.map((e) => registry.apply(id, e)))
      const pending = await waitFor(actor, (s) => s.value === 'pending', { timeout: 5_000 })
      expect((await applied).every((r) => r.ok)).toBe(true)
      expect(pending.context.quote).toEqual(quote)
      // The database held each state before the actor showed it.
      expect(order).toEqual([
        'committed prepared',
        'actor prepared',
        'committed pending',
        'actor pending',
      ])
      expect(inspected.filter((e) => e.type === '@xstate.event').map((e) => e.event)).toEqual(
        expect.arrayContaining(['token.selected', 'customer.confirmed']),
      )
      expect(inspected.filter((e) => e.type === '@xstate.snapshot').map((e) => e.value)).toEqual(
        expect.arrayContaining(['created', 'prepared', 'pending']),
      )
      // A refused event never reaches the actor.
      const before = inspected.length
      expect(
        (await registry.apply(id, { type: 'payment.included', txHash: '0xnope', blockNumber: 1 }))
          .ok,
      ).toBe(false)
      expect(inspected.slice(before).filter((e) => e.type === '@xstate.event')).toEqual([])
      const cancelled = await registry.apply(id, { type: 'cancel.requested', by: 'merchant' })
      expect(cancelled.ok).toBe(true)
      expect(actor.getSnapshot().status).toBe('done')
      expect(registry.actorOf(id)).toBeNull()
      await registry.stop()
      await lease.stop()
      scheduler.stop()
    })

    test('an event the machine fails on (an action throws) is refused; nothing is persisted and the actor carries on', async () => {
      const tx = await create()
      await drive(tx.id, 'processing')
      const before = await eventsOf(tx.id)
      const [stored] = await t.server.services.database.db
        .select()
        .from(transactionActors)
        .where(eq(transactionActors.transactionId, tx.id))
      // A second transfer whose amount is not a number: recording it throws inside the machine's
      // assign.
      const r = await t.server.services.lifecycle.apply(tx.id, {
        type: 'payment.detected',
        txHash: '0xbad',
        amount: 'not-a-number',
      })
      expect(r.ok).toBe(false)
      if (!r.ok) expect(r.code).toBe('unavailable')
      expect(await eventsOf(tx.id)).toEqual(before)
      const [after] = await t.server.services.database.db
        .select()
        .from(transactionActors)
        .where(eq(transactionActors.transactionId, tx.id))
      expect(after.snapshot).toEqual(stored.snapshot)
      expect((after.snapshot as { status: string }).status).toBe('active')
      expect(t.server.services.lifecycle.statusOf(tx.id)).toBe('processing')
      const included = await t.server.services.lifecycle.apply(tx.id, {
        type: 'payment.included',
        txHash: TX_HASH,
        blockNumber: 1234,
      })
      expect(included.ok).toBe(true)
      expect(t.server.services.lifecycle.statusOf(tx.id)).toBe('confirming')
    })

    test('docs/decisions/0015-confirmations-and-reorgs.md: a reorg taking the payment back after payment_received was sent announces transaction.payment_reversed with the status returned to', async () => {
      for (const status of ['processing', 'confirming'] as const) {
        const tx = await create()
        await drive(tx.id, status)
        const r = await t.server.services.lifecycle.apply(tx.id, {
          type: 'payment.reorged',
          txHash: TX_HASH,
        })
        expect(r.ok).toBe(true)
        const events = await outboxOf(tx.id)
        expect(events.map((e) => e.eventType).at(-1)).toBe('transaction.payment_reversed')
        expect(events.at(-1)!.data).toMatchObject({
          transaction_id: tx.id,
          status: 'pending',
          transaction_hash: null,
          block_number: null,
          token_symbol: 'USDC',
        })
        expect((await timeline(tx.id)).timeline.at(-1)).toMatchObject({
          from_status: status,
          to_status: 'pending',
          cause: 'payment.reorged',
        })
      }
      // A partial payment taken back while still pending announced nothing before, and nothing now.
      const partial = await create()
      await drive(partial.id, 'pending')
      await t.server.services.lifecycle.apply(partial.id, {
        type: 'payment.detected',
        txHash: '0xhalf',
        amount: '1000',
      })
      await t.server.services.lifecycle.apply(partial.id, {
        type: 'payment.reorged',
        txHash: '0xhalf',
      })
      expect((await outboxOf(partial.id)).map((e) => e.eventType)).toEqual(['transaction.created'])
    })

    test('a refused event is a conflict and leaves no trace', async () => {
      const tx = await create()
      const before = await eventsOf(tx.id)
      const r = await t.server.services.lifecycle.apply(tx.id, {
        type: 'payment.included',
        txHash: '0x1',
        blockNumber: 1,
      })
      expect(r.ok).toBe(false)
      if (!r.ok) expect(r.code).toBe('conflict')
      expect(await eventsOf(tx.id)).toEqual(before)
      expect(await outboxOf(tx.id)).toHaveLength(1)
    })
  })
}
