import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { killAllProcesses, spawnServer } from '../helpers/processes.ts'
import {
  cliProject,
  cliWith,
  createTransaction,
  waitUntil,
  type Cli,
} from '../helpers/webhook-cli.ts'
import { startWebhookSink, type Received, type WebhookSink } from '../helpers/webhook-sink.ts'

/**
 * docs/decisions/0032-webhook-delivery-actors.md: webhook deadlines are absolute and persisted. A
 * server SIGKILLed while a delivery waits for its next retry, started again on the same DATA_DIR or
 * database, carries the schedule on: every attempt is made exactly once, none is lost, none is
 * repeated.
 */
const attemptsOf = (got: Received[]) => got.map((r) => Number(r.headers['x-service-attempt']))

for (const backend of backends()) {
  describe(`webhook retries across a SIGKILL [${backend}]`, () => {
    let sink: WebhookSink
    const cleanups: (() => Promise<void> | void)[] = []
    afterAll(async () => {
      await killAllProcesses()
      await sink?.stop()
      for (const c of cleanups.reverse()) await c()
    })

    /**
     * A server on a fresh DATA_DIR (and database), a project with a test key and an always-failing
     * endpoint for transaction.created.
     */
    async function setup(schedule: string, path: string) {
      sink ??= await startWebhookSink()
      const dataDir = await freshDataDir()
      cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
      const pg = backend === 'postgres' ? await freshPostgres() : null
      if (pg) cleanups.push(() => pg.drop())
      const env = {
        DATA_DIR: dataDir,
        PORT: '0',
        HTTP_PORT: '0',
        LOG_LEVEL: 'info',
        WEBHOOK_RETRY_SCHEDULE: schedule,
        ...(pg ? pg.env : {}),
      }
      const server = await spawnServer(env)
      cleanups.push(async () => void (await server.stop()))
      const cli = cliWith(env)
      const project = await cliProject(cli, `Restart ${path}`)
      const ep = await cli.ok(
        'endpoint',
        'create',
        '--project',
        project.id,
        '--mode',
        'test',
        '--url',
        sink.url(path),
        '--events',
        'transaction.created',
      )
      await sink.configure(path, { secret: ep.secret, mode: 'fail' })
      return { env, server, cli, project, endpointId: ep.id as string }
    }

    /** The delivery log's only delivery of the project, through `delivery list` (the CLI). */
    async function onlyDelivery(cli: Cli, projectId: string) {
      const { deliveries } = await cli.ok('delivery', 'list', '--project', projectId)
      expect(deliveries).toHaveLength(1)
      return deliveries[0]
    }

    /**
     * Waits until attempt 1 has been received and committed (status retrying, a next retry time),
     * then SIGKILLs the server.
     */
    async function killDuringRetryWait(s: Awaited<ReturnType<typeof setup>>, path: string) {
      await sink.waitFor(path, (r) => r.length >= 1, 15_000)
      let d: any
      await waitUntil(
        async () => {
          d = await onlyDelivery(s.cli, s.project.id)
          return d.attempts === 1
        },
        15_000,
        () => JSON.stringify(d),
      )
      expect(d).toMatchObject({ status: 'retrying', attempts: 1, endpoint: s.endpointId })
      const due = Date.parse(d.next_retry_at)
      // The kill lands inside the wait for attempt 2 (otherwise this test would prove nothing).
      expect(Date.now()).toBeLessThan(due)
      s.server.kill('SIGKILL')
      expect((await s.server.exited).signal).toBe('SIGKILL')
      expect(attemptsOf(await sink.received(path))).toEqual([1])
      return { delivery: d, due }
    }

    /**
     * After the restart: the delivery ends failed with six attempts, each received exactly once,
     * for one event id.
     */
    async function expectSixAttemptsExactlyOnce(
      cli: Cli,
      projectId: string,
      path: string,
      deliveryId: string,
    ) {
      let shown: any
      await waitUntil(
        async () => {
          shown = await cli.ok('delivery', 'show', '--delivery', deliveryId)
          return shown.status !== 'retrying'
        },
        30_000,
        () => JSON.stringify({ status: shown?.status, attempts: shown?.attempts?.length }),
      )
      const got = await sink.received(path)
      expect(attemptsOf(got)).toEqual([1, 2, 3, 4, 5, 6])
      expect(new Set(got.map((r) => r.headers['x-service-event-id'])).size).toBe(1)
      expect(got.every((r) => r.verified)).toBe(true)
      // (No expect.any(Array) inside toMatchObject: Bun 1.4.5 replaces the matched array with {}.)
      expect({
        id: shown.id,
        status: shown.status,
        retry_count: shown.retry_count,
        next_retry_at: shown.next_retry_at,
      }).toEqual({ id: deliveryId, status: 'failed', retry_count: 5, next_retry_at: null })
      expect(shown.attempts.map((a: any) => [a.number, a.trigger, a.status_code])).toEqual(
        [1, 2, 3, 4, 5, 6].map((n) => [n, 'scheduled', 500]),
      )
      expect(shown.event_id).toBe(got[0].headers['x-service-event-id'])
      const listed = await onlyDelivery(cli, projectId)
      expect(listed).toMatchObject({
        id: deliveryId,
        status: 'failed',
        attempts: 6,
        next_retry_at: null,
      })
      return shown
    }

    test('SIGKILL during a retry wait: after the restart the schedule goes on, attempt 2 at its original time, 6 attempts in all, none doubled', async () => {
      const path = `/restart-wait-${backend}`
      const s = await setup('6s,1s,1s,1s,1s', path)
      await createTransaction(s.server.fetch, s.project.key)
      const { delivery, due } = await killDuringRetryWait(s, path)

      const server = await spawnServer(s.env)
      cleanups.push(async () => void (await server.stop()))
      const shown = await expectSixAttemptsExactlyOnce(s.cli, s.project.id, path, delivery.id)
      // Attempt 2 kept the deadline stored before the kill and was not made before it.
      expect(Date.parse(shown.attempts[1].scheduled_for)).toBe(due)
      expect(Date.parse(shown.attempts[1].started_at)).toBeGreaterThanOrEqual(due)
      const got = await sink.received(path)
      expect(got[1].at).toBeGreaterThanOrEqual(due)
    })

    test('down across the due time of attempt 2: attempt 2 is made right after the restart, once, and the schedule continues from it', async () => {
      const path = `/restart-down-${backend}`
      const s = await setup('2s,2s,2s,2s,2s', path)
      await createTransaction(s.server.fetch, s.project.key)
      const { delivery, due } = await killDuringRetryWait(s, path)

      // The service stays down past the due time: that passing time is the point of this test.
      await new Promise((r) => setTimeout(r, Math.max(0, due + 1500 - Date.now())))
      expect(attemptsOf(await sink.received(path))).toEqual([1])
      const restartedAt = Date.now()
      const server = await spawnServer(s.env)
      cleanups.push(async () => void (await server.stop()))
      const listeningAt = Date.now()
      const [second] = await sink
        .waitFor(path, (r) => r.length >= 2, 10_000)
        .then((r) => r.slice(1))
      // Right after the restart: the overdue attempt runs at start-up, not a whole delay later.
      expect(second.at).toBeGreaterThanOrEqual(restartedAt)
      expect(second.at - listeningAt).toBeLessThan(1500)

      const shown = await expectSixAttemptsExactlyOnce(s.cli, s.project.id, path, delivery.id)
      const a = shown.attempts.map((x: any) => ({
        scheduledFor: Date.parse(x.scheduled_for),
        startedAt: Date.parse(x.started_at),
      }))
      // Not lost: attempt 2 still records the deadline it missed, and ran after the downtime.
      expect(a[1].scheduledFor).toBe(due)
      expect(a[1].startedAt).toBeGreaterThanOrEqual(due + 1500)
      // The schedule continues from attempt 2's failure: each later attempt 2 s after the one
      // before.
      for (let i = 2; i < 6; i++) {
        expect(a[i].scheduledFor - a[i - 1].startedAt).toBeGreaterThanOrEqual(2000)
        expect(a[i].startedAt).toBeGreaterThanOrEqual(a[i].scheduledFor)
      }
    })
  })
}
