import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { killAllProcesses, spawnServer, type ServerProcess } from '../helpers/processes.ts'
import {
  cliProject,
  cliWith,
  createTransaction,
  waitUntil,
  type Cli,
} from '../helpers/webhook-cli.ts'
import { startWebhookSink, type Received, type WebhookSink } from '../helpers/webhook-sink.ts'

/**
 * docs/decisions/0032-webhook-delivery-actors.md, two instances on one PostgreSQL: both wake on
 * every outbox event and both look for due retries, yet each attempt of each delivery is made by
 * one of them, once. PGlite is one instance by design, so this runs only with DATABASE_URL.
 */
if (!process.env.DATABASE_URL) {
  test.skip('webhook deliveries with two instances need PostgreSQL: set DATABASE_URL (PGlite is single-instance by design)', () => {})
} else {
  describe('webhook deliveries with two instances on one PostgreSQL', () => {
    let sink: WebhookSink
    const servers: ServerProcess[] = []
    let cli: Cli
    const cleanups: (() => Promise<void> | void)[] = []
    beforeAll(async () => {
      sink = await startWebhookSink()
      const pg = await freshPostgres()
      cleanups.push(() => pg.drop())
      for (let i = 0; i < 2; i++) {
        const dataDir = await freshDataDir()
        cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
        // Same database, same SECRET_KEY (pg.env); a short schedule so six attempts take seconds.
        servers.push(
          await spawnServer({
            DATA_DIR: dataDir,
            PORT: '0',
            HTTP_PORT: '0',
            LOG_LEVEL: 'info',
            WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s',
            ...pg.env,
          }),
        )
      }
      cli = cliWith({ ...pg.env, DATA_DIR: '/nonexistent' })
    })
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()))
      await killAllProcesses()
      await sink?.stop()
      for (const c of cleanups.reverse()) await c()
    })

    test('20 events to an always-failing endpoint: every (event, attempt) pair arrives exactly once, every delivery ends with 6 attempts', async () => {
      const path = '/instances-fail'
      const project = await cliProject(cli, 'Two instances')
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
      const n = 20
      // Half the events are committed through each instance.
      await Promise.all(
        Array.from({ length: n }, (_, i) =>
          createTransaction(servers[i % 2].fetch, project.key, { amount: 10 + i }),
        ),
      )

      let deliveries: any[] = []
      await waitUntil(
        async () => {
          deliveries = (await cli.ok('delivery', 'list', '--project', project.id, '--limit', '100'))
            .deliveries
          return deliveries.length === n && deliveries.every((d) => d.status === 'failed')
        },
        45_000,
        () => JSON.stringify(deliveries.map((d) => [d.status, d.attempts])),
        250,
      )
      expect(deliveries.map((d) => d.attempts)).toEqual(Array(n).fill(6))

      const got = await sink.received(path)
      expect(got.every((r) => r.verified)).toBe(true)
      const pairs = got.map(
        (r) => `${r.headers['x-service-event-id']}#${r.headers['x-service-attempt']}`,
      )
      const counts = new Map<string, number>()
      for (const p of pairs) counts.set(p, (counts.get(p) ?? 0) + 1)
      expect([...counts].filter(([, c]) => c !== 1)).toEqual([])
      const eventIds = new Set(deliveries.map((d) => d.event_id))
      expect(eventIds.size).toBe(n)
      const expected = [...eventIds]
        .flatMap((e) => [1, 2, 3, 4, 5, 6].map((a) => `${e}#${a}`))
        .sort()
      expect([...counts.keys()].sort()).toEqual(expected)
      expect(got).toHaveLength(n * 6)

      // The log holds one row per attempt: no attempt was recorded twice by the two instances.
      for (const d of deliveries) {
        const detail = await cli.ok('delivery', 'show', '--delivery', d.id)
        expect(
          detail.attempts.map((a: { number: number; trigger: string }) => [a.number, a.trigger]),
        ).toEqual([1, 2, 3, 4, 5, 6].map((k) => [k, 'scheduled']))
      }
    })

    test('a fresh event created through one instance is delivered once, not once per instance', async () => {
      const path = '/instances-ok'
      const project = await cliProject(cli, 'Two instances, one event')
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
      await sink.configure(path, { secret: ep.secret, mode: 'ok' })
      const id = await createTransaction(servers[1].fetch, project.key)
      const [got] = await sink.waitFor(path, (r) => r.length >= 1, 15_000)
      expect(got.verified).toBe(true)
      expect(JSON.parse(got.body).data.transaction_id).toBe(id)
      let deliveries: any[] = []
      await waitUntil(
        async () => {
          deliveries = (await cli.ok('delivery', 'list', '--project', project.id)).deliveries
          return deliveries.length > 0 && deliveries.every((d) => d.status === 'success')
        },
        15_000,
        () => JSON.stringify(deliveries),
      )
      expect(deliveries.map((d) => [d.transaction_id, d.attempts])).toEqual([[id, 1]])
      // The other instance also heard the NOTIFY and polls for due work; give it a pass to show it
      // sends nothing more.
      const settleUntil = Date.now() + 1500
      await waitUntil(
        async () => (await sink.received(path)).length > 1 || Date.now() > settleUntil,
        5_000,
      )
      expect(
        (await sink.received(path)).map((r: Received) => r.headers['x-service-attempt']),
      ).toEqual(['1'])
    })
  })
}
