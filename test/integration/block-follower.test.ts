/**
 * The block follower against a real anvil (`--no-mining`: the test decides what goes into
 * which block). A small JSON-RPC proxy on 127.0.0.1 sits in front of anvil where a test needs
 * to count calls, fail the node, hang it, or change the chain between two calls of a scan.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { createWalletClient, encodeFunctionData, http, type Address, type Hex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { startAnvil } from '../../src/chain/anvil.ts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import {
  createBlockFollower,
  type BlockFollowerDeps,
} from '../../src/chain/follower/block-follower.ts'
import type { FollowerEvent } from '../../src/chain/follower/events.ts'
import {
  memoryCursorStore,
  resumeCursor,
  type BlockRef,
  type CursorStore,
  type Halt,
} from '../../src/chain/follower/cursor.ts'
import { createChainClient } from '../../src/chain/rpc.ts'
import type { Finding } from '../../src/chain/transfer-scan.ts'
import { manualClock } from '../../src/lib/clock.ts'
import type { Logger } from '../../src/lib/logger.ts'
import { startRpcProxy } from '../helpers/rpc-proxy.ts'

// anvil's first default account (mnemonic "test test ... junk"): signs raw transactions that a
// reorg can put back into a replacement block.
const PAYER = privateKeyToAccount(
  '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
)
const payer = PAYER.address.toLowerCase() as Address

let node: { rpcUrl: string; stop(): Promise<void> }
let chain: ReturnType<typeof createChainClient>
let token: Address
/** Followers and proxies of the running test, stopped after it (newest first). */
const cleanups: Array<() => Promise<unknown> | unknown> = []

beforeAll(async () => {
  node = await startReorgableAnvil()
  chain = createChainClient({ rpcUrl: node.rpcUrl, retryCount: 0 })
  const wallet = walletClient(node.rpcUrl)
  const deploy = await wallet.deployContract({
    abi: TestStablecoin.abi,
    bytecode: TestStablecoin.bytecode,
    args: ['Test USD', 'TUSD'],
    chain: null,
  })
  await mine()
  const receipt = await chain.getTransactionReceipt({ hash: deploy })
  token = receipt.contractAddress!.toLowerCase() as Address
  await send({
    to: token,
    data: encodeFunctionData({
      abi: TestStablecoin.abi,
      functionName: 'mint',
      args: [PAYER.address, 10n ** 15n],
    }),
  })
  await mine()
})

afterEach(async () => {
  for (const stop of cleanups.splice(0).reverse()) await stop()
})

afterAll(async () => {
  await node?.stop()
})

