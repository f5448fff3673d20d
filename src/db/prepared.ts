import type { Column, SQL } from 'drizzle-orm'
import { Placeholder, sql } from 'drizzle-orm'
import { PgDialect } from 'drizzle-orm/pg-core'
import type { Database } from './client.ts'

const dialect = new PgDialect()

type Value = string | number | boolean | null

/**
 * A statement built once with drizzle and prepared: only its `sql.placeholder()` values change per
 * call.
 */
export interface Statement<Row, Params extends Record<string, Value | undefined>> {
  execute(params: Params): Promise<Row[]>
  /** The SQL as sent (tests, EXPLAIN). */
  readonly text: string
}

/**
 * Prepares a statement written with drizzle's `sql` template over schema columns: the type
 * checker sees every table and column it names (a renamed column fails to compile), and drizzle
 * renders it once. A placeholder used several times is sent once (`$n` repeated in the text),
 * and the text is prepared once per connection (postgres.js on PostgreSQL,
 * src/db/pglite-statements.ts on PGlite). For statements the query builder
 * cannot express in one round trip, such as data-modifying CTEs; everything simpler uses the
 * builder's own `.prepare()`. Values go as strings, numbers, booleans or null: dates as ISO
 * strings with a `::timestamptz` cast, JSON as text with `::jsonb`.
 */
export function prepare<Row, Params extends Record<string, Value | undefined>>(
  database: Pick<Database, 'query'>,
  query: SQL,
): Statement<Row, Params> {
  const rendered = dialect.sqlToQuery(query)
  const names: string[] = []
  const renumbered = new Map<number, number>()
  rendered.params.forEach((p, i) => {
    if (!(p instanceof Placeholder))
      throw new Error(
        `prepared statements take placeholders only; got a literal value at $${i + 1}`,
      )
    const at = names.indexOf(p.name)
    renumbered.set(i + 1, at >= 0 ? at + 1 : names.push(p.name))
  })
  const text = rendered.sql.replace(/\$(\d+)\b/g, (_, n) => `$${renumbered.get(Number(n))}`)
  return {
    text,
    execute(params) {
      return database.query<Row>(
        text,
        names.map((n) => {
          // A misspelt or forgotten placeholder is a bug, not a NULL.
          if (params[n] === undefined)
            throw new Error(`prepared statement: no value for placeholder "${n}"`)
          return params[n] ?? null
        }),
      )
    },
  }
}

/**
 * A column's bare name, for the places SQL wants it unqualified (SET lists, INSERT column lists).
 */
export const bare = (column: Column): SQL => sql`${sql.identifier(column.name)}`

/** A named placeholder with a cast, e.g. `param('at', 'timestamptz')`. */
export const param = (name: string, type?: string): SQL =>
  type ? sql`${sql.placeholder(name)}::${sql.raw(type)}` : sql`${sql.placeholder(name)}`
