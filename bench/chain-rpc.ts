/**
 * `bun bench/chain-rpc.ts`: JSON-RPC calls per block followed
 * (docs/decisions/0045-one-follower-per-network.md), counted by a proxy in front of anvil, with one
 * instance and with three instances on one PostgreSQL (only one follows the network: the others
 * must add nothing), and with heads pushed over a WebSocket. A block is mined every BENCH_BLOCK_MS
 * (default 1000) for BENCH_BLOCKS blocks (default 30); the follower polls every BENCH_POLL_MS
 * (default 500). Calls made at start-up (the network's verification) are not counted: counting
 * starts once every instance is up and the follower is at the head. Env: DATABASE_URL.
 *
 * Then the same with BENCH_NATIVE_QUOTES (default 10,000) open transactions quoted in the native
 * coin, each with its own deposit address, written straight into the database: the follower reads
 * all their balances at every chunk of blocks (docs/decisions/0046-native-coin-by-internal-call.md),
 * through Multicall3 where the chain has it, and by eth_getBalance batches where it does not.
 * BENCH_NATIVE_ONLY=1 runs only these two.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { installMulticall3 } from '../src/chain/devnet.ts'
import { loadConfig } from '../src/config.ts'
import { createLogger } from '../src/lib/logger.ts'
import { startServer, type RunningServer } from '../src/server/start.ts'
import { startManualChain, waitUntil } from '../test/helpers/chain.ts'
import { freshDataDir, freshPostgres } from '../test/helpers/databases.ts'
import { startRpcProxy } from '../test/helpers/rpc-proxy.ts'

const BLOCKS = Number(process.env.BENCH_BLOCKS ?? 30)
const BLOCK_MS = Number(process.env.BENCH_BLOCK_MS ?? 1000)
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 500)
const NATIVE_QUOTES = Number(process.env.BENCH_NATIVE_QUOTES ?? 10_000)
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'

/**
 * `native`: the network accepts its native coin and has NATIVE_QUOTES open quotes in it, the chain
 * Multicall3 (`multicall3`) or not.
 */
async function measure(
  instances: number,
  ws: boolean,
  native?: { multicall3: boolean },
): Promise<string> {
  const chain = await startManualChain()
  if (native?.multicall3) await installMulticall3(chain.client)
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
        tokens: [
          { symbol: 'TUSD', decimals: 6, address: chain.token, price: { fixedUsd: '1' } },
          ...(native
            ? [{ symbol: 'ETH', decimals: 18, native: true, price: { fixedUsd: '3000' } }]
            : []),
        ],
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
  if (native) await openNativeQuotes(pg.url)
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
    native ? 180_000 : 30_000,
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
  const setup = `${instances} instance${instances > 1 ? 's' : ''}, ${ws ? 'heads pushed (WebSocket) + polling' : 'polling'}`
  const quotes = native
    ? `, ${NATIVE_QUOTES.toLocaleString('en')} open native quotes, ${native.multicall3 ? 'Multicall3' : 'no Multicall3 (eth_getBalance batches)'}`
    : ''
  return `| ${setup}${quotes} | ${perBlock(calls.length)} | ${methods} |`
}

/**
 * NATIVE_QUOTES open transactions quoted in ETH on the network, each with its own deposit address,
 * as the follower's balance watch finds them (chain.repo.ts `nativeWatch`).
 */
async function openNativeQuotes(url: string) {
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    await sql`INSERT INTO projects (id, name) VALUES ('proj_bench_native', 'native quotes')`
    await sql.unsafe(
      `INSERT INTO transactions (id, project_id, testing_mode, transaction_number, status, amount_usd,
        amount_in_currency, token_symbol, token_amount, blockchain_network, deposit_address,
        native_baseline, native_baseline_network, finality, required_confirmations, expires_at,
        created_at, updated_at)
      SELECT gen_random_uuid(), 'proj_bench_native', true, 'NATIVE-' || g, 'pending', 30, 30, 'ETH',
        10000000000000000, 'bench', '0x' || md5('native-' || g) || lpad(to_hex(g), 8, '0'), 0,
        'bench', 'confirmations', 2, now() + interval '1 day', now(), now()
      FROM generate_series(1, $1::int) g`,
      [NATIVE_QUOTES],
    )
  } finally {
    await sql.end()
  }
}

const rows =
  process.env.BENCH_NATIVE_ONLY === '1'
    ? []
    : [await measure(1, false), await measure(3, false), await measure(1, true)]
rows.push(
  await measure(1, false, { multicall3: true }),
  await measure(1, false, { multicall3: false }),
)
console.log(
  `\nMachine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}, Bun ${Bun.version}, PostgreSQL, anvil (a block every ${BLOCK_MS} ms, ${BLOCKS} blocks, poll ${POLL_MS} ms, one ERC-20 watched; with native quotes also the native coin)`,
)
console.log('\n| setup | JSON-RPC calls per block | by method, per block |\n|---|---:|---|')
for (const r of rows) console.log(r)
process.exit(0)