describe('createBlockFollower() on anvil', () => {
  test('reports a native transfer to a watched address with its amount and block, and ignores unwatched ones', async () => {
    const watched = randomAddress()
    const f = await follow({ watch: [watched] })
    const paid = await send({ to: watched, value: 1234n })
    const ignored = await send({ to: randomAddress(), value: 99n })
    const block = await mine()
    await f.waitForHeight(block.number)

    expect(f.findings()).toEqual([
      {
        kind: 'native',
        from: payer,
        to: watched,
        amount: 1234n,
        txHash: paid,
        blockNumber: block.number,
        blockHash: block.hash,
      },
    ])
    expect(f.findings().some((x) => x.txHash === ignored)).toBe(false)
    await f.waitFor(
      () => f.events.some((e) => e.type === 'head' && e.number === block.number),
      'the head event',
    )
  })

  test('reports an ERC-20 Transfer to a watched address, by token, amount and logIndex', async () => {
    const watched = randomAddress()
    const f = await follow({ watch: [watched], scanNative: false })
    const paid = await send(transferCall(watched, 5_000_000n))
    await send(transferCall(randomAddress(), 7n))
    const block = await mine()
    await f.waitForHeight(block.number)

    expect(f.findings()).toEqual([
      {
        kind: 'erc20',
        token,
        from: payer,
        to: watched,
        amount: 5_000_000n,
        txHash: paid,
        logIndex: 0,
        blockNumber: block.number,
        blockHash: block.hash,
      },
    ])
  })

  test('reports two transfers to one address both, in one block and across blocks', async () => {
    const watched = randomAddress()
    const f = await follow({ watch: [watched] })
    const a = await send(transferCall(watched, 1n))
    const b = await send(transferCall(watched, 2n))
    const first = await mine()
    const c = await send({ to: watched, value: 3n })
    const second = await mine()
    const d = await send({ to: watched, value: 4n })
    const third = await mine()
    await f.waitForHeight(third.number)

    const found = f.findings().map((x) => [x.kind, x.txHash, x.amount, x.blockNumber])
    expect(found).toEqual([
      ['erc20', a, 1n, first.number],
      ['erc20', b, 2n, first.number],
      ['native', c, 3n, second.number],
      ['native', d, 4n, third.number],
    ])
  })

  test('a reorg that drops the payment block is reported with the removed blocks, and the payment is not reported again', async () => {
    const watched = randomAddress()
    const f = await follow({ watch: [watched] })
    const paid = await send({ to: watched, value: 10n })
    const paymentBlock = await mine()
    const after = await mine()
    await f.waitForHeight(after.number)
    expect(f.findings().map((x) => x.txHash)).toEqual([paid])

    await anvilReorg(2, [])
    const reorg = await f.waitForEvent('reorg')
    expect(reorg).toEqual({
      type: 'reorg',
      forkPoint: paymentBlock.number - 1n,
      removed: [
        { number: paymentBlock.number, hash: paymentBlock.hash },
        { number: after.number, hash: after.hash },
      ],
    })
    await f.waitFor(() => f.blocksAfter(reorg).length === 2, 'replacement blocks')
    const replacements = f.blocksAfter(reorg)
    expect(replacements.map((b) => b.block.number)).toEqual([paymentBlock.number, after.number])
    expect(replacements[0]!.block.hash).not.toBe(paymentBlock.hash)
    expect(replacements.flatMap((b) => b.findings)).toEqual([])
    expect((await chain.getBlock({ blockNumber: paymentBlock.number })).hash).toBe(
      replacements[0]!.block.hash,
    )
  })

  test('a reorg that re-includes the same transaction reports it again with the new block hash', async () => {
    const watched = randomAddress()
    const f = await follow({ watch: [watched] })
    const raw = await signedTransfer({ to: watched, value: 77n })
    const paid = await chain.request({ method: 'eth_sendRawTransaction', params: [raw] })
    const old = await mine()
    await f.waitForHeight(old.number)

    await anvilReorg(1, [[raw, 0]])
    const reorg = await f.waitForEvent('reorg')
    expect(reorg).toMatchObject({
      forkPoint: old.number - 1n,
      removed: [{ number: old.number, hash: old.hash }],
    })
    await f.waitFor(() => f.blocksAfter(reorg).length === 1, 'replacement block')
    const [replacement] = f.blocksAfter(reorg)
    expect(replacement!.block.hash).not.toBe(old.hash)
    expect(replacement!.findings).toEqual([
      {
        kind: 'native',
        from: payer,
        to: watched,
        amount: 77n,
        txHash: paid,
        blockNumber: old.number,
        blockHash: replacement!.block.hash,
      },
    ])
  })

  test('a reorg between reading headers and reading logs restarts the scan; no block of the old chain is reported', async () => {
    const watched = randomAddress()
    const proxy = await startProxy(node.rpcUrl)
    const store = memoryCursorStore()
    const first = await follow({ watch: [watched], store })
    const start = await mine()
    await first.waitForHeight(start.number)
    await first.stop()

    const raw = await signedTransfer(transferCall(watched, 42n))
    await chain.request({ method: 'eth_sendRawTransaction', params: [raw] })
    const oldBlocks = [await mine(), await mine(), await mine()]
    let reorged = false
    // Headers and logs travel in one JSON-RPC batch; the proxy answers its calls one by one
    // and the chain changes after the headers were read, before the logs are.
    proxy.beforeCall = async (call) => {
      if (reorged || call.method !== 'eth_getLogs') return
      reorged = true
      await anvilReorg(3, [[raw, 0]])
    }
    const f = await follow({ watch: [watched], store, rpcUrl: proxy.url })
    await f.waitForHeight(oldBlocks[2]!.number)

    expect(reorged).toBe(true)
    expect(f.logs.some((l) => l.msg === 'chain moved during a scan; rescanning')).toBe(true)
    const oldHashes = new Set(oldBlocks.map((b) => b.hash))
    expect(f.blocks().filter((b) => oldHashes.has(b.block.hash))).toEqual([])
    expect(f.events.filter((e) => e.type === 'reorg')).toEqual([])
    const canonical = await chain.getBlock({ blockNumber: oldBlocks[0]!.number })
    expect(f.findings().map((x) => [x.amount, x.blockHash])).toEqual([[42n, canonical.hash]])
  })

  test('a 12-block reorg finds its fork point past the first few heights probed', async () => {
    const f = await follow({ watch: [] })
    const base = await mine()
    const top = await anvilMine(12)
    await f.waitForHeight(top.number)

    await anvilReorg(12, [])
    const reorg = await f.waitForEvent('reorg')
    expect(reorg.forkPoint).toBe(base.number)
    expect(reorg.removed.map((r) => r.number)).toEqual(range(base.number + 1n, top.number))
    await f.waitFor(() => f.blocksAfter(reorg).length === 12, 'replacement blocks')
  })

  test('a reorg deeper than the remembered window halts the network: no reorg and no event after it, the halt saved in the cursor, said once as an error', async () => {
    const store = countingStore()
    const halts: Halt[] = []
    const f = await follow({ watch: [], windowSize: 2, store, onHalt: (h) => halts.push(h) })
    const blocks = [await mine(), await mine(), await mine(), await mine()]
    await f.waitForHeight(blocks[3]!.number)

    await reorgAnew(4)
    await f.waitFor(() => f.follower.status().halted !== null, 'the halt')
    const expected = {
      windowFrom: blocks[2]!.number,
      windowTo: blocks[3]!.number,
      resumeFrom: blocks[0]!.number,
    }
    expect(f.follower.status().halted).toMatchObject(expected)
    // The head seen when the halt was found: one CI run found it a block short of the old
    // chain's height (the replacement chain read before its last block), which is as true.
    expect([blocks[2]!.number, blocks[3]!.number]).toContain(f.follower.status().halted!.head)
    expect(store.current()?.halted).toMatchObject(expected)
    expect(halts).toEqual([expect.objectContaining(expected)])
    const count = f.events.length
    expect(f.events.filter((e) => e.type === 'reorg')).toEqual([])

    // The chain goes on; the follower keeps reading its cursor (to see a resume) and emits nothing.
    await anvilMine(3)
    const loads = store.loads
    await f.waitFor(() => store.loads >= loads + 3, 'three more ticks')
    expect(f.events.length).toBe(count)
    expect(f.follower.syncedHeight()).toBe(blocks[3]!.number)
    const said = f.logs.filter((l) => l.msg.startsWith('reorg deeper than the remembered window'))
    expect(said).toHaveLength(1)
    expect(said[0]).toMatchObject({
      level: 'error',
      fields: expect.objectContaining({
        network: 'anvil',
        windowFrom: String(expected.windowFrom),
        windowTo: String(expected.windowTo),
        fix: expect.stringContaining('npm run cli -- network resume --network anvil'),
      }),
    })
  })

  test('a follower started on a halted cursor (a restart, another instance) stays halted: it emits nothing and says so once', async () => {
    const store = countingStore()
    const first = await follow({ watch: [], windowSize: 2, store })
    await anvilMine(3)
    const top = await mine()
    await first.waitForHeight(top.number)
    await reorgAnew(3)
    await first.waitFor(() => first.follower.status().halted !== null, 'the halt')
    await first.stop()

    const second = await follow({ watch: [], windowSize: 2, store })
    await anvilMine(2)
    const loads = store.loads
    await second.waitFor(() => store.loads >= loads + 3, 'three ticks')
    expect(second.events).toEqual([])
    expect(second.follower.status().halted).toEqual(store.current()!.halted!)
    expect(second.logs.filter((l) => l.msg.startsWith('this network is halted'))).toEqual([
      expect.objectContaining({
        level: 'warn',
        fields: expect.objectContaining({
          fix: expect.stringContaining('network resume --network anvil'),
        }),
      }),
    ])
  })

  test('resumed from block N: recorded blocks no longer canonical are reported as a reorg, those still canonical are not; N..head is scanned again and the chain followed on', async () => {
    const watched = randomAddress()
    const store = memoryCursorStore()
    // What the handler recorded: the blocks of its findings, as the chain watcher reads them from
    // the database.
    const recorded = new Map<string, BlockRef>()
    const f = await follow({
      watch: [watched],
      windowSize: 2,
      store,
      recorded: async (from) => [...recorded.values()].filter((b) => b.number >= from),
      onEvent: (e) => {
        if (e.type === 'block')
          for (const x of e.findings)
            recorded.set(x.blockHash, { number: x.blockNumber, hash: x.blockHash })
      },
    })
    await send({ to: watched, value: 1n })
    const kept = await mine()
    await anvilMine(2)
    await send({ to: watched, value: 2n })
    const lost = await mine()
    const top = await anvilMine(3)
    await f.waitForHeight(top.number)
    const belowTop = await chain.getBlock({ blockNumber: top.number - 1n })
    expect(f.findings().map((x) => [x.amount, x.blockHash])).toEqual([
      [1n, kept.hash],
      [2n, lost.hash],
    ])

    // Replaces `lost` and everything above it, far below the 2-block window.
    await reorgAnew(Number(top.number - lost.number) + 1)
    await f.waitFor(() => f.follower.status().halted !== null, 'the halt')
    const before = f.events.length

    const resumed = resumeCursor(store.current(), 'anvil', kept.number)
    if (!resumed.ok) throw new Error(resumed.message)
    await store.save(resumed.value.cursor)
    const head = (await anvilMine(1)).number
    await f.waitForHeight(head)

    const after = f.events.slice(before)
    // The lost payment's block, and the window remembered at the halt; not the block of the payment
    // that stayed.
    expect(after[0]).toEqual({
      type: 'reorg',
      forkPoint: lost.number - 1n,
      removed: [
        { number: lost.number, hash: lost.hash },
        { number: belowTop.number, hash: belowTop.hash },
        { number: top.number, hash: top.hash },
      ],
    })
    const rescanned = after.filter(
      (e): e is Extract<FollowerEvent, { type: 'block' }> => e.type === 'block',
    )
    expect(rescanned.map((b) => b.block.number)).toEqual(range(kept.number, head))
    // The payment still on the chain is found again in the same block (the handler keeps it once);
    // the lost one is gone.
    expect(rescanned.flatMap((b) => b.findings).map((x) => [x.amount, x.blockHash])).toEqual([
      [1n, kept.hash],
    ])
    expect(f.follower.status().halted).toBeNull()
    expect(store.current()).not.toHaveProperty('halted')
    expect(store.current()).not.toHaveProperty('recheckFrom')

    // Followed on, reorgs within the window handled as usual again.
    const next = await mine()
    await f.waitForHeight(next.number)
    await reorgAnew(1)
    await f.waitFor(
      () => f.events.slice(before + 1).some((e) => e.type === 'reorg'),
      'a shallow reorg',
    )
    expect(f.events.slice(before + 1).find((e) => e.type === 'reorg')).toEqual({
      type: 'reorg',
      forkPoint: next.number - 1n,
      removed: [{ number: next.number, hash: next.hash }],
    })
  })

  test('a reorg reaching below the first block followed is no halt: nothing below it was scanned, and what was followed is reported removed', async () => {
    const before = await mine()
    const f = await follow({ watch: [] })
    const first = f.blocks()[0]!.block
    expect(first.number).toBe(before.number)
    const next = await mine()
    await f.waitForHeight(next.number)

    await reorgAnew(3)
    const reorg = await f.waitForEvent('reorg')
    expect(reorg).toEqual({
      type: 'reorg',
      forkPoint: first.number - 1n,
      removed: [
        { number: first.number, hash: first.hash },
        { number: next.number, hash: next.hash },
      ],
    })
    expect(f.follower.status().halted).toBeNull()
    await f.waitFor(() => f.blocksAfter(reorg).length === 2, 'replacement blocks')
  })

  test('waiting for the finalized block, the window reaches down to it: a reorg deeper than the window but above that block is a reorg, not a halt', async () => {
    // anvil's finalized block is 64 below its head (two epochs of 32 slots).
    await anvilMine(70)
    const store = memoryCursorStore()
    const f = await follow({ watch: [], windowSize: 2, store, finalityTag: 'finalized' })
    const top = await anvilMine(70)
    await f.waitForHeight(top.number)
    // One more chunk once the finalized block is known: the window is trimmed to it, not to 2.
    const last = await mine()
    await f.waitForHeight(last.number)
    const finalized = (await chain.getBlock({ blockTag: 'finalized' })).number
    expect(finalized).toBeLessThan(last.number - 10n)
    expect(store.current()!.recent[0]!.number).toBeLessThanOrEqual(finalized)

    await reorgAnew(10)
    const reorg = await f.waitForEvent('reorg')
    expect(reorg.forkPoint).toBe(last.number - 10n)
    expect(f.follower.status().halted).toBeNull()
  })

  test('after a restart on the same store, every block mined while stopped is delivered once, in order', async () => {
    const watched = randomAddress()
    const store = memoryCursorStore()
    const before = await follow({ watch: [watched], store })
    const start = await mine()
    await before.waitForHeight(start.number)
    await before.stop()

    await send({ to: watched, value: 1n })
    const paidA = await mine()
    await anvilMine(10)
    await send(transferCall(watched, 2n))
    const paidB = await mine()
    const head = (await anvilMine(5)).number

    const after = await follow({ watch: [watched], store })
    await after.waitForHeight(head)
    const numbers = after.blocks().map((b) => b.block.number)
    expect(numbers).toEqual(range(start.number + 1n, head))
    expect(after.findings().map((x) => [x.amount, x.blockNumber])).toEqual([
      [1n, paidA.number],
      [2n, paidB.number],
    ])
  })

  test('a reorg that happened while stopped is found after a restart from the stored hashes', async () => {
    const watched = randomAddress()
    const store = memoryCursorStore()
    const before = await follow({ watch: [watched], store })
    await send({ to: watched, value: 6n })
    const paid = await mine()
    await before.waitForHeight(paid.number)
    await before.stop()

    await anvilReorg(1, [])
    const head = (await anvilMine(2)).number
    const after = await follow({ watch: [watched], store })
    await after.waitForHeight(head)
    expect(after.events.filter((e) => e.type === 'reorg')).toEqual([
      {
        type: 'reorg',
        forkPoint: paid.number - 1n,
        removed: [{ number: paid.number, hash: paid.hash }],
      },
    ])
    expect(after.blocks().map((b) => b.block.number)).toEqual(range(paid.number, head))
    expect(after.findings()).toEqual([])
  })

  test('keeps retrying through an RPC outage and catches up without a gap when the node answers again', async () => {
    const watched = randomAddress()
    const proxy = await startProxy(node.rpcUrl)
    const f = await follow({ watch: [watched], rpcUrl: proxy.url })
    const start = await mine()
    await f.waitForHeight(start.number)

    proxy.mode = 'refuse'
    const refusedBefore = proxy.refused
    await send({ to: watched, value: 5n })
    const paid = await mine()
    const head = (await anvilMine(3)).number
    await f.waitFor(() => proxy.refused >= refusedBefore + 3, 'retries during the outage')
    expect(f.follower.syncedHeight()).toBe(start.number)
    expect(f.logs.some((l) => l.level === 'warn' && l.msg === 'chain follower tick failed')).toBe(
      true,
    )

    proxy.mode = 'pass'
    await f.waitForHeight(head)
    expect(
      f
        .blocks()
        .map((b) => b.block.number)
        .filter((n) => n > start.number),
    ).toEqual(range(start.number + 1n, head))
    expect(f.findings().map((x) => [x.amount, x.blockNumber])).toEqual([[5n, paid.number]])
  })

  test('uses the fallback URL when the primary fails', async () => {
    const watched = randomAddress()
    const primary = await startProxy(node.rpcUrl)
    primary.mode = 'refuse'
    const f = await follow({
      watch: [watched],
      rpcUrl: primary.url,
      fallbackRpcUrls: [node.rpcUrl],
    })
    await send({ to: watched, value: 8n })
    const paid = await mine()
    await f.waitForHeight(paid.number)
    expect(f.findings().map((x) => [x.amount, x.blockNumber])).toEqual([[8n, paid.number]])
    expect(primary.refused).toBeGreaterThan(0)
  })

  test('catch-up asks eth_getLogs for ranges no longer than maxLogRange, covering every block once', async () => {
    const watched = randomAddress()
    const proxy = await startProxy(node.rpcUrl)
    const start = await mine()
    const store = memoryCursorStore({
      height: start.number,
      recent: [{ number: start.number, hash: start.hash }],
    })
    await anvilMine(11)
    await send(transferCall(watched, 9n))
    const paid = await mine()
    const head = (await anvilMine(11)).number

    const f = await follow({
      watch: [watched],
      store,
      rpcUrl: proxy.url,
      maxLogRange: 4,
      batchSize: 10,
    })
    await f.waitForHeight(head)
    const ranges = proxy.calls
      .filter((c) => c.method === 'eth_getLogs')
      .map((c) => (c.params as [{ fromBlock: Hex; toBlock: Hex }])[0])
      .filter((p) => p.fromBlock !== undefined)
      .map((p) => [BigInt(p.fromBlock), BigInt(p.toBlock)] as const)
    for (const [lo, hi] of ranges) expect(hi - lo + 1n).toBeLessThanOrEqual(4n)
    expect(ranges.flatMap(([lo, hi]) => range(lo, hi))).toEqual(range(start.number + 1n, head))
    expect(f.findings().map((x) => [x.amount, x.blockNumber])).toEqual([[9n, paid.number]])
  })

  test('a node whose head lags behind the cursor is waited for, not taken for a reorg', async () => {
    const proxy = await startProxy(node.rpcUrl)
    const f = await follow({ watch: [], rpcUrl: proxy.url })
    await anvilMine(3)
    const top = await mine()
    await f.waitForHeight(top.number)
    proxy.blockNumberOffset = -2n
    const heads = f.events.filter((e) => e.type === 'head').length
    await f.waitFor(
      () => f.events.filter((e) => e.type === 'head').length >= heads + 3,
      'three ticks',
    )
    expect(f.events.filter((e) => e.type === 'reorg')).toEqual([])
    expect(f.follower.syncedHeight()).toBe(top.number)
  })

  test('stop() returns promptly while an RPC call hangs, and no event follows it', async () => {
    const proxy = await startProxy(node.rpcUrl)
    const f = await follow({ watch: [], rpcUrl: proxy.url })
    proxy.mode = 'hang'
    const hung = proxy.hung
    await f.waitFor(() => proxy.hung > hung, 'a hanging call')
    const t0 = performance.now()
    await f.follower.stop()
    expect(performance.now() - t0).toBeLessThan(500)
    const count = f.events.length
    const calls = proxy.calls.length
    proxy.mode = 'pass'
    // A second follower seeing the next block three ticks later: the stopped one had time to act.
    const witness = await follow({ watch: [] })
    const block = await mine()
    await witness.waitForHeight(block.number)
    const heads = witness.events.filter((e) => e.type === 'head').length
    await witness.waitFor(
      () => witness.events.filter((e) => e.type === 'head').length >= heads + 3,
      'three ticks',
    )
    expect(f.events.length).toBe(count)
    expect(proxy.calls.length).toBe(calls)
  })
})

