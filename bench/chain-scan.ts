/**
 * What watching a chain costs: `bun bench/chain-scan.ts` (stops by itself, about a minute).
 *
 * 1. Per block: 1,000 ERC-20 Transfer logs in one block (real anvil, --no-mining then
 *    evm_mine), 100,000 watched addresses. A follower tick (eth_blockNumber, the header,
 *    eth_getLogs by hash, decode, match, handler) against a bare `eth_getLogs` of the same
 *    block, and the pure decode + match against viem's generic ABI decoder.
 * 2. Catch-up: a fresh follower from a cursor 10,000 blocks behind the head, with and without
 *    native scanning, against bare batched header fetches and ranged eth_getLogs.
 *
 * Baselines run interleaved with the measured code in the same process, because this kind of
 * machine is noisy: compare ratios, not absolute numbers, across runs.
 */
import { spawnSync } from 'node:child_process'
import { cpus } from 'node:os'
import {
  decodeEventLog,
  encodeDeployData,
  encodeFunctionData,
  parseAbiItem,
  type Address,
  type Hex,
} from 'viem'
import { anvilBinary, startAnvil, type AnvilNode } from '../src/chain/anvil.ts'
import { TestStablecoin } from '../src/chain/artifacts/index.ts'
import { createBlockFollower } from '../src/chain/follower/block-follower.ts'
import { memoryCursorStore } from '../src/chain/follower/cursor.ts'
import { createChainClient } from '../src/chain/rpc.ts'
import { TRANSFER_TOPIC, scanTransferLogs, type RpcLogLike } from '../src/chain/transfer-scan.ts'

const DEADLINE = performance.now() + 150_000
const WATCHED = 100_000
const LOGS_PER_BLOCK = 1_000
const BLOCKS = 12
const REPS = 4
const CATCH_UP = 10_000

type Client = ReturnType<typeof createChainClient>
const rows: Array<[string, string]> = []
const row = (name: string, value: string) => {
  rows.push([name, value])
  console.error(`  ${name}: ${value}`)
}
const outOfTime = () => performance.now() > DEADLINE

const nodes: AnvilNode[] = []

async function perBlock() {
  console.error(`per block: ${LOGS_PER_BLOCK} Transfer logs, ${WATCHED} watched addresses`)
  const node = await startAnvil({ noMining: true, extraArgs: ['--gas-limit', '300000000'] })
  nodes.push(node)
  const client = createChainClient({ rpcUrl: node.rpcUrl, timeoutMs: 60_000 })
  const from = ((await rpc(client, 'eth_accounts', [])) as Address[])[0]!
  const token = await deployToken(client, from)
  const watched = new Set<string>()
  while (watched.size < WATCHED) watched.add(randomAddress())
  const watchedList = [...watched]
  const tokens = new Set([token])

  const samples = {
    rawLogs: [] as number[],
    viemLogs: [] as number[],
    tick: [] as number[],
    rawFull: [] as number[],
    tickNative: [] as number[],
    match: [] as number[],
    viemMatch: [] as number[],
  }
  let blocks = 0
  let fillMs = 0
  for (let b = 0; b < BLOCKS && !outOfTime(); b++) {
    // 1% of the transfers go to watched addresses, the rest to fresh ones.
    const recipients = Array.from({ length: LOGS_PER_BLOCK }, (_, i) =>
      i % 100 === 0 ? watchedList[(b * 10 + i / 100) % WATCHED]! : randomAddress(),
    )
    const t0 = performance.now()
    const block = await fillBlock(client, from, token, recipients)
    fillMs += performance.now() - t0
    blocks++
    const parent = { number: block.number - 1n, hash: block.parentHash }
    const filter = { blockHash: block.hash, address: [token], topics: [TRANSFER_TOPIC] }
    let logs: RpcLogLike[] = []
    for (let r = 0; r < REPS; r++) {
      samples.rawLogs.push(
        await time(async () => {
          logs = (await client.request({
            method: 'eth_getLogs',
            params: [filter],
          } as never)) as RpcLogLike[]
        }),
      )
      samples.viemLogs.push(
        await time(() =>
          client.getLogs({ blockHash: block.hash, address: token, event: TRANSFER_EVENT }),
        ),
      )
      samples.rawFull.push(
        await time(() =>
          client.request({
            method: 'eth_getBlockByNumber',
            params: [`0x${block.number.toString(16)}`, true],
          } as never),
        ),
      )
      for (const scanNative of [false, true]) {
        let found = 0
        const follower = createBlockFollower({
          network: {
            name: 'bench',
            pollIntervalMs: 1000,
            maxLogRange: 1000,
            erc20Tokens: [token],
            scanNative,
          },
          client,
          store: memoryCursorStore({ height: parent.number, recent: [parent] }),
          watch: watched,
          handler: (e) => {
            if (e.type === 'block') found += e.findings.length
          },
        })
        const ms = await time(() => follower.syncOnce())
        ;(scanNative ? samples.tickNative : samples.tick).push(ms)
        if (found !== LOGS_PER_BLOCK / 100)
          throw new Error(`expected ${LOGS_PER_BLOCK / 100} findings, got ${found}`)
      }
    }
    if (logs.length !== LOGS_PER_BLOCK)
      throw new Error(`block ${block.number} has ${logs.length} logs`)
    for (let r = 0; r < 20; r++) {
      samples.match.push(await time(() => scanTransferLogs(logs, watched, tokens)))
      samples.viemMatch.push(await time(() => viemDecodeAndMatch(logs, watched)))
    }
  }
  row(
    'blocks measured',
    `${blocks} (x${REPS} each); filling one block took ${(fillMs / blocks).toFixed(0)} ms`,
  )
  row('bare eth_getLogs by hash (raw JSON)', stats(samples.rawLogs))
  row('viem getLogs + generic ABI decode', stats(samples.viemLogs))
  row('follower tick, ERC-20 (fetch+decode+match)', stats(samples.tick))
  row('bare eth_getBlockByNumber(full, 1,000 txs)', stats(samples.rawFull))
  row('follower tick, ERC-20 + native', stats(samples.tickNative))
  row('pure decode+match of 1,000 logs (ours)', stats(samples.match))
  row('pure decode+match, viem decodeEventLog', stats(samples.viemMatch))
}

