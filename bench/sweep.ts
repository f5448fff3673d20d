/**
 * `bun bench/sweep.ts` (docs/decisions/0039-sweeps-by-eip-7702-or-top-up.md): what a sweep costs,
 * on a real anvil (Prague).
 *
 * 1. Gas per swept address: DepositAccount batches (the treasury's way: EIP-7702 authorization +
 *    EIP-712 sweep signature per address, one transaction from the gas account) at batch sizes 1,
 *    10, 20 and 50, for an ERC-20 (TUSD) and for the native coin, the first time (the address
 *    authorizes DepositAccount in the same transaction) and again once it delegates. Against the
 *    floor: a plain ERC-20 `transfer` of a whole balance from a funded address (what moving the
 *    money costs at least, one transaction per address), and a plain native transfer (21,000).
 *    The published anchor: an EIP-7702 sweep at 66,889 gas for one address, about 60,000 an
 *    address in batches of 10-20 (dfinity/ic #10652, #11313).
 * 2. Wall time of `npm run treasury -- sweep` for BENCH_ADDRESSES (default 200) paid deposit
 *    addresses, end to end: the tool in its own process against a service (PGlite) and the chain,
 *    from start to exit, with its dry run beside it.
 * 3. The route of a chain without EIP-7702 (anvil under Cancun): the gas account tops up every
 *    address's fee in one transaction (DepositAccount's `topUp`), then each address sends its own
 *    legacy transfer. Gas per address for BENCH_TOP_UP_ADDRESSES (default 40) TUSD addresses and
 *    as many ETH ones, the top-up's share included, against the same floors.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { HDKey } from '@scure/bip32'
import { bytesToHex, type Address, type Hex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { TestStablecoin } from '../src/chain/artifacts/index.ts'
import {
  batchData,
  CREATE2_DEPLOYER,
  DEPLOY_DATA,
  DEPOSIT_ACCOUNT,
  sweepData,
  sweepTypedData,
} from '../src/chain/deposit-account.ts'
import { createDevnetClient } from '../src/chain/devnet.ts'
import { mnemonicToSeed } from '../src/lib/bip39.ts'
import { writeNetworksFile } from '../test/helpers/chain.ts'
import { runTreasuryTool } from '../test/helpers/processes.ts'
import { startTestServer, type TestServer } from '../test/helpers/server.ts'
import {
  MERCHANT_MNEMONIC,
  paidTransactions,
  startTreasuryChain,
  toolArgs,
  toolKey,
  useMerchantKey,
  writeMerchantFiles,
  type TreasuryChain,
} from '../test/helpers/treasury.ts'

const ADDRESSES = Number(process.env.BENCH_ADDRESSES ?? 200)
const TREASURY: Address = '0x000000000000000000000000000000000000bEEF'
const account = HDKey.fromMasterSeed(
  mnemonicToSeed(
    'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about',
  ),
).derive("m/44'/60'/0'/0")
let nextIndex = 0
const fresh = () =>
  privateKeyToAccount(bytesToHex(account.deriveChild(nextIndex++).privateKey!) as Hex)

async function gasTable() {
  const chain = await startTreasuryChain()
  try {
    const gas = createDevnetClient(chain.rpcUrl, chain.gas.key)
    const send = async (tx: Parameters<typeof gas.sendTransaction>[0]) =>
      gas.waitForTransactionReceipt({ hash: await gas.sendTransaction(tx) })
    await send({ to: CREATE2_DEPLOYER, data: DEPLOY_DATA } as never)
    // The treasury holds some of both already, as it will after its first sweep.
    const mint = async (to: Address, amount: bigint) =>
      chain.customer.waitForTransactionReceipt({
        hash: await chain.customer.writeContract({
          address: chain.token,
          abi: TestStablecoin.abi,
          functionName: 'mint',
          args: [to, amount],
        }),
      })
    const fund = async (to: Address, wei: bigint) =>
      chain.customer.waitForTransactionReceipt({
        hash: await chain.customer.sendTransaction({ to, value: wei }),
      })
    await mint(TREASURY, 1n)
    await fund(TREASURY, 1n)

    // The floor: a funded address sends its whole token balance, and a plain native transfer.
    const payer = fresh()
    await mint(payer.address, 25_000_000n)
    await fund(payer.address, 10n ** 16n)
    const payerClient = createDevnetClient(
      chain.rpcUrl,
      bytesToHex(account.deriveChild(nextIndex - 1).privateKey!) as Hex,
    )
    const floor = await payerClient.waitForTransactionReceipt({
      hash: await payerClient.writeContract({
        address: chain.token,
        abi: TestStablecoin.abi,
        functionName: 'transfer',
        args: [TREASURY, 25_000_000n],
      }),
    })
    const nativeFloor = await payerClient.waitForTransactionReceipt({
      hash: await payerClient.sendTransaction({ to: TREASURY, value: 10n ** 15n }),
    })

    const deadline = BigInt(Math.floor(Date.now() / 1000) + 3600)
    async function sweep(members: ReturnType<typeof fresh>[], native: boolean, delegated: boolean) {
      const tokens = native ? [] : [chain.token]
      const authorizationList = delegated
        ? []
        : await Promise.all(
            members.map((m) =>
              m.signAuthorization({ contractAddress: DEPOSIT_ACCOUNT, chainId: 31337, nonce: 0 }),
            ),
          )
      // Each address's first sweep names its sweep nonce 0, its second 1.
      const nonce = delegated ? 1n : 0n
      const calls = await Promise.all(
        members.map(async (m) => ({
          account: m.address,
          data: sweepData({
            to: TREASURY,
            tokens,
            native,
            nonce,
            deadline,
            signature: await m.signTypedData(
              sweepTypedData({
                chainId: 31337,
                account: m.address,
                to: TREASURY,
                tokens,
                native,
                nonce,
                deadline,
              }) as never,
            ),
          }),
        })),
      )
      const r = await send({
        to: DEPOSIT_ACCOUNT,
        data: batchData(calls),
        ...(authorizationList.length ? { authorizationList } : {}),
      } as never)
      if (r.status !== 'success') throw new Error('sweep reverted')
      return Number(r.gasUsed) / members.length
    }
    const rows: string[] = []
    for (const size of [1, 10, 20, 50]) {
      const tokenAddresses = Array.from({ length: size }, fresh)
      for (const a of tokenAddresses) await mint(a.address, 25_000_000n)
      const first = await sweep(tokenAddresses, false, false)
      for (const a of tokenAddresses) await mint(a.address, 5_000_000n)
      const again = await sweep(tokenAddresses, false, true)
      const nativeAddresses = Array.from({ length: size }, fresh)
      for (const a of nativeAddresses) await fund(a.address, 10n ** 16n)
      const nativeFirst = await sweep(nativeAddresses, true, false)
      const f = Number(floor.gasUsed)
      const ratio = (g: number) => `${(g / f).toFixed(2)}x`
      rows.push(
        `| batch of ${size} | ${Math.round(first).toLocaleString('en-US')} (${ratio(first)}) | ${Math.round(again).toLocaleString('en-US')} (${ratio(again)}) | ${Math.round(nativeFirst).toLocaleString('en-US')} (${(nativeFirst / Number(nativeFloor.gasUsed)).toFixed(2)}x) |`,
      )
    }
    console.log(`Gas per swept address (ratio to the floor: a plain ERC-20 transfer of a whole balance from a funded address, ${Number(floor.gasUsed).toLocaleString('en-US')} gas; for the native coin a plain transfer, ${Number(nativeFloor.gasUsed).toLocaleString('en-US')}). Anchor: 66,889 for one address, ~60,000 an address in batches of 10-20.

| sweep | ERC-20, first (authorizes) | ERC-20, delegating already | native, first (authorizes) |
|---|---:|---:|---:|
${rows.join('\n')}
`)
  } finally {
    await chain.stop()
  }
}

/**
 * A chain (`hardfork`), a service on PGlite following it, a project with the merchant's deposit
 * key and the treasury tool's own API key, and the merchant's files; all gone after `run`.
 */
