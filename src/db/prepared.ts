import type { Column, SQL } from 'drizzle-orm'
import { sql } from 'drizzle-orm'
import { PgDialect } from 'drizzle-orm/pg-core'
import type { Db } from './client.ts'

const dialect = new PgDialect()

/** A statement built once with drizzle and prepared: only its `sql.placeholder()` values change per call. */
export interface Statement<Row, Params extends Record<string, unknown>> {
  execute(params: Params): Promise<Row[]>
}

/**
 * Prepares a statement written with drizzle's `sql` template over schema columns: the type
 * checker sees every table and column it names (a renamed column fails to compile), drizzle
 * renders it once, and the driver prepares it by `name` (PostgreSQL parses and plans it once
 * per connection). For statements the query builder cannot express in one round trip, such
 * as data-modifying CTEs; everything simpler uses the builder's own `.prepare()`.
 */
export function prepare<Row, Params extends Record<string, unknown>>(db: Db, name: string, query: SQL): Statement<Row, Params> {
  const prepared = db._.session.prepareQuery(dialect.sqlToQuery(query), undefined, name, false)
  return {
    async execute(params) {
      const result = (await prepared.execute(params)) as Row[] | { rows: Row[] }
      // postgres.js answers an array, PGlite `{ rows }`.
      return Array.isArray(result) ? result : result.rows
    },
  }
}

/** A column's bare name, for the places SQL wants it unqualified (SET lists, INSERT column lists). */
export const bare = (column: Column): SQL => sql`${sql.identifier(column.name)}`

/** A named placeholder with a cast, e.g. `param('at', 'timestamptz')`. */
export const param = (name: string, type?: string): SQL => (type ? sql`${sql.placeholder(name)}::${sql.raw(type)}` : sql`${sql.placeholder(name)}`)
