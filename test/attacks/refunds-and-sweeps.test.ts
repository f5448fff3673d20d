/**
 * Money you can trust, on a real chain: what a stolen API key, a compromised server and a third
 * party can and cannot make the merchant's money do.
 *  - A stolen key (even one that may create refunds) moves nothing to an address the merchant did
 *    not approve on their own machine: `refunds pay` run by nobody at a terminal pays a refund only
 *    back to an address that paid the deposit address, no more than it sent; anything else waits
 *    for `--approve` or a yes typed at the terminal. The key cannot record a payment, and never
 *    sees the deposit key's xpub.
 *  - A compromised server, listing what it likes, fares no better: the tool reads who paid from
 *    the chain.
 *  - The service records only what it can verify: forged payment and sweep records are refused,
 *    each with its reason; a record that can no longer be mined is abandoned (API, CLI), and one
 *    that lapsed unsent returns its refund to pending by itself.
 *  - A third party replaying a sweep's signature moves nothing, and a refund queued behind it is paid.
 *  - A refund paid in the native coin from the gas account is refused before it is recorded when
 *    the account cannot pay its fee too (an OP Stack chain's L1 data fee included).
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  decodeFunctionData,
  encodeFunctionData,
  getAddress,
  parseTransaction,
  type Address,
  type Hex,
} from 'viem'
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from 'viem/accounts'
import { DepositAccount } from '../../src/chain/artifacts/index.ts'
import { createDevnetClient } from '../../src/chain/devnet.ts'
import {
  DEPOSIT_ACCOUNT,
  payData,
  paymentId,
  SWEEP_NONCE_SLOT,
  sweepData,
  sweepTypedData,
} from '../../src/chain/deposit-account.ts'
import { GAS_PRICE_ORACLE } from '../../src/chain/l1-fee.ts'
import { backends } from '../helpers/databases.ts'
import { payToken, waitUntil } from '../helpers/chain.ts'
import { BUN, ROOT, runCli, runTreasuryTool } from '../helpers/processes.ts'
import { startRpcProxy } from '../helpers/rpc-proxy.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'
import {
  killedAtSend,
  MERCHANT_MNEMONIC,
  paidTransactions,
  setUpMerchant,
  toolArgs,
  type TreasuryChain,
  type writeMerchantFiles,
} from '../helpers/treasury.ts'

const CONFIRMATIONS = 3
const STRANGER = getAddress('0x000000000000000000000000000000000000bEEF')
const TREASURY = getAddress('0x2b5ad5c4795c026514f8317c7a215e218dccd6cf')

for (const backend of backends()) {
  describe(`money you can trust [${backend}]`, () => {
    let chain: TreasuryChain
    let t: TestServer
    let dir: string
    let networks: string
    let project: { id: string; key: string }
    let tool: string
    let payer: Address
    let files: ReturnType<typeof writeMerchantFiles>

    useStack(
      backend,
      { treasury: true, network: { confirmations: CONFIRMATIONS }, project: false },
      async (s) => {
        chain = s.treasury
        t = s.t
        dir = s.dir
        networks = s.networksFile!
        project = await t.project()
        ;({ tool, files } = await setUpMerchant(t, project.id, dir, chain))
        payer = chain.customer.account.address
      },
    )

    const shop = () => api(t, project.key)
    const refund = async (txId: string, body: Record<string, unknown>) =>
      ((await (await shop().post(`/api/transactions/${txId}/refunds`, body)).json()) as any).refund
    const refundOf = async (id: string) =>
      ((await (await api(t, tool).get(`/api/refunds/${id}`)).json()) as any).refund
    const keyArgs = (gasKey = files.gasKey) => [
      '--mnemonic-file',
      files.mnemonic,
      '--gas-key-file',
      gasKey,
    ]
    const pay = (extra: string[] = [], o: { apiUrl?: string; gasKey?: string } = {}) => {
      const args = toolArgs(t, tool, chain, files)
      if (o.apiUrl) args[args.indexOf('--api-url') + 1] = o.apiUrl
      return runTreasuryTool(['refunds', 'pay', ...args, ...keyArgs(o.gasKey), '--json', ...extra])
    }
    const gasNonce = () =>
      chain.customer.getTransactionCount({ address: chain.gas.address, blockTag: 'latest' })
    /**
     * Mines one block at a time, each followed by the service, until `pred` holds of the refund.
     */
    async function mineUntil(id: string, pred: (r: any) => boolean, blocks = 20) {
      for (let i = 0; i < blocks; i++) {
        const head = await chain.mine()
        await waitUntil(
          'the follower at the head',
          async () => t.server.services.chain.syncedHeights().localchain ?? -1n,
          (h) => h >= head,
        )
        const r = await refundOf(id)
        if (pred(r)) return r
      }
      throw new Error(`refund ${id} never got there: ${JSON.stringify(await refundOf(id))}`)
    }
    /**
     * Sweeps one deposit address's TUSD to the treasury at once, signed with its own key (as the
     * merchant's tool would), sent by the customer's wallet.
     */
    async function sweepNow(address: Address) {
      const index = (
        (await (await api(t, tool).get(`/api/deposit-addresses?address=${address}`)).json()) as any
      ).deposit_addresses[0].derivation_index
      const account = mnemonicToAccount(MERCHANT_MNEMONIC, { addressIndex: index })
      const nonce = BigInt(
        (await chain.customer.getStorageAt({ address, slot: SWEEP_NONCE_SLOT })) ?? 0n,
      )
      const deadline = (await chain.customer.getBlock()).timestamp + 600n
      const signature = await account.signTypedData(
        sweepTypedData({
          chainId: 31337,
          account: address,
          to: TREASURY,
          tokens: [chain.token],
          native: false,
          nonce,
          deadline,
        }) as never,
      )
      const code = await chain.customer.getCode({ address })
      const authorizationList =
        code && code !== '0x'
          ? []
          : [
              await account.signAuthorization!({
                contractAddress: DEPOSIT_ACCOUNT,
                chainId: 31337,
                nonce: await chain.customer.getTransactionCount({ address }),
              }),
            ]
      const data = encodeFunctionData({
        abi: DepositAccount.abi,
        functionName: 'batch',
        args: [
          [
            {
              account: address,
              data: sweepData({
                to: TREASURY,
                tokens: [chain.token],
                native: false,
                nonce,
                deadline,
                signature,
              }),
            },
          ],
        ],
      })
      const hash = await chain.customer.sendTransaction({
        to: DEPOSIT_ACCOUNT,
        data,
        ...(authorizationList.length ? { authorizationList } : {}),
      } as never)
      await chain.customer.waitForTransactionReceipt({ hash })
      expect(await chain.tokenBalance(address)).toBe(0n)
    }

    test('a stolen shop key: it creates a refund to its own address, and a routine refunds pay sends that address nothing', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 20)
      const stolen = await refund(paid!.id, { address: STRANGER })
      // The refund lists who paid; the stranger is not among them.
      expect(stolen.arrivals).toEqual([
        expect.objectContaining({
          kind: 'token',
          from_address: payer,
          amount: paid!.units.toString(),
          transaction_hash: expect.stringMatching(/^0x/),
        }),
      ])
      const r = await pay()
      expect(r.code).toBe(1)
      expect(r.json.paid).toEqual([])
      expect(r.json.awaiting_approval).toEqual([
        {
          refund_id: stolen.id,
          reason: expect.stringContaining(
            `${STRANGER} is not an address that paid this deposit address on-chain (paid by: ${payer})`,
          ),
        },
      ])
      expect(await chain.tokenBalance(STRANGER)).toBe(0n)
      expect(await refundOf(stolen.id)).toMatchObject({ status: 'pending', transaction_hash: null })
      // The key cannot record a payment, mark one unpayable or abandon one (refunds:pay is the
      // tool's), and it never sees the xpub.
      const raw = await privateKeyToAccount(chain.gas.key).signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce: await gasNonce(),
        to: chain.token,
        data: '0x',
        gas: 50_000n,
        maxFeePerGas: 10n ** 10n,
        maxPriorityFeePerGas: 1n,
      })
      for (const [path, body] of [
        [`/api/refunds/${stolen.id}/payment`, { raw_transaction: raw }],
        [`/api/refunds/${stolen.id}/unpayable`, { reason: 'x' }],
        [`/api/refunds/${stolen.id}/abandon`, undefined],
      ] as const) {
        const res = await shop().post(path, body ?? '')
        expect({ path, status: res.status }).toEqual({ path, status: 403 })
      }
      const depositKey = (await (await shop().get('/api/deposit-key')).json()) as any
      expect(depositKey).toMatchObject({
        success: true,
        mode: 'test',
        fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/),
      })
      expect(JSON.stringify(depositKey)).not.toContain('xpub')
      // The merchant, on their own machine, approves it by name: paid.
      const approved = await pay(['--refund', stolen.id, '--approve', stolen.id])
      expect(approved.code).toBe(0)
      expect(approved.json.paid).toEqual([
        expect.objectContaining({ refund_id: stolen.id, to: STRANGER, approved: 'named' }),
      ])
      expect(await chain.tokenBalance(STRANGER)).toBe(paid!.units)
    })

    test('more than an address sent waits for approval; what a second payer sent goes back to it without one', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 23)
      // A second wallet pays the same deposit address late.
      const secondKey = generatePrivateKey()
      const second = createDevnetClient(chain.rpcUrl, secondKey)
      await chain.customer.waitForTransactionReceipt({
        hash: await chain.customer.sendTransaction({
          to: second.account.address,
          value: 10n ** 17n,
        }),
      })
      await payToken(chain.customer, chain.token, second.account.address, 5_000_000n)
      await payToken(second, chain.token, paid!.address, 5_000_000n)
      await chain.mine(CONFIRMATIONS)
      await waitUntil(
        'the late payment refundable',
        async () =>
          ((await (await shop().get(`/api/transactions/${paid!.id}/refunds`)).json()) as any)
            .refundable[0]?.refundable,
        (x) => x === (paid!.units + 5_000_000n).toString(),
        20_000,
        200,
      )
      const tooMuch = await refund(paid!.id, {
        address: payer,
        amount: (paid!.units + 1n).toString(),
      })
      const back = await refund(paid!.id, { address: second.account.address, amount: '4000000' })
      const r = await pay(['--refund', `${tooMuch.id},${back.id}`])
      expect(r.code).toBe(1)
      expect(r.json.paid).toEqual([
        expect.objectContaining({
          refund_id: back.id,
          to: getAddress(second.account.address),
          approved: 'payer',
        }),
      ])
      expect(r.json.awaiting_approval).toEqual([
        {
          refund_id: tooMuch.id,
          reason: expect.stringContaining(
            `it is more than ${payer} sent this deposit address (${Number(paid!.units) / 1e6} TUSD)`,
          ),
        },
      ])
      await shop().post(`/api/refunds/${tooMuch.id}/cancel`, '')
      // What went back counts: many small refunds return no more than the payer sent. 4 of its 5
      // went back; 1 more is 5 (paid); 2 more would be 6, or 7 after that one (approval), in
      // whichever order they come.
      const second2 = await refund(paid!.id, { address: second.account.address, amount: '2000000' })
      const last = await refund(paid!.id, { address: second.account.address, amount: '1000000' })
      const again = await pay(['--refund', `${second2.id},${last.id}`])
      expect(again.json.awaiting_approval).toEqual([
        { refund_id: second2.id, reason: expect.stringMatching(/of which [45] went back already/) },
      ])
      expect(again.json.paid).toEqual([
        expect.objectContaining({ refund_id: last.id, approved: 'payer' }),
      ])
      const more = await refund(paid!.id, { address: second.account.address, amount: '1' })
      expect((await pay(['--refund', more.id])).json.awaiting_approval).toEqual([
        { refund_id: more.id, reason: expect.stringContaining('of which 5 went back already') },
      ])
      for (const id of [second2.id, more.id]) await shop().post(`/api/refunds/${id}/cancel`, '')
    })

    test('a compromised server listing a refund to its own address, or of more than the payer sent, gets nothing paid', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 24)
      const honest = await refund(paid!.id, { address: payer, amount: '1000000' })
      const before = {
        stranger: await chain.tokenBalance(STRANGER),
        payer: await chain.tokenBalance(payer),
      }
      // The "server" the tool talks to rewrites that refund as it likes. The refund's address or
      // amount, or the token's decimals (a million USDC shown as a fraction of one).
      for (const lie of [
        { address: STRANGER },
        { amount: (paid!.units + 1n).toString() },
        { decimals: 18 },
      ]) {
        const proxy = await tamperingProxy(t, (path, body) => {
          if (path.startsWith('/api/refunds') && !('decimals' in lie))
            for (const r of (body.refunds ?? [body.refund]).filter(Boolean))
              if (r.id === honest.id) Object.assign(r, lie)
          if (path === '/api/networks' && 'decimals' in lie)
            for (const n of body.networks)
              for (const token of n.tokens)
                if (token.symbol === 'TUSD') token.decimals = lie.decimals
          return body
        })
        try {
          const r = await pay(['--refund', honest.id], { apiUrl: proxy.url })
          expect({ lie, code: r.code, paid: r.json.paid }).toEqual({ lie, code: 1, paid: [] })
          expect(r.json.awaiting_approval.length + r.json.waiting_for_funds.length).toBe(1)
        } finally {
          proxy.stop()
        }
      }
      expect(await chain.tokenBalance(STRANGER)).toBe(before.stranger)
      expect(await chain.tokenBalance(payer)).toBe(before.payer)
      // An approval names the destination it was given for: one the server changes afterwards is
      // not approved.
      const toStranger = await refund(paid!.id, { address: STRANGER, amount: '1000000' })
      const elsewhere = getAddress('0x000000000000000000000000000000000000dEaD')
      const swapping = await tamperingProxy(t, (path, body) => {
        if (path.startsWith('/api/refunds'))
          for (const r of (body.refunds ?? [body.refund]).filter(Boolean))
            if (r.id === toStranger.id) r.address = elsewhere
        return body
      })
      try {
        const r = await pay(
          ['--refund', toStranger.id, '--approve', `${toStranger.id}:${STRANGER}`],
          { apiUrl: swapping.url },
        )
        expect({
          code: r.code,
          paid: r.json.paid,
          waiting: r.json.awaiting_approval.map((x: any) => x.refund_id),
        }).toEqual({ code: 1, paid: [], waiting: [toStranger.id] })
      } finally {
        swapping.stop()
      }
      expect(await chain.tokenBalance(elsewhere)).toBe(0n)
      await shop().post(`/api/refunds/${toStranger.id}/cancel`, '')
      // Told the truth, the same run pays the refund back to the payer.
      const real = await pay(['--refund', honest.id])
      expect(real.json.paid).toEqual([
        expect.objectContaining({ refund_id: honest.id, to: payer, approved: 'payer' }),
      ])
    })

    test('an approval typed at the terminal: no leaves the refund pending, yes pays it', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 25)
      const made = await refund(paid!.id, { address: STRANGER, amount: '2000000' })
      const before = await chain.tokenBalance(STRANGER)
      const args = [
        'refunds',
        'pay',
        ...toolArgs(t, tool, chain, files),
        ...keyArgs(),
        '--refund',
        made.id,
      ]
      const no = await atTerminal(args, 'no')
      expect(no.output).toContain(
        `Refund ${made.id}: 2 TUSD on localchain, of transaction ${paid!.id}, to ${STRANGER}`,
      )
      expect(no.output).toContain('It needs your approval')
      expect(no.code).toBe(1)
      expect(await chain.tokenBalance(STRANGER)).toBe(before)
      const yes = await atTerminal(args, 'yes')
      expect(yes.code).toBe(0)
      expect((await chain.tokenBalance(STRANGER)) - before).toBe(2_000_000n)
      expect((await refundOf(made.id)).status).not.toBe('pending')
    })

    test('forged payment records are refused, each with its reason, and the refund stays pending', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 26)
      const made = await refund(paid!.id, { address: payer, amount: '3000000' })
      const record = async (raw: Hex) => {
        const res = await api(t, tool).post(`/api/refunds/${made.id}/payment`, {
          raw_transaction: raw,
        })
        return { status: res.status, message: ((await res.json()) as any).message as string }
      }
      // A plain transfer of the right amount, at nonce 1,000,000, from a key that holds nothing.
      const unfunded = privateKeyToAccount(generatePrivateKey())
      const transfer = encodeFunctionData({
        abi: [
          {
            type: 'function',
            name: 'transfer',
            stateMutability: 'nonpayable',
            inputs: [
              { name: 'to', type: 'address' },
              { name: 'value', type: 'uint256' },
            ],
            outputs: [{ type: 'bool' }],
          },
        ],
        functionName: 'transfer',
        args: [payer, 3_000_000n],
      })
      const far = await unfunded.signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce: 1_000_000,
        to: chain.token,
        data: transfer,
        gas: 60_000n,
        maxFeePerGas: 10n ** 9n,
        maxPriorityFeePerGas: 1n,
      })
      expect(await record(far)).toEqual({
        status: 400,
        message: expect.stringContaining('has nonce 1000000, more than 16 past'),
      })
      const poor = await unfunded.signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce: 0,
        to: chain.token,
        data: transfer,
        gas: 60_000n,
        maxFeePerGas: 10n ** 9n,
        maxPriorityFeePerGas: 1n,
      })
      expect(await record(poor)).toEqual({
        status: 400,
        message: expect.stringMatching(/may cost up to \d+ .* holds 0/),
      })
      // Funded for its gas, but holding none of the token: it could never be mined as a payment.
      await chain.customer.waitForTransactionReceipt({
        hash: await chain.customer.sendTransaction({ to: unfunded.address, value: 10n ** 17n }),
      })
      const tokenless = await unfunded.signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce: 0,
        to: chain.token,
        data: transfer,
        gas: 60_000n,
        maxFeePerGas: 10n ** 9n,
        maxPriorityFeePerGas: 1n,
      })
      expect(await record(tokenless)).toEqual({
        status: 400,
        message: expect.stringContaining(
          `transfers 3000000 TUSD from ${unfunded.address.toLowerCase()}, which holds 0`,
        ),
      })
      // A pay() with a garbage signature and a deadline of 2^200, sent by the funded gas account.
      const gas = privateKeyToAccount(chain.gas.key)
      const sendAs = async (data: Hex, to: Address) =>
        gas.signTransaction({
          type: 'eip1559',
          chainId: 31337,
          nonce: await gasNonce(),
          to,
          data,
          gas: 200_000n,
          maxFeePerGas: 10n ** 10n,
          maxPriorityFeePerGas: 1n,
        })
      const deposit = getAddress(made.deposit_address)
      const garbage = payData({
        id: paymentId(made.id),
        token: chain.token,
        to: payer,
        amount: 3_000_000n,
        deadline: 2n ** 200n,
        signature: `0x${'11'.repeat(64)}1b`,
      })
      expect(await record(await sendAs(garbage, deposit))).toEqual({
        status: 400,
        message: expect.stringContaining("more than 2 hours past the chain's time"),
      })
      const now = (await chain.customer.getBlock()).timestamp
      const wrongSigner = await privateKeyToAccount(generatePrivateKey()).signTypedData({
        domain: {
          name: 'CryptoPay DepositAccount',
          version: '1',
          chainId: 31337,
          verifyingContract: deposit,
        },
        types: {
          Pay: [
            { name: 'id', type: 'bytes32' },
            { name: 'token', type: 'address' },
            { name: 'to', type: 'address' },
            { name: 'amount', type: 'uint256' },
            { name: 'deadline', type: 'uint256' },
          ],
        },
        primaryType: 'Pay',
        message: {
          id: paymentId(made.id),
          token: chain.token,
          to: payer,
          amount: 3_000_000n,
          deadline: now + 600n,
        },
      })
      const signedByAnother = payData({
        id: paymentId(made.id),
        token: chain.token,
        to: payer,
        amount: 3_000_000n,
        deadline: now + 600n,
        signature: wrongSigner,
      })
      expect(await record(await sendAs(signedByAnother, deposit))).toEqual({
        status: 400,
        message: expect.stringContaining(
          'its pay() is not signed by the deposit address that pays',
        ),
      })
      expect(await refundOf(made.id)).toMatchObject({ status: 'pending', transaction_hash: null })
      // The tool's own, verifiable payment is recorded and pays it.
      const r = await pay(['--refund', made.id])
      expect(r.json.paid).toEqual([expect.objectContaining({ refund_id: made.id })])
    })

    test('forged sweep records are refused, each with its reason', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 35)
      const deposit = getAddress(paid!.address)
      const gas = privateKeyToAccount(chain.gas.key)
      const now = (await chain.customer.getBlock()).timestamp
      const sweepSignedBy = async (
        signer: { signTypedData: (x: never) => Promise<Hex> },
        deadline: bigint,
      ) => {
        const signature = await signer.signTypedData(
          sweepTypedData({
            chainId: 31337,
            account: deposit,
            to: STRANGER,
            tokens: [chain.token],
            native: false,
            nonce: 0n,
            deadline,
          }) as never,
        )
        return encodeFunctionData({
          abi: DepositAccount.abi,
          functionName: 'batch',
          args: [
            [
              {
                account: deposit,
                data: sweepData({
                  to: STRANGER,
                  tokens: [chain.token],
                  native: false,
                  nonce: 0n,
                  deadline,
                  signature,
                }),
              },
            ],
          ],
        })
      }
      const record = async (data: Hex, nonce?: number) => {
        const raw = await gas.signTransaction({
          type: 'eip1559',
          chainId: 31337,
          nonce: nonce ?? (await gasNonce()),
          to: DEPOSIT_ACCOUNT,
          data,
          gas: 300_000n,
          maxFeePerGas: 10n ** 10n,
          maxPriorityFeePerGas: 1n,
        })
        const res = await api(t, tool).post('/api/sweeps', {
          blockchain_network: 'localchain',
          raw_transaction: raw,
          items: [{ address: deposit, token_symbol: 'TUSD', amount: paid!.units.toString() }],
        })
        return { status: res.status, message: ((await res.json()) as any).message as string }
      }
      const stranger = privateKeyToAccount(generatePrivateKey())
      expect(await record(await sweepSignedBy(stranger as never, now + 600n))).toEqual({
        status: 400,
        message: expect.stringContaining('is not signed by the deposit address it sweeps'),
      })
      const own = mnemonicToAccount(MERCHANT_MNEMONIC, {
        addressIndex: (
          (await (
            await api(t, tool).get(`/api/deposit-addresses?address=${deposit}`)
          ).json()) as any
        ).deposit_addresses[0].derivation_index,
      })
      expect(own.address).toBe(deposit)
      expect(await record(await sweepSignedBy(own as never, 2n ** 200n))).toEqual({
        status: 400,
        message: expect.stringContaining("more than 2 hours past the chain's time"),
      })
      expect(await record(await sweepSignedBy(own as never, now + 600n), 1_000_000)).toEqual({
        status: 400,
        message: expect.stringContaining('more than 16 past'),
      })
      expect(
        ((await (await api(t, tool).get('/api/sweeps?limit=100')).json()) as any).sweeps.filter(
          (w: any) => w.treasury === STRANGER,
        ),
      ).toEqual([])
    })

    test('a replayed sweep signature moves nothing, and a refund queued behind it is paid', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 27)
      const sweepArgs = [
        'sweep',
        ...toolArgs(t, tool, chain, files),
        '--to',
        TREASURY,
        ...keyArgs(),
        '--token',
        'TUSD',
        '--json',
      ]
      const swept = await runTreasuryTool(sweepArgs)
      expect({ code: swept.code, stderr: swept.stderr }).toEqual({ code: 0, stderr: '' })
      expect(await chain.tokenBalance(paid!.address)).toBe(0n)
      // A late payment arrives, and the merchant refunds it.
      const late = 4_000_000n
      await chain.customer
        .writeContract({
          address: chain.token,
          abi: [
            {
              type: 'function',
              name: 'transfer',
              stateMutability: 'nonpayable',
              inputs: [
                { name: 'to', type: 'address' },
                { name: 'value', type: 'uint256' },
              ],
              outputs: [{ type: 'bool' }],
            },
          ],
          functionName: 'transfer',
          args: [paid!.address as Address, late],
        })
        .then((h) => chain.customer.waitForTransactionReceipt({ hash: h }))
      await chain.mine(CONFIRMATIONS)
      const queued = await waitUntil(
        'the late payment refundable',
        async () => refund(paid!.id, { address: payer, amount: late.toString() }),
        (r) => !!r?.id,
        20_000,
        200,
      )
      // Anyone who saw the sweep sends its signed call again, within its hour: it moves nothing.
      const recorded = (
        (await (await api(t, tool).get('/api/sweeps?limit=100')).json()) as any
      ).sweeps.find((w: any) => w.transaction_hash === swept.json.sweeps[0].transaction_hash)
      const replay = signedSweepsOf(recorded.raw_transaction).filter(
        (c) => c.account.toLowerCase() === paid!.address.toLowerCase(),
      )
      expect(replay).toHaveLength(1)
      const hash = await chain.customer.sendTransaction({
        to: DEPOSIT_ACCOUNT,
        data: encodeFunctionData({
          abi: DepositAccount.abi,
          functionName: 'batch',
          args: [replay],
        }),
      })
      expect((await chain.customer.waitForTransactionReceipt({ hash })).status).toBe('success')
      expect(await chain.tokenBalance(paid!.address)).toBe(late)
      // The refund queued behind it is paid from the address, and completes.
      const r = await pay(['--refund', queued.id])
      expect({ code: r.code, paid: r.json.paid.map((p: any) => p.refund_id) }).toEqual({
        code: 0,
        paid: [queued.id],
      })
      await mineUntil(queued.id, (x) => x.status === 'completed')
    })

    test('a native refund from the gas account is refused before it is recorded when the account cannot pay its fee too, L1 data fee included', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'ETH', 9)
      // Swept: the refund can come only from a gas account, with the merchant's approval.
      const swept = await runTreasuryTool([
        'sweep',
        ...toolArgs(t, tool, chain, files),
        '--to',
        TREASURY,
        ...keyArgs(),
        '--json',
      ])
      expect(swept.code).toBe(0)
      const made = await refund(paid!.id, { address: payer })
      const amount = BigInt(made.amount)
      const poorSecret = generatePrivateKey()
      const poor = privateKeyToAccount(poorSecret)
      const poorKey = join(dir, 'poor-gas-key.txt')
      writeFileSync(poorKey, `${poorSecret}\n`, { mode: 0o600 })
      const setBalance = (wei: bigint) =>
        chain.customer.request({
          method: 'anvil_setBalance',
          params: [poor.address, `0x${wei.toString(16)}`],
        } as never)
      await setBalance(amount)
      const short = await pay(['--refund', made.id, '--approve', made.id], { gasKey: poorKey })
      expect(short.code).toBe(1)
      expect(short.json.waiting_for_funds).toEqual([
        {
          refund_id: made.id,
          reason: expect.stringContaining('the refund and its fee needs up to'),
        },
      ])
      expect(await refundOf(made.id)).toMatchObject({ status: 'pending', raw_transaction: null })
      // On an OP Stack chain the sender also pays for its bytes on Ethereum: enough for the gas is
      // not enough.
      await chain.customer.request({
        method: 'anvil_setCode',
        params: [
          GAS_PRICE_ORACLE,
          `0x7f${(10n ** 16n).toString(16).padStart(64, '0')}60005260206000f3`,
        ],
      } as never)
      try {
        await setBalance(amount + 10n ** 15n)
        const l1 = await pay(['--refund', made.id, '--approve', made.id], { gasKey: poorKey })
        expect(l1.json.waiting_for_funds).toEqual([
          { refund_id: made.id, reason: expect.stringContaining('(L1 data fee included)') },
        ])
        expect((await refundOf(made.id)).status).toBe('pending')
        await setBalance(amount + 10n ** 17n)
        const ok = await pay(['--refund', made.id, '--approve', made.id], { gasKey: poorKey })
        expect(ok.json.paid).toEqual([
          expect.objectContaining({ refund_id: made.id, paid_from: poor.address }),
        ])
      } finally {
        await chain.customer.request({
          method: 'anvil_setCode',
          params: [GAS_PRICE_ORACLE, '0x'],
        } as never)
      }
    })

    test('a recorded payment that can no longer be mined is abandoned on request (API, CLI); one still mineable is not, saying why', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 28)
      const made = await refund(paid!.id, { address: payer, amount: '1000000' })
      // Recorded from the deposit address, then the tool dies before it is sent.
      await killedAtSend(chain.rpcUrl, (rpc) => [
        'refunds',
        'pay',
        ...toolArgs(t, tool, chain, files, rpc),
        ...keyArgs(),
        '--json',
        '--refund',
        made.id,
      ])
      expect((await refundOf(made.id)).status).toBe('submitted')
      const early = await api(t, tool).post(`/api/refunds/${made.id}/abandon`, '')
      expect(early.status).toBe(409)
      expect(((await early.json()) as any).message).toMatch(
        /may still be mined: its signature holds until \d{4}-\d\d-\d\dT/,
      )
      const cliEnv = { ...t.cliEnv, NETWORKS_CONFIG: networks }
      const cli = await runCli(['refund', 'abandon', '--refund', made.id, '--json'], {
        env: cliEnv,
      })
      expect(cli.code).toBe(1)
      expect(cli.stderr + cli.stdout).toContain('may still be mined')

      // Paid from the gas account (approved), recorded, never sent; the gas account's next
      // transaction takes its nonce.
      await runTreasuryTool([
        'sweep',
        ...toolArgs(t, tool, chain, files),
        '--to',
        TREASURY,
        ...keyArgs(),
        '--token',
        'TUSD',
        '--json',
      ])
      const [other] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 29)
      await runTreasuryTool([
        'sweep',
        ...toolArgs(t, tool, chain, files),
        '--to',
        TREASURY,
        ...keyArgs(),
        '--token',
        'TUSD',
        '--json',
      ])
      await payToken(chain.customer, chain.token, chain.gas.address, 10_000_000n)
      const fromGas = await refund(other!.id, { address: payer, amount: '2000000' })
      await killedAtSend(chain.rpcUrl, (rpc) => [
        'refunds',
        'pay',
        ...toolArgs(t, tool, chain, files, rpc),
        ...keyArgs(),
        '--json',
        '--refund',
        fromGas.id,
        '--approve',
        fromGas.id,
      ])
      const recorded = await refundOf(fromGas.id)
      expect(recorded).toMatchObject({ status: 'submitted', paid_from: chain.gas.address })
      const stillFree = await runCli(['refund', 'abandon', '--refund', fromGas.id, '--json'], {
        env: cliEnv,
      })
      expect(stillFree.stderr + stillFree.stdout).toContain(
        'is not taken yet, so it can still be mined',
      )
      const gas = createDevnetClient(chain.rpcUrl, chain.gas.key)
      await gas.waitForTransactionReceipt({
        hash: await gas.sendTransaction({ to: TREASURY, value: 1n }),
      })
      // Deep enough for the service to see the nonce taken (not yet for the follower to call it
      // dropped by itself).
      const head = await chain.mine(CONFIRMATIONS - 1)
      await waitUntil(
        'the follower at the head',
        async () => t.server.services.chain.syncedHeights().localchain ?? -1n,
        (h) => h >= head,
      )
      const abandoned = await runCli(['refund', 'abandon', '--refund', fromGas.id, '--json'], {
        env: cliEnv,
      })
      expect({ code: abandoned.code, json: abandoned.json }).toEqual({
        code: 0,
        json: { id: fromGas.id, status: 'pending', transaction_id: other!.id },
      })
      const timeline = (
        (await (await shop().get(`/api/transactions/${other!.id}/timeline`)).json()) as any
      ).timeline
      expect(timeline.find((e: any) => e.cause === 'refund.abandoned')).toMatchObject({
        details: { refund_status: 'pending', tx_hash: recorded.transaction_hash },
      })
      await shop().post(`/api/refunds/${fromGas.id}/cancel`, '')
    })

    test('a payment recorded but never sent, whose signature lapses with its nonce still free, returns its refund to pending by itself', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 30)
      const made = await refund(paid!.id, { address: payer, amount: '1000000' })
      await killedAtSend(chain.rpcUrl, (rpc) => [
        'refunds',
        'pay',
        ...toolArgs(t, tool, chain, files, rpc),
        ...keyArgs(),
        '--json',
        '--refund',
        made.id,
      ])
      expect((await refundOf(made.id)).status).toBe('submitted')
      await chain.customer.request({ method: 'evm_increaseTime', params: [3700] } as never)
      await mineUntil(made.id, (x) => x.status === 'pending')
      const timeline = (
        (await (await shop().get(`/api/transactions/${paid!.id}/timeline`)).json()) as any
      ).timeline.map((e: any) => e.cause)
      expect(timeline).toContain('refund.expired_unpaid')
      // Paid anew, once; the stale transaction's nonce is retired by the run.
      const r = await pay(['--refund', made.id])
      expect(r.json.paid).toEqual([expect.objectContaining({ refund_id: made.id })])
    })

    test('a run goes on past a refund it cannot see through, says which, and does not crash on a submitted refund without a recorded transaction', async () => {
      const [a, b] = await paidTransactions(t, project.key, chain, 2, 'TUSD', 31)
      const first = await refund(a!.id, { address: payer, amount: '1000000' })
      const second = await refund(b!.id, { address: payer, amount: '1000000' })
      // The service refuses the first's payment record (a 503 here); the second is paid all the
      // same.
      const proxy = await tamperingProxy(t, (path, body, method) =>
        method === 'POST' && path === `/api/refunds/${first.id}/payment`
          ? Response.json({ success: false, message: 'try again' }, { status: 503 })
          : body,
      )
      try {
        const r = await pay(['--refund', `${first.id},${second.id}`], { apiUrl: proxy.url })
        expect(r.code).toBe(1)
        expect(r.json.errors).toEqual([
          { refund_id: first.id, reason: expect.stringContaining('try again') },
        ])
        expect(r.json.paid).toEqual([expect.objectContaining({ refund_id: second.id })])
      } finally {
        proxy.stop()
      }
      // A submitted refund listed without its transaction (another one delivered its signature) is
      // reported, not a crash.
      const [c] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 32)
      const third = await refund(c!.id, { address: payer, amount: '1000000' })
      await killedAtSend(chain.rpcUrl, (rpc) => [
        'refunds',
        'pay',
        ...toolArgs(t, tool, chain, files, rpc),
        ...keyArgs(),
        '--json',
        '--refund',
        third.id,
      ])
      const noRaw = await tamperingProxy(t, (path, body) => {
        if (path.startsWith('/api/refunds'))
          for (const r of (body.refunds ?? [body.refund]).filter(Boolean))
            if (r.id === third.id) r.raw_transaction = null
        return body
      })
      try {
        const r = await pay(['--refund', third.id, '--dry-run'], { apiUrl: noRaw.url })
        expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
        expect(r.json.resumed).toEqual([
          expect.objectContaining({
            refund_id: third.id,
            outcome: expect.stringContaining('nothing to send'),
          }),
        ])
      } finally {
        noRaw.stop()
      }
    })

    test('a refund whose address no longer holds the amount when it is paid waits; it is not failed', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 33)
      const made = await refund(paid!.id, { address: payer, amount: '2000000' })
      // Between the tool's look at the balance and its simulation, the address's money leaves (a
      // sweep the merchant signed).
      const proxy = await startRpcProxy(chain.rpcUrl)
      let moved = false
      proxy.beforeCall = async (call) => {
        if (call.method !== 'eth_estimateGas' || moved) return
        moved = true
        await sweepNow(paid!.address as Address)
      }
      try {
        const r = await runTreasuryTool([
          'refunds',
          'pay',
          ...toolArgs(t, tool, chain, files, proxy.url),
          ...keyArgs(),
          '--json',
          '--refund',
          made.id,
        ])
        expect(r.code).toBe(1)
        expect(r.json.unpayable).toEqual([])
        expect(r.json.waiting_for_funds).toEqual([
          { refund_id: made.id, reason: expect.stringContaining('less than the refund') },
        ])
      } finally {
        await proxy.close()
      }
      expect((await refundOf(made.id)).status).toBe('pending')
      await shop().post(`/api/refunds/${made.id}/cancel`, '')
    })

    test('--max-usd caps what one run pays', async () => {
      const [a, b] = await paidTransactions(t, project.key, chain, 2, 'TUSD', 34)
      const first = await refund(a!.id, { address: payer, amount: '30000000' })
      const second = await refund(b!.id, { address: payer, amount: '30000000' })
      const r = await pay(['--refund', `${first.id},${second.id}`, '--max-usd', '50'])
      expect(r.code).toBe(1)
      expect(r.json.paid).toHaveLength(1)
      expect(r.json.over_cap).toEqual([
        { refund_id: expect.stringMatching(/^rf_/), reason: expect.stringContaining('--max-usd') },
      ])
      const rest = await pay(['--refund', r.json.over_cap[0].refund_id])
      expect(rest.json.paid).toHaveLength(1)
    })
  })

  describe(`one transaction is a sweep or a refund, never both (a chain without EIP-7702) [${backend}]`, () => {
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

    test("a refund paid by the deposit address itself cannot be recorded again as a sweep: the Funds page's count stays exact", async () => {
      const payer = chain.customer.account.address
      const [paid] = await paidTransactions(t, shop, chain, 1, 'TUSD', 9)
      const made = (
        (await (
          await api(t, shop).post(`/api/transactions/${paid!.id}/refunds`, {
            address: payer,
            amount: '4000000',
          })
        ).json()) as any
      ).refund
      // The tool tops the address up, records the refund's own transfer, and dies before sending
      // it: recorded, still mineable.
      await killedAtSend(
        chain.rpcUrl,
        (rpc) => [
          'refunds',
          'pay',
          ...toolArgs(t, tool, chain, files, rpc),
          '--mnemonic-file',
          files.mnemonic,
          '--gas-key-file',
          files.gasKey,
          '--json',
        ],
        // The deposit address's own transfer is the run's one legacy transaction.
        (raw) => parseTransaction(raw).type === 'legacy',
      )
      const refund = ((await (await api(t, tool).get(`/api/refunds/${made.id}`)).json()) as any)
        .refund
      expect({ status: refund.status, paid_from: refund.paid_from }).toEqual({
        status: 'submitted',
        paid_from: getAddress(paid!.address),
      })
      // The same signed transaction, a deposit address's own transfer of its token, offered as
      // a sweep of that address (which it also looks like).
      const asSweep = await api(t, tool).post('/api/sweeps', {
        blockchain_network: 'localchain',
        raw_transaction: refund.raw_transaction,
        items: [{ address: paid!.address, token_symbol: 'TUSD', amount: '4000000' }],
      })
      expect(asSweep.status).toBe(409)
      expect(((await asSweep.json()) as any).message).toMatch(
        new RegExp(`recorded as the payment of refund ${made.id}`),
      )
      const sweeps = ((await (await api(t, tool).get('/api/sweeps')).json()) as any).sweeps
      expect(sweeps).toEqual([])
    })
  })
}