async function catchUp() {
  console.error(`catch-up: ${CATCH_UP} blocks`)
  const node = await startAnvil({ noMining: true })
  nodes.push(node)
  const client = createChainClient({ rpcUrl: node.rpcUrl, timeoutMs: 60_000 })
  const from = ((await rpc(client, 'eth_accounts', [])) as Address[])[0]!
  const token = await deployToken(client, from)
  await rpc(client, 'eth_sendTransaction', [
    {
      from,
      to: token,
      data: encodeFunctionData({
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [from, 10n ** 18n],
      }),
    },
  ])
  await rpc(client, 'evm_mine', [])
  const startBlock = await client.getBlock({ blockTag: 'latest' })
  const watched = new Set<string>()
  while (watched.size < WATCHED) watched.add(randomAddress())
  const payees = [...watched].slice(0, 1000)

  // A native payment and a token payment every 100 blocks; mined in chunks (one giant
  // anvil_mine outlives viem's timeout, docs/development.md#anvil).
  const t0 = performance.now()
  for (let i = 0; i < CATCH_UP / 100; i++) {
    await rpc(client, 'eth_sendTransaction', [{ from, to: payees[i], value: '0x1' }])
    await rpc(client, 'eth_sendTransaction', [
      {
        from,
        to: token,
        data: encodeFunctionData({
          abi: TestStablecoin.abi,
          functionName: 'transfer',
          args: [payees[i] as Address, 1n],
        }),
      },
    ])
    await rpc(client, 'anvil_mine', ['0x64'])
  }
  const head = await client.getBlockNumber()
  row(
    'mining 10,000 blocks (100 x anvil_mine 100)',
    `${((performance.now() - t0) / 1000).toFixed(1)} s`,
  )

  const from1 = startBlock.number + 1n
  const samples = {
    headers: [] as number[],
    logs: [] as number[],
    erc20: [] as number[],
    native: [] as number[],
    erc20Big: [] as number[],
  }
  for (let r = 0; r < 3 && !outOfTime(); r++) {
    samples.headers.push(
      await time(async () => {
        for (let lo = from1; lo <= head; lo += 100n) {
          const calls = []
          for (let n = lo; n < lo + 100n && n <= head; n++)
            calls.push(rpc(client, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false]))
          await Promise.all(calls)
        }
      }),
    )
    samples.logs.push(
      await time(async () => {
        for (let lo = from1; lo <= head; lo += 1000n) {
          const hi = lo + 999n < head ? lo + 999n : head
          await rpc(client, 'eth_getLogs', [
            {
              fromBlock: `0x${lo.toString(16)}`,
              toBlock: `0x${hi.toString(16)}`,
              address: [token],
              topics: [TRANSFER_TOPIC],
            },
          ])
        }
      }),
    )
    for (const [key, scanNative, batchSize] of [
      ['erc20', false, 100],
      ['native', true, 100],
      ['erc20Big', false, 500],
    ] as const) {
      let blocks = 0
      let found = 0
      const follower = createBlockFollower({
        network: {
          name: 'bench',
          pollIntervalMs: 1000,
          maxLogRange: 1000,
          erc20Tokens: [token],
          scanNative,
        },
        client,
        store: memoryCursorStore({
          height: startBlock.number,
          recent: [{ number: startBlock.number, hash: startBlock.hash! }],
        }),
        watch: watched,
        handler: (e) => {
          if (e.type === 'block') {
            blocks++
            found += e.findings.length
          }
        },
        tuning: { batchSize },
      })
      samples[key].push(await time(() => follower.syncOnce()))
      const expected = (CATCH_UP / 100) * (scanNative ? 2 : 1)
      if (BigInt(blocks) !== head - startBlock.number || found !== expected)
        throw new Error(`${key}: ${blocks} blocks, ${found} findings (expected ${expected})`)
    }
  }
  const n = Number(head - startBlock.number)
  const rate = (ms: number[]) =>
    `${stats(ms)}  = ${Math.round(n / (median(ms) / 1000)).toLocaleString('en')} blocks/s`
  row(`bare headers, batches of 100 (${n} blocks)`, rate(samples.headers))
  row('bare eth_getLogs, ranges of 1,000', rate(samples.logs))
  row('follower catch-up, ERC-20 only', rate(samples.erc20))
  row('follower catch-up, ERC-20 + native', rate(samples.native))
  row('follower catch-up, ERC-20, chunks of 500', rate(samples.erc20Big))
}

