/**
 * Native coin sent to deposit addresses by a contract's internal call is found by comparing
 * balances (docs/decisions/0046-native-coin-by-internal-call.md), and those balances are read in
 * few calls: one Multicall3 `aggregate3` of `getEthBalance` for every open native quote where the
 * chain has Multicall3, else `eth_getBalance` per address in JSON-RPC batches. Real anvil, the
 * counting proxy between the server and it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { encodeFunctionData, encodeFunctionResult, parseAbi, type Address, type Hex } from 'viem'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { TestBatchPayer } from '../../src/chain/artifacts/index.ts'
import { MULTICALL3 } from '../../src/chain/deposit-account.ts'
import { createDevnetClient, installMulticall3, type DevnetClient } from '../../src/chain/devnet.ts'
import {
  MULTICALL_ADDRESSES_PER_CALL,
  createNativeBalances,
  decodeBalances,
  encodeBalanceCalls,
} from '../../src/chain/follower/native-balances.ts'
import type { Logger } from '../../src/lib/logger.ts'
import { backends } from '../helpers/databases.ts'
import { waitUntil } from '../helpers/chain.ts'
import type { RpcCall, RpcProxy } from '../helpers/rpc-proxy.ts'
import type { StackOf } from '../helpers/stack.ts'
import { useStack } from '../helpers/stack.ts'
import type { TreasuryChain } from '../helpers/treasury.ts'

/** Multicall3's functions, as github.com/mds1/multicall3 declares them (the reference encoding). */
const multicall3Abi = parseAbi([
  'struct Call3 { address target; bool allowFailure; bytes callData; }',
  'struct Result { bool success; bytes returnData; }',
  'function aggregate3(Call3[] calls) payable returns (Result[] returnData)',
  'function getEthBalance(address addr) view returns (uint256 balance)',
])
const AGGREGATE3 = '0x82ad56cb'

/** The follower's balance reads among the proxy's calls: the ones made at a block's hash. */
const atBlockHash = (c: RpcCall) =>
  Array.isArray(c.params) &&
  typeof c.params[1] === 'object' &&
  c.params[1] !== null &&
  'blockHash' in c.params[1]
const multicalls = (calls: RpcCall[]) =>
  calls.filter((c) => {
    const [call] = c.params as [{ to?: string; data?: string }]
    return (
      c.method === 'eth_call' &&
      atBlockHash(c) &&
      call.to?.toLowerCase() === MULTICALL3.toLowerCase() &&
      call.data?.startsWith(AGGREGATE3)
    )
  })
const balanceCalls = (calls: RpcCall[]) =>
  calls.filter((c) => c.method === 'eth_getBalance' && atBlockHash(c))

/** Deploys the contract that forwards native coin (an internal call, as from a smart wallet). */
async function deployForwarder(customer: DevnetClient): Promise<Address> {
  const receipt = await customer.waitForTransactionReceipt({
    hash: await customer.deployContract({
      abi: TestBatchPayer.abi,
      bytecode: TestBatchPayer.bytecode,
    }),
  })
  return receipt.contractAddress!
}

/** Sends `amount` through the forwarder to `to`: no block lists a transfer to `to`. */
async function forward(customer: DevnetClient, forwarder: Address, to: string, amount: bigint) {
  return customer.waitForTransactionReceipt({
    hash: await customer.writeContract({
      address: forwarder,
      abi: TestBatchPayer.abi,
      functionName: 'forward',
      args: [to as Address],
      value: amount,
    }),
  })
}

type Stack = StackOf<{ treasury: true; proxy: true }>

/** Pays `quote` by an internal call, mines its confirmations and waits for the transaction. */
async function payByInternalCall(
  s: Stack,
  forwarder: Address,
  quote: { id: string; address: string; units: bigint },
) {
  const receipt = await forward(s.treasury.customer, forwarder, quote.address, quote.units)
  expect(receipt.to!.toLowerCase()).toBe(forwarder.toLowerCase())
  await s.treasury.mine(3)
  return waitUntil(
    `transaction ${quote.id} completed`,
    () => s.api.transaction(quote.id),
    (x) => x.status === 'completed',
    60_000,
  )
}

const setCode = (treasury: TreasuryChain, code: Hex) =>
  treasury.customer.request({ method: 'anvil_setCode', params: [MULTICALL3, code] } as never)