/**
 * An HTTPS "service" in front of the test server, on its certificate, that rewrites the JSON the
 * server answers: what a compromised server could say to the treasury tool.
 */
async function tamperingProxy(
  t: TestServer,
  rewrite: (path: string, body: any, method: string) => any,
) {
  const tls = {
    cert: readFileSync(join(t.dataDir, 'tls', 'cert.pem'), 'utf8'),
    key: readFileSync(join(t.dataDir, 'tls', 'key.pem'), 'utf8'),
  }
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    tls,
    async fetch(req) {
      const url = new URL(req.url)
      const upstream = await t.fetch(url.pathname + url.search, {
        method: req.method,
        headers: req.headers,
        body: req.method === 'GET' ? undefined : await req.text(),
      })
      const text = await upstream.text()
      let body: unknown
      try {
        body = rewrite(url.pathname, JSON.parse(text), req.method)
      } catch {
        return new Response(text, { status: upstream.status, headers: upstream.headers })
      }
      if (body instanceof Response) return body
      return new Response(JSON.stringify(body), {
        status: upstream.status,
        headers: { 'content-type': 'application/json' },
      })
    },
  })
  return { url: `https://localhost:${server.port}`, stop: () => server.stop(true) }
}

/**
 * Runs the treasury tool on a terminal of its own (a pseudo-terminal from `script`), answering
 * `answer` once it asks; resolves with what the terminal showed and the exit status.
 */