// ---- helpers ------------------------------------------------------------------------------

const TRANSFER_EVENT = parseAbiItem(
  'event Transfer(address indexed from, address indexed to, uint256 value)',
)

function viemDecodeAndMatch(logs: RpcLogLike[], watch: Set<string>) {
  let found = 0
  for (const log of logs) {
    const { args } = decodeEventLog({
      abi: [TRANSFER_EVENT],
      topics: log.topics as [Hex, ...Hex[]],
      data: log.data as Hex,
    })
    if (watch.has(args.to.toLowerCase())) found++
  }
  return found
}

function rpc(client: Client, method: string, params: unknown[]) {
  return client.request({ method, params } as never) as Promise<unknown>
}

async function deployToken(client: Client, from: Address): Promise<Address> {
  const data = encodeDeployData({
    abi: TestStablecoin.abi,
    bytecode: TestStablecoin.bytecode,
    args: ['Bench USD', 'BUSD'],
  })
  const hash = (await rpc(client, 'eth_sendTransaction', [{ from, data }])) as Hex
  await rpc(client, 'evm_mine', [])
  const receipt = await client.getTransactionReceipt({ hash })
  return receipt.contractAddress!.toLowerCase() as Address
}

/** One block holding a `mint` per recipient, sent as JSON-RPC batches with explicit nonces. */
async function fillBlock(client: Client, from: Address, token: Address, recipients: string[]) {
  const nonce = Number(await rpc(client, 'eth_getTransactionCount', [from, 'pending']))
  await Promise.all(
    recipients.map((to, i) =>
      rpc(client, 'eth_sendTransaction', [
        {
          from,
          to: token,
          gas: '0x186a0',
          nonce: `0x${(nonce + i).toString(16)}`,
          data: encodeFunctionData({
            abi: TestStablecoin.abi,
            functionName: 'mint',
            args: [to as Address, 1_000_000n],
          }),
        },
      ]),
    ),
  )
  await rpc(client, 'evm_mine', [])
  const block = await client.getBlock({ blockTag: 'latest' })
  if (block.transactions.length !== recipients.length)
    throw new Error(`block has ${block.transactions.length} transactions`)
  return { number: block.number, hash: block.hash, parentHash: block.parentHash }
}

async function time(fn: () => unknown): Promise<number> {
  const t0 = performance.now()
  await fn()
  return performance.now() - t0
}

function randomAddress(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(20))
  let s = '0x'
  for (const b of bytes) s += b.toString(16).padStart(2, '0')
  return s
}

function median(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor((s.length - 1) / 2)]!
}

function stats(xs: number[]) {
  if (xs.length === 0) return 'not measured (time budget)'
  const s = [...xs].sort((a, b) => a - b)
  const p99 = s[Math.min(s.length - 1, Math.ceil(0.99 * s.length) - 1)]!
  const f = (v: number) => (v < 10 ? v.toFixed(2) : v.toFixed(1))
  return `median ${f(median(s))} ms, p99 ${f(p99)} ms (n=${s.length})`
}

function printTable() {
  const anvil = spawnSync(anvilBinary(), ['--version'], { encoding: 'utf8' }).stdout.split('\n')[0]
  const runtime = process.versions.bun
    ? `Bun ${process.versions.bun}`
    : `Node ${process.versions.node}`
  console.log(
    `\nchain-scan bench: ${cpus().length} CPUs (${cpus()[0]?.model.trim()}), ${runtime}, ${anvil}\n`,
  )
  const width = Math.max(...rows.map(([n]) => n.length))
  console.log(`| ${'measure'.padEnd(width)} | result |`)
  console.log(`|${'-'.repeat(width + 2)}|--------|`)
  for (const [name, value] of rows) console.log(`| ${name.padEnd(width)} | ${value} |`)
}

// Last, so every declaration above is initialised.
try {
  await perBlock()
  if (!outOfTime()) await catchUp()
} finally {
  for (const n of nodes) await n.stop()
}
printTable()