describe('createBlockFollower() timing (scripted node, injected clock and sleep: no wall time)', () => {
  const HASH = `0x${'11'.repeat(32)}`
  const scriptedBlock = {
    number: '0x5',
    hash: HASH,
    parentHash: `0x${'22'.repeat(32)}`,
    timestamp: '0x1',
    transactions: [],
  }
  const network = {
    name: 'scripted',
    pollIntervalMs: 100,
    maxLogRange: 10,
    erc20Tokens: [],
    scanNative: false,
  }

  test('a failing node is retried with exponential backoff, capped', async () => {
    const delays: number[] = []
    const follower = createBlockFollower({
      network,
      client: {
        request: async () => {
          throw new Error('connection refused')
        },
      },
      store: memoryCursorStore(),
      watch: new Set(),
      handler: () => {},
      tuning: { backoff: { baseMs: 25, maxMs: 400 } },
      sleep: async (ms) => {
        delays.push(ms)
        if (delays.length === 7) void follower.stop()
      },
    })
    follower.start()
    await until(() => delays.length >= 7, 'seven retries')
    await follower.stop()
    expect(delays).toEqual([25, 50, 100, 200, 400, 400, 400])
  })

  test('polls every pollIntervalMs counted from the start of the previous tick, and backs off again from the base after a success', async () => {
    const clock = manualClock(0)
    const delays: number[] = []
    let failNext = false
    const follower = createBlockFollower({
      network,
      client: {
        request: async ({ method, params }) => {
          clock.advance(30) // each call "takes" 30 ms
          if (failNext) throw new Error('timeout')
          if (method === 'eth_blockNumber') return '0x5'
          return (params as unknown[])?.[0] === '0x0'
            ? { ...scriptedBlock, number: '0x0', hash: `0x${'33'.repeat(32)}` }
            : scriptedBlock
        },
      },
      store: memoryCursorStore(),
      watch: new Set(),
      handler: () => {},
      clock,
      tuning: { backoff: { baseMs: 25, maxMs: 400 } },
      sleep: async (ms) => {
        delays.push(ms)
        failNext = delays.length === 1 || delays.length === 2
        if (delays.length === 4) void follower.stop()
      },
    })
    follower.start()
    await until(() => delays.length >= 4, 'four ticks')
    await follower.stop()
    // Tick 1: genesis check + blockNumber + first block = 90 ms -> 10 ms left; two failures; then a
    // success (blockNumber + tip check = 60 ms; the genesis was checked once) -> 40 ms.
    expect(delays).toEqual([10, 25, 50, 40])
    expect(follower.syncedHeight()).toBe(5n)
  })
})

