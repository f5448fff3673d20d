import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { KEEPALIVE_MS } from '../../src/modules/pay/status-streams.ts'
import { rmSync } from 'node:fs'
import { loadConfig } from '../../src/config.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { startServer } from '../../src/server/start.ts'
import { backends, freshDataDir } from '../helpers/databases.ts'
import { NO_NETWORKS } from '../helpers/processes.ts'
import { quote } from '../helpers/lifecycle.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

const STREAMS = 200

/**
 * Counts the statements the server sends to its database, at the driver (PGlite's
 * query/exec, postgres.js's unsafe, which drizzle and the prepared statements all go through).
 */
function countStatements(t: TestServer) {
  const client = (
    t.server.services.database.db as unknown as {
      $client: Record<string, (...a: unknown[]) => unknown>
    }
  ).$client
  const seen: string[] = []
  for (const method of t.backend === 'pglite' ? ['query', 'exec'] : ['unsafe']) {
    const original = client[method]!.bind(client)
    client[method] = (text: unknown, ...rest: unknown[]) => {
      seen.push(String(text))
      return original(text, ...rest)
    }
  }
  return {
    total: () => seen.length,
    /** The pay page's state read (the transaction joined with its project's name). */
    stateReads: () => seen.filter((q) => q.includes('"projects"."name"')).length,
  }
}

/**
 * One Server-Sent Events connection: its `state` events' statuses, its keep-alive comments, and
 * whether it ended.
 */
function follow(res: Response) {
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  const s = {
    statuses: [] as string[],
    versions: [] as number[],
    keepAlives: 0,
    ended: false,
    error: null as unknown,
  }
  let buffer = ''
  void (async () => {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return void (s.ended = true)
      buffer += decoder.decode(value, { stream: true })
      let end: number
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        if (block.startsWith(': keep-alive')) s.keepAlives++
        const data = /^data: (.*)$/m.exec(block)?.[1]
        if (data) {
          const state = JSON.parse(data) as { status: string; version: number }
          s.statuses.push(state.status)
          s.versions.push(state.version)
        }
      }
    }
  })().catch((e) => (s.error = e))
  return s
}

async function until(what: string, ok: () => boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await Bun.sleep(5)
  }
}

