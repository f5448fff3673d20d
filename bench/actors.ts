/**
 * `bun bench/actors.ts`: the lifecycle's costs (docs/decisions/0027-transaction-actors.md), with
 * bare baselines from the same run.
 *   1. recovery of N active transactions from PostgreSQL: claim, restore and start a running
 *      XState actor each (with its expiry timer child armed on the shared scheduler);
 *   2. heap per running transaction actor, measured on those N actors as the registry holds
 *      them, against a bare XState actor of a one-state machine;
 *   3. sustained persisted transitions per second on PostgreSQL, against bare single-row
 *      UPDATEs through the same pool.
 * Env: BENCH_ACTORS (default 100000), BENCH_TRANSITIONS (default 20000), DATABASE_URL (the
 * PostgreSQL server; a fresh database is created and dropped).
 */
import { heapStats } from 'bun:jsc'
import { sql } from 'drizzle-orm'
import { createActor, createMachine } from 'xstate'
import { MACHINE_VERSION, transactionMachine } from '../machines/transaction.machine.ts'
import { createInstanceLease } from '../src/instances/lease.ts'
import { createInstanceRepo } from '../src/instances/instance.repo.ts'
import { createLifecycleRepo } from '../src/actors/lifecycle.repo.ts'
import { createScheduler } from '../src/actors/scheduler.ts'
import { createTransactionRegistry } from '../src/actors/transaction-registry.ts'
import { openDatabase, type Database } from '../src/db/client.ts'
import { bare, param, prepare } from '../src/db/prepared.ts'
import { transactions } from '../src/db/schema.ts'
import { systemClock } from '../src/lib/clock.ts'
import { createLogger } from '../src/lib/logger.ts'
import { freshPostgres } from '../test/helpers/databases.ts'

const N = Number(process.env.BENCH_ACTORS ?? 100_000)
const TRANSITIONS = Number(process.env.BENCH_TRANSITIONS ?? 20_000)
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'
const logger = createLogger('silent')
const mib = (b: number) => (b / 2 ** 20).toFixed(1)
const gib = (b: number) => (b / 2 ** 30).toFixed(2)

function memory() {
  Bun.gc(true)
  Bun.gc(true)
  return { heap: heapStats().heapSize, rss: process.memoryUsage().rss }
}

function registry(database: Database, instanceId: string) {
  const lease = createInstanceLease({
    repo: createInstanceRepo(database.db),
    clock: systemClock,
    logger,
    instanceId,
    leaseMs: 600_000,
  })
  const scheduler = createScheduler(systemClock)
  const reg = createTransactionRegistry({
    database,
    repo: createLifecycleRepo(database),
    lease,
    clock: systemClock,
    logger,
    scheduler,
    singleInstance: false,
  })
  return {
    reg,
    scheduler,
    lease,
    stop: async () => (await reg.stop(), await lease.stop(), scheduler.stop()),
  }
}

const rows: string[] = []
const report = (line: string) => {
  rows.push(line)
  console.error(line)
}

// Baseline: a bare XState actor of a one-state machine.
const bareMachine = createMachine({ id: 'bare', initial: 'idle', states: { idle: {} } })
const m0 = memory()
const bareActors = Array.from({ length: N }, () => createActor(bareMachine).start())
const m1 = memory()
const bareHeap = (m1.heap - m0.heap) / N
for (const a of bareActors) a.stop()
bareActors.length = 0

