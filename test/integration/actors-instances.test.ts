import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import postgres from 'postgres'
import type { TxEvent } from '../../machines/transaction.machine.ts'
import { loadConfig } from '../../src/config.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { startServer, type RunningServer } from '../../src/server/start.ts'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import {
  killAllProcesses,
  NO_NETWORKS,
  spawnServer,
  type ServerProcess,
} from '../helpers/processes.ts'
import {
  cliProject,
  cliWith,
  createTransaction,
  waitUntil,
  type Cli,
} from '../helpers/webhook-cli.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'

/**
 * docs/decisions/0029-several-instances-leases-and-claims.md, several instances on one PostgreSQL:
 * a transaction's actor runs on one instance at a time (the one recorded as its owner while its
 * lease lives), events reaching any instance are applied exactly once, a gracefully stopped
 * instance hands its actors over, and the same instance restarted on its DATA_DIR does not take
 * them back while another holds them. Then a webhook backlog that outlasts a claim (ACTOR_LEASE_MS)
 * is sent once per attempt. PGlite is one instance by design: the in-process test runs only with
 * DATABASE_URL; the backlog test runs on both (one process on PGlite).
 */
const describeIfPg = process.env.DATABASE_URL ? describe : describe.skip

const LEASE_MS = '1000'
const confirmed: TxEvent = { type: 'customer.confirmed' }
const [tokenSelected] = PATH_TO.prepared

