/**
 * docs/decisions/0038-refunds.md's refunds on a real chain: the merchant makes a refund through the
 * API, the treasury tool (a separate process, keys in files) pays it from the transaction's deposit
 * address or, once that was swept, from the gas account, and the service completes it at the
 * network's confirmations and tells a verifying receiver `refund.completed`. A refund whose payment
 * a reorg takes back never completes on it. The keys never reach the service's database or logs.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { HDKey } from '@scure/bip32'
import { bytesToHex, getAddress, parseTransaction, type Hex } from 'viem'
import { createDevnetClient, deployTestStablecoin } from '../../src/chain/devnet.ts'
import { sql } from '../../src/db/client.ts'
import { mnemonicToSeed } from '../../src/lib/bip39.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { backends } from '../helpers/databases.ts'
import { payToken, waitUntil } from '../helpers/chain.ts'
import { runTreasuryTool } from '../helpers/processes.ts'
import { startRpcProxy } from '../helpers/rpc-proxy.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'
import {
  killedAtSend,
  MERCHANT_MNEMONIC,
  MERCHANT_PASSPHRASE,
  paidTransactions,
  setUpMerchant,
  toolArgs,
  type TreasuryChain,
  type writeMerchantFiles,
} from '../helpers/treasury.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'

const CONFIRMATIONS = 3
const CUSTOMER = getAddress('0x1f9090aae28b8a3dceadf281b0f12828e676c326')
const TREASURY = getAddress('0x2b5ad5c4795c026514f8317c7a215e218dccd6cf')

for (const backend of backends()) {
  describe(`treasury refunds on a real chain [${backend}]`, () => {
    let chain: TreasuryChain
    let t: TestServer
    let sink: WebhookSink
    let dir: string
    let project: { id: string; key: string }
    /**
     * The treasury tool's key (the shop's, project.key, creates refunds but cannot record their
     * payment).
     */
    let tool: string
    /**
     * The customers' wallet: every payment here comes from it, so a refund back to it needs no
     * approval.
     */
    let payer: string
    let files: ReturnType<typeof writeMerchantFiles>
    const logs: string[] = []

    useStack(
      backend,
      {
        treasury: true,
        network: { confirmations: CONFIRMATIONS },
        server: { logger: createLogger('debug', (line) => logs.push(line)) },
        project: false,
      },
      async (s) => {
        chain = s.treasury
        t = s.t
        dir = s.dir
        sink = await startWebhookSink()
        project = await t.project()
        // This merchant's deposit key has a BIP-39 passphrase too.
        ;({ tool, files } = await setUpMerchant(t, project.id, dir, chain, MERCHANT_PASSPHRASE))
        payer = chain.customer.account.address
        const ep = await t.server.services.endpoints.create({
          projectId: project.id,
          mode: 'test',
          url: sink.url('/refunds'),
          eventTypes: ['refund.completed', 'refund.failed'],
        })
        if (!ep.ok) throw new Error(ep.message)
        await sink.configure('/refunds', { secret: ep.value.secret, mode: 'ok' })
      },
    )
    afterAll(() => sink?.stop())

    const a = () => api(t, project.key)
    const refund = async (
      txId: string,
      body: Record<string, unknown>,
      headers: Record<string, string> = {},
    ) => {
      const r = await a().post(`/api/transactions/${txId}/refunds`, body, headers)
      return { status: r.status, body: (await r.json()) as any, headers: r.headers }
    }
    const refundOf = async (id: string) =>
      ((await (await a().get(`/api/refunds/${id}`)).json()) as any).refund
    const keyArgs = () => [
      '--mnemonic-file',
      files.mnemonic,
      '--passphrase-file',
      files.passphrase!,
      '--gas-key-file',
      files.gasKey,
    ]
    const pay = (extra: string[] = []) =>
      runTreasuryTool([
        'refunds',
        'pay',
        ...toolArgs(t, tool, chain, files),
        ...keyArgs(),
        '--json',
        ...extra,
      ])
    const events = async (type: string) =>
      (await sink.received('/refunds')).filter((r) => JSON.parse(r.body).event === type)

    test('the API refuses a refund of nothing, of more than is left, of an open transaction, to a bad address, and of another project or mode', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 20)
      // More than arrived: 409, saying what is left.
      const over = await refund(paid!.id, {
        address: CUSTOMER,
        amount: (paid!.units + 1n).toString(),
      })
      expect(over.status).toBe(409)
      expect(over.body.error.type).toBe('conflict_error')
      expect(over.body.message).toContain(
        `exceeds what is left to refund in TUSD on localchain: ${paid!.units}`,
      )
      // Nothing received: a transaction cancelled before any payment.
      const created = ((await (await a().create({ amount: 5 })).json()) as any).transaction.id
      expect((await a().post(`/api/transactions/${created}/cancel`, {})).status).toBe(200)
      const nothing = await refund(created, { address: CUSTOMER })
      expect({ status: nothing.status, message: nothing.body.message }).toEqual({
        status: 409,
        message: expect.stringContaining('Nothing to refund'),
      })
      // A token was chosen, nothing arrived, then it was cancelled: still nothing.
      const quoted = await a().quoted(6)
      await a().post(`/api/transactions/${quoted.id}/cancel`, {})
      expect((await refund(quoted.id, { address: CUSTOMER })).body.message).toContain(
        'no confirmed transfer of it arrived',
      )
      // Still open.
      const open = await a().quoted(7)
      expect((await refund(open.id, { address: CUSTOMER })).status).toBe(409)
      // Bad input: 400 naming the field.
      for (const [body, path] of [
        [{ address: '0x1234' }, 'address'],
        [{ address: CUSTOMER.toLowerCase().replace('0x1f9', '0x1F9') }, 'address'],
        [{ address: CUSTOMER, amount: '0' }, 'amount'],
        [{ address: '0x0000000000000000000000000000000000000000' }, 'address'],
        [{ address: CUSTOMER, amount: '1.5' }, 'amount'],
        [{ address: CUSTOMER, amount: 5 }, 'amount'],
        [{ address: CUSTOMER, extra: true }, 'extra'],
      ] as const) {
        const r = await refund(paid!.id, body)
        expect({ status: r.status, paths: r.body.error.details?.map((d: any) => d.path) }).toEqual({
          status: 400,
          paths: [path],
        })
      }
      // Another project's, or another mode's, transaction does not exist.
      const other = await t.project()
      expect(
        (
          await api(t, other.key).post(`/api/transactions/${paid!.id}/refunds`, {
            address: CUSTOMER,
          })
        ).status,
      ).toBe(404)
      const live = await t.key(project.id, 'live')
      expect(
        (
          await api(t, live.key).post(`/api/transactions/${paid!.id}/refunds`, {
            address: CUSTOMER,
          })
        ).status,
      ).toBe(404)
      // Scopes.
      const reader = await t.key(project.id, 'test', ['transactions:read', 'refunds:read'])
      expect(
        (
          await api(t, reader.key).post(`/api/transactions/${paid!.id}/refunds`, {
            address: CUSTOMER,
          })
        ).status,
      ).toBe(403)
      expect((await api(t, reader.key).get(`/api/transactions/${paid!.id}/refunds`)).status).toBe(
        200,
      )
      // An Idempotency-Key: the same body answers the same refund once; another body is 409.
      const first = await refund(
        paid!.id,
        { address: CUSTOMER, amount: '1000000', reason: 'a retried request' },
        { 'idempotency-key': 'rf-1' },
      )
      const again = await refund(
        paid!.id,
        { address: CUSTOMER, amount: '1000000', reason: 'a retried request' },
        { 'idempotency-key': 'rf-1' },
      )
      expect(first.status).toBe(200)
      expect(again.body).toEqual(first.body)
      expect(again.headers.get('idempotent-replayed')).toBe('true')
      expect(
        (
          await refund(
            paid!.id,
            { address: CUSTOMER, amount: '2000000' },
            { 'idempotency-key': 'rf-1' },
          )
        ).status,
      ).toBe(409)
      const listed = (await (await a().get(`/api/transactions/${paid!.id}/refunds`)).json()) as any
      expect(listed.refunds).toHaveLength(1)
      expect(listed.refundable).toEqual([
        {
          token_symbol: 'TUSD',
          blockchain_network: 'localchain',
          received: paid!.units.toString(),
          refunded: '1000000',
          refundable: (paid!.units - 1_000_000n).toString(),
        },
      ])
      // Withdrawn before it is paid: cancelled, and the amount is refundable again.
      expect(
        ((await (await a().post(`/api/refunds/${first.body.refund.id}/cancel`, {})).json()) as any)
          .refund.status,
      ).toBe('cancelled')
      expect((await a().post(`/api/refunds/${first.body.refund.id}/cancel`, {})).status).toBe(409)
    })

    test('refunds paid by the tool from the deposit addresses (a token and the native coin) complete, each with a signed refund.completed', async () => {
      const [tusd] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 30)
      const [eth] = await paidTransactions(t, project.key, chain, 1, 'ETH', 15)
      const part = await refund(tusd!.id, {
        address: payer,
        amount: '4000000',
        reason: 'one item returned',
      })
      const whole = await refund(eth!.id, { address: payer })
      expect(part.body.refund).toMatchObject({
        status: 'pending',
        amount: '4000000',
        token_symbol: 'TUSD',
        address: payer,
        deposit_address: getAddress(tusd!.address),
      })
      expect(whole.body.refund).toMatchObject({
        status: 'pending',
        amount: eth!.units.toString(),
        token_symbol: 'ETH',
      })
      const [tusdBefore, ethBefore] = [
        await chain.tokenBalance(payer),
        await chain.ethBalance(payer),
      ]

      const r = await pay()
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
      expect(r.json.paid.map((p: any) => [p.refund_id, p.paid_from])).toEqual(
        expect.arrayContaining([
          [part.body.refund.id, getAddress(tusd!.address)],
          [whole.body.refund.id, getAddress(eth!.address)],
        ]),
      )
      expect((await chain.tokenBalance(payer)) - tusdBefore).toBe(4_000_000n)
      expect((await chain.ethBalance(payer)) - ethBefore).toBe(eth!.units)
      // The native coin left the deposit address to the last wei: the gas account paid the gas.
      expect(await chain.ethBalance(eth!.address)).toBe(0n)

      await chain.mine(CONFIRMATIONS)
      for (const id of [part.body.refund.id, whole.body.refund.id]) {
        const done = await waitUntil(
          `refund ${id} completed`,
          () => refundOf(id),
          (x) => x.status === 'completed',
        )
        expect(done).toMatchObject({
          required_confirmations: CONFIRMATIONS,
          transaction_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
        })
        expect(done.confirmations).toBeGreaterThanOrEqual(CONFIRMATIONS)
      }
      const completed = await sink.waitFor(
        '/refunds',
        (got) => got.filter((x) => JSON.parse(x.body).event === 'refund.completed').length >= 2,
      )
      expect(completed.every((x) => x.verified)).toBe(true)
      const partEvent = completed
        .map((x) => JSON.parse(x.body))
        .find((e) => e.data.refund.id === part.body.refund.id)
      expect(partEvent.data).toMatchObject({
        transaction_id: tusd!.id,
        status: 'completed',
        testing_mode: true,
        token_symbol: 'TUSD',
        refund: {
          id: part.body.refund.id,
          status: 'completed',
          amount: '4000000',
          token_symbol: 'TUSD',
          address: payer,
          paid_from: getAddress(tusd!.address),
          reason: 'one item returned',
          failure_reason: null,
        },
      })
      // What is left of the token payment is still refundable; running the tool again pays nothing
      // twice.
      const left = ((await (await a().get(`/api/transactions/${tusd!.id}/refunds`)).json()) as any)
        .refundable
      expect(left).toEqual([
        expect.objectContaining({
          token_symbol: 'TUSD',
          refunded: '4000000',
          refundable: (tusd!.units - 4_000_000n).toString(),
        }),
      ])
      const second = await pay()
      expect(second.json.paid).toEqual([])
      expect((await chain.tokenBalance(payer)) - tusdBefore).toBe(4_000_000n)
      // The timeline tells the story.
      const timeline = (
        (await (await a().get(`/api/transactions/${tusd!.id}/timeline`)).json()) as any
      ).timeline.map((e: any) => e.cause)
      expect(timeline).toEqual(
        expect.arrayContaining([
          'refund.created',
          'refund.submitted',
          'refund.included',
          'refund.completed',
        ]),
      )
    })

    test('a sweep leaves an address with a pending refund alone; once swept, a refund is paid from the gas account', async () => {
      const [held, swept] = await paidTransactions(t, project.key, chain, 2, 'TUSD', 40)
      const pending = await refund(held!.id, { address: payer, amount: '1000000' })
      const sweep = await runTreasuryTool([
        'sweep',
        ...toolArgs(t, tool, chain, files),
        '--to',
        TREASURY,
        ...keyArgs(),
        '--token',
        'TUSD',
        '--json',
      ])
      expect({ code: sweep.code, stderr: sweep.stderr }).toEqual({ code: 0, stderr: '' })
      expect(sweep.json.held_for_refunds).toEqual([
        expect.objectContaining({
          address: getAddress(held!.address),
          token_symbol: 'TUSD',
          refunds: [pending.body.refund.id],
        }),
      ])
      expect(await chain.tokenBalance(swept!.address)).toBe(0n)
      expect(await chain.tokenBalance(held!.address)).toBeGreaterThan(0n)

      // The gas account holds some TUSD of the merchant's; the swept address holds nothing.
      await payToken(chain.customer, chain.token, chain.gas.address, 50_000_000n)
      const later = await refund(swept!.id, { address: payer, amount: '3000000' })
      const before = await chain.tokenBalance(payer)
      // Paid from the gas account's own funds: only with the merchant's approval.
      const unapproved = await pay(['--refund', later.body.refund.id])
      expect(unapproved.code).toBe(1)
      expect(unapproved.json.awaiting_approval).toEqual([
        {
          refund_id: later.body.refund.id,
          reason: expect.stringContaining('it would be paid from your gas account'),
        },
      ])
      expect(await chain.tokenBalance(payer)).toBe(before)
      const r = await pay(['--refund', later.body.refund.id, '--approve', later.body.refund.id])
      expect(r.code).toBe(0)
      expect(r.json.paid).toEqual([
        expect.objectContaining({
          refund_id: later.body.refund.id,
          paid_from: chain.gas.address,
          approved: 'named',
        }),
      ])
      expect((await chain.tokenBalance(payer)) - before).toBe(3_000_000n)
      await chain.mine(CONFIRMATIONS)
      expect(
        await waitUntil(
          'paid from the gas account, completed',
          () => refundOf(later.body.refund.id),
          (x) => x.status === 'completed',
        ),
      ).toMatchObject({ paid_from: chain.gas.address })
      // The pending one of the address left alone is paid too, from its deposit address.
      const rest = await pay()
      expect(rest.json.paid).toEqual([
        expect.objectContaining({
          refund_id: pending.body.refund.id,
          paid_from: getAddress(held!.address),
        }),
      ])
    })

    test('a refund whose payment a reorg takes back before its confirmations does not complete; sent again, it completes once', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 12)
      const made = (await refund(paid!.id, { address: payer, amount: '2000000' })).body.refund
      const before = await chain.tokenBalance(payer)
      const r = await pay(['--refund', made.id])
      expect(r.code).toBe(0)
      // Mined in a block of its own (one per transaction here): 1 confirmation of 3.
      await waitUntil(
        'the refund confirming',
        () => refundOf(made.id),
        (x) => x.status === 'confirming',
      )
      await chain.reorg(1)
      expect(await chain.tokenBalance(payer)).toBe(before)
      await waitUntil(
        'the refund back to submitted',
        () => refundOf(made.id),
        (x) => x.status === 'submitted',
      )
      // Far more blocks than its confirmations: the payment is gone, so nothing completes. (The
      // follower past one block more has settled the head before it.)
      await chain.mine(CONFIRMATIONS + 3)
      for (const n of [0, 1]) {
        const head = n === 0 ? await chain.head() : await chain.mine(n)
        await waitUntil(
          'the follower at the head',
          async () => t.server.services.chain.syncedHeights().localchain ?? -1n,
          (h) => h >= head,
        )
      }
      expect((await refundOf(made.id)).status).toBe('submitted')
      expect(
        await events('refund.completed').then((e) =>
          e.filter((x) => JSON.parse(x.body).data.refund.id === made.id),
        ),
      ).toEqual([])
      const timeline = (
        (await (await a().get(`/api/transactions/${paid!.id}/timeline`)).json()) as any
      ).timeline.map((e: any) => e.cause)
      expect(timeline).toContain('refund.reorged')

      // A dry run says it would send it again, and sends nothing.
      const head = await chain.head()
      const dry = await pay(['--dry-run'])
      expect(dry.json.resumed).toEqual([
        expect.objectContaining({ refund_id: made.id, outcome: 'would be sent again' }),
      ])
      expect(await chain.head()).toBe(head)
      expect((await refundOf(made.id)).status).toBe('submitted')
      // The next run sends the very same payment again (its nonce is free): it completes, once.
      const again = await pay()
      expect(again.json.resumed).toEqual([
        expect.objectContaining({ refund_id: made.id, outcome: 'sent again' }),
      ])
      expect(again.json.paid).toEqual([])
      await chain.mine(CONFIRMATIONS)
      await waitUntil(
        'completed',
        () => refundOf(made.id),
        (x) => x.status === 'completed',
      )
      expect((await chain.tokenBalance(payer)) - before).toBe(2_000_000n)
      await sink.waitFor('/refunds', (got) =>
        got.some((x) => JSON.parse(x.body).data.refund?.id === made.id),
      )
      expect(
        (await events('refund.completed')).filter(
          (x) => JSON.parse(x.body).data.refund.id === made.id,
        ),
      ).toHaveLength(1)
    })

    /**
     * Mines one block at a time, each followed by the service, until `pred` holds of the refund (at
     * most 20 blocks).
     */
    async function mineUntil(id: string, pred: (r: any) => boolean) {
      for (let i = 0; i < 20; i++) {
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

    test("a refund's signature sent first by someone else pays it once: the tool's own transaction reverts, and the refund completes on the other one", async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 13)
      const made = (await refund(paid!.id, { address: payer, amount: '3000000' })).body.refund
      const before = await chain.tokenBalance(payer)
      const proxy = await startRpcProxy(chain.rpcUrl)
      let replayed: Hex | null = null
      proxy.beforeCall = async (call) => {
        if (call.method !== 'eth_sendRawTransaction' || replayed) return
        // Someone who saw the signed payment sends its call from an account of their own, first.
        const tx = parseTransaction((call.params as Hex[])[0]! as never)
        replayed = await chain.customer.sendTransaction({
          to: tx.to!,
          data: tx.data!,
          ...('authorizationList' in tx && tx.authorizationList
            ? { authorizationList: tx.authorizationList }
            : {}),
        } as never)
        await chain.customer.waitForTransactionReceipt({ hash: replayed })
      }
      const r = await runTreasuryTool([
        'refunds',
        'pay',
        ...toolArgs(t, tool, chain, files, proxy.url),
        ...keyArgs(),
        '--json',
        '--refund',
        made.id,
      ])
      await proxy.close()
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
      expect(r.json.already_paid).toEqual([made.id])
      expect((await chain.tokenBalance(payer)) - before).toBe(3_000_000n)
      const done = await mineUntil(made.id, (x) => x.status === 'completed')
      expect(done.transaction_hash).toBe(replayed)
      expect((await chain.tokenBalance(payer)) - before).toBe(3_000_000n)
      await sink.waitFor('/refunds', (got) =>
        got.some((x) => JSON.parse(x.body).data.refund?.id === made.id),
      )
      expect(
        (await events('refund.completed'))
          .filter((x) => JSON.parse(x.body).data.refund.id === made.id)
          .map((x) => JSON.parse(x.body).data.refund.transaction_hash),
      ).toEqual([replayed])
    })

    test('a payment recorded but never sent, its nonce taken and its signature expired unpaid: the refund is pending again, and paid anew it completes once', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 14)
      const made = (await refund(paid!.id, { address: payer, amount: '1000000' })).body.refund
      const before = await chain.tokenBalance(payer)
      // The tool records the payment, and dies before it is sent.
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
      // The gas account's next transaction takes that nonce, and the signature's hour passes.
      const gas = createDevnetClient(chain.rpcUrl, chain.gas.key)
      await gas.waitForTransactionReceipt({
        hash: await gas.sendTransaction({ to: TREASURY, value: 1n }),
      })
      await chain.customer.request({ method: 'evm_increaseTime', params: [3700] } as never)
      await mineUntil(made.id, (x) => x.status === 'pending')
      expect(await chain.tokenBalance(payer)).toBe(before)
      const timeline = (
        (await (await a().get(`/api/transactions/${paid!.id}/timeline`)).json()) as any
      ).timeline.map((e: any) => e.cause)
      expect(timeline).toContain('refund.expired_unpaid')
      const again = await pay(['--refund', made.id])
      expect(again.json.paid).toEqual([expect.objectContaining({ refund_id: made.id })])
      await mineUntil(made.id, (x) => x.status === 'completed')
      expect((await chain.tokenBalance(payer)) - before).toBe(1_000_000n)
    })

    test('a payment recorded but never sent whose signature lapsed is not sent: a dry run says so and sends nothing, a run gives its nonce to a zero-value transfer, and the refund, pending again, is paid anew once', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'TUSD', 15)
      const made = (await refund(paid!.id, { address: payer, amount: '1500000' })).body.refund
      const before = await chain.tokenBalance(payer)
      await killedAtSend(chain.rpcUrl, (rpc) => [
        'refunds',
        'pay',
        ...toolArgs(t, tool, chain, files, rpc),
        ...keyArgs(),
        '--json',
        '--refund',
        made.id,
      ])
      const recorded = await refundOf(made.id)
      expect(recorded.status).toBe('submitted')
      await chain.customer.request({ method: 'evm_increaseTime', params: [3700] } as never)
      await chain.mine()
      const gasNonce = () =>
        chain.customer.getTransactionCount({ address: chain.gas.address, blockTag: 'latest' })
      const [nonce, head] = [await gasNonce(), await chain.head()]
      const dry = await pay(['--refund', made.id, '--dry-run'])
      expect(dry.code).toBe(0)
      expect(dry.json.resumed).toEqual([
        {
          refund_id: made.id,
          transaction_hash: recorded.transaction_hash,
          outcome: expect.stringMatching(
            /^expired unsent: its signatures lapsed; would give its nonce/,
          ),
        },
      ])
      expect([await gasNonce(), await chain.head()]).toEqual([nonce, head])
      const run = await pay(['--refund', made.id])
      expect(run.code).toBe(0)
      expect(run.json.resumed).toEqual([
        {
          refund_id: made.id,
          transaction_hash: recorded.transaction_hash,
          outcome: expect.stringMatching(
            /^expired unsent: its signatures lapsed; its nonce \d+ went to 0x[0-9a-f]{64}/,
          ),
        },
      ])
      expect(run.json.paid).toEqual([])
      expect(await gasNonce()).toBe(nonce + 1)
      expect(
        await chain.customer
          .getTransactionReceipt({ hash: recorded.transaction_hash })
          .catch(() => null),
      ).toBeNull()
      await mineUntil(made.id, (x) => x.status === 'pending')
      const again = await pay(['--refund', made.id])
      expect(again.json.paid).toEqual([expect.objectContaining({ refund_id: made.id })])
      await mineUntil(made.id, (x) => x.status === 'completed')
      expect((await chain.tokenBalance(payer)) - before).toBe(1_500_000n)
    })

    test('a refund that cannot be paid (the address refuses the coin) fails, with a signed refund.failed, and its amount is refundable again', async () => {
      const [paid] = await paidTransactions(t, project.key, chain, 1, 'ETH', 9)
      // A contract without a way to take ETH: every native transfer to it reverts.
      const refuser = await deployTestStablecoin(chain.customer, 'Refuser', 'NOPE')
      const made = (await refund(paid!.id, { address: refuser })).body.refund
      const r = await pay(['--refund', made.id, '--approve', made.id])
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: '' })
      expect(r.json.unpayable).toEqual([
        { refund_id: made.id, reason: expect.stringContaining('would revert') },
      ])
      expect(await refundOf(made.id)).toMatchObject({
        status: 'failed',
        failure_reason: 'unpayable',
      })
      const failed = await sink.waitFor('/refunds', (got) =>
        got.some((x) => JSON.parse(x.body).event === 'refund.failed'),
      )
      const e = JSON.parse(failed.find((x) => JSON.parse(x.body).event === 'refund.failed')!.body)
      expect(e.data.refund).toMatchObject({
        id: made.id,
        status: 'failed',
        failure_reason: 'unpayable',
        transaction_hash: null,
      })
      const left = ((await (await a().get(`/api/transactions/${paid!.id}/refunds`)).json()) as any)
        .refundable
      expect(left).toEqual([
        expect.objectContaining({
          token_symbol: 'ETH',
          refunded: '0',
          refundable: paid!.units.toString(),
        }),
      ])
    })

    if (backend === 'pglite') {
      test('the tool runs on Deno too', async () => {
        const r = await runTreasuryTool(
          ['balances', ...toolArgs(t, tool, chain, files), '--json'],
          { runtime: 'deno' },
        )
        expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
        expect(r.json).toMatchObject({ network: 'localchain', read_through: 'Multicall3' })
        expect(r.json.tokens.map((x: any) => x.token_symbol)).toEqual(['TUSD', 'ETH'])
      })
    }

    test('no key material reaches the service: not its database, not its logs', async () => {
      const root = HDKey.fromMasterSeed(mnemonicToSeed(MERCHANT_MNEMONIC, MERCHANT_PASSPHRASE))
      const account = root.derive("m/44'/60'/0'/0")
      const handedOut = (await t.server.services.deposits.xpubs(project.id)).find(
        (x) => x.mode === 'test',
      )!.addressesHandedOut
      const secrets = [
        MERCHANT_MNEMONIC,
        MERCHANT_MNEMONIC.split(' ').slice(0, 4).join(' '),
        MERCHANT_PASSPHRASE,
        bytesToHex(mnemonicToSeed(MERCHANT_MNEMONIC, MERCHANT_PASSPHRASE)).slice(2),
        root.privateExtendedKey,
        account.privateExtendedKey,
        ...Array.from({ length: handedOut }, (_, i) =>
          bytesToHex(account.deriveChild(i).privateKey!).slice(2),
        ),
        chain.gas.key.slice(2),
      ]
      const db = t.server.services.database
      const tables = (
        await db.rows<{ name: string }>(
          sql`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'`,
        )
      ).map((r) => r.name)
      expect(tables).toEqual(
        expect.arrayContaining(['refunds', 'sweeps', 'sweep_items', 'transactions']),
      )
      let everything = ''
      for (const table of tables) {
        for (const r of await db.rows<{ row: unknown }>(
          sql`SELECT row_to_json(x)::text AS row FROM ${sql.identifier(table)} x`,
        ))
          everything += `${typeof r.row === 'string' ? r.row : JSON.stringify(r.row)}\n`
      }
      // The service did see what the tool recorded: signed transactions, no keys.
      expect(everything).toContain('"raw_transaction"')
      expect(everything.length).toBeGreaterThan(10_000)
      const text = `${everything}\n${logs.join('\n')}`.toLowerCase()
      expect(
        secrets.filter((s) => text.includes(s.toLowerCase())).map((s) => s.slice(0, 12)),
      ).toEqual([])
    })
  })
}
