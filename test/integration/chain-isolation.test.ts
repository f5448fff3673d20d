/**
 * docs/decisions/0054-one-bad-transfer-never-halts-a-network.md items 2, 3 and 6 on a real chain
 * (anvil mining on request, a real TestStablecoin, real signed transfers), through the public
 * surfaces: the merchant API, the pay endpoints, a real webhook receiver verifying signatures, and
 * the chain itself.
 *
 *  - Per-transfer isolation (src/chain/payment-tracker.ts): a transfer whose judging fails (here:
 *    its transaction's stored actor has a machine version this build cannot run) is recorded in
 *    `chain_transfers` with attempts / retry_at / last_error, logged at error level with its ids,
 *    retried with back-off (`retryDelayMs`) on later heads, and the rest of the network goes on.
 *  - One follower per network across instances (src/chain/chain-watcher.ts, `chain_followers`):
 *    sampled every few milliseconds on two in-process instances on one PostgreSQL, through a
 *    reorg and a graceful hand-over.
 *  - docs/decisions/0015-confirmations-and-reorgs.md after the fact: a reorg taking back a payment of a processing/confirming transaction is
 *    announced as `transaction.payment_reversed` (src/webhooks/payload.ts); one taking back the
 *    payment of a completed transaction moves nothing, is noted on the timeline as
 *    `payment.reorged_after_final` and logged at error level for the operator.
 *
 * The follower polls on real time whatever clock the lifecycle uses, so every wait polls with a
 * deadline (waitUntil); nothing sleeps.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { retryDelayMs } from '../../src/chain/payment-tracker.ts'
import { loadConfig } from '../../src/config.ts'
import { openDatabase, pgliteDirOf, sql, type Database } from '../../src/db/client.ts'
import { manualClock, type Clock } from '../../src/lib/clock.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { startServer, type RunningServer } from '../../src/server/start.ts'
import { verifyWebhookSignature } from '../../src/webhooks/verify-webhook/index.mjs'
import {
  startManualChain,
  waitUntil,
  writeNetworksFile,
  type ManualChain,
} from '../helpers/chain.ts'
import { backends, freshDataDir, freshPostgres, type Backend } from '../helpers/databases.ts'
import { expectStatus } from '../helpers/expect.ts'
import { startWebhookSink, type Received, type WebhookSink } from '../helpers/webhook-sink.ts'

const NETWORK = 'localchain'
const CONFIRMATIONS = 3
const describeIfPg = process.env.DATABASE_URL ? describe : describe.skip

type LogEntry = { from: string; level: string; msg: string } & Record<string, unknown>
type Cleanups = (() => Promise<void> | void)[]

async function runCleanups(cleanups: Cleanups) {
  for (const c of cleanups.splice(0).reverse()) {
    try {
      await c()
    } catch (e) {
      console.error('cleanup failed', e)
    }
  }
}

/**
 * An in-process server on `dataDir` (and the database in `env`), logging at debug level into
 * `logs`.
 */
interface Instance {
  name: string
  server: RunningServer
  fetch(path: string, init?: RequestInit): Promise<Response>
  /** The networks this instance follows now (src/chain/chain-watcher.ts `following()`). */
  following(): string[]
  synced(): bigint
  stop(): Promise<void>
}

async function startInstance(
  name: string,
  o: {
    dataDir: string
    networksFile: string
    env: Record<string, string>
    logs: LogEntry[]
    clock?: Clock
    cleanups: Cleanups
  },
): Promise<Instance> {
  const config = loadConfig({
    DATA_DIR: o.dataDir,
    PORT: '0',
    HTTP_PORT: '0',
    LOG_LEVEL: 'silent',
    NETWORKS_CONFIG: o.networksFile,
    ...o.env,
  })
  const server = await startServer(config, {
    clock: o.clock,
    logger: createLogger('debug', (line) => o.logs.push({ from: name, ...JSON.parse(line) })),
  })
  // stop() is idempotent: a test may stop it earlier; this one runs before the database is dropped.
  o.cleanups.push(() => server.stop())
  const ca = readFileSync(join(o.dataDir, 'tls', 'cert.pem'), 'utf8')
  const url = `https://localhost:${server.port}`
  return {
    name,
    server,
    fetch: (path, init = {}) =>
      fetch(url + path, { ...init, tls: { ca }, redirect: 'manual' } as RequestInit),
    following: () => server.services.chain.following(),
    synced: () => server.services.chain.syncedHeights()[NETWORK] ?? -1n,
    stop: () => server.stop(),
  }
}