describeIfPg('transaction actors on two in-process instances sharing one PostgreSQL', () => {
  const cleanups: (() => Promise<void> | void)[] = []
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c()
  })

  test("two instances never run one transaction's actor at the same time", async () => {
    const pg = await freshPostgres()
    cleanups.push(() => pg.drop())
    const sql = postgres(pg.url, { max: 1, onnotice: () => {} })
    cleanups.push(() => sql.end())
    const dirA = await freshDataDir()
    const dirB = await freshDataDir()
    cleanups.push(
      () => rmSync(dirA, { recursive: true, force: true }),
      () => rmSync(dirB, { recursive: true, force: true }),
    )

    /**
     * Warnings and errors of every instance, to show when something fails and to check no error was
     * logged.
     */
    const logs: string[] = []
    const servers: { name: string; s: RunningServer }[] = []
    async function start(name: string, dataDir: string) {
      const config = loadConfig({
        DATA_DIR: dataDir,
        PORT: '0',
        HTTP_PORT: '0',
        LOG_LEVEL: 'silent',
        NETWORKS_CONFIG: NO_NETWORKS,
        ACTOR_LEASE_MS: LEASE_MS,
        ...pg.env,
      })
      const s = await startServer(config, {
        logger: createLogger('warn', (line) => logs.push(`${name} ${line}`)),
      })
      // Stopped before the database is dropped (cleanups run in reverse); stop() is idempotent.
      cleanups.push(() => s.stop())
      servers.push({ name, s })
      return s
    }
    const A = await start('A', dirA)
    const B = await start('B', dirB)
    const idA = A.services.lease.instanceId
    expect(B.services.lease.instanceId).not.toBe(idA)

    // The sampler: every couple of milliseconds, no transaction may run on two instances.
    /**
     * Each transaction seen running on two instances at once: when first, where, and in how many
     * samples.
     */
    const overlaps = new Map<string, { first: string; samples: number }>()
    let samples = 0
    let busySamples = 0
    const sampler = setInterval(() => {
      samples++
      const seen = new Map<string, string>()
      let nonEmpty = 0
      for (const { name, s } of servers) {
        const ids = s.services.lifecycle.runningIds()
        if (ids.length > 0) nonEmpty++
        for (const id of ids) {
          const other = seen.get(id)
          if (other !== undefined) {
            const o = overlaps.get(id) ?? {
              first: `sample ${samples} (${new Date().toISOString()}): on ${other} and ${name}`,
              samples: 0,
            }
            o.samples++
            overlaps.set(id, o)
          } else seen.set(id, name)
        }
      }
      if (nonEmpty >= 2) busySamples++
    }, 2)
    cleanups.push(() => clearInterval(sampler))

    const context = () =>
      `overlaps: ${JSON.stringify([...overlaps].slice(0, 20))}\nlogs:\n${logs.slice(-40).join('\n')}`

    // A project and a test key, through A's services.
    const p = await A.services.projects.create('Actors on two instances')
    if (!p.ok) throw new Error(p.message)
    const limits = await A.services.projects.setLimits(p.value.id, {
      minute: 100_000,
      hour: 1_000_000,
      day: 10_000_000,
    })
    if (!limits.ok) throw new Error(limits.message)
    const k = await A.services.keys.create({
      projectId: p.value.id,
      mode: 'test',
      name: 'test key',
    })
    if (!k.ok) throw new Error(k.message)
    const caller = { projectId: p.value.id, mode: 'test' as const }

    async function create(s: RunningServer): Promise<string> {
      const r = await s.services.transactions.create(caller, { amount: 25 })
      if (!r.ok) throw new Error(r.message)
      return JSON.parse(r.value.body).transaction.id
    }
    async function dbStatus(id: string): Promise<string> {
      const r = await B.services.transactions.get(caller, id)
      if (!r.ok) throw new Error(r.message)
      return r.value.status
    }
    const N = 20
    const createdBy = new Map<string, RunningServer>()
    await Promise.all(
      [A, B].flatMap((s) =>
        Array.from({ length: N }, async () => createdBy.set(await create(s), s)),
      ),
    )
    const idsA = [...createdBy].filter(([, s]) => s === A).map(([id]) => id)
    const idsB = [...createdBy].filter(([, s]) => s === B).map(([id]) => id)
    const all = [...idsA, ...idsB]
    expect(idsA).toHaveLength(N)
    expect(idsB).toHaveLength(N)
    // Each actor starts on the instance that created the transaction.
    await waitUntil(
      () =>
        idsA.every((id) => A.services.lifecycle.statusOf(id) === 'created') &&
        idsB.every((id) => B.services.lifecycle.statusOf(id) === 'created'),
      10_000,
      context,
    )

    // (a) Events to A's transactions through B and to B's through A, all at once. Half of them
    // are then confirmed by both instances at the same moment: exactly one of the two applies,
    // the other is refused (a conflict) and changes nothing.
    const toPending = new Set(all.filter((_, i) => i % 2 === 0))
    const refused: string[] = []
    const confirmOutcomes = new Map<string, string[]>()
    await Promise.all(
      all.map(async (id) => {
        const owner = createdBy.get(id)!
        const other = owner === A ? B : A
        const selected = await other.services.lifecycle.apply(id, tokenSelected)
        if (!selected.ok) refused.push(`${id} token.selected: ${selected.message}`)
        if (!toPending.has(id)) return
        const both = await Promise.all([
          other.services.lifecycle.apply(id, confirmed),
          owner.services.lifecycle.apply(id, confirmed),
        ])
        confirmOutcomes.set(
          id,
          both.map((r) => (r.ok ? 'ok' : r.code)),
        )
      }),
    )
    expect(refused).toEqual([])
    expect(confirmOutcomes.size).toBe(toPending.size)
    expect([...confirmOutcomes].filter(([, r]) => [...r].sort().join() !== 'conflict,ok')).toEqual(
      [],
    )

    // Every actor is back in step on its creator, in the status the database holds, and runs
    // nowhere else.
    const expected = (id: string) => (toPending.has(id) ? 'pending' : 'prepared')
    let stale: string[] = []
    await waitUntil(
      async () => {
        stale = []
        for (const id of all) {
          const owner = createdBy.get(id)!
          const other = owner === A ? B : A
          const db = await dbStatus(id)
          if (
            db !== expected(id) ||
            owner.services.lifecycle.statusOf(id) !== db ||
            other.services.lifecycle.statusOf(id) !== null
          ) {
            stale.push(
              `${id}: db ${db}, creator ${owner.services.lifecycle.statusOf(id)}, other ${other.services.lifecycle.statusOf(id)}`,
            )
          }
        }
        return stale.length === 0
      },
      10_000,
      () => `${stale.join('\n')}\n${context()}`,
      50,
    )
    const owners = async () =>
      new Map(
        (
          (await sql`select transaction_id, owner from transaction_actors`) as unknown as {
            transaction_id: string
            owner: string | null
          }[]
        ).map((r) => [r.transaction_id, r.owner]),
      )
    const recorded = await owners()
    expect(
      all.filter((id) => recorded.get(id) !== createdBy.get(id)!.services.lease.instanceId),
    ).toEqual([])

    // (b) A stops gracefully: its actors are handed over, and B runs every active transaction.
    await A.stop()
    expect(A.services.lifecycle.runningIds()).toEqual([])
    await waitUntil(
      () => all.every((id) => B.services.lifecycle.statusOf(id) !== null),
      10_000,
      () =>
        `B does not run: ${all.filter((id) => B.services.lifecycle.statusOf(id) === null).join(', ')}\n${context()}`,
    )
    for (const id of all)
      expect({ id, status: B.services.lifecycle.statusOf(id) as string | null }).toEqual({
        id,
        status: await dbStatus(id),
      })
    const cancelledId = idsA.find((id) => toPending.has(id))!
    const cancelled = await B.services.transactions.cancel(caller, cancelledId)
    if (!cancelled.ok) throw new Error(`B could not cancel ${cancelledId}: ${cancelled.message}`)
    expect(cancelled.value.status).toBe('cancelled')
    expect(await dbStatus(cancelledId)).toBe('cancelled')
    // A final transaction's actor stops.
    expect(B.services.lifecycle.statusOf(cancelledId)).toBeNull()
    const active = all.filter((id) => id !== cancelledId)

    // (c) A again, on its DATA_DIR: the same instance id. Its old actors are B's now, so it runs
    // none of them.
    const A2 = await start('A2', dirA)
    expect(A2.services.lease.instanceId).toBe(idA)
    expect(A2.services.lifecycle.runningIds()).toEqual([])
    const fresh = await Promise.all(Array.from({ length: 5 }, () => create(A2)))
    await waitUntil(
      () => fresh.every((id) => A2.services.lifecycle.statusOf(id) === 'created'),
      10_000,
      context,
    )
    // Through B, to one of A2's: its actor on A2 follows.
    const remote = await B.services.lifecycle.apply(fresh[0], tokenSelected)
    if (!remote.ok) throw new Error(remote.message)
    await waitUntil(() => A2.services.lifecycle.statusOf(fresh[0]) === 'prepared', 10_000, context)
    // Let A2's lease be renewed (each renewal is followed by a pass claiming free actors) at least
    // three times.
    const leaseOf = async () =>
      (
        (await sql`select lease_until from instances where id = ${idA}`) as unknown as {
          lease_until: Date
        }[]
      )[0]?.lease_until.getTime() ?? 0
    const renewals = new Set<number>([await leaseOf()])
    await waitUntil(
      async () => renewals.add(await leaseOf()).size > 3,
      10_000,
      () => `A2 lease renewals seen: ${renewals.size}`,
      50,
    )
    expect(A2.services.lifecycle.runningIds().sort()).toEqual([...fresh].sort())
    expect(B.services.lifecycle.runningIds().sort()).toEqual([...active].sort())
    for (const id of fresh) expect(B.services.lifecycle.statusOf(id)).toBeNull()
    const finalOwners = await owners()
    expect(active.filter((id) => finalOwners.get(id) !== B.services.lease.instanceId)).toEqual([])
    expect(fresh.filter((id) => finalOwners.get(id) !== idA)).toEqual([])

    clearInterval(sampler)
    expect([...overlaps]).toEqual([])
    // The sampler did watch two instances running actors at once (else it showed nothing).
    expect(busySamples).toBeGreaterThan(50)

    // Every event applied exactly once: one timeline entry per transition, one outbox event per
    // status change.
    const timeline = async (id: string) => {
      const t = await B.services.transactions.timeline(caller, id)
      if (!t.ok) throw new Error(t.message)
      return t.value.map((e) => `${e.from_status ?? '-'}>${e.to_status} ${e.cause}`)
    }
    for (const id of all) {
      const want = ['->created transaction.created', 'created>prepared token.selected']
      if (toPending.has(id)) want.push('prepared>pending customer.confirmed')
      if (id === cancelledId) want.push('pending>cancelled cancel.requested')
      expect({ id, timeline: await timeline(id) }).toEqual({ id, timeline: want })
    }
    expect(await timeline(fresh[0])).toEqual([
      '->created transaction.created',
      'created>prepared token.selected',
    ])
    for (const id of fresh.slice(1))
      expect(await timeline(id)).toEqual(['->created transaction.created'])
    // The outbox holds exactly the webhook events of those transitions: one transaction.created
    // each, one transaction.cancelled.
    const outbox =
      (await sql`select transaction_id, event_type from outbox order by transaction_id, event_type`) as unknown as {
        transaction_id: string
        event_type: string
      }[]
    const wantOutbox = [...all, ...fresh]
      .map((id) => `${id} transaction.created`)
      .concat(`${cancelledId} transaction.cancelled`)
    expect(outbox.map((o) => `${o.transaction_id} ${o.event_type}`).sort()).toEqual(
      wantOutbox.sort(),
    )
    expect(logs.filter((l) => l.includes('"level":"error"'))).toEqual([])
  }, 90_000)

  test("the instance running an actor judges an event on the committed state, not on a copy that has not heard of another instance's commit yet", async () => {
    const pg = await freshPostgres()
    cleanups.push(() => pg.drop())
    const servers = await Promise.all(
      [await freshDataDir(), await freshDataDir()].map(async (dir) => {
        cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
        const s = await startServer(
          loadConfig({
            DATA_DIR: dir,
            PORT: '0',
            HTTP_PORT: '0',
            LOG_LEVEL: 'silent',
            NETWORKS_CONFIG: NO_NETWORKS,
            ACTOR_LEASE_MS: LEASE_MS,
            ...pg.env,
          }),
          { logger: createLogger('silent') },
        )
        cleanups.push(() => s.stop())
        return s
      }),
    )
    const [owner, other] = servers
    const p = await owner.services.projects.create('Stale copies')
    if (!p.ok) throw new Error(p.message)
    const caller = { projectId: p.value.id, mode: 'test' as const }
    for (let i = 0; i < 10; i++) {
      const r = await owner.services.transactions.create(caller, { amount: 25 })
      if (!r.ok) throw new Error(r.message)
      const id = JSON.parse(r.value.body).transaction.id as string
      await waitUntil(() => owner.services.lifecycle.statusOf(id) === 'created', 5_000)
      // The other instance commits token.selected; the owner is asked for the next step before its
      // NOTIFY may have arrived.
      expect((await other.services.lifecycle.apply(id, tokenSelected)).ok).toBe(true)
      const next = await owner.services.lifecycle.apply(id, confirmed)
      expect({ id, next: next.ok ? 'ok' : next.message }).toEqual({ id, next: 'ok' })
      expect(owner.services.lifecycle.statusOf(id)).toBe('pending')
    }
  }, 60_000)
})