// ---- harness ----------------------------------------------------------------------------

interface FollowOptions {
  watch: string[]
  store?: CursorStore
  rpcUrl?: string
  fallbackRpcUrls?: string[]
  scanNative?: boolean
  maxLogRange?: number
  batchSize?: number
  windowSize?: number
  finalityTag?: 'safe' | 'finalized'
  recorded?: (from: bigint) => Promise<BlockRef[]>
  onHalt?: (halt: Halt) => void
  /** Sees each event as the handler does. */
  onEvent?: (event: FollowerEvent) => void
}

async function follow(options: FollowOptions) {
  const events: FollowerEvent[] = []
  const logs: Array<{ level: string; msg: string; fields?: Record<string, unknown> }> = []
  const logger = Object.fromEntries(
    (['debug', 'info', 'warn', 'error'] as const).map((level) => [
      level,
      (msg: string, fields?: Record<string, unknown>) => logs.push({ level, msg, fields }),
    ]),
  ) as unknown as Logger
  const deps: BlockFollowerDeps = {
    network: {
      name: 'anvil',
      pollIntervalMs: 25,
      maxLogRange: options.maxLogRange ?? 1000,
      erc20Tokens: [token],
      scanNative: options.scanNative ?? true,
      ...(options.finalityTag ? { finalityTag: options.finalityTag } : {}),
    },
    client: createChainClient({
      rpcUrl: options.rpcUrl ?? node.rpcUrl,
      fallbackRpcUrls: options.fallbackRpcUrls,
      retryCount: 0,
      timeoutMs: 5000,
    }),
    store: options.store ?? memoryCursorStore(),
    watch: new Set(options.watch.map((a) => a.toLowerCase())),
    handler: (event) => {
      options.onEvent?.(event)
      events.push(event)
    },
    logger,
    ...(options.recorded ? { recorded: options.recorded } : {}),
    ...(options.onHalt ? { onHalt: options.onHalt } : {}),
    tuning: {
      batchSize: options.batchSize,
      windowSize: options.windowSize,
      backoff: { baseMs: 25, maxMs: 100 },
    },
  }
  const follower = createBlockFollower(deps)
  follower.start()
  cleanups.push(() => follower.stop())
  const blocks = () =>
    events.filter((e): e is Extract<FollowerEvent, { type: 'block' }> => e.type === 'block')
  const waitFor = (predicate: () => boolean, what: string) =>
    until(predicate, what, () => JSON.stringify(logs.slice(-3)))
  const harness = {
    follower,
    events,
    logs,
    blocks,
    findings: (): Finding[] => blocks().flatMap((b) => b.findings),
    blocksAfter: (event: FollowerEvent) =>
      blocks().filter((b) => events.indexOf(b) > events.indexOf(event)),
    waitFor,
    waitForHeight: (n: bigint) =>
      waitFor(() => (follower.syncedHeight() ?? -1n) >= n, `synced height ${n}`),
    async waitForEvent<T extends FollowerEvent['type']>(type: T) {
      await waitFor(() => events.some((e) => e.type === type), `a ${type} event`)
      return events.find((e) => e.type === type) as Extract<FollowerEvent, { type: T }>
    },
    stop: () => follower.stop(),
  }
  // Start from a known point: the first block event (the head when it started) has arrived.
  await waitFor(() => follower.syncedHeight() !== null, 'first tick')
  return harness
}

