import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { keyedTurns } from '../lib/keyed-turns.ts'
import { PGlite } from '@electric-sql/pglite'
import { sql, type SQL } from 'drizzle-orm'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import { namedStatementsSupported, withNamedStatements } from './pglite-statements.ts'
import { assertPostgresQueueFixed } from './postgres-queue-check.ts'
import * as schema from './schema.ts'

export type Schema = typeof schema
export type Db = PgDatabase<PgQueryResultHKT, Schema>

/** One database handle for both back ends; repositories see only `db` and `rows`. */
export interface Database {
  kind: 'pglite' | 'postgres'
  db: Db
  /**
   * For the instance lease alone: on PostgreSQL a connection of its own, so a renewal never waits
   * in line behind the pool's work (a webhook backlog, a long report) and the lease is not lost
   * to a busy pool; on PGlite, which has one connection and no other instance, `db` itself.
   */
  leaseDb: Db
  /** Raw SQL rows, whichever driver (postgres.js returns an array, PGlite `{ rows }`). */
  rows<T = Record<string, unknown>>(query: SQL): Promise<T[]>
  /** A hot-path statement: `$1`-style parameters, prepared once per connection and reused. */
  query<T = Record<string, unknown>>(
    text: string,
    params: (string | number | boolean | null)[],
  ): Promise<T[]>
  /**
   * Runs `fn`'s statements in one transaction on one connection: committed if it resolves, rolled
   * back if it throws.
   */
  transaction<T>(fn: (query: Database['query']) => Promise<T>): Promise<T>
  /**
   * Subscribe to a NOTIFY channel; returns an unsubscribe function. `onReconnect` runs after the
   * listening connection came back from a loss (notifications sent meanwhile are lost).
   */
  listen(
    channel: string,
    onPayload: (payload: string) => void,
    onReconnect?: () => void,
  ): Promise<() => Promise<void>>
  notify(channel: string, payload: string): Promise<void>
  /**
   * Runs `fn` while no other section of the same `key` runs, in this process or another: on
   * PostgreSQL under a session advisory lock held on a connection of its own (released if the
   * process dies); on PGlite, whose one process is the only instance, in turns within it.
   */
  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T>
  close(): Promise<void>
}

const MIGRATIONS = fileURLToPath(new URL('../../drizzle', import.meta.url))
/** Any constant works; it only has to be the same in every instance. */
const MIGRATION_LOCK_ID = 727_001
/** How often `exclusive` asks again for a lock another instance holds. */
const LOCK_RETRY_MS = 20

export interface OpenOptions {
  databaseUrl: string | null
  /** PGlite data directory; `null` for an in-memory database (tests). */
  pgliteDir: string | null
  /** postgres.js pool size. */
  poolSize?: number
  /** Told when a database runs in a slower way than it should (the service logs it). */
  warn?: (message: string) => void
}

/**
 * Opens the configured database and applies pending migrations
 * (docs/decisions/0002-storage-postgresql-or-embedded.md).
 */
export async function openDatabase(opts: OpenOptions): Promise<Database> {
  const database = opts.databaseUrl
    ? await openPostgres(opts.databaseUrl, opts.poolSize ?? 10)
    : await openPglite(opts.pgliteDir, opts.warn)
  return database
}

async function openPostgres(url: string, max: number): Promise<Database> {
  // Refuse to run on a driver whose pool slows down under steady load (the fix is applied at
  // install).
  await assertPostgresQueueFixed()
  // Migrate on a dedicated connection holding an advisory lock, so instances starting together
  // take turns; drizzle's migrator takes no lock of its own (docs/development.md#both-databases).
  const lockConn = postgres(url, { max: 1, onnotice: () => {} })
  try {
    await lockConn`select pg_advisory_lock(${MIGRATION_LOCK_ID})`
    await migratePostgres(drizzlePostgres(lockConn), { migrationsFolder: MIGRATIONS })
    await lockConn`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`
  } finally {
    await lockConn.end()
  }
  // The pool's queue of connections is fixed at install (patches/postgres+3.4.9.patch): as
  // shipped, postgres.js 3.4.9 slowed down the longer steady load lasted, every statement
  // scanning a list of holes that grew by one per statement (bench/db-pool.ts).
  const client = postgres(url, { max, onnotice: () => {} })
  const db = drizzlePostgres(client, { schema }) as unknown as Db
  const leaseClient = postgres(url, { max: 1, onnotice: () => {} })
  // Holds the session locks of `exclusive`, so a section never takes a connection from the pool
  // (whose statements it may need) and never waits behind the pool's queue.
  const lockClient = postgres(url, { max: 1, onnotice: () => {} })
  // Sections of one key in this process take turns first: advisory locks are re-entrant within a
  // session, so the lock alone would not keep two of this process apart.
  const inTurns = keyedTurns()
  return {
    kind: 'postgres',
    db,
    leaseDb: drizzlePostgres(leaseClient, { schema }) as unknown as Db,
    rows: async (q) => (await db.execute(q)) as unknown as never[],
    query: async (text, params) =>
      (await client.unsafe(text, params, { prepare: true })) as unknown as never[],
    transaction: (fn) =>
      client.begin((tx) =>
        fn(
          async (text, params) =>
            (await tx.unsafe(text, params, { prepare: true })) as unknown as never[],
        ),
      ) as Promise<never>,
    // postgres.js listens again by itself after a lost connection, retrying while the database is
    // unreachable (test/integration/notify-reconnect.test.ts); its `onlisten` runs on every
    // (re)listen, the first one included, which is not a reconnect.
    listen: async (channel, onPayload, onReconnect) => {
      let first = true
      const sub = await client.listen(channel, onPayload, () =>
        first ? (first = false) : onReconnect?.(),
      )
      return () => sub.unlisten()
    },
    notify: async (channel, payload) => {
      await client`select pg_notify(${channel}, ${payload})`
    },
    exclusive: (key, fn) =>
      inTurns(key, async () => {
        // Tried, not waited for, on the one locking connection: a wait there would hold up every
        // other key's section behind this one.
        while (
          !(await lockClient`select pg_try_advisory_lock(hashtextextended(${key}, 0)) as ok`)[0]!.ok
        )
          await new Promise((r) => setTimeout(r, LOCK_RETRY_MS))
        try {
          return await fn()
        } finally {
          await lockClient`select pg_advisory_unlock(hashtextextended(${key}, 0))`
        }
      }),
    close: async () => {
      await Promise.all([
        client.end({ timeout: 5 }),
        leaseClient.end({ timeout: 5 }),
        lockClient.end({ timeout: 5 }),
      ])
    },
  }
}

