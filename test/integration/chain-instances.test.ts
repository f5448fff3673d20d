/**
 * One follower per network across instances (docs/decisions/0045-one-follower-per-network.md), with
 * real processes: three servers on one PostgreSQL follow a chain through a JSON-RPC proxy that
 * tells them apart by URL path and answers slowly (a call at a time), so catching up over 600
 * blocks takes a while. The instance catching up is SIGKILLed part-way; another takes the network
 * over from the stored cursor once the dead one's lease ends. Every payment completes exactly once,
 * and the log queries come from one instance at a time: the one following, then the one that took
 * over, never two interleaved.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { startManualChain, waitUntil } from '../helpers/chain.ts'
import { killAllProcesses, runCli, spawnServer, type ServerProcess } from '../helpers/processes.ts'
import { startRpcProxy } from '../helpers/rpc-proxy.ts'

const describeIfPg = process.env.DATABASE_URL ? describe : describe.skip
const CONFIRMATIONS = 2
const PAYMENTS = 3
const GAP = 200

describeIfPg('three instances following one network', () => {
  const cleanups: (() => Promise<unknown> | unknown)[] = []
  afterAll(async () => {
    await killAllProcesses()
    for (const c of cleanups.reverse()) await c()
  })

  test('the instance catching up is SIGKILLed mid-way: another takes over from the cursor, every payment completes exactly once, log queries from one instance at a time', async () => {
    const chain = await startManualChain()
    cleanups.push(() => chain.stop())
    const proxy = await startRpcProxy(chain.rpcUrl)
    cleanups.push(() => proxy.close())
    const pg = await freshPostgres()
    cleanups.push(() => pg.drop())
    const dir = mkdtempSync(join(tmpdir(), 'chain-instances-'))
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))

    const names = ['i0', 'i1', 'i2']
    const servers: ServerProcess[] = []
    for (const name of names) {
      const file = join(dir, `${name}.json`)
      // Each instance reaches the same node at its own path, so the proxy knows who asked.
      writeFileSync(
        file,
        JSON.stringify([
          {
            name: 'localchain',
            chainId: 31337,
            rpcUrl: `${proxy.url}/${name}`,
            confirmations: CONFIRMATIONS,
            pollIntervalMs: 100,
            testnet: true,
            tokens: [
              { symbol: 'TUSD', decimals: 6, address: chain.token, price: { fixedUsd: '1' } },
            ],
          },
        ]),
      )
      const dataDir = await freshDataDir()
      cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
      servers.push(
        await spawnServer({
          DATA_DIR: dataDir,
          PORT: '0',
          HTTP_PORT: '0',
          LOG_LEVEL: 'info',
          ACTOR_LEASE_MS: '1000',
          NETWORKS_CONFIG: file,
          READY_CHAIN_MAX_LAG: '1h',
          ...pg.env,
        }),
      )
    }
    const cli = async (...args: string[]) =>
      (await runCli([...args, '--json'], { env: { ...pg.env, DATA_DIR: '/nonexistent' } })).json
    const project = await cli('project', 'create', '--name', 'Followers')
    await cli(
      'project',
      'set-limits',
      '--project',
      project.id,
      '--minute',
      '100000',
      '--hour',
      '100000',
      '--day',
      '100000',
    )
    const { key } = await cli(
      'key',
      'create',
      '--project',
      project.id,
      '--mode',
      'test',
      '--name',
      'k',
    )
    const auth = { authorization: `Bearer ${key}` }
    const sql = postgres(pg.url, { max: 1, onnotice: () => {} })
    cleanups.push(() => sql.end())
    const follower = async () =>
      ((await sql`select owner from chain_followers where network = 'localchain'`)[0]?.owner as
        | string
        | undefined) ?? null
    const synced = async () => {
      const [row] = await sql`select cursor from chain_cursors where network = 'localchain'`
      return row ? BigInt(JSON.parse(row.cursor).height) : -1n
    }
    const tx = async (id: string) =>
      (
        (await (
          await servers[2]!.fetch(`/api/transactions/${id}`, { headers: auth })
        ).json()) as any
      ).transaction

    const start = await chain.head()
    await waitUntil('a follower at the head', synced, (h) => h >= start)

    // Transactions on different instances, each with TUSD selected.
    const quotes: { id: string; address: string; units: bigint }[] = []
    for (let i = 0; i < PAYMENTS; i++) {
      const s = servers[i % servers.length]!
      const id = (
        (await (
          await s.fetch('/api/transactions/create', {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ amount: 10 + i }),
          })
        ).json()) as any
      ).transaction.id
      const q = (
        (await (
          await s.fetch(`/pay/${id}/select`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ token_symbol: 'TUSD', blockchain_network: 'localchain' }),
          })
        ).json()) as any
      ).quote
      quotes.push({ id, address: q.deposit_address, units: BigInt(q.token_amount) })
    }

    // While nobody can reach the node, the payments are mined 200 blocks apart: a catch-up of 600
    // blocks.
    proxy.mode = 'refuse'
    for (const q of quotes) {
      await chain.sendRaw(await chain.signTokenTransfer(q.address, q.units))
      await chain.mine(GAP)
    }
    const top = await chain.head()
    // One call at a time, a little slow: the catch-up spans many ticks.
    proxy.beforeCall = () => Bun.sleep(2)
    const before = proxy.calls.length
    proxy.mode = 'pass'

    // The instance catching up is killed once it has asked for logs twice (100 blocks a chunk).
    const logQueries = () => proxy.calls.slice(before).filter((c) => c.method === 'eth_getLogs')
    const [first] = await waitUntil(
      'the catch-up under way',
      async () => logQueries(),
      (q) => q.length >= 2,
      60_000,
    )
    const leader = first!.path!.slice(1)
    const killed = servers[names.indexOf(leader)]!
    killed.kill('SIGKILL')
    await killed.exited
    const killedAt = proxy.calls.length
    expect(await synced()).toBeLessThan(top)

    // Another instance takes over once the dead one's lease ends, from the stored cursor.
    await waitUntil('caught up by another instance', synced, (h) => h >= top, 60_000)
    proxy.beforeCall = undefined
    await chain.mine(CONFIRMATIONS)
    for (const q of quotes) {
      const done = await waitUntil(
        `${q.id} completed`,
        () => tx(q.id),
        (x) => x.status === 'completed',
        30_000,
      )
      expect(done.amount_received).toBe(q.units.toString())
    }

    // Exactly once: one recorded transfer and one payment.detected per transaction.
    for (const q of quotes) {
      const [{ n }] =
        await sql`select count(*)::int as n from chain_transfers where transaction_id = ${q.id} and reorged_at is null`
      expect(n).toBe(1)
      const [{ detected }] =
        await sql`select count(*)::int as detected from transaction_events where transaction_id = ${q.id} and cause = 'payment.detected'`
      expect(detected).toBe(1)
    }
    // Log queries from one instance at a time: the leader until it died, then its successor alone.
    const askers = proxy.calls
      .slice(before)
      .filter((c) => c.method === 'eth_getLogs')
      .map((c) => c.path!.slice(1))
    const runs = askers.filter((a, i) => i === 0 || askers[i - 1] !== a)
    expect(runs).toHaveLength(2)
    expect(runs[0]).toBe(leader)
    expect(proxy.calls.slice(killedAt).some((c) => c.path === `/${leader}`)).toBe(false)
    expect(await follower()).not.toBeNull()
  }, 180_000)
})