/**
 * A memoryCursorStore that counts its loads: a halted follower reads its cursor again at every
 * tick.
 */
function countingStore() {
  const inner = memoryCursorStore()
  const store = {
    ...inner,
    loads: 0,
    load: () => {
      store.loads++
      return inner.load()
    },
  }
  return store
}

/** Polls until `predicate` holds; fails with `what` after a deadline. */
async function until(
  predicate: () => boolean,
  what: string,
  context = () => '',
  timeoutMs = 4_000,
) {
  const deadline = performance.now() + timeoutMs
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what} ${context()}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

function walletClient(rpcUrl: string) {
  return createWalletClient({ account: PAYER, transport: http(rpcUrl) })
}

/** Queues a transaction (mined by the next `mine()`); returns its hash. */
async function send(tx: { to: Address; value?: bigint; data?: Hex }): Promise<Hex> {
  return chain.request({ method: 'eth_sendRawTransaction', params: [await signedTransfer(tx)] })
}

async function signedTransfer(tx: { to: Address; value?: bigint; data?: Hex }): Promise<Hex> {
  const wallet = walletClient(node.rpcUrl)
  const request = await wallet.prepareTransactionRequest({ ...tx, gas: 100_000n, chain: null })
  return wallet.signTransaction({ ...request, chain: null } as Parameters<
    typeof wallet.signTransaction
  >[0])
}