/** A project with generous limits and a test key, made through an instance's services. */
async function merchant(s: RunningServer) {
  const p = await s.services.projects.create('Chain isolation')
  if (!p.ok) throw new Error(p.message)
  const limits = await s.services.projects.setLimits(p.value.id, {
    minute: 100_000,
    hour: 1_000_000,
    day: 10_000_000,
  })
  if (!limits.ok) throw new Error(limits.message)
  const k = await s.services.keys.create({ projectId: p.value.id, mode: 'test', name: 'test key' })
  if (!k.ok) throw new Error(k.message)
  return { projectId: p.value.id, key: k.value.key }
}

/** The merchant API and the pay endpoints of one instance, for one key. */
function client(i: () => Instance, key: string) {
  const auth = { authorization: `Bearer ${key}` }
  return {
    async create(amount = 25): Promise<string> {
      const r = await i().fetch('/api/transactions/create', {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ amount }),
      })
      await expectStatus(r, 200)
      return ((await r.json()) as any).transaction.id
    },
    /**
     * The customer selects TUSD on the pay page; returns the deposit address and the amount due.
     */
    async select(id: string): Promise<{ address: string; units: bigint }> {
      const r = await i().fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: 'TUSD', blockchain_network: NETWORK }),
      })
      await expectStatus(r, 200)
      const s = (await r.json()) as any
      expect(s.status).toBe('prepared')
      return { address: s.quote.deposit_address, units: BigInt(s.quote.token_amount) }
    },
    async tx(id: string): Promise<any> {
      const r = await i().fetch(`/api/transactions/${id}`, { headers: auth })
      await expectStatus(r, 200)
      return ((await r.json()) as any).transaction
    },
    async timeline(id: string): Promise<any[]> {
      const r = await i().fetch(`/api/transactions/${id}/timeline`, { headers: auth })
      await expectStatus(r, 200)
      return ((await r.json()) as any).timeline
    },
  }
}

interface TransferRow {
  id: number
  tx_hash: string
  block_number: number
  block_hash: string
  kind: string
  applied: boolean
  reorged: boolean
  attempts: number
  retry_ms: number | null
  last_error: string | null
}

/**
 * The `chain_transfers` rows of a transaction, in the order they were recorded (no public surface
 * shows them).
 */
async function transfersOf(database: Database, transactionId: string): Promise<TransferRow[]> {
  const rows = await database.rows<Record<string, unknown>>(sql`
    SELECT id, tx_hash, block_number, block_hash, kind, applied, reorged_at IS NOT NULL AS reorged, attempts,
      (extract(epoch FROM retry_at) * 1000)::float8 AS retry_ms, last_error
    FROM chain_transfers WHERE transaction_id = ${transactionId} ORDER BY id`)
  return rows.map((r) => ({
    id: Number(r.id),
    tx_hash: String(r.tx_hash),
    block_number: Number(r.block_number),
    block_hash: String(r.block_hash),
    kind: String(r.kind),
    applied: r.applied === true,
    reorged: r.reorged === true,
    attempts: Number(r.attempts),
    retry_ms: r.retry_ms === null ? null : Math.round(Number(r.retry_ms)),
    last_error: (r.last_error as string | null) ?? null,
  }))
}

/** Timeline entries as `cause:from->to`, the form the sequences below are written in. */
const moves = (timeline: any[]) =>
  timeline.map((e) => `${e.cause}:${e.from_status ?? '-'}->${e.to_status}`)

/** A database of the backend: a DATA_DIR (PGlite in it), plus a PostgreSQL database when asked. */
async function storage(backend: Backend, cleanups: Cleanups) {
  const dataDir = await freshDataDir()
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
  const pg = backend === 'postgres' ? await freshPostgres() : null
  if (pg) cleanups.push(() => pg.drop())
  return { dataDir, pg, env: pg ? pg.env : ({} as Record<string, string>) }
}

