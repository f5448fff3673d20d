/**
 * src/db/client.ts on both databases: the values a repository gets back do not depend on the
 * database. Timestamps come back from raw statements as text on both (PGlite is given the
 * parsers drizzle sets on postgres.js, once per instance, instead of drizzle sending them with
 * every query, which made PGlite copy its whole parser table each time); drizzle's query
 * builder still maps timestamp columns to Date on both, in and out of transactions. The embedded
 * database does not zero-fill its new WAL segments (each stopped the server for ~50 ms).
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { PGlite } from '@electric-sql/pglite'
import { eq, sql } from 'drizzle-orm'
import { readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import { openDatabase, pgliteDirOf, type Database } from '../../src/db/client.ts'
import { isUniqueViolation } from '../../src/db/errors.ts'
import { namedStatementsSupported, withNamedStatements } from '../../src/db/pglite-statements.ts'
import { projects } from '../../src/db/schema.ts'
import { createInstanceRepo } from '../../src/instances/instance.repo.ts'
import { backends, freshDataDir, freshPostgres } from '../helpers/databases.ts'

const AT = '2026-01-02T03:04:05.678Z'

for (const backend of backends()) {
  describe(`database client [${backend}]`, () => {
    let database: Database
    const cleanup: (() => Promise<void> | void)[] = []
    afterAll(async () => {
      await database?.close()
      for (const c of cleanup.reverse()) await c()
    })

    const open = async () => {
      if (database) return database
      if (backend === 'postgres') {
        const pg = await freshPostgres()
        cleanup.push(() => pg.drop())
        database = await openDatabase({ databaseUrl: pg.url, pgliteDir: null })
      } else {
        const dataDir = await freshDataDir()
        cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }))
        database = await openDatabase({ databaseUrl: null, pgliteDir: pgliteDirOf(dataDir) })
      }
      return database
    }

    test('raw statements read timestamps, dates and intervals as text, in and out of a transaction', async () => {
      const d = await open()
      const read = `SELECT $1::timestamptz AS at, $1::timestamptz::date AS day, interval '90 minutes' AS span, ARRAY[$1::timestamptz] AS ats`
      const [row] = await d.query<{ at: unknown; day: unknown; span: unknown; ats: unknown }>(
        read,
        [AT],
      )
      const [inTx] = await d.transaction((q) =>
        q<{ at: unknown; day: unknown; span: unknown; ats: unknown }>(read, [AT]),
      )
      for (const r of [row!, inTx!]) {
        expect(typeof r.at).toBe('string')
        expect(new Date(r.at as string).toISOString()).toBe(AT)
        expect(r.day).toBe('2026-01-02')
        expect(r.span).toBe('01:30:00')
        expect(typeof r.ats).toBe('string')
      }
    })

    test("drizzle's builder still maps timestamp columns to Date, in and out of a transaction", async () => {
      const d = await open()
      await d.query(
        `INSERT INTO projects (id, name, created_at) VALUES ('proj_client_test', 'Client test', $1::timestamptz)`,
        [AT],
      )
      const [p] = await d.db
        .select({ createdAt: projects.createdAt })
        .from(projects)
        .where(eq(projects.id, 'proj_client_test'))
      const [q] = await d.db.transaction((tx) =>
        tx
          .select({ createdAt: projects.createdAt })
          .from(projects)
          .where(eq(projects.id, 'proj_client_test')),
      )
      for (const r of [p!, q!]) {
        expect(r.createdAt).toBeInstanceOf(Date)
        expect(r.createdAt.toISOString()).toBe(AT)
      }
    })

    test('a statement that failed is the same statement next time: its error as PostgreSQL gave it, then its result', async () => {
      const d = await open()
      const insert = 'INSERT INTO projects (id, name) VALUES ($1, $2) RETURNING id, name'
      expect(await d.query(insert, ['proj_client_twice', 'First'])).toEqual([
        { id: 'proj_client_twice', name: 'First' },
      ])
      const failed = await d.query(insert, ['proj_client_twice', 'Again']).catch((e) => e)
      expect(failed.code).toBe('23505')
      expect(isUniqueViolation(failed, 'projects_pkey')).toBe(true)
      expect(await d.query(insert, ['proj_client_other', 'Other'])).toEqual([
        { id: 'proj_client_other', name: 'Other' },
      ])
    })

    test('a table changed under a statement used before: the statement reads the table as it is now', async () => {
      const d = await open()
      await d.query(`CREATE TABLE client_changes (id int PRIMARY KEY, a text)`, [])
      await d.query(`INSERT INTO client_changes VALUES (1, 'x')`, [])
      const read = 'SELECT * FROM client_changes WHERE id = $1'
      // Used enough times for PostgreSQL to keep a generic plan, on every connection of the pool.
      for (let i = 0; i < 30; i++) expect(await d.query(read, [1])).toEqual([{ id: 1, a: 'x' }])
      await d.query(`ALTER TABLE client_changes ADD COLUMN b text NOT NULL DEFAULT 'y'`, [])
      for (let i = 0; i < 30; i++)
        expect(await d.query(read, [1])).toEqual([{ id: 1, a: 'x', b: 'y' }])
      await d.query(`ALTER TABLE client_changes ALTER COLUMN a TYPE int USING length(a)`, [])
      expect(
        await d.query('UPDATE client_changes SET a = $1 WHERE id = 1 RETURNING a', [7]),
      ).toEqual([{ a: 7 }])
      for (let i = 0; i < 30; i++)
        expect(await d.query(read, [1])).toEqual([{ id: 1, a: 7, b: 'y' }])
    })
  })
}

describe.if(backends().includes('postgres'))('the instance lease on PostgreSQL', () => {
  test('renews on a connection of its own: while every connection of the pool waits on a lock, a renewal is written', async () => {
    const pg = await freshPostgres()
    const database = await openDatabase({ databaseUrl: pg.url, pgliteDir: null, poolSize: 2 })
    const holder = postgres(pg.url, { max: 1, onnotice: () => {} })
    try {
      await holder`select pg_advisory_lock(4242)`
      // Both pool connections block until the holder lets go (each then holds the lock only for
      // its own statement).
      const blocked = [1, 2].map(() => database.rows(sql`select pg_advisory_xact_lock(4242)`))
      while (
        (
          await holder`select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted`
        )[0]!.n < 2
      )
        await new Promise((r) => setTimeout(r, 10))
      const repo = createInstanceRepo(database.leaseDb)
      const until = new Date(Date.now() + 10_000)
      await repo.renew('inst_lease_conn', until, new Date())
      const [row] = await holder`select lease_until from instances where id = 'inst_lease_conn'`
      expect(new Date(row!.lease_until).toISOString()).toBe(until.toISOString())
      await holder`select pg_advisory_unlock(4242)`
      await Promise.all(blocked)
    } finally {
      await holder.end()
      await database.close()
      await pg.drop()
    }
  })
})

describe.if(backends().includes('postgres'))('exclusive sections on PostgreSQL', () => {
  test('two instances never run a section of the same key at once; other keys run beside it; a thrown section lets go', async () => {
    const pg = await freshPostgres()
    const [a, b] = await Promise.all(
      [1, 2].map(() => openDatabase({ databaseUrl: pg.url, pgliteDir: null, poolSize: 3 })),
    )
    try {
      const log: string[] = []
      let inside = 0
      let most = 0
      const section = (d: Database, key: string, name: string) =>
        d.exclusive(key, async () => {
          inside++
          most = Math.max(most, inside)
          log.push(`${name} in`)
          // Long enough for the other instance to ask for the lock meanwhile.
          await d.rows(sql`select pg_sleep(0.05)`)
          log.push(`${name} out`)
          inside--
        })
      await Promise.all(
        [1, 2, 3].flatMap((i) => [section(a!, 'k', `a${i}`), section(b!, 'k', `b${i}`)]),
      )
      expect(most).toBe(1)
      // Each section left before the next came in.
      for (let i = 0; i < log.length; i += 2)
        expect(log[i + 1]).toBe(log[i]!.replace(' in', ' out'))
      // A different key is not held up by a section of this one.
      let release!: () => void
      let entered!: () => void
      const held = new Promise<void>((r) => (entered = r))
      const holding = a!.exclusive('k', () => {
        entered()
        return new Promise<void>((r) => (release = r))
      })
      // Held first, then the other key is asked for.
      await held
      await b!.exclusive('other', async () => {})
      release()
      await holding
      // A section that throws lets go of the lock.
      await expect(
        a!.exclusive('k', async () => {
          throw new Error('boom')
        }),
      ).rejects.toThrow('boom')
      expect(await b!.exclusive('k', async () => 'free')).toBe('free')
    } finally {
      await Promise.all([a!.close(), b!.close()])
      await pg.drop()
    }
  })
})

describe('the embedded database', () => {
  test("does not write a new WAL segment full of zeros before using it (16 MB, a ~50 ms stop of the server's thread)", async () => {
    const dataDir = await freshDataDir()
    const database = await openDatabase({ databaseUrl: null, pgliteDir: pgliteDirOf(dataDir) })
    try {
      const wal = join(pgliteDirOf(dataDir), 'pg_wal')
      const segments = () =>
        readdirSync(wal)
          .filter((f) => /^[0-9A-F]{24}$/.test(f))
          .sort()
      const before = segments()
      await database.query('SELECT pg_switch_wal()', [])
      await database.query('CREATE TABLE after_the_switch (a int)', [])
      const made = segments().filter((f) => !before.includes(f))
      expect(made).toHaveLength(1)
      const file = statSync(join(wal, made[0]!))
      expect(file.size).toBe(16 * 1024 * 1024)
      // Made at its full size, but only what was written since takes room on the disk.
      expect(file.blocks * 512).toBeLessThan(file.size / 4)
    } finally {
      await database.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})

describe('PGlite statements with parameters', () => {
  let client: PGlite
  afterAll(() => client?.close())
  const kept = async () =>
    (
      await client.query<{ statement: string }>(
        'SELECT statement FROM pg_prepared_statements ORDER BY prepare_time',
      )
    ).rows.map((r) => r.statement)

  test('are parsed once, then only bound and run: one prepared statement however often used', async () => {
    client = withNamedStatements(new PGlite(), 2)
    // The installed PGlite has the private locks they need (docs/upstream/pglite.md).
    expect(namedStatementsSupported(client)).toBe(true)
    const add = 'SELECT $1::int + $2::int AS sum'
    for (let i = 0; i < 5; i++)
      expect((await client.query<{ sum: number }>(add, [i, 1])).rows).toEqual([{ sum: i + 1 }])
    expect(await kept()).toEqual([add])
  })

  test('beyond the number kept, the least recently used is closed', async () => {
    const [a, b, c] = ['SELECT $1::text AS a', 'SELECT $1::text AS b', 'SELECT $1::text AS c']
    await client.query(a, ['1'])
    await client.query(b, ['1'])
    await client.query(a, ['2'])
    await client.query(c, ['1'])
    // The close goes with the next statement.
    expect((await client.query<{ a: string }>(a, ['3'])).rows).toEqual([{ a: '3' }])
    expect((await kept()).sort()).toEqual([a, c].sort())
    expect((await client.query<{ b: string }>(b, ['2'])).rows).toEqual([{ b: '2' }])
  })

  test('inside a transaction too, where a rollback takes back what they wrote', async () => {
    await client.query('CREATE TABLE tx_rows (v int)')
    const insert = 'INSERT INTO tx_rows VALUES ($1) RETURNING v'
    await client.transaction(async (tx) => {
      for (let v = 1; v <= 3; v++) expect((await tx.query(insert, [v])).rows).toEqual([{ v }])
    })
    await client.transaction(async (tx) => {
      await tx.query(insert, [4])
      await tx.rollback()
    })
    expect((await client.query('SELECT v FROM tx_rows ORDER BY v')).rows).toEqual([
      { v: 1 },
      { v: 2 },
      { v: 3 },
    ])
    expect((await kept()).filter((s) => s === insert)).toEqual([insert])
  })

  test('never run inside a transaction another caller has open', async () => {
    await client.query('CREATE TABLE tx_probe (v int)')
    let inside!: () => void
    const held = new Promise<void>((r) => (inside = r))
    let release!: () => void
    const done = client.transaction(async (tx) => {
      await tx.query('INSERT INTO tx_probe VALUES (1)')
      inside()
      await new Promise<void>((r) => (release = r))
      await tx.rollback()
    })
    await held
    const outside = client.query('INSERT INTO tx_probe VALUES ($1) RETURNING v', [2])
    // Everything the outside call could do before the transaction ends, it has done.
    await new Promise((r) => setImmediate(r))
    release()
    await done
    expect((await outside).rows).toEqual([{ v: 2 }])
    expect((await client.query('SELECT v FROM tx_probe')).rows).toEqual([{ v: 2 }])
  })
})

describe('a PGlite without the private methods named statements need', () => {
  test('is left as it is: its own query and transaction answer, every statement parsed and planned each time', () => {
    // PGlite's own query calls these very methods, so a working PGlite without them can only be
    // a later release that renamed them; a stand-in with the public methods plays it here.
    const query = async () => ({ rows: [] })
    const transaction = async () => undefined
    const later = { query, transaction, execProtocolStream: query } as unknown as PGlite
    expect(namedStatementsSupported(later)).toBe(false)
    const client = withNamedStatements(later)
    expect(client).toBe(later)
    expect(client.query).toBe(query as never)
    expect(client.transaction).toBe(transaction as never)
  })
})
