/**
 * docs/decisions/0039-sweeps-by-eip-7702-or-top-up.md on a real chain: the merchant's treasury tool
 * (a separate process, keys in files on "the merchant's machine") sweeps 50 paid deposit addresses,
 * in TUSD and in ETH, to a treasury through EIP-7702 and DepositAccount, with the gas account
 * paying for everything; the service records each sweep and confirms it from the chain.
 */
import { describe, expect, test } from 'bun:test'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { getAddress, parseEventLogs, type Hex } from 'viem'
import { DepositAccount, TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { DEPOSIT_ACCOUNT, depositAccountCode } from '../../src/chain/deposit-account.ts'
import { backends } from '../helpers/databases.ts'
import { waitUntil } from '../helpers/chain.ts'
import { runTreasuryTool } from '../helpers/processes.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'
import {
  killedAtSend,
  paidTransactions,
  setUpMerchant,
  toolArgs,
  type TreasuryChain,
  type writeMerchantFiles,
} from '../helpers/treasury.ts'

const TREASURY = getAddress('0x7e5f4552091a69125d5dfcb7b8c2659029395bdf')

for (const backend of backends()) {
  describe(`treasury sweeps on a real chain [${backend}]`, () => {
    let chain: TreasuryChain
    let t: TestServer
    /** The shop's key (pays transactions in these tests), and the treasury tool's. */
    let shopKey: string
    let key: string
    let dir: string
    let files: ReturnType<typeof writeMerchantFiles>
    let paid: { id: string; address: string; units: bigint }[]
    let tusd: typeof paid
    let eth: typeof paid

    useStack(backend, { treasury: true, project: false }, async (s) => {
      chain = s.treasury
      t = s.t
      dir = s.dir
      const p = await t.project()
      shopKey = p.key
      ;({ tool: key, files } = await setUpMerchant(t, p.id, dir, chain))
      tusd = await paidTransactions(t, shopKey, chain, 25, 'TUSD')
      eth = await paidTransactions(t, shopKey, chain, 25, 'ETH')
      paid = [...tusd, ...eth]
    })

    const sweepArgs = (extra: string[] = [], rpcUrl?: string) => [
      'sweep',
      ...toolArgs(t, key, chain, files, rpcUrl),
      '--to',
      TREASURY,
      '--mnemonic-file',
      files.mnemonic,
      '--gas-key-file',
      files.gasKey,
      '--batch-size',
      '10',
      '--json',
      ...extra,
    ]
    const gasNonce = () =>
      chain.customer.getTransactionCount({ address: chain.gas.address, blockTag: 'latest' })
    const sweeps = async () =>
      ((await (await api(t, key).get('/api/sweeps?limit=100')).json()) as any).sweeps as any[]
    const sum = (list: typeof paid) => list.reduce((a, p) => a + p.units, 0n)

    test('a wrong mnemonic, passphrase or path is refused before anything is signed or sent', async () => {
      const [head, nonce] = [await chain.head(), await gasNonce()]
      const other = join(dir, 'other-mnemonic.txt')
      writeFileSync(other, 'test test test test test test test test test test test junk\n')
      const wrongPassphrase = join(dir, 'wrong-passphrase.txt')
      writeFileSync(wrongPassphrase, 'not the one\n')
      const badChecksum = join(dir, 'bad-mnemonic.txt')
      writeFileSync(
        badChecksum,
        'legal winner thank year wave sausage worth useful legal winner thank thank\n',
      )
      const base = sweepArgs().filter(
        (a, i, all) => a !== files.mnemonic && all[i + 1] !== files.mnemonic,
      )
      for (const [extra, message] of [
        [['--mnemonic-file', other], /does not derive this project's test deposit key/],
        [
          ['--mnemonic-file', files.mnemonic, '--passphrase-file', wrongPassphrase],
          /does not derive this project's test deposit key/,
        ],
        [
          ['--mnemonic-file', files.mnemonic, '--path', "m/44'/60'/0'/1"],
          /does not derive this project's test deposit key/,
        ],
        [
          ['--mnemonic-file', badChecksum],
          /not hold a valid BIP-39 mnemonic: the checksum does not match/,
        ],
      ] as const) {
        const r = await runTreasuryTool([...base, ...extra])
        expect({ code: r.code, message: r.json?.error?.message }).toEqual({
          code: 1,
          message: expect.stringMatching(message),
        })
        // Nothing of any key is said: not the other mnemonic's words, not a key.
        expect(r.stdout + r.stderr).not.toContain('test test test')
        expect(r.stdout + r.stderr).not.toContain('legal winner')
      }
      expect([await chain.head(), await gasNonce()]).toEqual([head, nonce])
      expect(await sweeps()).toEqual([])
    })

    test('a dry run prints the plan for all 50 addresses and its estimated gas, and changes nothing on chain', async () => {
      const before = {
        head: await chain.head(),
        nonce: await gasNonce(),
        gas: await chain.ethBalance(chain.gas.address),
        treasury: await chain.tokenBalance(TREASURY),
      }
      const r = await runTreasuryTool(sweepArgs(['--dry-run']))
      expect(r.code).toBe(0)
      const out = r.json
      expect(out.dry_run).toBe(true)
      expect(out.plan).toHaveLength(50)
      expect(out.totals).toEqual([
        {
          token_symbol: 'TUSD',
          amount: sum(tusd).toString(),
          amount_decimal: expect.any(String),
          usd: expect.any(String),
        },
        {
          token_symbol: 'ETH',
          amount: sum(eth).toString(),
          amount_decimal: expect.any(String),
          usd: expect.any(String),
        },
      ])
      expect(out.estimated).toMatchObject({ batches: 5, deploy_deposit_account: true })
      expect(BigInt(out.estimated.gas)).toBeGreaterThan(0n)
      expect(BigInt(out.estimated.max_fee)).toBeGreaterThan(0n)
      expect(out.sweeps).toEqual([])
      expect({
        head: await chain.head(),
        nonce: await gasNonce(),
        gas: await chain.ethBalance(chain.gas.address),
        treasury: await chain.tokenBalance(TREASURY),
      }).toEqual(before)
      for (const p of paid.slice(0, 3))
        expect(
          (await chain.tokenBalance(p.address)) + (await chain.ethBalance(p.address)),
        ).toBeGreaterThan(0n)
      expect(await sweeps()).toEqual([])
    })

    test('a sweep SIGKILLed between recording a batch and sending it, run again, empties all 50 addresses into the treasury exactly, paying for no transaction twice', async () => {
      const startNonce = await gasNonce()
      const startHead = await chain.head()
      const startGas = await chain.ethBalance(chain.gas.address)
      const treasuryEth = await chain.ethBalance(TREASURY)
      // The first run dies at its third transaction (the second batch, after the deployment and the
      // first batch), which never reaches the chain.
      await killedAtSend(chain.rpcUrl, (rpc) => sweepArgs([], rpc), 3)
      // Two batches recorded; the second was never sent.
      const recorded = await sweeps()
      expect(recorded).toHaveLength(2)
      expect(await gasNonce()).toBe(startNonce + 2)

      // A dry run, even without the gas key, says it would send the unsent batch again, and sends
      // nothing.
      const withoutGasKey = sweepArgs(['--dry-run']).filter(
        (a, i, all) => a !== files.gasKey && all[i + 1] !== files.gasKey,
      )
      const dry = await runTreasuryTool(withoutGasKey)
      expect({ code: dry.code, stderr: dry.stderr }).toEqual({ code: 0, stderr: '' })
      expect(dry.json.resumed).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            sweep_id: expect.stringMatching(/^swp_/),
            outcome: 'would be sent again',
          }),
        ]),
      )
      expect(dry.json.resumed.map((x: any) => x.outcome)).not.toContain('sent again')
      expect(await gasNonce()).toBe(startNonce + 2)

      const again = await runTreasuryTool(sweepArgs())
      expect({ code: again.code, stderr: again.stderr }).toEqual({ code: 0, stderr: '' })
      expect(again.json.resumed).toEqual(
        expect.arrayContaining([expect.objectContaining({ outcome: 'sent again' })]),
      )

      // Every address is empty, and the treasury holds exactly what the customers paid.
      for (const p of tusd) expect(await chain.tokenBalance(p.address)).toBe(0n)
      for (const p of eth) expect(await chain.ethBalance(p.address)).toBe(0n)
      expect(await chain.tokenBalance(TREASURY)).toBe(sum(tusd))
      expect((await chain.ethBalance(TREASURY)) - treasuryEth).toBe(sum(eth))

      // One deployment and five batches: no transaction twice, and the gas account paid exactly
      // their fees.
      const all = await sweeps()
      expect(all).toHaveLength(5)
      expect(await gasNonce()).toBe(startNonce + 6)
      const sent: Hex[] = []
      for (let n = startHead + 1n; n <= (await chain.head()); n++) {
        const block = await chain.customer.getBlock({ blockNumber: n, includeTransactions: true })
        for (const tx of block.transactions)
          if (tx.from.toLowerCase() === chain.gas.address.toLowerCase()) sent.push(tx.hash)
      }
      expect(sent).toHaveLength(6)
      expect(new Set(all.map((s) => s.transaction_hash))).toEqual(new Set(sent.slice(1)))
      const receipts = await Promise.all(
        sent.map((hash) => chain.customer.getTransactionReceipt({ hash })),
      )
      expect(receipts.every((r) => r.status === 'success')).toBe(true)
      expect(receipts[0]!.to?.toLowerCase()).toBe('0x4e59b44847b379578588920ca78fbf26c0b4956c')
      const fees = (rs: typeof receipts) =>
        rs.reduce((a, r) => a + r.gasUsed * r.effectiveGasPrice, 0n)
      expect(startGas - (await chain.ethBalance(chain.gas.address))).toBe(fees(receipts))
      const swept = receipts.flatMap((r) =>
        parseEventLogs({ abi: DepositAccount.abi, logs: r.logs, eventName: 'Swept' }),
      )
      expect(swept).toHaveLength(50)
      expect(new Set(swept.map((e) => e.address.toLowerCase())).size).toBe(50)
      expect(await chain.customer.getCode({ address: DEPOSIT_ACCOUNT })).toBe(depositAccountCode())

      // The service confirms each sweep from its receipt, and knows which addresses are swept.
      await chain.mine(3)
      await waitUntil(
        '5 sweeps confirmed',
        async () => (await sweeps()).map((s) => `${s.nonce}:${s.status}:${s.confirmations}`),
        (s) => s.length === 5 && s.every((x) => x.includes(':confirmed:')),
      )
      const confirmed = await sweeps()
      const items = confirmed.flatMap((s) => s.items)
      expect(items).toHaveLength(50)
      expect(items.every((i: any) => i.swept === i.planned)).toBe(true)
      expect(
        items
          .filter((i: any) => i.token_symbol === 'TUSD')
          .reduce((a: bigint, i: any) => a + BigInt(i.swept), 0n),
      ).toBe(sum(tusd))
      expect(confirmed.reduce((a, s) => a + BigInt(s.fee), 0n)).toBe(fees(receipts.slice(1)))
      const listed = ((await (await api(t, key).get('/api/deposit-addresses')).json()) as any)
        .deposit_addresses as any[]
      expect(listed).toHaveLength(50)
      expect(listed.every((d) => d.swept === true)).toBe(true)
    })

    test('a late payment to a swept address is swept by the next run, with no new authorization', async () => {
      const before = await chain.tokenBalance(TREASURY)
      const [a, b] = tusd
      await chain.customer.waitForTransactionReceipt({
        hash: await chain.customer.writeContract({
          address: chain.token,
          abi: TestStablecoin.abi,
          functionName: 'transfer',
          args: [a!.address as Hex, 7_000_000n],
        }),
      })
      await chain.customer.waitForTransactionReceipt({
        hash: await chain.customer.sendTransaction({
          to: b!.address as Hex,
          value: 5_000_000_000_000_000n,
        }),
      })
      const r = await runTreasuryTool(sweepArgs())
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
      expect(r.json.plan.map((p: any) => p.address.toLowerCase()).sort()).toEqual(
        [a!.address, b!.address].map((x) => x.toLowerCase()).sort(),
      )
      expect(r.json.sweeps).toHaveLength(1)
      const receipt = await chain.customer.getTransactionReceipt({
        hash: r.json.sweeps[0].transaction_hash,
      })
      // Both addresses delegate to DepositAccount since the first sweep: a plain transaction does
      // it.
      expect(receipt.type).toBe('eip1559')
      expect((await chain.tokenBalance(TREASURY)) - before).toBe(7_000_000n)
      expect(await chain.tokenBalance(a!.address)).toBe(0n)
      expect(await chain.ethBalance(b!.address)).toBe(0n)
    })

    test('a batch recorded but never sent whose signatures lapsed is not sent: its nonce goes to a zero-value transfer, the service calls it dropped, and the run sweeps its address anew', async () => {
      const c = tusd[2]!
      const before = await chain.tokenBalance(TREASURY)
      const listing = async () =>
        (
          (await (
            await api(t, key).get(`/api/deposit-addresses?address=${c.address}`)
          ).json()) as any
        ).deposit_addresses[0]
      await chain.customer.waitForTransactionReceipt({
        hash: await chain.customer.writeContract({
          address: chain.token,
          abi: TestStablecoin.abi,
          functionName: 'transfer',
          args: [c.address as Hex, 3_000_000n],
        }),
      })
      // Swept before, but what arrived since is not: the address is no longer swept.
      await waitUntil('the late payment seen', listing, (d) => d.swept === false)
      // The tool records the batch and dies before it is sent.
      await killedAtSend(chain.rpcUrl, (rpc) => sweepArgs([], rpc))
      const stale = (await sweeps()).find((w) => w.status === 'submitted')
      expect(stale).toBeDefined()
      // The signatures' hour passes with the batch unsent.
      await chain.customer.request({ method: 'evm_increaseTime', params: [3700] } as never)
      await chain.mine()
      const nonce = await gasNonce()
      const dry = await runTreasuryTool(sweepArgs(['--dry-run']))
      expect({ code: dry.code, stderr: dry.stderr }).toEqual({ code: 0, stderr: '' })
      expect(dry.json.resumed).toEqual([
        {
          sweep_id: stale.id,
          transaction_hash: stale.transaction_hash,
          outcome: `expired unsent: its signatures lapsed; would give its nonce ${stale.nonce} to a zero-value transfer of the gas account to itself`,
        },
      ])
      expect(await gasNonce()).toBe(nonce)
      const r = await runTreasuryTool(sweepArgs())
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
      expect(r.json.resumed).toEqual([
        {
          sweep_id: stale.id,
          transaction_hash: stale.transaction_hash,
          outcome: expect.stringMatching(
            /^expired unsent: its signatures lapsed; its nonce \d+ went to 0x[0-9a-f]{64} \(a zero-value transfer\)/,
          ),
        },
      ])
      // The retiring transfer (to the gas account itself, nothing moved) and the new batch: the
      // stale one can never be mined.
      expect(await gasNonce()).toBe(nonce + 2)
      const retire = await chain.customer.getTransaction({
        hash: /went to (0x[0-9a-f]{64})/.exec(r.json.resumed[0].outcome)![1] as Hex,
      })
      expect({
        from: retire.from.toLowerCase(),
        to: retire.to?.toLowerCase(),
        value: retire.value,
        nonce: retire.nonce,
      }).toEqual({
        from: chain.gas.address.toLowerCase(),
        to: chain.gas.address.toLowerCase(),
        value: 0n,
        nonce: stale.nonce,
      })
      expect(
        await chain.customer
          .getTransactionReceipt({ hash: stale.transaction_hash })
          .catch(() => null),
      ).toBeNull()
      expect(r.json.sweeps).toHaveLength(1)
      expect(await chain.tokenBalance(c.address)).toBe(0n)
      expect((await chain.tokenBalance(TREASURY)) - before).toBe(3_000_000n)
      // The service calls the stale record dropped once its nonce is taken at the network's depth,
      // and the address swept again.
      await waitUntil(
        'the stale sweep dropped, the new one confirmed',
        async () => {
          await chain.mine()
          return (await sweeps())
            .filter((w) => w.id === stale.id || w.id === r.json.sweeps[0].sweep_id)
            .map((w) => w.status)
            .sort()
        },
        (st) => st.join() === 'confirmed,dropped',
        20_000,
        200,
      )
      expect((await listing()).swept).toBe(true)
    })

    test("the service refuses to record what is not this project's sweep, and keys without the scopes", async () => {
      const a = api(t, key)
      const notSigned = await a.post('/api/sweeps', {
        blockchain_network: 'localchain',
        raw_transaction: '0x1234',
        items: [],
      })
      expect(notSigned.status).toBe(400)
      const plain = await chain.customer.signTransaction(
        (await chain.customer.prepareTransactionRequest({ to: TREASURY, value: 1n })) as never,
      )
      // A plain transfer is a sweep only when a deposit address of this project sends it.
      const transfer = await a.post('/api/sweeps', {
        blockchain_network: 'localchain',
        raw_transaction: plain,
        items: [],
      })
      expect(transfer.status).toBe(400)
      expect(((await transfer.json()) as any).message).toContain(
        "sweeps addresses that are not this project's test deposit addresses",
      )
      const call = await chain.customer.signTransaction(
        (await chain.customer.prepareTransactionRequest({
          to: TREASURY,
          data: '0x12345678',
        })) as never,
      )
      expect(
        (
          (await (
            await a.post('/api/sweeps', {
              blockchain_network: 'localchain',
              raw_transaction: call,
              items: [],
            })
          ).json()) as any
        ).message,
      ).toContain('is not a sweep')
      const unknown = await a.post('/api/sweeps', {
        blockchain_network: 'mainnet',
        raw_transaction: plain,
        items: [],
      })
      expect(unknown.status).toBe(400)
      // A live key sees no testnet (the networks of its own mode only) and no test deposit key.
      const projectId = (await t.server.services.keys.authenticate(key))!.projectId
      const live = await t.key(projectId, 'live')
      expect(
        ((await (await api(t, live.key).get('/api/networks')).json()) as any).networks,
      ).toEqual([])
      expect((await api(t, live.key).get('/api/deposit-key')).status).toBe(404)
      expect(
        ((await (await api(t, live.key).get('/api/deposit-addresses')).json()) as any)
          .deposit_addresses,
      ).toEqual([])
      expect(((await (await api(t, live.key).get('/api/sweeps')).json()) as any).sweeps).toEqual([])
      // Scopes: reading deposits and recording sweeps each need theirs.
      const reader = await t.key(projectId, 'test', ['transactions:read'])
      expect((await api(t, reader.key).get('/api/deposit-addresses')).status).toBe(403)
      expect((await api(t, reader.key).get('/api/networks')).status).toBe(403)
      expect(
        (
          await api(t, reader.key).post('/api/sweeps', {
            blockchain_network: 'localchain',
            raw_transaction: plain,
            items: [],
          })
        ).status,
      ).toBe(403)
      // Another project sees none of this one's sweeps.
      const other = await t.project()
      const first = (await sweeps())[0]
      expect((await api(t, other.key).get(`/api/sweeps/${first.id}`)).status).toBe(404)
      expect(((await (await api(t, other.key).get('/api/sweeps')).json()) as any).sweeps).toEqual(
        [],
      )
    })
  })
}
