import { afterAll, describe, expect, test } from 'bun:test'
import { createServer, connect, type Server, type Socket } from 'node:net'
import postgres from 'postgres'
import { openDatabase, type Database } from '../../src/db/client.ts'
import { freshPostgres } from '../helpers/databases.ts'
import { waitUntil } from '../helpers/webhook-cli.ts'

/**
 * docs/decisions/0029-several-instances-leases-and-claims.md (item 7) said the NOTIFY listener has
 * no reconnect. It has one (postgres.js listens again by itself), and this keeps it so: the LISTEN
 * connection comes back after the database was unreachable, and listeners are told once
 * (`onReconnect`: notifications sent meanwhile are lost, so caches re-read). The service reaches
 * PostgreSQL through a TCP proxy the test cuts: every connection is dropped and the port refuses
 * new ones for longer than the connect timeout, as when the database restarts.
 */
const describeIfPg = process.env.DATABASE_URL ? describe : describe.skip

/**
 * A TCP proxy to PostgreSQL that can be cut: open connections dropped, and the port closed
 * (connections refused) until restored.
 */
async function cuttableProxy(target: URL) {
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('close', () => sockets.delete(s))
      s.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
  })
  const listen = (port: number) => new Promise<void>((r) => server.listen(port, '127.0.0.1', r))
  await listen(0)
  const port = (server.address() as { port: number }).port
  const closeAll = () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy()
      server.close(() => r())
    })
  return {
    url: (u: string) => {
      const url = new URL(u)
      url.host = `127.0.0.1:${port}`
      return url.toString()
    },
    cut: closeAll,
    restore: () => listen(port),
    close: () => (server.listening ? closeAll() : undefined),
  }
}

describeIfPg('LISTEN after the database was unreachable', () => {
  const cleanups: (() => Promise<unknown> | unknown)[] = []
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c()
  })

  test('a listener hears notifications again after its connection was dropped and refused for a while, and is told it reconnected', async () => {
    const pg = await freshPostgres()
    cleanups.push(() => pg.drop())
    const proxy = await cuttableProxy(new URL(pg.url))
    cleanups.push(() => proxy.close())
    // A short connect timeout stands for a long outage: postgres.js retries a refused connection
    // for that long (30 s by default), then gives up; the outage below outlasts it.
    const database: Database = await openDatabase({
      databaseUrl: `${proxy.url(pg.url)}?connect_timeout=2`,
      pgliteDir: null,
    })
    cleanups.push(() => database.close())
    // Notifications are sent on a direct connection, around the proxy.
    const direct = postgres(pg.url, { max: 1, onnotice: () => {} })
    cleanups.push(() => direct.end())

    const heard: string[] = []
    let reconnects = 0
    await database.listen(
      'reconnect_probe',
      (p) => heard.push(p),
      () => reconnects++,
    )
    await direct`select pg_notify('reconnect_probe', 'before')`
    await waitUntil(() => heard.includes('before'), 5_000)

    await proxy.cut()
    // Refused for longer than the connect timeout: postgres.js's own re-listen gives up here.
    await waitUntil(
      async () =>
        (
          await direct`select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen%'`
        )[0].n === 0,
      5_000,
    )
    await new Promise((r) => setTimeout(r, 4_000))
    await direct`select pg_notify('reconnect_probe', 'while cut')`
    await proxy.restore()

    await waitUntil(
      () => reconnects > 0,
      15_000,
      () => `reconnects: ${reconnects}`,
    )
    await direct`select pg_notify('reconnect_probe', 'after')`
    await waitUntil(
      () => heard.includes('after'),
      5_000,
      () => JSON.stringify(heard),
    )
    expect(heard).toEqual(['before', 'after'])
    expect(reconnects).toBe(1)
  }, 60_000)
})
