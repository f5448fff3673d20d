import { describe, expect, test } from 'bun:test'
import { TestBatchPayer, TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { createDevnetClient, type Devnet, type DevnetClient } from '../../src/chain/devnet.ts'
import { backends } from '../helpers/databases.ts'
import { payNative, payToken, waitUntil } from '../helpers/chain.ts'
import type { RpcProxy } from '../helpers/rpc-proxy.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

for (const backend of backends()) {
  describe(`payments on a real devnet [${backend}]`, () => {
    let devnet: Devnet
    let wallet: DevnetClient
    let t: TestServer
    let key: string
    /** Between the service and the devnet: lets a test hold the block follower still. */
    let proxy: RpcProxy
    useStack(backend, { devnet: { confirmations: 2, pollIntervalMs: 200 }, proxy: true }, (s) => {
      devnet = s.devnet
      wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
      proxy = s.proxy
      t = s.t
      key = s.key
    })

    const state = async (id: string) => (await (await t.fetch(`/pay/${id}/state`)).json()) as any
    const create = async (body: Record<string, unknown> = { amount: 25 }) =>
      ((await (await api(t, key).create(body)).json()) as any).transaction.id as string
    const select = (id: string, token_symbol: string) =>
      t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol, blockchain_network: 'devnet' }),
      })

    test('an exact stablecoin payment completes after the configured confirmations', async () => {
      const id = await create({ amount: 25 })
      const offered = await state(id)
      expect(offered.tokens.map((x: any) => x.token_symbol).sort()).toEqual(['ETH', 'TEUR', 'TUSD'])
      const r = await select(id, 'TUSD')
      expect(r.status).toBe(200)
      const s = (await r.json()) as any
      expect(s.status).toBe('prepared')
      expect(s.quote.token_amount).toBe('25000000')
      expect(s.quote.payment_uri).toBe(
        `ethereum:${devnet.stablecoin}@31337/transfer?address=${s.quote.deposit_address}&uint256=25000000`,
      )
      const hash = await payToken(wallet, devnet.stablecoin, s.quote.deposit_address, 25_000_000n)
      const done = await waitUntil(
        'completed',
        () => state(id),
        (x) => x.status === 'completed',
      )
      expect(done.transaction_hash).toBe(hash)
      expect(done.confirmations).toBeGreaterThanOrEqual(2)
      const tx = (await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any
      expect(tx.transaction).toMatchObject({
        status: 'completed',
        transaction_hash: hash,
        token_symbol: 'TUSD',
        blockchain_network: 'devnet',
        amount_received: '25000000',
      })
      expect(tx.transaction.block_number).toBeGreaterThan(0)
    })

    test('an exact native payment (ETH priced by the feed) completes', async () => {
      const id = await create({ amount: 30 })
      const s = (await (await select(id, 'ETH')).json()) as any
      // $30 at $3000/ETH = 0.01 ETH
      expect(s.quote.token_amount).toBe('10000000000000000')
      await payNative(wallet, s.quote.deposit_address, 10_000_000_000_000_000n)
      await waitUntil(
        'completed',
        () => state(id),
        (x) => x.status === 'completed',
      )
    })

    test('two transfers of the token in one transaction (a batch payout) add up to the quote', async () => {
      const deployed = await wallet.waitForTransactionReceipt({
        hash: await wallet.deployContract({
          abi: TestBatchPayer.abi,
          bytecode: TestBatchPayer.bytecode,
        }),
      })
      const payer = deployed.contractAddress!
      await wallet.waitForTransactionReceipt({
        hash: await wallet.writeContract({
          address: devnet.stablecoin,
          abi: TestStablecoin.abi,
          functionName: 'mint',
          args: [payer, 25_000_000n],
        }),
      })
      const id = await create({ amount: 25 })
      const s = (await (await select(id, 'TUSD')).json()) as any
      const hash = await wallet.writeContract({
        address: payer,
        abi: TestBatchPayer.abi,
        functionName: 'payInParts',
        args: [devnet.stablecoin, s.quote.deposit_address, [10_000_000n, 15_000_000n]],
      })
      const receipt = await wallet.waitForTransactionReceipt({ hash })
      expect(
        receipt.logs.filter((l) => l.address.toLowerCase() === devnet.stablecoin.toLowerCase()),
      ).toHaveLength(2)
      const done = await waitUntil(
        'completed',
        () => state(id),
        (x) => x.status === 'completed',
      )
      expect(done.transaction_hash).toBe(hash)
      const tx = (await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any
      expect(tx.transaction).toMatchObject({ status: 'completed', amount_received: '25000000' })
    })

    test('native coin forwarded by a contract (an internal call, as from a smart wallet) completes the transaction', async () => {
      const payer = (
        await wallet.waitForTransactionReceipt({
          hash: await wallet.deployContract({
            abi: TestBatchPayer.abi,
            bytecode: TestBatchPayer.bytecode,
          }),
        })
      ).contractAddress!
      const id = await create({ amount: 30 })
      const s = (await (await select(id, 'ETH')).json()) as any
      const amount = BigInt(s.quote.token_amount)
      const receipt = await wallet.waitForTransactionReceipt({
        hash: await wallet.writeContract({
          address: payer,
          abi: TestBatchPayer.abi,
          functionName: 'forward',
          args: [s.quote.deposit_address],
          value: amount,
        }),
      })
      // The transaction is to the contract: no block lists a transfer to the deposit address.
      expect(receipt.to!.toLowerCase()).toBe(payer.toLowerCase())
      const done = await waitUntil(
        'completed',
        () => state(id),
        (x) => x.status === 'completed',
      )
      // The node traces calls (anvil answers trace_block): the payment is named by the transaction
      // that sent it.
      expect(done.transaction_hash).toBe(receipt.transactionHash)
      const tx = (await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any
      expect(tx.transaction).toMatchObject({
        status: 'completed',
        amount_received: amount.toString(),
        block_number: Number(receipt.blockNumber),
        transaction_hash: receipt.transactionHash,
        transaction_hash_names: 'transaction',
      })
    })

    test('on a node that cannot trace, native coin forwarded by a contract is named by its block, and the API says so', async () => {
      const payer = (
        await wallet.waitForTransactionReceipt({
          hash: await wallet.deployContract({
            abi: TestBatchPayer.abi,
            bytecode: TestBatchPayer.bytecode,
          }),
        })
      ).contractAddress!
      proxy.refuseMethods = new Set(['debug_traceBlockByHash', 'trace_block'])
      try {
        const id = await create({ amount: 30 })
        const s = (await (await select(id, 'ETH')).json()) as any
        const amount = BigInt(s.quote.token_amount)
        const receipt = await wallet.waitForTransactionReceipt({
          hash: await wallet.writeContract({
            address: payer,
            abi: TestBatchPayer.abi,
            functionName: 'forward',
            args: [s.quote.deposit_address],
            value: amount,
          }),
        })
        await waitUntil(
          'completed',
          () => state(id),
          (x) => x.status === 'completed',
        )
        const tx = (await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any
        expect(tx.transaction).toMatchObject({
          status: 'completed',
          amount_received: amount.toString(),
          transaction_hash: receipt.blockHash,
          transaction_hash_names: 'block',
        })
      } finally {
        proxy.refuseMethods = new Set()
      }
    })

    test('choosing the native coin again keeps what the address held at the first choice: coin that arrived meanwhile, not seen yet, is still a payment', async () => {
      const payer = (
        await wallet.waitForTransactionReceipt({
          hash: await wallet.deployContract({
            abi: TestBatchPayer.abi,
            bytecode: TestBatchPayer.bytecode,
          }),
        })
      ).contractAddress!
      const id = await create({ amount: 30 })
      const quote = ((await (await select(id, 'ETH')).json()) as any).quote
      const amount = BigInt(quote.token_amount)
      // The follower is held still (its next poll waits), so the payment below is not seen before
      // the customer chooses again.
      let release!: () => void
      const released = new Promise<void>((r) => (release = r))
      let held!: () => void
      const holding = new Promise<void>((r) => (held = r))
      proxy.beforeCall = async (call) => {
        if (call.method !== 'eth_blockNumber') return
        held()
        await released
      }
      try {
        await holding
        await wallet.waitForTransactionReceipt({
          hash: await wallet.writeContract({
            address: payer,
            abi: TestBatchPayer.abi,
            functionName: 'forward',
            args: [quote.deposit_address],
            value: amount,
          }),
        })
        const again = await select(id, 'ETH')
        expect(again.status).toBe(200)
      } finally {
        proxy.beforeCall = undefined
        release()
      }
      await waitUntil(
        'completed',
        () => state(id),
        (x) => x.status === 'completed',
      )
      const tx = (await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any
      expect(tx.transaction.amount_received).toBe(amount.toString())
    })

    test('native coin the address held before the native coin was quoted is not a payment', async () => {
      const payer = (
        await wallet.waitForTransactionReceipt({
          hash: await wallet.deployContract({
            abi: TestBatchPayer.abi,
            bytecode: TestBatchPayer.bytecode,
          }),
        })
      ).contractAddress!
      const forward = async (to: string, value: bigint) =>
        wallet.waitForTransactionReceipt({
          hash: await wallet.writeContract({
            address: payer,
            abi: TestBatchPayer.abi,
            functionName: 'forward',
            args: [to as `0x${string}`],
            value,
          }),
        })
      const id = await create({ amount: 30 })
      // The address is handed out with TUSD, and ETH reaches it by an internal call before ETH is
      // chosen.
      const address = ((await (await select(id, 'TUSD')).json()) as any).quote
        .deposit_address as string
      await forward(address, 4_000_000_000_000_000n)
      const quote = ((await (await select(id, 'ETH')).json()) as any).quote
      expect(quote.deposit_address).toBe(address)
      const amount = BigInt(quote.token_amount)
      await forward(address, amount)
      await waitUntil(
        'completed',
        () => state(id),
        (x) => x.status === 'completed',
      )
      const tx = (await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any
      expect(tx.transaction.amount_received).toBe(amount.toString())
    })
  })
}
