/**
 * src/db/client.ts on both databases: the values a repository gets back do not depend on the
 * database. Timestamps come back from raw statements as text on both (PGlite is given the
 * parsers drizzle sets on postgres.js, once per instance, instead of drizzle sending them with
 * every query, which made PGlite copy its whole parser table each time); drizzle's query
 * builder still maps timestamp columns to Date on both, in and out of transactions.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { eq } from 'drizzle-orm'
import { rmSync } from 'node:fs'
import { openDatabase, pgliteDirOf, type Database } from '../../src/db/client.ts'
import { projects } from '../../src/db/schema.ts'
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
      const [row] = await d.query<{ at: unknown; day: unknown; span: unknown; ats: unknown }>(read, [AT])
      const [inTx] = await d.transaction((q) => q<{ at: unknown; day: unknown; span: unknown; ats: unknown }>(read, [AT]))
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
      await d.query(`INSERT INTO projects (id, name, created_at) VALUES ('proj_client_test', 'Client test', $1::timestamptz)`, [AT])
      const [p] = await d.db.select({ createdAt: projects.createdAt }).from(projects).where(eq(projects.id, 'proj_client_test'))
      const [q] = await d.db.transaction((tx) => tx.select({ createdAt: projects.createdAt }).from(projects).where(eq(projects.id, 'proj_client_test')))
      for (const r of [p!, q!]) {
        expect(r.createdAt).toBeInstanceOf(Date)
        expect(r.createdAt.toISOString()).toBe(AT)
      }
    })
  })
}
