/**
 * `bun bench/relayer-attack.ts` (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md):
 * what a hundred hostile payments by signature cost the relayer, against what one honest payment
 * costs it, in gas and in the chain's coin.
 *
 * The chain: anvil from npm, Prague, mined by hand (a block after each round of attempts), with a
 * 6-decimal TUSD taking EIP-3009 authorizations (contracts/TestStablecoin.sol). The service: the
 * real server (`bun src/main.ts`, its own process, PGlite by default) behind a trusted proxy, so
 * every attempt comes from a client address of its own, with its relayer on anvil's account 8.
 * The network allows payers with code (`"relayer": { "contractPayers": true }`), so what is
 * measured is the bound, not the refusal (on the default network every attempt below is refused
 * before any gas: test/attacks/relayer.test.ts).
 *
 * 1. The unit: one honest customer with no ETH pays by signature; the relayer's gasUsed.
 * 2. The attack: BENCH_ATTEMPTS (100) lying contract wallets (contracts/TestLyingWallet.sol, half
 *    burning a million rounds of hashing when not simulated, half nothing), each paying its own
 *    transaction of the attacked project from its own client address, BENCH_ROUND (10) at once,
 *    a block mined after each round. Counted: relays sent, reverted, their gas, the wei the
 *    relayer's balance lost.
 * 3. Another project's honest customer after the attack: served or not.
 *
 * BENCH_SERVER_ROOT: another checkout (e.g. one made with `git worktree add` at the commit before
 * this decision, with a link to these node_modules) whose service runs instead: the same attack
 * on that code (its networks file then carries no `relayer` block, which it would refuse).
 * Env: BENCH_DATABASE (pglite | postgres), BENCH_TIME_LIMIT (300 s).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { type Address, bytesToHex, getAddress, type Hex } from 'viem'
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from 'viem/accounts'
import { TestLyingWallet, TestStablecoin } from '../src/chain/artifacts/index.ts'
import { ANVIL_DEFAULT_MNEMONIC } from '../src/chain/devnet.ts'
import { startManualChain, writeNetworksFile } from '../test/helpers/chain.ts'
import { contractOffer, signOffer } from '../test/helpers/signature-payments.ts'
import { cli, liftRateLimits, startService } from './harness.ts'

const ATTEMPTS = Number(process.env.BENCH_ATTEMPTS ?? 100)
const ROUND = Number(process.env.BENCH_ROUND ?? 10)
const BACKEND = (process.env.BENCH_DATABASE ?? 'pglite') as 'pglite' | 'postgres'
const OLD = process.env.BENCH_SERVER_ROOT !== undefined
const log = (s: string) => console.error(s)
const RELAYER = mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 8 })
const dir = mkdtempSync(join(tmpdir(), 'bench-relayer-attack-'))
const keyFile = join(dir, 'relayer.key')
writeFileSync(keyFile, `${bytesToHex(RELAYER.getHdKey().privateKey!)}\n`, { mode: 0o600 })
const limit = setTimeout(
  () => {
    log('time limit reached')
    process.exit(2)
  },
  Number(process.env.BENCH_TIME_LIMIT ?? 300) * 1000,
)

const chain = await startManualChain({ hardfork: 'prague' })
let svc: Awaited<ReturnType<typeof startService>> | null = null
try {
  const network = chain.network({
    tokens: [
      {
        kind: 'erc20',
        symbol: 'TUSD',
        decimals: 6,
        address: chain.token,
        eip3009: true,
        price: { kind: 'fixedUsd', usd: '1' },
      },
    ],
    ...(OLD
      ? {}
      : { relayer: { contractPayers: true, contractPayerGas: 50_000, minSettleUsd: null } }),
  })
  svc = await startService(BACKEND, {
    NETWORKS_CONFIG: writeNetworksFile(dir, [network]),
    RELAYER_KEY_FILE: keyFile,
    TRUST_PROXY: '1',
    PAY_RATE_LIMITS: '1000000/10000000/100000000',
  })
  const s = svc
  liftRateLimits(s)
  const base = `http://127.0.0.1:${s.server.port}`
  let ip = 0
  const call = (path: string, body?: unknown, key?: string) =>
    fetch(`${base}${path}`, {
      method: body ? 'POST' : 'GET',
      headers: {
        'x-forwarded-proto': 'https',
        'x-forwarded-for': `198.51.${Math.floor(++ip / 250)}.${(ip % 250) + 1}`,
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    })
  const otherProject = cli(['project', 'create', '--name', 'Other'], s.env).id as string
  const otherKey = cli(
    ['key', 'create', '--project', otherProject, '--mode', 'test', '--name', 'other'],
    s.env,
  ).key as string
  async function prepared(key: string) {
    const created = (await (
      await call('/api/transactions/create', { amount: 2 }, key)
    ).json()) as any
    const id = created.transaction.id as string
    return (await (
      await call(`/pay/${id}/select`, { token_symbol: 'TUSD', blockchain_network: 'localchain' })
    ).json()) as any
  }
  const mint = async (to: Address) =>
    chain.client.writeContract({
      address: chain.token,
      abi: TestStablecoin.abi,
      functionName: 'mint',
      args: [to, 2_000_000n],
    })
  const balance = () => chain.client.getBalance({ address: RELAYER.address })
  const nonce = () =>
    chain.client.getTransactionCount({ address: RELAYER.address, blockTag: 'pending' })

  // 1. The unit: one honest payment.
  const honest = privateKeyToAccount(generatePrivateKey())
  await mint(honest.address)
  await chain.mine()
  const h = await prepared(s.key)
  const paid = (await (
    await call(`/pay/${h.id}/authorization`, await signOffer(honest, h))
  ).json()) as any
  await chain.mine()
  const honestReceipt = await chain.client.getTransactionReceipt({ hash: paid.transaction_hash })
  const honestTx = await chain.client.getTransaction({ hash: paid.transaction_hash })
  const unitGas = honestReceipt.gasUsed
  const unitWei = honestReceipt.gasUsed * honestReceipt.effectiveGasPrice
  log(`honest payment: ${unitGas} gas used (limit ${honestTx.gas}), ${unitWei} wei`)

  // 2. The attack.
  const hashes: Hex[] = []
  for (let i = 0; i < ATTEMPTS; i++)
    hashes.push(
      await chain.client.deployContract({
        abi: TestLyingWallet.abi,
        bytecode: TestLyingWallet.bytecode,
        args: [i % 2 === 0 ? 1_000_000n : 0n],
      }),
    )
  await chain.mine()
  const wallets: Address[] = []
  for (const hash of hashes)
    wallets.push(getAddress((await chain.client.getTransactionReceipt({ hash })).contractAddress!))
  for (const w of wallets) await mint(w)
  await chain.mine()
  const states = []
  for (let i = 0; i < ATTEMPTS; i++) states.push(await prepared(s.key))
  const before = { balance: await balance(), nonce: await nonce(), head: await chain.head() }
  const answers: Record<number, number> = {}
  for (let from = 0; from < ATTEMPTS; from += ROUND) {
    const statuses = await Promise.all(
      states.slice(from, from + ROUND).map(async (st, k) => {
        const r = await call(`/pay/${st.id}/authorization`, contractOffer(wallets[from + k]!, st))
        return r.status
      }),
    )
    for (const x of statuses) answers[x] = (answers[x] ?? 0) + 1
    await chain.mine()
  }
  const head = await chain.head()
  let reverted = 0
  let gas = 0n
  for (let n = before.head + 1n; n <= head; n++)
    for (const tx of (await chain.client.getBlock({ blockNumber: n, includeTransactions: true }))
      .transactions) {
      if (getAddress(tx.from) !== RELAYER.address) continue
      const receipt = await chain.client.getTransactionReceipt({ hash: tx.hash })
      if (receipt.status === 'reverted') reverted++
      gas += receipt.gasUsed
    }
  const sent = (await nonce()) - before.nonce
  const wei = before.balance - (await balance())

  // 3. Another project's honest customer.
  const other = privateKeyToAccount(generatePrivateKey())
  await mint(other.address)
  await chain.mine()
  const o = await prepared(otherKey)
  const served = (await call(`/pay/${o.id}/authorization`, await signOffer(other, o))).status

  const result = {
    code: OLD ? `BENCH_SERVER_ROOT=${process.env.BENCH_SERVER_ROOT}` : 'this tree',
    attempts: ATTEMPTS,
    answers,
    relays_sent: sent,
    reverted,
    gas_used: gas.toString(),
    ordinary_payments: Number(gas) / Number(unitGas),
    wei_spent: wei.toString(),
    other_project_served: served,
    unit_gas: unitGas.toString(),
    unit_gas_limit: honestTx.gas.toString(),
    machine: `${cpus().length} x ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, Bun ${Bun.version}`,
  }
  console.log(JSON.stringify(result, null, 2))
} finally {
  clearTimeout(limit)
  await svc?.stop()
  await chain.stop()
  rmSync(dir, { recursive: true, force: true })
}
