/**
 * `bun bench/actors.ts`: the lifecycle's costs (issue 3), with bare baselines from the same run.
 *   1. memory per live transaction actor (heap and RSS) for N actors, against a bare XState
 *      actor of a one-state machine;
 *   2. start-up recovery of N active transactions from PostgreSQL (claim + restore);
 *   3. sustained persisted transitions per second on PostgreSQL, against bare single-row
 *      UPDATEs through the same pool.
 * Env: BENCH_ACTORS (default 100000), BENCH_TRANSITIONS (default 20000), DATABASE_URL (the
 * PostgreSQL server; a fresh database is created and dropped).
 */
import { heapStats } from 'bun:jsc'
import { sql } from 'drizzle-orm'
import { createActor, createMachine } from 'xstate'
import { createLifecycleRepo } from '../src/actors/lifecycle.repo.ts'
import { createScheduler } from '../src/actors/scheduler.ts'
import { createTransactionRegistry } from '../src/actors/transaction-registry.ts'
import { openDatabase, type Database } from '../src/db/client.ts'
import { systemClock } from '../src/lib/clock.ts'
import { createLogger } from '../src/lib/logger.ts'
import { freshPostgres } from '../test/helpers/databases.ts'

const N = Number(process.env.BENCH_ACTORS ?? 100_000)
const TRANSITIONS = Number(process.env.BENCH_TRANSITIONS ?? 20_000)
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'
const logger = createLogger('silent')
const mib = (b: number) => (b / 2 ** 20).toFixed(1)

function memory() {
  Bun.gc(true)
  Bun.gc(true)
  return { heap: heapStats().heapSize, rss: process.memoryUsage().rss }
}

function registry(database: Database, instanceId: string) {
  return createTransactionRegistry({ database, repo: createLifecycleRepo(database), clock: systemClock, logger, scheduler: createScheduler(systemClock), instanceId, leaseMs: 60_000, singleInstance: false })
}

const rows: string[] = []
const report = (line: string) => {
  rows.push(line)
  console.error(line)
}

// 1. Memory per live actor.
{
  const bare = createMachine({ id: 'bare', initial: 'idle', states: { idle: {} } })
  const m0 = memory()
  const bareActors = Array.from({ length: N }, () => createActor(bare).start())
  const m1 = memory()
  for (const a of bareActors) a.stop()
  bareActors.length = 0
  const database = { notify: async () => {}, listen: async () => async () => {} } as unknown as Database
  const reg = registry(database, 'inst_mem')
  const expiresAt = Date.now() + 3_600_000
  const template = reg.initialSnapshot({ transactionId: '00000000-0000-4000-8000-000000000000', expiresAt })
  const m2 = memory()
  for (let i = 0; i < N; i++) {
    const id = crypto.randomUUID()
    const snapshot = JSON.parse(JSON.stringify(template).replaceAll('00000000-0000-4000-8000-000000000000', id))
    reg.adopt(id, snapshot, 0)
  }
  while (reg.size < N) await Bun.sleep(10)
  const m3 = memory()
  const bareHeap = (m1.heap - m0.heap) / N
  const txHeap = (m3.heap - m2.heap) / N
  const txRss = (m3.rss - m2.rss) / N
  report(`| memory per live actor, ${N.toLocaleString()} actors | heap ${(txHeap / 1024).toFixed(2)} KiB, RSS ${(txRss / 1024).toFixed(2)} KiB | bare XState actor: heap ${(bareHeap / 1024).toFixed(2)} KiB | ${(txHeap / bareHeap).toFixed(2)}x |`)
  report(`| projected heap for 1,000,000 live actors | ${mib(txHeap * 1_000_000)} MiB | | |`)
  await reg.stop()
}

// 2. Recovery of N active transactions from PostgreSQL, and 3. persisted transitions per second.
{
  const pg = await freshPostgres()
  const database = await openDatabase({ databaseUrl: pg.url, pgliteDir: null, poolSize: 10 })
  try {
    const seeder = registry(database, 'inst_seed')
    const expiresAt = Date.now() + 3_600_000
    const template = JSON.stringify(seeder.initialSnapshot({ transactionId: 'TEMPLATE', expiresAt }))
    await database.rows(sql`insert into projects (id, name) values ('proj_bench', 'Bench')`)
    const t0 = performance.now()
    await database.rows(sql`
      insert into transactions (id, project_id, testing_mode, transaction_number, status, amount_usd, expires_at, created_at, updated_at)
      select gen_random_uuid(), 'proj_bench', true, 'TX-B' || g, 'created', 25, ${new Date(expiresAt).toISOString()}, now(), now()
      from generate_series(1, ${N}) g`)
    await database.rows(sql`
      insert into transaction_actors (transaction_id, snapshot, machine_version, owner)
      select id, replace(${template}, 'TEMPLATE', id::text)::jsonb, 1, null from transactions`)
    console.error(`seeded ${N} active transactions in ${((performance.now() - t0) / 1000).toFixed(1)} s`)

    const restorer = registry(database, 'inst_restore')
    const r0 = performance.now()
    await restorer.start()
    const recoveryMs = performance.now() - r0
    report(`| recovery of ${N.toLocaleString()} active transactions (PostgreSQL) | ${(recoveryMs / 1000).toFixed(2)} s (${Math.round(N / (recoveryMs / 1000)).toLocaleString()} actors/s) | | |`)
    if (restorer.size !== N) throw new Error(`restored ${restorer.size} of ${N}`)

    // Transitions: token.selected then customer.confirmed on distinct transactions, 64 at a time.
    const ids = ((await database.rows<{ id: string }>(sql`select id from transactions limit ${Math.ceil(TRANSITIONS / 2)}`)) as { id: string }[]).map((r) => r.id)
    const quote = { tokenSymbol: 'USDC', network: 'devnet', tokenAmount: '25000000', depositAddress: '0xabc', requiredConfirmations: 3 }
    let next = 0
    let applied = 0
    const w0 = performance.now()
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < ids.length) {
          const id = ids[next++]
          for (const e of [{ type: 'token.selected' as const, quote }, { type: 'customer.confirmed' as const }]) {
            const r = await restorer.apply(id, e)
            if (!r.ok) throw new Error(r.message)
            applied++
          }
        }
      }),
    )
    const perSecond = applied / ((performance.now() - w0) / 1000)
    // Baseline: one bare single-row UPDATE per "transition", same pool, same concurrency.
    let k = 0
    let bare = 0
    const b0 = performance.now()
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (k < applied) {
          const id = ids[k++ % ids.length]
          await database.query('update transactions set updated_at = now() where id = $1', [id])
          bare++
        }
      }),
    )
    const barePerSecond = bare / ((performance.now() - b0) / 1000)
    report(`| persisted transitions/s (PostgreSQL, 64 concurrent, ${applied.toLocaleString()} transitions) | ${Math.round(perSecond).toLocaleString()} /s | bare single-row UPDATE: ${Math.round(barePerSecond).toLocaleString()} /s | ${((100 * perSecond) / barePerSecond).toFixed(1)}% |`)
    await restorer.stop()
    await seeder.stop()
  } finally {
    await database.close()
    await pg.drop()
  }
}

console.log(`\n${new Date().toISOString()} · Bun ${Bun.version}\n`)
console.log('| measure | result | baseline (same run) | ratio |')
console.log('|---|---|---|---|')
for (const r of rows) console.log(r)