for (const backend of backends()) {
  describe(`native balances with Multicall3 [${backend}]`, () => {
    let s: Stack
    let proxy: RpcProxy
    let forwarder: Address
    useStack(backend, { treasury: true, proxy: true }, async (stack) => {
      s = stack
      proxy = stack.proxy
      forwarder = await deployForwarder(stack.treasury.customer)
    })

    test('the start-up verification records that the chain has Multicall3', () => {
      expect(s.t.server.services.chain.verdicts()).toEqual([
        expect.objectContaining({ network: 'localchain', status: 'verified', multicall3: true }),
      ])
    })

    test('native coin arriving by an internal call completes the transaction, every open native quote read by one eth_call to Multicall3 and none by eth_getBalance', async () => {
      const others = [await s.api.quoted(11, 'ETH'), await s.api.quoted(12, 'ETH')]
      const quote = await s.api.quoted(30, 'ETH')
      const from = proxy.calls.length
      const done = await payByInternalCall(s, forwarder, quote)
      expect(done).toMatchObject({
        status: 'completed',
        amount_received: quote.units.toString(),
        transaction_hash_names: 'transaction',
      })
      const calls = proxy.calls.slice(from)
      const reads = multicalls(calls)
      expect(reads.length).toBeGreaterThan(0)
      expect(balanceCalls(calls)).toEqual([])
      // Each read is one call covering every open native quote (three: fewer than a call takes);
      // the paid one leaves the reads once it completes.
      const data = reads.map((r) => (r.params as [{ data: string }])[0].data.toLowerCase())
      for (const d of data)
        for (const q of others) expect(d).toContain(q.address.slice(2).toLowerCase())
      expect(data.some((d) => d.includes(quote.address.slice(2).toLowerCase()))).toBe(true)
      // As many reads as blocks followed, not as addresses.
      const blocks = calls.filter((c) => c.method === 'eth_getBlockByNumber').length
      expect(reads.length).toBeLessThanOrEqual(blocks)
    })

    test('where Multicall3 answers no contract (its code gone), balances are read by eth_getBalance and the payment still completes', async () => {
      const quote = await s.api.quoted(30, 'ETH')
      await setCode(s.treasury, '0x')
      try {
        const from = proxy.calls.length
        const done = await payByInternalCall(s, forwarder, quote)
        expect(done).toMatchObject({ status: 'completed', amount_received: quote.units.toString() })
        const calls = proxy.calls.slice(from)
        expect(multicalls(calls).length).toBeGreaterThan(0)
        expect(
          balanceCalls(calls).some(
            (c) => (c.params as string[])[0]!.toLowerCase() === quote.address.toLowerCase(),
          ),
        ).toBe(true)
      } finally {
        await installMulticall3(s.treasury.customer)
      }
    })
  })

  describe(`native balances without Multicall3 [${backend}]`, () => {
    let s: Stack
    let proxy: RpcProxy
    let forwarder: Address
    useStack(
      backend,
      {
        treasury: true,
        proxy: true,
        // A chain where nothing is at Multicall3's address, from before the server starts.
        networks: async ({ treasury, rpcUrl }) => {
          await setCode(treasury!, '0x')
          return [treasury!.network({ rpcUrl })]
        },
      },
      async (stack) => {
        s = stack
        proxy = stack.proxy
        forwarder = await deployForwarder(stack.treasury.customer)
      },
    )

    test('the start-up verification records that the chain has no Multicall3', () => {
      expect(s.t.server.services.chain.verdicts()).toEqual([
        expect.objectContaining({ network: 'localchain', status: 'verified', multicall3: false }),
      ])
    })

    test('native coin arriving by an internal call completes the transaction, balances read by eth_getBalance batches at the block hash', async () => {
      const other = await s.api.quoted(11, 'ETH')
      const quote = await s.api.quoted(30, 'ETH')
      const from = proxy.calls.length
      const done = await payByInternalCall(s, forwarder, quote)
      expect(done).toMatchObject({ status: 'completed', amount_received: quote.units.toString() })
      const calls = proxy.calls.slice(from)
      expect(multicalls(calls)).toEqual([])
      const read = balanceCalls(calls).map((c) => (c.params as string[])[0]!.toLowerCase())
      expect(read).toContain(quote.address.toLowerCase())
      expect(read).toContain(other.address.toLowerCase())
    })
  })
}