function transferCall(to: Address, amount: bigint) {
  return {
    to: token,
    data: encodeFunctionData({
      abi: TestStablecoin.abi,
      functionName: 'transfer',
      args: [to, amount],
    }),
  }
}

async function mine() {
  await chain.request({ method: 'evm_mine' } as never)
  return chain.getBlock({ blockTag: 'latest' })
}

async function anvilMine(n: number) {
  await chain.request({ method: 'anvil_mine', params: [`0x${n.toString(16)}`] } as never)
  return chain.getBlock({ blockTag: 'latest' })
}

async function anvilReorg(depth: number, txs: Array<[Hex, number]>) {
  await chain.request({ method: 'anvil_reorg', params: [depth, txs] } as never)
}

/**
 * A reorg whose first replacement block holds a transfer nobody watches, so it cannot come out
 * identical to the block it replaces.
 */
async function reorgAnew(depth: number) {
  await anvilReorg(depth, [[await signedTransfer({ to: randomAddress(), value: 1n }), 0]])
}

function randomAddress(): Address {
  const bytes = crypto.getRandomValues(new Uint8Array(20))
  return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`
}

function range(from: bigint, to: bigint): bigint[] {
  const out: bigint[] = []
  for (let n = from; n <= to; n++) out.push(n)
  return out
}

/** A no-mining anvil that keeps 256 past states, so `anvil_reorg` can replace recent blocks. */
const startReorgableAnvil = () => startAnvil({ noMining: true, historyStates: 256 })

/** The shared proxy, closed after the running test. */
async function startProxy(target: string) {
  const proxy = await startRpcProxy(target)
  cleanups.push(() => proxy.close())
  return proxy
}
