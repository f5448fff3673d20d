/**
 * `bun bench/chain-rpc.ts`: JSON-RPC calls per block followed
 * (docs/decisions/0045-one-follower-per-network.md), counted by a proxy in front of anvil, with one
 * instance and with three instances on one PostgreSQL (only one follows the network: the others
 * must add nothing), and with heads pushed over a WebSocket. A block is mined every BENCH_BLOCK_MS
 * (default 1000) for BENCH_BLOCKS blocks (default 30); the follower polls every BENCH_POLL_MS
 * (default 500). Calls made at start-up (the network's verification) are not counted: counting
 * starts once every instance is up and the follower is at the head. Env: DATABASE_URL.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../src/config.ts'
import { createLogger } from '../src/lib/logger.ts'
import { startServer, type RunningServer } from '../src/server/start.ts'
import { startManualChain, waitUntil } from '../test/helpers/chain.ts'
import { freshDataDir, freshPostgres } from '../test/helpers/databases.ts'
import { startRpcProxy } from '../test/helpers/rpc-proxy.ts'

const BLOCKS = Number(process.env.BENCH_BLOCKS ?? 30)
const BLOCK_MS = Number(process.env.BENCH_BLOCK_MS ?? 1000)
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 500)
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'

async function measure(instances: number, ws: boolean) {
  const chain = await startManualChain()
  const proxy = await startRpcProxy(chain.rpcUrl)
  const pg = await freshPostgres()
  const dir = mkdtempSync(join(tmpdir(), 'chain-rpc-'))
  const file = join(dir, 'networks.json')
  writeFileSync(
    file,
    JSON.stringify([
      {
        name: 'bench',
        chainId: 31337,
        rpcUrl: proxy.url,
        ...(ws ? { wsUrl: chain.rpcUrl.replace(/^http/, 'ws') } : {}),
        confirmations: 2,
        pollIntervalMs: POLL_MS,
        testnet: true,
        tokens: [{ symbol: 'TUSD', decimals: 6, address: chain.token, price: { fixedUsd: '1' } }],
      },
    ]),
  )
  const servers: RunningServer[] = []
  const dirs: string[] = []
  for (let i = 0; i < instances; i++) {
    const dataDir = await freshDataDir()
    dirs.push(dataDir)
    servers.push(
      await startServer(
        loadConfig({
          DATA_DIR: dataDir,
          PORT: '0',
          HTTP_PORT: '0',
          LOG_LEVEL: 'silent',
          NETWORKS_CONFIG: file,
          ACTOR_LEASE_MS: '3000',
          ...pg.env,
        }),
        { logger: createLogger('silent') },
      ),
    )
  }
  const synced = () =>
    servers
      .map((s) => s.services.chain.syncedHeights().bench ?? -1n)
      .reduce((a, b) => (a > b ? a : b))
  const head = await chain.head()
  await waitUntil(
    'a follower at the head',
    async () => synced(),
    (h) => h >= head,
    30_000,
  )
  const from = proxy.calls.length
  for (let i = 0; i < BLOCKS; i++) {
    await Bun.sleep(BLOCK_MS)
    await chain.mine()
  }
  const top = await chain.head()
  await waitUntil(
    'the last block followed',
    async () => synced(),
    (h) => h >= top,
    30_000,
  )
  const calls = proxy.calls.slice(from)
  const byMethod = new Map<string, number>()
  for (const c of calls) byMethod.set(c.method, (byMethod.get(c.method) ?? 0) + 1)
  for (const s of servers) await s.stop()
  await proxy.close()
  await chain.stop()
  await pg.drop()
  for (const d of [...dirs, dir]) rmSync(d, { recursive: true, force: true })
  const perBlock = (n: number) => (n / BLOCKS).toFixed(2)
  const methods = [...byMethod]
    .sort((a, b) => b[1] - a[1])
    .map(([m, n]) => `${m} ${perBlock(n)}`)
    .join(', ')
  return `| ${instances} instance${instances > 1 ? 's' : ''}, ${ws ? 'heads pushed (WebSocket) + polling' : 'polling'} | ${perBlock(calls.length)} | ${methods} |`
}

const rows = [await measure(1, false), await measure(3, false), await measure(1, true)]
console.log(
  `\nMachine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}, Bun ${Bun.version}, PostgreSQL, anvil (a block every ${BLOCK_MS} ms, ${BLOCKS} blocks, poll ${POLL_MS} ms, one ERC-20 watched)`,
)
console.log('\n| setup | JSON-RPC calls per block | by method, per block |\n|---|---:|---|')
for (const r of rows) console.log(r)
process.exit(0)