for (const backend of backends()) {
  describe(`pay page event streams at scale [${backend}]`, () => {
    let t: TestServer
    beforeAll(async () => {
      t = await startTestServer(backend)
    })
    afterAll(() => t?.stop())

    test(`${STREAMS} streams of one transaction: nothing is read while idle, one read per change reaches every stream in order`, async () => {
      const p = await t.project()
      const created = await api(t, p.key).create({ amount: 25 })
      const id = ((await created.json()) as { transaction: { id: string } }).transaction.id
      const counted = countStatements(t)

      const streams = await Promise.all(
        Array.from({ length: STREAMS }, async () => {
          const res = await t.fetch(`/pay/${id}/events`)
          expect(res.status).toBe(200)
          return follow(res)
        }),
      )
      await until('every stream has the first state', () =>
        streams.every((s) => s.statuses.length === 1),
      )
      expect(t.server.services.payStreams.size).toBe(STREAMS)
      // What an operator sees of them.
      const metrics = await (await t.fetch('/metrics')).text()
      expect(metrics).toMatch(new RegExp(`^cryptopay_pay_streams_open ${STREAMS}$`, 'm'))
      // Opening a stream reads its state once.
      expect(counted.stateReads()).toBe(STREAMS)

      // Idle for a keep-alive period: every stream hears a comment, and no stream reads anything.
      const before = { total: counted.total(), stateReads: counted.stateReads() }
      await until(
        'every stream got a keep-alive',
        () => streams.every((s) => s.keepAlives >= 1),
        KEEPALIVE_MS * 6,
      )
      expect(counted.stateReads() - before.stateReads).toBe(0)
      // Only the server's own background work (lease, webhook dispatcher) ran meanwhile: far fewer
      // statements than streams, where polling would have cost one per stream per second.
      expect(counted.total() - before.total).toBeLessThan(STREAMS / 2)

      const moves = [
        { event: { type: 'token.selected' as const, quote }, status: 'prepared' },
        { event: { type: 'customer.confirmed' as const }, status: 'pending' },
        {
          event: { type: 'cancel.requested' as const, by: 'customer' as const },
          status: 'cancelled',
        },
      ]
      for (const [i, move] of moves.entries()) {
        const reads = counted.stateReads()
        const r = await t.server.services.driveTestTransaction(id, move.event)
        expect(r.ok).toBe(true)
        await until(`every stream has ${move.status}`, () =>
          streams.every((s) => s.statuses.length === i + 2),
        )
        expect(counted.stateReads() - reads).toBe(1)
      }
      await until('every stream ended at the final status', () => streams.every((s) => s.ended))
      for (const s of streams) {
        expect(s.error).toBeNull()
        expect(s.statuses).toEqual(['created', 'prepared', 'pending', 'cancelled'])
        expect(s.versions).toEqual([...s.versions].sort((a, b) => a - b))
      }
      expect(t.server.services.payStreams.size).toBe(0)
    }, 120_000)

    test('a stream opened while a change commits misses nothing, and an unknown transaction is 404 with nothing kept', async () => {
      const p = await t.project()
      const created = await api(t, p.key).create({ amount: 5 })
      const id = ((await created.json()) as { transaction: { id: string } }).transaction.id
      const opening = t.fetch(`/pay/${id}/events`)
      const moved = t.server.services.driveTestTransaction(id, { type: 'token.selected', quote })
      const s = follow(await opening)
      expect((await moved).ok).toBe(true)
      await until('the stream shows prepared', () => s.statuses.at(-1) === 'prepared')
      expect(s.statuses.filter((x) => x === 'prepared').length).toBe(1)
      expect(s.versions).toEqual([...s.versions].sort((a, b) => a - b))
      await t.server.services.driveTestTransaction(id, { type: 'cancel.requested', by: 'customer' })
      await until('the stream ended', () => s.ended)

      const missing = await t.fetch('/pay/00000000-0000-4000-8000-000000000000/events')
      expect(missing.status).toBe(404)
      expect(t.server.services.payStreams.size).toBe(0)
    })
  })
}

describe.skipIf(!process.env.DATABASE_URL)(
  'pay page event streams across instances [postgres]',
  () => {
    test('a change committed on another instance reaches the streams here by NOTIFY, without polling', async () => {
      const a = await startTestServer('postgres')
      const dataDir = await freshDataDir()
      const b = await startServer(
        loadConfig({
          PORT: '0',
          HTTP_PORT: '0',
          DATA_DIR: dataDir,
          LOG_LEVEL: 'silent',
          NETWORKS_CONFIG: NO_NETWORKS,
          DATABASE_URL: a.databaseUrl!,
          SECRET_KEY: a.cliEnv.SECRET_KEY!,
        }),
        { logger: createLogger('silent') },
      )
      try {
        const p = await a.project()
        const created = await api(a, p.key).create({ amount: 25 })
        const id = ((await created.json()) as { transaction: { id: string } }).transaction.id
        // Opened on B; the transaction's actor runs on A, which created it.
        const res = await fetch(`https://localhost:${b.port}/pay/${id}/events`, {
          tls: { rejectUnauthorized: false },
        } as RequestInit)
        const s = follow(res)
        await until('the first state', () => s.statuses.length === 1)
        expect(
          (await a.server.services.driveTestTransaction(id, { type: 'token.selected', quote })).ok,
        ).toBe(true)
        await until("B's stream shows prepared", () => s.statuses.at(-1) === 'prepared')
        // And a change committed on B (not the owner) reaches B's stream too.
        expect((await b.services.driveTestTransaction(id, { type: 'customer.confirmed' })).ok).toBe(
          true,
        )
        await until("B's stream shows pending", () => s.statuses.at(-1) === 'pending')
        expect(
          (
            await a.server.services.driveTestTransaction(id, {
              type: 'cancel.requested',
              by: 'customer',
            })
          ).ok,
        ).toBe(true)
        await until('the stream ended', () => s.ended)
        expect(s.statuses).toEqual(['created', 'prepared', 'pending', 'cancelled'])
      } finally {
        await b.stop()
        await a.stop()
        rmSync(dataDir, { recursive: true, force: true })
      }
    }, 60_000)
  },
)