/**
 * docs/decisions/0032-webhook-delivery-actors.md with
 * docs/decisions/0029-several-instances-leases-and-claims.md's claims: a claim lasts as long as the
 * instance's lease, so deliveries queued behind the per-endpoint limit for longer than a lease are
 * neither claimed nor sent by another instance meanwhile.
 */
async function backlogOnce(o: {
  cli: Cli
  sink: WebhookSink
  servers: ServerProcess[]
  path: string
  n: number
  delayMs: number
  leaseMs: string
}) {
  const { cli, sink, servers, path, n } = o
  const project = await cliProject(cli, `Backlog ${path}`)
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
  await sink.configure(path, { secret: ep.secret, mode: 'slow', delayMs: o.delayMs })

  // Quickly, through the first instance's API: ten requests at a time.
  const ids: string[] = []
  for (let i = 0; i < n; i += 10) {
    ids.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(10, n - i) }, (_, j) =>
          createTransaction(servers[0].fetch, project.key, { amount: 10 + i + j }),
        ),
      )),
    )
  }
  expect(new Set(ids).size).toBe(n)

  await sink.waitFor(path, (r) => r.length >= n, 60_000)
  const listAll = async () => {
    const out: any[] = []
    for (;;) {
      const page = (
        await cli.ok(
          'delivery',
          'list',
          '--project',
          project.id,
          '--limit',
          '100',
          ...(out.length ? ['--before', out.at(-1).id] : []),
        )
      ).deliveries
      out.push(...page)
      if (page.length < 100) return out
    }
  }
  let deliveries: any[] = []
  await waitUntil(
    async () => {
      deliveries = await listAll()
      return deliveries.length === n && deliveries.every((d) => d.status === 'success')
    },
    30_000,
    () =>
      `${deliveries.length} listed: ${JSON.stringify(countBy(deliveries.map((d) => d.status)))}`,
    250,
  )
  expect(deliveries.map((d) => d.attempts)).toEqual(Array(n).fill(1))

  const got = await sink.received(path)
  // Deliveries did wait longer than a claim between being made (claimed by fan-out) and being sent,
  // else this shows nothing about claims.
  const madeAt = new Map(deliveries.map((d) => [d.event_id as string, Date.parse(d.created_at)]))
  const longestWait = Math.max(
    ...got.map((r) => r.at - (madeAt.get(r.headers['x-service-event-id']) ?? r.at)),
  )
  expect(longestWait).toBeGreaterThan(Number(o.leaseMs))
  expect(got.filter((r) => !r.verified)).toEqual([])
  const counts = new Map<string, number>()
  for (const r of got) {
    const pair = `${r.headers['x-service-event-id']}#${r.headers['x-service-attempt']}`
    counts.set(pair, (counts.get(pair) ?? 0) + 1)
  }
  expect([...counts].filter(([, c]) => c !== 1)).toEqual([])
  expect(got.map((r) => r.headers['x-service-attempt']).filter((a) => a !== '1')).toEqual([])
  expect(got).toHaveLength(n)
  // One request per delivery in the log, each for one of the transactions created.
  expect(new Set(got.map((r) => r.headers['x-service-event-id']))).toEqual(
    new Set(deliveries.map((d) => d.event_id)),
  )
  expect(got.map((r) => JSON.parse(r.body).data.transaction_id).sort()).toEqual([...ids].sort())
  // No instance lost a claim it was still working on.
  for (const s of servers)
    expect(
      s
        .stderr()
        .split('\n')
        .filter((l) => /not recorded|lease lost|lease not renewed/.test(l)),
    ).toEqual([])
}