describe('Multicall3 balance reads', () => {
  test('encodeBalanceCalls() is the ABI encoding of aggregate3 of getEthBalance, and decodeBalances() reads its answer exactly', () => {
    for (const n of [1, 2, 5, 300]) {
      const addresses = Array.from(
        { length: n },
        (_, i) => `0x${(0xabc000 + i).toString(16).padStart(40, 'f')}` as Address,
      )
      expect(encodeBalanceCalls(MULTICALL3, addresses)).toBe(
        encodeFunctionData({
          abi: multicall3Abi,
          functionName: 'aggregate3',
          args: [
            addresses.map((a) => ({
              target: MULTICALL3,
              allowFailure: true,
              callData: encodeFunctionData({
                abi: multicall3Abi,
                functionName: 'getEthBalance',
                args: [a],
              }),
            })),
          ],
        }).toLowerCase() as Hex,
      )
      // Up to 2^256 - 1 wei, exactly.
      const balances = addresses.map((_, i) => 2n ** 256n - 1n - BigInt(i) * 10n ** 18n)
      const answer = encodeFunctionResult({
        abi: multicall3Abi,
        functionName: 'aggregate3',
        result: balances.map((b) => ({
          success: true,
          returnData: `0x${b.toString(16).padStart(64, '0')}` as Hex,
        })),
      })
      expect(decodeBalances(answer, n)).toEqual(balances)
      expect(decodeBalances(answer, n + 1)).toBeNull()
    }
  })

  test('decodeBalances() takes no answer for a balance: no contract, a failed call, a short one', () => {
    const failed = encodeFunctionResult({
      abi: multicall3Abi,
      functionName: 'aggregate3',
      result: [{ success: false, returnData: '0x' }],
    })
    const short = encodeFunctionResult({
      abi: multicall3Abi,
      functionName: 'aggregate3',
      result: [{ success: true, returnData: '0x01' }],
    })
    expect(decodeBalances('0x', 1)).toBeNull()
    expect(decodeBalances(failed, 1)).toBeNull()
    expect(decodeBalances(short, 1)).toBeNull()
    expect(decodeBalances(`0x${'00'.repeat(31)}`, 1)).toBeNull()
  })

  describe('on a node whose eth_call gas is capped low', () => {
    let node: AnvilNode
    let client: DevnetClient
    beforeAll(async () => {
      // eth_call defaults to the block gas limit on anvil: 4,000,000 takes a few hundred addresses.
      node = await startAnvil({ extraArgs: ['--gas-limit', '4000000'] })
      client = createDevnetClient(node.rpcUrl, `0x${'11'.repeat(32)}`)
      await installMulticall3(client)
    })
    afterAll(() => node?.stop())

    test('a read refused as too large is asked again in smaller calls, and every balance is exact', async () => {
      const addresses = Array.from(
        { length: MULTICALL_ADDRESSES_PER_CALL + 100 },
        (_, i) => `0x${(0x5eed0000 + i).toString(16).padStart(40, '7')}`,
      )
      const funded = new Map([
        [addresses[0]!, 1n],
        [addresses[1_777]!, 123_456_789_012_345_678_901n],
        [addresses.at(-1)!, 10n ** 30n + 7n],
      ])
      for (const [address, balance] of funded)
        await client.request({
          method: 'anvil_setBalance',
          params: [address, `0x${balance.toString(16)}`],
        } as never)
      await client.request({ method: 'anvil_mine', params: ['0x1'] } as never)
      const block = await client.getBlock({ blockTag: 'latest' })
      const calls: number[] = []
      const warnings: string[] = []
      const reader = createNativeBalances({
        rpc: (method, params) => {
          if (method === 'eth_call') {
            const data = (params[0] as { data: string }).data
            calls.push((data.length - 2 - 8 - 128) / 448)
          }
          return client.request({ method, params } as never)
        },
        multicall3: MULTICALL3,
        network: 'capped',
        checkStopped: () => {},
        logger: { warn: (message: string) => warnings.push(message) } as unknown as Logger,
      })
      const balances = await reader.at(addresses, block.hash)
      expect(balances).toEqual(addresses.map((a) => funded.get(a) ?? 0n))
      expect(warnings.length).toBeGreaterThan(0)
      // Halved until the node took it: the first call was the even split of a fresh reader.
      expect(calls[0]).toBe(addresses.length / 2)
      expect(calls.reduce((a, b) => a + b, 0)).toBeGreaterThan(addresses.length)
      // Once narrowed, the next read asks the smaller size at once: nothing refused, nothing twice.
      const smallest = Math.min(...calls)
      calls.length = 0
      warnings.length = 0
      expect(await reader.at(addresses, block.hash)).toEqual(balances)
      expect(warnings).toEqual([])
      expect(calls.reduce((a, b) => a + b, 0)).toBe(addresses.length)
      expect(Math.max(...calls)).toBeLessThanOrEqual(smallest + 1)
    })
  })
})
