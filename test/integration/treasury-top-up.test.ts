/**
 * Money out on a chain without EIP-7702 (anvil under Cancun, as Avalanche's C-Chain is): the
 * service says so (`/api/networks`), `treasury check` says which route it takes, and the tool
 * sweeps and refunds through it. The gas account sends each deposit address exactly its own
 * transfers' fee, all in one transaction; each address then sends its own legacy transactions,
 * signed on the merchant's machine. No EIP-7702 transaction is ever signed, recorded or sent; the
 * treasury gains exactly what the customers paid; refunds complete.
 */
import { describe, expect, test } from 'bun:test'
import { getAddress, type Hex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { DEPOSIT_ACCOUNT } from '../../src/chain/deposit-account.ts'
import { backends } from '../helpers/databases.ts'
import { waitUntil } from '../helpers/chain.ts'
import { runTreasuryTool } from '../helpers/processes.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'
import {
  paidTransactions,
  setUpMerchant,
  toolArgs,
  type TreasuryChain,
  type writeMerchantFiles,
} from '../helpers/treasury.ts'

const TREASURY = getAddress('0x6813eb9362372eef6200f3b1dbc3f819671cba69')
const CONFIRMATIONS = 2

for (const backend of backends()) {
  describe(`money out on a chain without EIP-7702 [${backend}]`, () => {
    let chain: TreasuryChain
    let t: TestServer
    let shop: string
    let tool: string
    let dir: string
    let files: ReturnType<typeof writeMerchantFiles>

    useStack(
      backend,
      {
        treasury: { hardfork: 'cancun' },
        network: { confirmations: CONFIRMATIONS },
        project: false,
      },
      async (s) => {
        chain = s.treasury
        t = s.t
        dir = s.dir
        const p = await t.project()
        shop = p.key
        ;({ tool, files } = await setUpMerchant(t, p.id, dir, chain))
      },
    )

    const keyArgs = () => ['--mnemonic-file', files.mnemonic, '--gas-key-file', files.gasKey]
    const treasury = (command: string[], extra: string[] = []) =>
      runTreasuryTool([
        ...command,
        ...toolArgs(t, tool, chain, files),
        ...keyArgs(),
        '--json',
        ...extra,
      ])
    const sweeps = async () =>
      ((await (await api(t, tool).get('/api/sweeps?limit=100')).json()) as any).sweeps as any[]
    const refundOf = async (id: string) =>
      ((await (await api(t, tool).get(`/api/refunds/${id}`)).json()) as any).refund
    /** Every transaction type mined since `from`. */
    const typesSince = async (from: bigint) => {
      const types = new Set<string>()
      for (let n = from + 1n; n <= (await chain.head()); n++)
        for (const tx of (
          await chain.customer.getBlock({ blockNumber: n, includeTransactions: true })
        ).transactions)
          types.add(tx.type)
      return types
    }

    test("the service and `treasury check` say the chain has no EIP-7702, and that money leaves by topping up each address's fee", async () => {
      const networks = ((await (await api(t, tool).get('/api/networks')).json()) as any).networks
      expect(networks).toEqual([
        expect.objectContaining({ name: 'localchain', eip7702: false, money_out_route: 'top-up' }),
      ])
      const check = await treasury(['check'])
      expect({ code: check.code, stderr: check.stderr }).toEqual({ code: 0, stderr: '' })
      expect(check.json).toMatchObject({
        money_out_route: 'top-up',
        service_says_eip7702: false,
        route_detail: expect.stringContaining('no EIP-7702'),
      })
    })

    test("a sweep tops up exactly each address's fees in one transaction, sends no EIP-7702 transaction, and the treasury gains exactly what was paid", async () => {
      const tusd = await paidTransactions(t, shop, chain, 3, 'TUSD')
      const eth = await paidTransactions(t, shop, chain, 2, 'ETH')
      const start = await chain.head()
      const before = {
        token: await chain.tokenBalance(TREASURY),
        eth: await chain.ethBalance(TREASURY),
        gas: await chain.ethBalance(chain.gas.address),
      }

      const dry = await treasury(['sweep'], ['--to', TREASURY, '--dry-run'])
      expect({ code: dry.code, stderr: dry.stderr }).toEqual({ code: 0, stderr: '' })
      expect(dry.json).toMatchObject({ route: 'top-up', sweeps: [], top_up_transaction: null })
      expect(dry.json.plan).toHaveLength(5)
      // The gas account pays every fee: each address is topped up with exactly what its transfers
      // are signed for.
      const price = BigInt(dry.json.estimated.gas_price)
      for (const p of dry.json.plan)
        expect(BigInt(p.top_up)).toBe(
          p.assets.reduce((a: bigint, x: any) => a + BigInt(x.gas) * price, 0n),
        )
      expect(await chain.head()).toBe(start)

      const run = await treasury(['sweep'], ['--to', TREASURY])
      expect({ code: run.code, stderr: run.stderr, failed: run.json?.failed }).toEqual({
        code: 0,
        stderr: '',
        failed: [],
      })
      expect(run.json.sweeps).toHaveLength(5)
      const sum = (l: { units: bigint }[]) => l.reduce((a, p) => a + p.units, 0n)
      expect((await chain.tokenBalance(TREASURY)) - before.token).toBe(sum(tusd))
      expect((await chain.ethBalance(TREASURY)) - before.eth).toBe(sum(eth))
      // Every address is empty of what it received; a coin address to the last wei (a plain
      // transfer uses exactly 21,000 gas).
      for (const p of tusd) expect(await chain.tokenBalance(p.address)).toBe(0n)
      for (const p of eth) expect(await chain.ethBalance(p.address)).toBe(0n)
      // One top-up transaction for all five: exactly the fees paid, and what a token transfer's gas
      // refund left at its address.
      const topUp = await chain.customer.getTransaction({
        hash: run.json.top_up_transaction.transaction_hash,
      })
      expect(topUp.to?.toLowerCase()).toBe(DEPOSIT_ACCOUNT.toLowerCase())
      expect(run.json.top_up_transaction.addresses).toBe(5)
      const paidFees = (run.json.sweeps as any[]).reduce((a, w) => a + BigInt(w.fee), 0n)
      const leftOver = (await Promise.all(tusd.map((p) => chain.ethBalance(p.address)))).reduce(
        (a, b) => a + b,
        0n,
      )
      expect(paidFees + leftOver).toBe(topUp.value)
      // No transaction of a type the chain lacks; the deposit addresses' own are legacy ones.
      const types = await typesSince(start)
      expect(types.has('eip7702')).toBe(false)
      for (const w of run.json.sweeps)
        expect((await chain.customer.getTransaction({ hash: w.transaction_hash })).type).toBe(
          'legacy',
        )

      // The service confirms each from its receipt: what each address gave, planned and swept.
      await chain.mine(CONFIRMATIONS + 1)
      await waitUntil(
        '5 sweeps confirmed',
        sweeps,
        (l) => l.length === 5 && l.every((w) => w.status === 'confirmed'),
      )
      const items = (await sweeps()).flatMap((w) => w.items)
      expect(items.every((i: any) => i.swept === i.planned)).toBe(true)
      expect(
        items
          .filter((i: any) => i.token_symbol === 'TUSD')
          .reduce((a: bigint, i: any) => a + BigInt(i.swept), 0n),
      ).toBe(sum(tusd))
      expect(
        items
          .filter((i: any) => i.token_symbol === 'ETH')
          .reduce((a: bigint, i: any) => a + BigInt(i.swept), 0n),
      ).toBe(sum(eth))
      expect(before.gas - (await chain.ethBalance(chain.gas.address))).toBeGreaterThan(topUp.value)
    })

    test('refunds, of a token and of the coin, are paid by the deposit address itself after a top-up of its fee, and complete', async () => {
      const payer = chain.customer.account.address
      const [tusd] = await paidTransactions(t, shop, chain, 1, 'TUSD', 21)
      const [eth] = await paidTransactions(t, shop, chain, 1, 'ETH', 11)
      const create = async (id: string, body: Record<string, unknown>) =>
        ((await (await api(t, shop).post(`/api/transactions/${id}/refunds`, body)).json()) as any)
          .refund
      const part = await create(tusd!.id, { address: payer, amount: '5000000' })
      const whole = await create(eth!.id, { address: payer })
      const start = await chain.head()
      const [tokenBefore, ethBefore] = [
        await chain.tokenBalance(payer),
        await chain.ethBalance(payer),
      ]
      const r = await treasury(['refunds', 'pay'])
      expect({ code: r.code, stderr: r.stderr, errors: r.json?.errors }).toEqual({
        code: 0,
        stderr: '',
        errors: [],
      })
      expect(r.json.route).toBe('top-up')
      expect(r.json.paid.map((p: any) => [p.refund_id, p.route, p.paid_from])).toEqual(
        expect.arrayContaining([
          [part.id, 'direct', getAddress(tusd!.address)],
          [whole.id, 'direct', getAddress(eth!.address)],
        ]),
      )
      expect((await chain.tokenBalance(payer)) - tokenBefore).toBe(5_000_000n)
      expect((await chain.ethBalance(payer)) - ethBefore).toBe(eth!.units)
      expect(await chain.ethBalance(eth!.address)).toBe(0n)
      expect((await typesSince(start)).has('eip7702')).toBe(false)
      await chain.mine(CONFIRMATIONS + 1)
      for (const id of [part.id, whole.id]) {
        const done = await waitUntil(
          `refund ${id} completed`,
          () => refundOf(id),
          (x) => x.status === 'completed',
        )
        expect(done.paid_from).toBe(getAddress(id === part.id ? tusd!.address : eth!.address))
      }
    })

    test('the service refuses to record an EIP-7702 transaction on this network', async () => {
      const [paid] = await paidTransactions(t, shop, chain, 1, 'TUSD', 22)
      const made = (
        (await (
          await api(t, shop).post(`/api/transactions/${paid!.id}/refunds`, {
            address: chain.customer.account.address,
          })
        ).json()) as any
      ).refund
      const gas = privateKeyToAccount(chain.gas.key)
      const authorization = await gas.signAuthorization({
        contractAddress: DEPOSIT_ACCOUNT,
        chainId: 31337,
        nonce: 0,
      })
      const raw = await gas.signTransaction({
        type: 'eip7702',
        chainId: 31337,
        nonce: await chain.customer.getTransactionCount({ address: gas.address }),
        to: chain.token,
        gas: 100_000n,
        maxFeePerGas: 10n ** 10n,
        maxPriorityFeePerGas: 1n,
        authorizationList: [authorization],
        data: '0x' as Hex,
      })
      const res = await api(t, tool).post(`/api/refunds/${made.id}/payment`, {
        raw_transaction: raw,
      })
      expect(res.status).toBe(400)
      expect(((await res.json()) as any).message).toContain('has no EIP-7702')
    })
  })
}