async function atTerminal(
  args: string[],
  answer: string,
): Promise<{ code: number; output: string }> {
  const command = [BUN, 'src/treasury/main.ts', ...args]
    .map((a) => `'${a.replace(/'/g, "'\\''")}'`)
    .join(' ')
  const proc = Bun.spawn(['script', '-qefc', command, '/dev/null'], {
    cwd: ROOT,
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
    env: { ...process.env, CI: '' },
  })
  let output = ''
  let answered = false
  const reader = proc.stdout.getReader()
  const decoder = new TextDecoder()
  const deadline = setTimeout(() => proc.kill(), 60_000)
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      output += decoder.decode(value)
      if (!answered && output.includes('Type yes to pay')) {
        answered = true
        proc.stdin.write(`${answer}\n`)
        proc.stdin.flush()
      }
    }
  } finally {
    clearTimeout(deadline)
  }
  return { code: await proc.exited, output: output.replace(/\r/g, '') }
}

/**
 * The signed `sweep` calls of a recorded DepositAccount batch, as anyone who saw it could send them
 * again.
 */
function signedSweepsOf(raw: Hex): { account: Address; data: Hex }[] {
  const tx = parseTransaction(raw as never)
  const call = decodeFunctionData({ abi: DepositAccount.abi, data: tx.data! })
  return call.functionName === 'batch'
    ? (call.args[0] as { account: Address; data: Hex }[]).map((c) => ({
        account: c.account,
        data: c.data,
      }))
    : []
}