async function manualChainWithFile(cleanups: Cleanups) {
  const chain = await startManualChain()
  cleanups.push(() => chain.stop())
  const dir = mkdtempSync(join(tmpdir(), 'chain-isolation-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  const networksFile = writeNetworksFile(dir, [
    chain.network({ confirmations: CONFIRMATIONS, pollIntervalMs: 100 }),
  ])
  return { chain, networksFile }
}

/** Until the instance's follower has processed the chain up to its current head. */
async function caughtUp(chain: ManualChain, i: Instance) {
  const head = await chain.head()
  await waitUntil(
    `${i.name}'s follower to reach block ${head}`,
    async () => i.synced(),
    (h) => h >= head,
  )
  return head
}

for (const backend of backends()) {
  describe(`chain isolation [${backend}]`, () => {
    const cleanups: Cleanups = []
    afterAll(() => runCleanups(cleanups))

    test('one transfer that cannot be applied does not halt the network', async () => {
      const { chain, networksFile } = await manualChainWithFile(cleanups)
      const { dataDir, pg, env } = await storage(backend, cleanups)
      // The lifecycle's clock (and so retry_at) stands still unless the test moves it.
      const clock = manualClock(Date.now())
      const logs: LogEntry[] = []
      let s = await startInstance('first', { dataDir, networksFile, env, logs, clock, cleanups })
      const { key } = await merchant(s.server)
      const api = client(() => s, key)

      const bad = await api.create(25)
      const good = await api.create(30)
      const badQ = await api.select(bad)
      const goodQ = await api.select(good)
      await s.stop()

      // The bad one's actor now claims to be from a machine version this build does not know.
      const db = await openDatabase({
        databaseUrl: pg?.url ?? null,
        pgliteDir: pg ? null : pgliteDirOf(dataDir),
      })
      try {
        const changed = await db.rows(
          sql`UPDATE transaction_actors SET machine_version = 99 WHERE transaction_id = ${bad} RETURNING transaction_id`,
        )
        expect(changed).toHaveLength(1)
      } finally {
        await db.close()
      }

      s = await startInstance('second', { dataDir, networksFile, env, logs, clock, cleanups })
      const errors = (msg: string) =>
        logs.filter((l) => l.from === 'second' && l.level === 'error' && l.msg === msg)
      // Not restored, loudly; the other one runs as before.
      expect(s.server.services.lifecycle.statusOf(bad)).toBeNull()
      expect(s.server.services.lifecycle.statusOf(good)).toBe('prepared')
      expect(errors('stored actor from another machine version; not run')).toEqual([
        expect.objectContaining({ transactionId: bad, machineVersion: 99 }),
      ])
      expect(s.following()).toEqual([NETWORK])
      await caughtUp(chain, s)

      // The bad one is paid first, the good one in a later block.
      const badHash = await chain.sendRaw(await chain.signTokenTransfer(badQ.address, badQ.units))
      const badBlock = await chain.mine()
      const [failed] = await waitUntil(
        'the bad transfer to fail once',
        () => transfersOf(s.server.services.database, bad),
        (r) => r.length === 1 && r[0]!.attempts >= 1,
      )
      const goodHash = await chain.sendRaw(
        await chain.signTokenTransfer(goodQ.address, goodQ.units),
      )
      const goodBlock = await chain.mine()
      expect(goodBlock).toBe(badBlock + 1n)
      await chain.mine(CONFIRMATIONS)

      // The network went on: the good one completes on its later block...
      const done = await waitUntil(
        'the good transaction to complete',
        () => api.tx(good),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({
        transaction_hash: goodHash,
        block_number: Number(goodBlock),
        amount_received: goodQ.units.toString(),
      })
      // ...and the follower processed past both blocks.
      const head = await caughtUp(chain, s)
      expect(s.synced()).toBeGreaterThan(goodBlock)
      expect(head).toBe(goodBlock + BigInt(CONFIRMATIONS))

      // The bad transfer waits, recorded; with the clock standing still it was tried exactly once.
      const frozenAt = clock.now()
      expect(await transfersOf(s.server.services.database, bad)).toEqual([
        {
          id: failed!.id,
          tx_hash: badHash.toLowerCase(),
          block_number: Number(badBlock),
          block_hash: (await chain.blockHash(badBlock)).toLowerCase(),
          kind: 'pending',
          applied: false,
          reorged: false,
          attempts: 1,
          retry_ms: frozenAt + retryDelayMs(1),
          last_error: expect.stringContaining(`payment.detected for ${bad}`),
        },
      ])
      expect(retryDelayMs(1)).toBe(5_000)
      expect(failed!.last_error).toContain('cannot be changed by this version of the service')
      expect(await api.tx(bad)).toMatchObject({
        status: 'prepared',
        amount_received: '0',
        transaction_hash: null,
        block_number: null,
      })
      expect(moves(await api.timeline(bad))).toEqual([
        'transaction.created:-->created',
        'token.selected:created->prepared',
      ])
      // Logged at error level with the transfer's and the transaction's ids, once per failed try.
      expect(errors('transfer not applied; tried again later')).toEqual([
        expect.objectContaining({
          network: NETWORK,
          transferId: failed!.id,
          transactionId: bad,
          txHash: badHash.toLowerCase(),
          attempts: 1,
          retryAt: new Date(frozenAt + retryDelayMs(1)).toISOString(),
        }),
      ])
      expect(errors('event refused: stored actor from another machine version')).toEqual([
        expect.objectContaining({
          transactionId: bad,
          machineVersion: 99,
          event: 'payment.detected',
        }),
      ])

      // "Migrate": the stored actor is of a version this build runs again. No restart: every event
      // to an actor not running here is judged on the snapshot stored at that moment (the
      // registry's remote path), so the retry alone must carry the transaction on.
      const migrated = await s.server.services.database.rows(
        sql`UPDATE transaction_actors SET machine_version = 1 WHERE transaction_id = ${bad} RETURNING transaction_id`,
      )
      expect(migrated).toHaveLength(1)
      // Before retry_at, later heads leave it alone (the back-off holds).
      await chain.mine()
      await caughtUp(chain, s)
      expect(await transfersOf(s.server.services.database, bad)).toEqual([
        expect.objectContaining({ applied: false, attempts: 1 }),
      ])

      // Past retry_at, a later head (no new block needed) judges it: applied, and the transaction
      // proceeds.
      clock.set(frozenAt + retryDelayMs(1))
      const [applied] = await waitUntil(
        'the bad transfer to be applied',
        () => transfersOf(s.server.services.database, bad),
        (r) => r[0]?.applied === true,
      )
      expect(applied).toMatchObject({
        kind: 'payment',
        applied: true,
        reorged: false,
        attempts: 1,
        retry_ms: null,
        last_error: null,
      })
      const completed = await waitUntil(
        'the once-bad transaction to complete',
        () => api.tx(bad),
        (x) => x.status === 'completed',
      )
      expect(completed).toMatchObject({
        transaction_hash: badHash.toLowerCase(),
        block_number: Number(badBlock),
        amount_received: badQ.units.toString(),
      })
      // Exactly once: detected, included, and (the head is far past its block) completed at once.
      const tl = await api.timeline(bad)
      expect(moves(tl)).toEqual([
        'transaction.created:-->created',
        'token.selected:created->prepared',
        'payment.detected:prepared->processing',
        'payment.included:processing->confirming',
        'confirmations.updated:confirming->completed',
      ])
      expect(tl[2].details).toMatchObject({
        txHash: badHash.toLowerCase(),
        amount: badQ.units.toString(),
        blockNumber: Number(badBlock),
      })
      // The failure was logged once; nothing else failed meanwhile.
      expect(errors('transfer not applied; tried again later')).toHaveLength(1)
      expect(
        logs.filter(
          (l) =>
            l.level === 'error' &&
            l.msg === 'confirmations not applied; tried again on the next head',
        ),
      ).toEqual([])
    }, 90_000)

    test('a reorg after payment_received tells the merchant; one after completion is recorded for the operator', async () => {
      const { chain, networksFile } = await manualChainWithFile(cleanups)
      const { dataDir, env } = await storage(backend, cleanups)
      const sink: WebhookSink = await startWebhookSink()
      cleanups.push(() => sink.stop())
      const logs: LogEntry[] = []
      const s = await startInstance('server', { dataDir, networksFile, env, logs, cleanups })
      const { projectId, key } = await merchant(s.server)
      const api = client(() => s, key)
      const path = `/reversed-${backend}`
      const ep = await s.server.services.endpoints.create({
        projectId,
        mode: 'test',
        url: sink.url(path),
        eventTypes: ['transaction.payment_received', 'transaction.payment_reversed'],
      })
      if (!ep.ok) throw new Error(ep.message)
      await sink.configure(path, { secret: ep.value.secret, mode: 'ok' })
      const payload = (r: Received) =>
        JSON.parse(r.body) as { event: string; timestamp: string; data: Record<string, any> }
      const of = async (id: string) =>
        (await sink.received(path)).filter((r) => payload(r).data.transaction_id === id)
      await caughtUp(chain, s)

      // 1. Paid and included (processing, then confirming in the same block), then the block is reorged away.
      const first = await api.create(25)
      const q1 = await api.select(first)
      const hash1 = (
        await chain.sendRaw(await chain.signTokenTransfer(q1.address, q1.units))
      ).toLowerCase()
      const block1 = await chain.mine()
      await waitUntil(
        'confirming',
        () => api.tx(first),
        (x) => x.status === 'confirming' && x.confirmations === 1,
      )
      await sink.waitFor(path, (r) =>
        r.some(
          (x) =>
            payload(x).data.transaction_id === first &&
            payload(x).event === 'transaction.payment_received',
        ),
      )
      const oldHash = await chain.blockHash(block1)
      await chain.reorg(1)
      expect(await chain.blockHash(block1)).not.toBe(oldHash)
      await waitUntil(
        'pending after the reorg',
        () => api.tx(first),
        (x) => x.status === 'pending',
      )
      await sink.waitFor(path, (r) =>
        r.some(
          (x) =>
            payload(x).data.transaction_id === first &&
            payload(x).event === 'transaction.payment_reversed',
        ),
      )
      const got1 = await of(first)
      expect(got1.map((r) => payload(r).event)).toEqual([
        'transaction.payment_received',
        'transaction.payment_reversed',
      ])
      const secret = ep.value.secret
      for (const r of got1) {
        expect(r.verified).toBe(true)
        expect(verifyWebhookSignature(r.body, r.headers['x-service-signature'], secret)).toBe(true)
      }
      const [received, reversed] = got1.map(payload)
      expect(received!.data).toMatchObject({
        status: 'processing',
        transaction_hash: hash1,
        token_symbol: 'TUSD',
        blockchain_network: NETWORK,
      })
      // The status the reorg returned it to, and no payment any more.
      expect(reversed!.data).toMatchObject({
        transaction_id: first,
        status: 'pending',
        transaction_hash: null,
        block_number: null,
        confirmed_at: null,
        token_symbol: 'TUSD',
        token_amount: q1.units.toString(),
        blockchain_network: NETWORK,
      })
      expect(got1[1]!.headers['x-service-event-id']).not.toBe(
        got1[0]!.headers['x-service-event-id'],
      )
      expect((await api.timeline(first)).filter((e) => e.cause === 'payment.reorged')).toEqual([
        expect.objectContaining({
          from_status: 'confirming',
          to_status: 'pending',
          details: { txHash: hash1, logIndex: 0, received: '0' },
        }),
      ])

      // 2. Completed (confirmations reached), then a reorg deep enough to take its payment block away.
      const second = await api.create(40)
      const q2 = await api.select(second)
      const hash2 = (
        await chain.sendRaw(await chain.signTokenTransfer(q2.address, q2.units))
      ).toLowerCase()
      const block2 = await chain.mine()
      await waitUntil(
        'confirming',
        () => api.tx(second),
        (x) => x.status === 'confirming' && x.confirmations === 1,
      )
      await chain.mine(CONFIRMATIONS - 1)
      const done = await waitUntil(
        'completed',
        () => api.tx(second),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({
        transaction_hash: hash2,
        block_number: Number(block2),
        confirmations: CONFIRMATIONS,
      })
      const beforeReorg = await api.timeline(second)
      await sink.waitFor(path, (r) =>
        r.some(
          (x) =>
            payload(x).data.transaction_id === second &&
            payload(x).event === 'transaction.payment_received',
        ),
      )

      await chain.reorg(CONFIRMATIONS)
      const noted = await waitUntil(
        'the reorg noted after the final status',
        () => api.timeline(second),
        (tl) => tl.length > beforeReorg.length,
      )
      expect(noted.slice(0, beforeReorg.length)).toEqual(beforeReorg)
      expect(noted.slice(beforeReorg.length)).toEqual([expect.anything()])
      expect(noted.at(-1)).toEqual({
        from_status: 'completed',
        to_status: 'completed',
        cause: 'payment.reorged_after_final',
        details: { txHash: hash2, blockNumber: Number(block2), network: NETWORK },
        at: expect.any(String),
      })
      // Nothing moved: still completed on the payment the operator must now look at.
      expect(await api.tx(second)).toMatchObject({
        status: 'completed',
        transaction_hash: hash2,
        block_number: Number(block2),
        confirmed_at: expect.any(String),
      })
      expect(
        logs.filter(
          (l) =>
            l.level === 'error' &&
            l.msg === 'a reorg took back a payment of a transaction in a final status',
        ),
      ).toEqual([
        expect.objectContaining({
          network: NETWORK,
          transactionId: second,
          status: 'completed',
          txHash: hash2,
          blockNumber: Number(block2),
        }),
      ])
      // ...and counted, for an alert (docs/decisions/0047-metrics-and-probes.md's metrics).
      const scraped = (await s.server.services.metrics.scrape()).body
      expect(scraped).toContain(`cryptopay_reorgs_after_final_total{network="${NETWORK}"} 1`)
      const transfers = await transfersOf(s.server.services.database, second)
      expect(transfers).toEqual([
        expect.objectContaining({
          tx_hash: hash2,
          block_number: Number(block2),
          kind: 'payment',
          applied: true,
          reorged: true,
          attempts: 0,
        }),
      ])

      // No payment_reversed for it: none in the outbox (written with any transition, atomically)...
      const outbox = await s.server.services.database.rows<{ event_type: string }>(
        sql`SELECT event_type FROM outbox WHERE transaction_id = ${second} ORDER BY id`,
      )
      expect(outbox.map((o) => o.event_type)).toEqual([
        'transaction.created',
        'transaction.payment_received',
        'transaction.confirming',
        'transaction.completed',
      ])
      // ...and, once a later block is through and every delivery of the project is final, none
      // received.
      await chain.mine()
      await caughtUp(chain, s)
      await waitUntil(
        'every delivery final',
        async () => {
          const l = await s.server.services.webhooks.listDeliveries({ projectId })
          return l.ok ? l.value.map((d) => d.status) : ['?']
        },
        (st) => st.length === 3 && st.every((x) => x === 'success'),
      )
      expect((await of(second)).map((r) => payload(r).event)).toEqual([
        'transaction.payment_received',
      ])
      expect(
        (await sink.received(path)).map(
          (r) =>
            `${payload(r).data.transaction_id === first ? 'first' : 'second'}:${payload(r).event}`,
        ),
      ).toEqual([
        'first:transaction.payment_received',
        'first:transaction.payment_reversed',
        'second:transaction.payment_received',
      ])
    }, 90_000)
  })
}

describeIfPg('chain following on two instances sharing one PostgreSQL', () => {
  const cleanups: Cleanups = []
  afterAll(() => runCleanups(cleanups))

  test('two instances follow a network one at a time, and a reorg reaches the paid transaction exactly once', async () => {
    const { chain, networksFile } = await manualChainWithFile(cleanups)
    const pg = await freshPostgres()
    cleanups.push(() => pg.drop())
    const dirA = await freshDataDir()
    const dirB = await freshDataDir()
    cleanups.push(
      () => rmSync(dirA, { recursive: true, force: true }),
      () => rmSync(dirB, { recursive: true, force: true }),
    )
    const logs: LogEntry[] = []
    const env = { ...pg.env, ACTOR_LEASE_MS: '1000' }
    const A = await startInstance('A', { dataDir: dirA, networksFile, env, logs, cleanups })
    const B = await startInstance('B', { dataDir: dirB, networksFile, env, logs, cleanups })
    const instances = [A, B]

    // The sampler: every few milliseconds, at most one instance may follow the network.
    let samples = 0
    const overlaps: string[] = []
    /** Who followed, each time it changed: 'A', 'B' or 'none'. */
    const changes: string[] = []
    const sample = () => {
      samples++
      const who = instances.filter((i) => i.following().includes(NETWORK)).map((i) => i.name)
      if (who.length > 1)
        overlaps.push(`sample ${samples} at ${new Date().toISOString()}: ${who.join(' and ')}`)
      const now = who.length === 0 ? 'none' : who.join('+')
      if (changes.at(-1) !== now) changes.push(now)
    }
    sample()
    const sampler = setInterval(sample, 3)
    cleanups.push(() => clearInterval(sampler))
    const context = () =>
      `changes: ${changes.join(' -> ')}; overlaps: ${JSON.stringify(overlaps.slice(0, 10))}; warnings: ${JSON.stringify(logs.filter((l) => l.level === 'warn' || l.level === 'error').slice(-20))}`
    const followerNow = () => instances.filter((i) => i.following().includes(NETWORK))

    const [X] = await waitUntil(
      'one instance to follow the network',
      async () => followerNow(),
      (f) => f.length === 1,
    )
    const Y = X === A ? B : A
    await caughtUp(chain, X!)

    const { key } = await merchant(A.server)
    const onY = client(() => Y, key)
    const onX = client(() => X!, key)

    // Created on the instance that does not follow (its actor runs there), selected on the one that
    // does.
    const id = await onY.create(25)
    const q = await onX.select(id)
    const raw = await chain.signTokenTransfer(q.address, q.units)
    const hash = (await chain.sendRaw(raw)).toLowerCase()
    const block = await chain.mine()
    await waitUntil(
      'confirming with 1 confirmation',
      () => onY.tx(id),
      (x) => x.status === 'confirming' && x.confirmations === 1,
    )
    await chain.mine()
    await waitUntil(
      '2 confirmations',
      () => onY.tx(id),
      (x) => x.confirmations === 2,
    )
    const oldHash = (await chain.blockHash(block)).toLowerCase()

    // Both blocks replaced; the same signed transfer goes into the second replacement, one block
    // later.
    await chain.reorg(2, [[raw, 1]])
    const newBlock = block + 1n
    expect((await chain.blockHash(block)).toLowerCase()).not.toBe(oldHash)
    const receipt = await chain.client.getTransactionReceipt({ hash: hash as `0x${string}` })
    expect(receipt.blockNumber).toBe(newBlock)
    const newHash = (await chain.blockHash(newBlock)).toLowerCase()
    await waitUntil(
      'confirming in the new block',
      () => onY.tx(id),
      (x) =>
        x.status === 'confirming' && x.block_number === Number(newBlock) && x.confirmations === 1,
    )
    await chain.mine()
    await waitUntil(
      '2 confirmations in the new block',
      () => onY.tx(id),
      (x) => x.confirmations === 2,
    )
    await chain.mine()
    const done = await waitUntil(
      'completed',
      () => onY.tx(id),
      (x) => x.status === 'completed',
    )
    expect(done).toMatchObject({
      transaction_hash: hash,
      block_number: Number(newBlock),
      confirmations: CONFIRMATIONS,
      amount_received: q.units.toString(),
    })

    // The exact timeline: each confirmation count is waited for before the next block, so each
    // is one entry; the reorg takes the payment back once (confirming -> pending), the transfer
    // is found again in its new block (detected, included), confirmations count from there.
    const tl = await onY.timeline(id)
    expect(moves(tl)).toEqual([
      'transaction.created:-->created',
      'token.selected:created->prepared',
      'payment.detected:prepared->processing',
      'payment.included:processing->confirming',
      'confirmations.updated:confirming->confirming',
      'confirmations.updated:confirming->confirming',
      'payment.reorged:confirming->pending',
      'payment.detected:pending->processing',
      'payment.included:processing->confirming',
      'confirmations.updated:confirming->confirming',
      'confirmations.updated:confirming->confirming',
      'confirmations.updated:confirming->completed',
    ])
    expect(tl.map((e) => e.to_status)).not.toContain('expired')
    expect(
      tl.filter((e) => e.cause === 'payment.detected').map((e) => e.details.blockNumber),
    ).toEqual([Number(block), Number(newBlock)])
    expect(
      tl.filter((e) => e.cause === 'payment.included').map((e) => e.details.blockNumber),
    ).toEqual([Number(block), Number(newBlock)])
    expect(
      tl.filter((e) => e.cause === 'confirmations.updated').map((e) => e.details.confirmations),
    ).toEqual([1, 2, 1, 2, 3])
    expect(tl[6].details).toEqual({ txHash: hash, logIndex: 0, received: '0' })

    // The old row taken back (and judged: the reorg applied), the new one applied, each once.
    expect(await transfersOf(A.server.services.database, id)).toEqual([
      expect.objectContaining({
        tx_hash: hash,
        block_number: Number(block),
        block_hash: oldHash,
        kind: 'payment',
        applied: true,
        reorged: true,
        attempts: 0,
      }),
      expect.objectContaining({
        tx_hash: hash,
        block_number: Number(newBlock),
        block_hash: newHash,
        kind: 'payment',
        applied: true,
        reorged: false,
        attempts: 0,
      }),
    ])
    expect(overlaps, context()).toEqual([])
    expect(
      followerNow().map((i) => i.name),
      context(),
    ).toEqual([X!.name])

    // A graceful stop of the follower: the other takes the network over and finds a new payment.
    // Created and selected on the instance about to stop: the other hears of its address by NOTIFY,
    // and takes its actor over too.
    const other = await onX.create(15)
    const q2 = await onX.select(other)
    const onlyY = client(() => Y, key)
    await X!.stop()
    expect(X!.following()).toEqual([])
    await waitUntil(
      `${Y.name} to follow the network`,
      async () => Y.following(),
      (f) => f.includes(NETWORK),
      10_000,
    )
    const hash2 = (
      await chain.sendRaw(await chain.signTokenTransfer(q2.address, q2.units))
    ).toLowerCase()
    const block2 = await chain.mine()
    await waitUntil(
      'the new payment detected by the new follower',
      () => onlyY.tx(other),
      (x) => x.status === 'confirming',
    )
    await chain.mine(CONFIRMATIONS - 1)
    const done2 = await waitUntil(
      'the new payment completed',
      () => onlyY.tx(other),
      (x) => x.status === 'completed',
    )
    expect(done2).toMatchObject({
      transaction_hash: hash2,
      block_number: Number(block2),
      amount_received: q2.units.toString(),
    })
    expect(
      moves(await onlyY.timeline(other)).filter(
        (m) => !m.startsWith('confirmations.updated:confirming->confirming'),
      ),
    ).toEqual([
      'transaction.created:-->created',
      'token.selected:created->prepared',
      'payment.detected:prepared->processing',
      'payment.included:processing->confirming',
      'confirmations.updated:confirming->completed',
    ])
    await caughtUp(chain, Y)

    clearInterval(sampler)
    sample()
    expect(overlaps, context()).toEqual([])
    expect(samples).toBeGreaterThan(100)
    // One follower at a time: first X alone, then nobody for the moment of the hand-over, then Y
    // alone.
    expect(changes, context()).toEqual(
      ['none', X!.name, 'none', Y.name].slice(changes[0] === 'none' ? 0 : 1),
    )
    expect(logs.filter((l) => l.msg === 'following network').map((l) => l.from)).toEqual([
      X!.name,
      Y.name,
    ])
    expect(
      logs.filter((l) => l.level === 'error'),
      context(),
    ).toEqual([])
  }, 90_000)
})