/**
 * The backlog runs under a lease of its own, longer than the other cases' one second: its
 * instances must keep their leases all along (it fails on a lost one), and with a one-second
 * lease a renewal starved for 667 ms on a busy machine (CI runs test files side by side) counts as
 * lost. The endpoint answers in 2 s and takes 16 requests at a time, so 100 deliveries drain at
 * 8 a second: the last ones made wait well past the lease (the test checks that they do).
 */
const BACKLOG = { n: 100, delayMs: 2000, leaseMs: '3000' }

/** Two server processes on one PostgreSQL (each with its own DATA_DIR), one on PGlite. */
for (const backend of backends()) {
  const count = backend === 'postgres' ? 2 : 1
  describe(`a webhook backlog longer than a claim, ${count} server process(es) [${backend}]`, () => {
    const cleanups: (() => Promise<void> | void)[] = []
    afterAll(async () => {
      for (const c of cleanups.reverse()) await c()
      await killAllProcesses()
    })

    test('a backlog of deliveries to a slow endpoint, longer than a claim, sends each attempt once', async () => {
      const sink = await startWebhookSink()
      cleanups.push(() => sink.stop())
      const pg = backend === 'postgres' ? await freshPostgres() : null
      if (pg) cleanups.push(() => pg.drop())
      const servers: ServerProcess[] = []
      let env: Record<string, string> = {}
      for (let i = 0; i < count; i++) {
        const dataDir = await freshDataDir()
        cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
        env = {
          DATA_DIR: dataDir,
          PORT: '0',
          HTTP_PORT: '0',
          LOG_LEVEL: 'info',
          ACTOR_LEASE_MS: BACKLOG.leaseMs,
          ...(pg ? pg.env : {}),
        }
        const s = await spawnServer(env)
        cleanups.push(async () => void (await s.stop()))
        servers.push(s)
      }
      // On PostgreSQL the CLI reaches the database itself; on PGlite, the server through DATA_DIR.
      const cli = cliWith(pg ? { ...pg.env, DATA_DIR: '/nonexistent' } : env)
      await backlogOnce({ cli, sink, servers, path: `/backlog-${backend}`, ...BACKLOG })
    }, 120_000)
  })
}

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1
  return counts
}
