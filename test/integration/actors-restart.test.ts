import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { waitFor } from 'xstate'
import { loadConfig } from '../../src/config.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { startServer, type RunningServer } from '../../src/server/start.ts'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import { killAllProcesses, NO_NETWORKS, spawnServer } from '../helpers/processes.ts'
import { cliProject, cliWith, createTransaction, waitUntil } from '../helpers/webhook-cli.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'

/**
 * docs/decisions/0013-absolute-deadlines.md: actors carry their own timers across a SIGKILL. A
 * server process is killed hard while actors wait; the same DATA_DIR (and database) is then
 * restored in this process on a virtual clock, so every deadline can be checked to the millisecond:
 * a restored actor fires at its original deadline and not a millisecond before, an overdue one at
 * once.
 */
const MIN = 60_000
const DEFAULT_OFFSETS = [1 * MIN, 5 * MIN, 30 * MIN, 120 * MIN, 480 * MIN]

for (const backend of backends()) {
  describe(`actors restored after a SIGKILL, on a virtual clock [${backend}]`, () => {
    const cleanups: (() => Promise<void> | void)[] = []
    let sink: WebhookSink | null = null
    afterAll(async () => {
      await killAllProcesses()
      await sink?.stop()
      for (const c of cleanups.reverse()) await c()
    })

    /**
     * A server process on a fresh DATA_DIR (and database), with a project and test key made through
     * the CLI.
     */
    async function processServer(env: Record<string, string> = {}) {
      const dataDir = await freshDataDir()
      cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
      const pg = backend === 'postgres' ? await freshPostgres() : null
      if (pg) cleanups.push(() => pg.drop())
      const all = {
        DATA_DIR: dataDir,
        PORT: '0',
        HTTP_PORT: '0',
        LOG_LEVEL: 'info',
        ...(pg ? pg.env : {}),
        ...env,
      }
      const server = await spawnServer(all)
      const cli = cliWith(all)
      const project = await cliProject(cli, 'Restart on a virtual clock')
      return { env: all, server, cli, project }
    }

    /** The same DATA_DIR and database restored in this process, on a clock the test moves. */
    async function restoreInProcess(env: Record<string, string>, startAt: number) {
      const clock = manualClock(startAt)
      const server: RunningServer = await startServer(
        loadConfig({ NETWORKS_CONFIG: NO_NETWORKS, ...env, LOG_LEVEL: 'silent' }),
        { clock, logger: createLogger('silent') },
      )
      cleanups.push(() => server.stop())
      return { clock, server, services: server.services }
    }

    test('a transaction actor restored after SIGKILL expires at its original deadline, not a millisecond before; an overdue one at once', async () => {
      const p = await processServer()
      const key = p.project.key
      const waiting = await createTransaction(p.server.fetch, key, {
        amount: 25,
        expires_in_minutes: 30,
      })
      const overdue = await createTransaction(p.server.fetch, key, {
        amount: 25,
        expires_in_minutes: 1,
      })
      for (const e of PATH_TO.pending)
        await p.cli.ok('transaction', 'event', '--id', waiting, '--event', JSON.stringify(e))
      const read = async (fetchFn: typeof p.server.fetch, id: string) =>
        (
          await (
            await fetchFn(`/api/transactions/${id}`, {
              headers: { authorization: `Bearer ${key}` },
            })
          ).json()
        ).transaction
      const deadline = Date.parse((await read(p.server.fetch, waiting)).expires_at)
      const overdueDeadline = Date.parse((await read(p.server.fetch, overdue)).expires_at)

      p.server.kill('SIGKILL')
      expect((await p.server.exited).signal).toBe('SIGKILL')

      // Two minutes pass while the server is down: one deadline is now behind, the other 28 minutes
      // ahead.
      const r = await restoreInProcess(p.env, overdueDeadline + MIN)
      const api = async (id: string) =>
        await r.services.transactions.get({ projectId: p.project.id, mode: 'test' }, id)
      const status = async (id: string) => {
        const t = await api(id)
        return t.ok ? t.value.status : null
      }
      await waitUntil(async () => (await status(overdue)) === 'expired', 10_000)
      const [expiry] = (
        (await r.services.transactions.timeline(
          { projectId: p.project.id, mode: 'test' },
          overdue,
        )) as any
      ).value.slice(-1)
      expect(expiry).toMatchObject({
        from_status: 'created',
        to_status: 'expired',
        cause: 'expiry.reached',
      })

      // The waiting one runs as an actor again, in its status, with its original deadline.
      const actor = r.services.lifecycle.actorOf(waiting)!
      expect(actor).not.toBeNull()
      expect(actor.getSnapshot().value).toBe('pending')
      expect(actor.getSnapshot().context.expiresAt).toBe(deadline)
      r.clock.set(deadline - 1)
      r.services.scheduler.runDue()
      expect(r.services.lifecycle.statusOf(waiting)).toBe('pending')
      expect(await status(waiting)).toBe('pending')

      r.clock.set(deadline)
      r.services.scheduler.runDue()
      const final = await waitFor(actor, (s) => s.status === 'done', { timeout: 10_000 })
      expect(final.value).toBe('expired')
      expect(await status(waiting)).toBe('expired')
      const timeline = (
        (await r.services.transactions.timeline(
          { projectId: p.project.id, mode: 'test' },
          waiting,
        )) as any
      ).value
      expect(timeline.at(-1)).toMatchObject({
        from_status: 'pending',
        to_status: 'expired',
        cause: 'expiry.reached',
        details: { at: deadline },
        at: new Date(deadline).toISOString(),
      })
      expect(r.services.lifecycle.statusOf(waiting)).toBeNull()
    })

    test('a delivery SIGKILLed mid-backoff continues with exactly the remaining attempts, each at its due time', async () => {
      sink ??= await startWebhookSink()
      const path = `/actors-restart-${backend}`
      const p = await processServer()
      const ep = await p.cli.ok(
        'endpoint',
        'create',
        '--project',
        p.project.id,
        '--mode',
        'test',
        '--url',
        sink.url(path),
        '--events',
        'transaction.created',
      )
      await sink.configure(path, { secret: ep.secret, mode: 'fail' })
      await createTransaction(p.server.fetch, p.project.key)
      // Attempt 1 fails on the default schedule (docs/decisions/0019-retry-schedule.md): the next
      // one is due a minute after it.
      let listed: any
      await waitUntil(
        async () => {
          listed = (await p.cli.ok('delivery', 'list', '--project', p.project.id)).deliveries[0]
          return listed?.attempts === 1
        },
        15_000,
        () => JSON.stringify(listed),
      )
      const due2 = Date.parse(listed.next_retry_at)
      p.server.kill('SIGKILL')
      await p.server.exited
      expect((await sink.received(path)).length).toBe(1)

      const r = await restoreInProcess(p.env, due2 - 30_000)
      const attempts = async () =>
        (await sink!.received(path)).map((x) => ({
          n: Number(x.headers['x-service-attempt']),
          event: x.headers['x-service-event-id'],
        }))
      await r.services.dispatcher.runOnce()
      expect(r.services.deliveries.runningIds()).toEqual([listed.id])
      r.clock.set(due2 - 1)
      await r.services.dispatcher.runOnce()
      expect((await attempts()).map((a) => a.n)).toEqual([1])

      let due = due2
      for (const [i, offset] of [...DEFAULT_OFFSETS.slice(1), 0].entries()) {
        r.clock.set(due)
        await r.services.dispatcher.runOnce()
        expect((await attempts()).map((a) => a.n)).toEqual([1, 2, 3, 4, 5, 6].slice(0, i + 2))
        if (offset === 0) break
        // Not a millisecond early.
        r.clock.set(due + offset - 1)
        await r.services.dispatcher.runOnce()
        expect((await attempts()).length).toBe(i + 2)
        due += offset
      }
      const got = await attempts()
      expect(new Set(got.map((a) => a.event)).size).toBe(1)
      const shown = await r.services.webhooks.getDelivery(listed.id)
      if (!shown.ok) throw new Error(shown.message)
      expect(shown.value.delivery).toMatchObject({
        status: 'failed',
        attempts: 6,
        failedBecause: 'exhausted',
        nextAttemptAt: null,
      })
      const a = shown.value.attempts
      expect(a.map((x) => x.number)).toEqual([1, 2, 3, 4, 5, 6])
      expect(a[1].scheduledFor!.getTime()).toBe(due2)
      for (let i = 1; i < 6; i++)
        expect(a[i].startedAt.getTime()).toBe(a[i].scheduledFor!.getTime())
      for (let i = 2; i < 6; i++)
        expect(a[i].scheduledFor!.getTime() - a[i - 1].startedAt.getTime()).toBe(
          DEFAULT_OFFSETS[i - 1],
        )
      expect(r.services.deliveries.runningIds()).toEqual([])
    })
  })
}
