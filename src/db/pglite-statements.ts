import { parse, protocol, type PGlite, type Transaction } from '@electric-sql/pglite'

type Query = PGlite['query']
type Options = Parameters<Query>[2]
interface Described {
  name: string
  paramTypes: number[]
}
interface BackendMessage {
  name: string
  dataTypeIDs?: number[]
}

/** Statements kept prepared; the least recently used beyond this are closed. */
export const PGLITE_STATEMENTS_KEPT = 256
/**
 * Errors that mean a kept statement went stale rather than that the call was wrong: the same
 * PostgreSQL routines after which postgres.js prepares again (a table changed under the
 * statement: "cached plan must not change result type", a column's type; or the statement is gone).
 */
const STALE_ROUTINES = new Set([
  'FetchPreparedStatement',
  'RevalidateCachedQuery',
  'transformAssignedExpr',
])

const { serialize } = protocol

/**
 * PGlite's private methods this builds on (0.5.16): its readiness check and the two locks its own
 * `query` takes. Its public `runExclusive` takes the query lock only, and no public method takes
 * the transaction lock without opening a transaction (a BEGIN and a COMMIT more per statement):
 * without that lock a statement could run inside a transaction another caller has open.
 */
const PRIVATE_METHODS = ['_checkReady', '_runExclusiveTransaction', '_runExclusiveQuery'] as const

/**
 * Whether this PGlite has what named statements need; without it (a PGlite that renamed or
 * dropped those methods) `withNamedStatements` leaves PGlite's own `query` in place
 * (docs/upstream/pglite.md: the same results, each statement parsed and planned every time).
 */
export const namedStatementsSupported = (client: PGlite): boolean =>
  PRIVATE_METHODS.every((m) => typeof client[m] === 'function') &&
  typeof client.execProtocolStream === 'function'

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/**
 * PGlite's `query` parses, describes and plans its text on every call, in six calls into the
 * database. Under a create load that was most of PGlite's time: parse, describe and bind (where
 * PostgreSQL plans) 56% of the time spent inside PGlite, execution 36% (bench/RESULTS.md,
 * docs/decisions/0052-the-embedded-database-in-one-process.md). This gives PGlite
 * what postgres.js does on PostgreSQL (and what src/db/prepared.ts promises): each text with
 * parameters is parsed once as a named statement, so PostgreSQL can reuse its plan, and every
 * later call is one message batch (bind, describe, execute, sync). Same locks as `query` (none
 * of it runs inside another caller's transaction), same results and errors, in transactions
 * too; texts without parameters and queries given a blob go to PGlite's own `query`. A kept
 * statement that went stale (a table changed under it) is prepared again.
 */
export function withNamedStatements(client: PGlite, kept = PGLITE_STATEMENTS_KEPT): PGlite {
  if (!namedStatementsSupported(client)) return client
  const plain = client.query.bind(client) as Query
  /** Text -> its statement; Map order is use order, the least recent first. */
  const statements = new Map<string, Described>()
  /** Close messages of evicted statements, sent with the next batch. */
  const closing: Uint8Array[] = []
  let counter = 0

  async function prepared(text: string, options: Options): Promise<Described> {
    const known = statements.get(text)
    if (known) {
      statements.delete(text)
      statements.set(text, known)
      return known
    }
    const name = `pglite_${++counter}`
    const messages = (await client.execProtocolStream(
      concat([
        ...closing.splice(0),
        serialize.parse({ name, text, types: options?.paramTypes }),
        serialize.describe({ type: 'S', name }),
        serialize.sync(),
      ]),
      { syncToFs: false, onNotice: options?.onNotice },
    )) as BackendMessage[]
    const described = {
      name,
      paramTypes: messages.find((m) => m.name === 'parameterDescription')?.dataTypeIDs ?? [],
    }
    statements.set(text, described)
    if (statements.size > kept) {
      const [oldest, old] = statements.entries().next().value!
      statements.delete(oldest)
      closing.push(serialize.close({ type: 'S', name: old.name }))
    }
    return described
  }

  async function execute(
    text: string,
    params: unknown[],
    options: Options,
    inTransaction: boolean,
  ) {
    const s = await prepared(text, options)
    const values = params.map((v, i) => {
      if (v === null || v === undefined) return null
      const serializer =
        options?.serializers?.[s.paramTypes[i]!] ?? client.serializers[s.paramTypes[i]!]
      return serializer ? serializer(v) : String(v)
    })
    const messages = await client.execProtocolStream(
      concat([
        ...closing.splice(0),
        serialize.bind({ statement: s.name, values }),
        serialize.describe({ type: 'P' }),
        serialize.execute({}),
        serialize.sync(),
      ]),
      { syncToFs: false, onNotice: options?.onNotice },
    )
    // As PGlite's own query: the file system is synced after a statement, not inside a transaction.
    if (!inTransaction) await client.syncToFs()
    return parse.parseResults(messages as never, client.parsers, options)[0]!
  }

  /**
   * Runs a statement; one that went stale is prepared again and, outside a transaction (inside, the
   * error aborted it), run again.
   */
  async function run(text: string, params: unknown[], options: Options, inTransaction: boolean) {
    try {
      return await execute(text, params, options, inTransaction)
    } catch (e) {
      const stale = statements.get(text)
      if (!stale || !STALE_ROUTINES.has((e as { routine?: string }).routine ?? '')) throw e
      statements.delete(text)
      closing.push(serialize.close({ type: 'S', name: stale.name }))
      if (inTransaction) throw e
      return execute(text, params, options, false)
    }
  }

  client.query = (async (text: string, params?: unknown[], options?: Options) => {
    if (!params?.length || options?.blob) return plain(text, params, options)
    await client._checkReady()
    return client._runExclusiveTransaction(() =>
      client._runExclusiveQuery(() => run(text, params, options, false)),
    )
  }) as Query

  // Inside a transaction its caller holds the transaction lock already: a statement takes the query
  // lock only, as PGlite's own.
  const transaction = client.transaction.bind(client)
  client.transaction = ((fn: Parameters<PGlite['transaction']>[0]) =>
    transaction((tx) => {
      const own = tx.query.bind(tx)
      const query = (async (text: string, params?: unknown[], options?: Options) => {
        if (!params?.length || options?.blob || tx.closed) return own(text, params, options)
        return client._runExclusiveQuery(() => run(text, params, options, true))
      }) as Transaction['query']
      return fn(Object.create(tx, { query: { value: query } }))
    })) as PGlite['transaction']
  return client
}