async function withMerchant<T>(
  hardfork: 'prague' | 'cancun',
  run: (m: {
    chain: TreasuryChain
    t: TestServer
    shopKey: string
    tool: string
    files: ReturnType<typeof writeMerchantFiles>
  }) => Promise<T>,
): Promise<T> {
  const chain = await startTreasuryChain({ hardfork })
  const dir = mkdtempSync(join(tmpdir(), 'bench-sweep-'))
  const t = await startTestServer('pglite', {
    NETWORKS_CONFIG: writeNetworksFile(dir, [chain.network()]),
  })
  try {
    const p = await t.project()
    const tool = await toolKey(t, p.id)
    await useMerchantKey(t, p.id)
    return await run({
      chain,
      t,
      shopKey: p.key,
      tool,
      files: writeMerchantFiles(dir, {
        mnemonic: MERCHANT_MNEMONIC,
        gasKey: chain.gas.key,
        ca: t.ca,
      }),
    })
  } finally {
    await t.stop()
    await chain.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

async function wallTime() {
  await withMerchant('prague', async ({ chain, t, shopKey, tool, files }) => {
    const half = Math.floor(ADDRESSES / 2)
    const t0 = performance.now()
    await paidTransactions(t, shopKey, chain, half, 'TUSD')
    await paidTransactions(t, shopKey, chain, ADDRESSES - half, 'ETH')
    console.error(
      `${ADDRESSES} transactions paid and completed in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    )
    const args = [
      'sweep',
      ...toolArgs(t, tool, chain, files),
      '--to',
      TREASURY,
      '--mnemonic-file',
      files.mnemonic,
      '--gas-key-file',
      files.gasKey,
      '--json',
    ]
    const timed = async (extra: string[]) => {
      const s = performance.now()
      const r = await runTreasuryTool([...args, ...extra])
      if (r.code !== 0) throw new Error(`treasury sweep failed: ${r.stderr}`)
      return { seconds: (performance.now() - s) / 1000, out: r.json }
    }
    const dry = await timed(['--dry-run'])
    const real = await timed([])
    const gasUsed = (real.out.sweeps as { gas_used: string }[]).reduce(
      (a, s) => a + Number(s.gas_used),
      0,
    )
    console.log(`Wall time of the treasury tool, end to end (its own process, against the service on PGlite and anvil), ${ADDRESSES} paid addresses (half TUSD, half ETH), batches of 20 (the default); the first run also deploys DepositAccount.

| run | addresses | batches | wall time | gas per address (sweep transactions) |
|---|---:|---:|---:|---:|
| dry run | ${dry.out.plan.length} | ${dry.out.estimated.batches} | ${dry.seconds.toFixed(1)} s | estimated ${Math.round(Number(dry.out.estimated.gas) / dry.out.plan.length).toLocaleString('en-US')} (with the deployment) |
| sweep | ${real.out.plan.length} | ${real.out.sweeps.length} | ${real.seconds.toFixed(1)} s | ${Math.round(gasUsed / real.out.plan.length).toLocaleString('en-US')} |
`)
  })
}

/** The top-up route's gas per address, from the tool's own report of what it sent. */
async function topUpTable() {
  const n = Number(process.env.BENCH_TOP_UP_ADDRESSES ?? 40)
  await withMerchant('cancun', async ({ chain, t, shopKey, tool, files }) => {
    const rows: string[] = []
    // The coin first: a token address keeps the gas its transfer did not use, which a later coin
    // sweep would take too.
    for (const token of ['ETH', 'TUSD'] as const) {
      await paidTransactions(t, shopKey, chain, n, token)
      const r = await runTreasuryTool([
        'sweep',
        ...toolArgs(t, tool, chain, files),
        '--to',
        TREASURY,
        '--mnemonic-file',
        files.mnemonic,
        '--gas-key-file',
        files.gasKey,
        '--token',
        token,
        '--json',
      ])
      if (r.code !== 0) throw new Error(`treasury sweep failed: ${r.stderr}`)
      const topUp = Number(r.json.top_up_transaction.gas_used)
      const own = (r.json.sweeps as { gas_used: string }[]).reduce(
        (a, w) => a + Number(w.gas_used),
        0,
      )
      const perAddress = (topUp + own) / r.json.sweeps.length
      rows.push(
        `| ${token} | ${r.json.sweeps.length} | ${Math.round(topUp / r.json.sweeps.length).toLocaleString('en-US')} | ${Math.round(own / r.json.sweeps.length).toLocaleString('en-US')} | ${Math.round(perAddress).toLocaleString('en-US')} |`,
      )
    }
    console.log(`A chain without EIP-7702 (anvil under Cancun): the gas account tops up every address's fee in one transaction, then each address sends its own legacy transfer (the floor of moving the money: 29,500 for an ERC-20 balance, 21,000 for the coin). The top-up share is the top-up transaction's gas over its addresses.

| asset | addresses | top-up share | the address's own transfer | gas per address |
|---|---:|---:|---:|---:|
${rows.join('\n')}
`)
  })
}

console.error(`bench/sweep.ts on ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`)
await gasTable()
await wallTime()
await topUpTable()
process.exit(0)