/**
 * The types drizzle reads as text (timestamps, dates, intervals and their arrays), as its
 * postgres.js driver sets for the whole client: PGlite gets them once, when it has started.
 */
const TEXT_TYPES = [1114, 1184, 1186, 1082, 1231, 1115, 1185, 1187, 1182]
const TEXT_TYPE_KEYS = new Set(TEXT_TYPES.map(String))
type PgliteQuery = PGlite['query']

/**
 * drizzle passes the parsers above with every query, and PGlite then copies its whole table of
 * parsers (318 types) for that query: 160 µs a query against 65-70 µs without (a key read, in
 * process). With the same parsers set on the instance, such per-query parsers are dropped here,
 * in transactions too; a query given a parser for any other type keeps its own.
 */
function withoutQueryParsers(client: PGlite): PGlite {
  const onInstance = (parsers: object) =>
    Object.keys(parsers).every((type) => TEXT_TYPE_KEYS.has(type))
  const strip = (query: PgliteQuery): PgliteQuery =>
    ((text, params, options) =>
      query(
        text,
        params,
        options?.parsers && onInstance(options.parsers)
          ? { ...options, parsers: undefined }
          : options,
      )) as PgliteQuery
  const transaction = client.transaction.bind(client)
  client.query = strip(client.query.bind(client))
  client.transaction = ((fn) =>
    transaction((tx) =>
      fn(Object.create(tx, { query: { value: strip(tx.query) } })),
    )) as PGlite['transaction']
  return client
}

async function openPglite(dir: string | null, warn?: (message: string) => void): Promise<Database> {
  if (dir) mkdirSync(dir, { recursive: true })
  const pglite = new PGlite(dir ?? undefined)
  if (!namedStatementsSupported(pglite))
    warn?.(
      'this PGlite lacks the private methods named statements use: every statement is parsed and planned each time (docs/upstream/pglite.md)',
    )
  const client = withoutQueryParsers(withNamedStatements(pglite))
  const inTurns = keyedTurns()
  await client.waitReady
  // PostgreSQL fills every new 16 MB WAL segment with zeros before writing to it. PGlite runs in
  // the server's own thread, so that stopped every request for ~50 ms once per segment: under a
  // create load, every second or so (bench/RESULTS.md). Not zero-filling is what PostgreSQL
  // offers for this (the file is made at its full size all the same); PGlite already runs
  // with fsync off, so the filling bought no durability here.
  await client.exec('SET wal_init_zero = off')
  // Set once started: starting installs PGlite's array parsers over any given at construction.
  for (const type of TEXT_TYPES) client.parsers[type] = (value: string) => value
  const db = drizzlePglite(client, { schema }) as unknown as Db
  await migratePglite(db as unknown as Parameters<typeof migratePglite>[0], {
    migrationsFolder: MIGRATIONS,
  })
  return {
    kind: 'pglite',
    db,
    leaseDb: db,
    rows: async (q) => ((await db.execute(q)) as unknown as { rows: never[] }).rows,
    query: async (text, params) => (await client.query<never>(text, params)).rows,
    transaction: (fn) =>
      client.transaction((tx) =>
        fn(async (text, params) => (await tx.query<never>(text, params)).rows),
      ),
    listen: async (channel, onPayload) => client.listen(channel, onPayload),
    notify: async (channel, payload) => {
      await client.query('select pg_notify($1, $2)', [channel, payload])
    },
    exclusive: (key, fn) => inTurns(key, fn),
    close: () => client.close(),
  }
}

export const pgliteDirOf = (dataDir: string) => join(dataDir, 'pglite')
export { sql }

/**
 * Migrations this code ships (drizzle's journal) against those the database recorded as applied.
 */
export async function migrationState(
  database: Pick<Database, 'rows'>,
): Promise<{ expected: number; applied: number }> {
  const journal = JSON.parse(readFileSync(join(MIGRATIONS, 'meta', '_journal.json'), 'utf8')) as {
    entries: unknown[]
  }
  const [r] = await database.rows<{ n: number | string }>(
    sql`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`,
  )
  return { expected: journal.entries.length, applied: Number(r?.n ?? 0) }
}

/** One round trip: whether the database answers at all. */
export async function ping(database: Pick<Database, 'rows'>): Promise<void> {
  await database.rows(sql`SELECT 1`)
}