const pg = await freshPostgres()
const database = await openDatabase({ databaseUrl: pg.url, pgliteDir: null, poolSize: 10 })
try {
  const expiresAt = Date.now() + 3_600_000
  const seed = createActor(transactionMachine, { input: { transactionId: 'TEMPLATE', expiresAt } })
  const template = JSON.stringify(seed.getPersistedSnapshot())
  await database.rows(sql`insert into projects (id, name) values ('proj_bench', 'Bench')`)
  const t0 = performance.now()
  await database.rows(sql`
    insert into transactions (id, project_id, testing_mode, transaction_number, status, amount_usd, amount_in_currency, expires_at, created_at, updated_at)
    select gen_random_uuid(), 'proj_bench', true, 'TX-B' || g, 'created', 25, 25, ${new Date(expiresAt).toISOString()}, now(), now()
    from generate_series(1, ${N}) g`)
  await database.rows(sql`
    insert into transaction_actors (transaction_id, snapshot, machine_version, owner)
    select id, replace(${template}, 'TEMPLATE', id::text)::jsonb, ${MACHINE_VERSION}, null from transactions`)
  console.error(
    `seeded ${N} active transactions in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  )

  // 1. Recovery, and 2. memory of the running actors it leaves.
  const restorer = registry(database, 'inst_restore')
  const before = memory()
  const r0 = performance.now()
  await restorer.reg.start()
  const recoveryMs = performance.now() - r0
  if (restorer.reg.size !== N) throw new Error(`restored ${restorer.reg.size} of ${N}`)
  if (restorer.scheduler.size !== N)
    throw new Error(`${restorer.scheduler.size} timers armed for ${N} actors`)
  const after = memory()
  const txHeap = (after.heap - before.heap) / N
  const txRss = (after.rss - before.rss) / N
  report(
    `| recovery of ${N.toLocaleString()} active transactions (PostgreSQL): claim, restore, start, arm the timer | ${(recoveryMs / 1000).toFixed(2)} s (${Math.round(N / (recoveryMs / 1000)).toLocaleString()} actors/s) (budget <= 8 s) | | |`,
  )
  report(
    `| heap per running transaction actor, ${N.toLocaleString()} actors (registry entry, actor, timer child, scheduler entry) | heap ${(txHeap / 1024).toFixed(2)} KiB, RSS ${(txRss / 1024).toFixed(2)} KiB (budget <= 6 KiB) | bare XState actor: heap ${(bareHeap / 1024).toFixed(2)} KiB | ${(txHeap / bareHeap).toFixed(2)}x |`,
  )
  report(
    `| projected heap for 1,000,000 running actors | ${gib(txHeap * 1_000_000)} GiB (${mib(txHeap * 1_000_000)} MiB; budget <= 6 GiB) | | |`,
  )

  // 3. Transitions: token.selected then customer.confirmed on distinct transactions, 64 at a time.
  const ids = (
    (await database.rows<{ id: string }>(
      sql`select id from transactions limit ${Math.ceil(TRANSITIONS / 2)}`,
    )) as { id: string }[]
  ).map((r) => r.id)
  const quote = {
    tokenSymbol: 'USDC',
    network: 'devnet',
    tokenAmount: '25000000',
    depositAddress: '0xabc',
    requiredConfirmations: 3,
  }
  let next = 0
  let applied = 0
  const w0 = performance.now()
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < ids.length) {
        const id = ids[next++]
        for (const e of [
          { type: 'token.selected' as const, quote },
          { type: 'customer.confirmed' as const },
        ]) {
          const r = await restorer.reg.apply(id, e)
          if (!r.ok) throw new Error(r.message)
          applied++
        }
      }
    }),
  )
  const perSecond = applied / ((performance.now() - w0) / 1000)
  // Baseline: one bare single-row UPDATE per "transition", same pool, same concurrency.
  const bareUpdate = prepare(
    database,
    sql`update ${transactions} set ${bare(transactions.updatedAt)} = now() where ${transactions.id} = ${param('id', 'uuid')}`,
  )
  let k = 0
  let bareCount = 0
  const b0 = performance.now()
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (k < applied) {
        const id = ids[k++ % ids.length]
        await bareUpdate.execute({ id })
        bareCount++
      }
    }),
  )
  const barePerSecond = bareCount / ((performance.now() - b0) / 1000)
  report(
    `| persisted transitions/s (PostgreSQL, 64 concurrent, ${applied.toLocaleString()} transitions, running actors) | ${Math.round(perSecond).toLocaleString()} /s (budget >= 1,775, 80% of 2,219) | bare single-row UPDATE: ${Math.round(barePerSecond).toLocaleString()} /s | ${((100 * perSecond) / barePerSecond).toFixed(1)}% |`,
  )
  await restorer.stop()
} finally {
  await database.close()
  await pg.drop()
}

console.log(`\n${new Date().toISOString()} · Bun ${Bun.version}\n`)
console.log('| measure | result | baseline (same run) | ratio |')
console.log('|---|---|---|---|')
for (const r of rows) console.log(r)
