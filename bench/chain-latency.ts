/**
 * `bun bench/chain-latency.ts`: latency from a payment's block being mined to the `processing`
 * transition committed (docs/decisions/0030-block-follower-finds-reorgs-itself.md; target under one
 * poll interval + 100 ms at p99), with the service in-process on PostgreSQL and a real anvil that
 * mines only when told to. Env: BENCH_PAYMENTS (default 100), BENCH_POLL_MS (default 500),
 * DATABASE_URL; BENCH_WS=1 adds anvil's WebSocket as the network's `wsUrl`, so new heads are pushed
 * (docs/decisions/0044-living-with-provider-limits.md) and polling stays.
 */
import { randomBytes } from 'node:crypto'
import { cpus, tmpdir } from 'node:os'
import { startAnvil } from '../src/chain/anvil.ts'
import { createDevnetClient, deployTestStablecoin } from '../src/chain/devnet.ts'
import { TestStablecoin } from '../src/chain/artifacts/index.ts'
import { openDatabase } from '../src/db/client.ts'
import { systemClock } from '../src/lib/clock.ts'
import { createLogger } from '../src/lib/logger.ts'
import { createServices } from '../src/services.ts'
import { freshPostgres } from '../test/helpers/databases.ts'

const PAYMENTS = Number(process.env.BENCH_PAYMENTS ?? 100)
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 500)
const WS = process.env.BENCH_WS === '1'
process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'

const anvil = await startAnvil({ noMining: true })
const wallet = createDevnetClient(
  anvil.rpcUrl,
  '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
)
// Set-up with automine; the measured payments are mined on request.
await wallet.request({ method: 'evm_setAutomine' as any, params: [true] as any })
const token = await deployTestStablecoin(wallet)
await wallet.waitForTransactionReceipt({
  hash: await wallet.writeContract({
    address: token,
    abi: TestStablecoin.abi,
    functionName: 'mint',
    args: [wallet.account.address, 10n ** 15n],
  }),
})
await wallet.request({ method: 'evm_setAutomine' as any, params: [false] as any })

const pg = await freshPostgres()
const database = await openDatabase({ databaseUrl: pg.url, pgliteDir: null, poolSize: 10 })
const services = await createServices({
  database,
  clock: systemClock,
  logger: createLogger('silent'),
  baseUrl: 'https://localhost',
  secretKey: randomBytes(32),
  networks: [
    {
      name: 'bench',
      chainId: 31337,
      rpcUrl: anvil.rpcUrl,
      fallbackRpcUrls: [],
      wsUrl: WS ? anvil.rpcUrl.replace(/^http/, 'ws') : null,
      confirmations: 1,
      finality: 'confirmations',
      pollIntervalMs: POLL_MS,
      maxLogRange: 1000,
      maxRequestsPerSecond: null,
      testnet: true,
      tokens: [
        {
          kind: 'erc20',
          symbol: 'TUSD',
          decimals: 6,
          address: token,
          price: { kind: 'fixedUsd', usd: '1' },
        },
      ],
    },
  ],
})
await services.lifecycle.start()
await services.chain.verify()
await services.chain.start()
const project = await services.projects.create('bench')
if (!project.ok) throw new Error(project.message)

const latencies: number[] = []
let nonce = await wallet.getTransactionCount({ address: wallet.account.address })
for (let i = 0; i < PAYMENTS; i++) {
  const created = await services.transactions.create(
    { projectId: project.value.id, mode: 'test' },
    { amount: 1 },
  )
  if (!created.ok) throw new Error(created.message)
  const id = JSON.parse(created.value.body).transaction.id as string
  const s = await services.pay.select(
    id,
    { token_symbol: 'TUSD', blockchain_network: 'bench' },
    null,
  )
  if (!s.ok) throw new Error(s.message)
  const hash = await wallet.writeContract({
    address: token,
    abi: TestStablecoin.abi,
    functionName: 'transfer',
    args: [s.value.quote!.deposit_address as `0x${string}`, 1_000_000n],
    nonce: nonce++,
  })
  // Mine at a random point of the poll cycle, as real blocks arrive.
  await Bun.sleep(Math.random() * POLL_MS)
  await wallet.request({ method: 'evm_mine' as any, params: [] as any })
  const mined = Date.now()
  const receipt = await wallet.getTransactionReceipt({ hash }).catch(() => null)
  if (!receipt)
    throw new Error(
      `payment ${i} not mined: pending ${JSON.stringify(await wallet.request({ method: 'txpool_content' as any, params: [] as any })).slice(0, 300)}`,
    )
  for (;;) {
    const rows = await database.query<{ at: string }>(
      `SELECT at FROM transaction_events WHERE transaction_id = $1 AND to_status = 'processing'`,
      [id],
    )
    if (rows.length) {
      latencies.push(new Date(rows[0].at).getTime() - mined)
      break
    }
    await Bun.sleep(5)
  }
}
const sorted = [...latencies].sort((a, b) => a - b)
const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
console.log(
  `\nMachine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}, Bun ${Bun.version}, PostgreSQL, anvil 1.7.1 (mining on request)`,
)
console.log('\n| measure | p50 | p99 | max | notes |\n|---|---:|---:|---:|---|')
console.log(
  `| block mined -> processing committed | p50 ${p(0.5)} ms | p99 ${p(0.99)} ms | max ${sorted.at(-1)} ms | ${PAYMENTS} payments, poll ${POLL_MS} ms${WS ? ', heads pushed over WebSocket' : ''}, target p99 < ${POLL_MS + 100} ms |`,
)
await services.stop()
await database.close()
await pg.drop()
await anvil.stop()
void tmpdir
process.exit(0)
