/**
 * docs/decisions/0031-transfers-recorded-then-judged.md on a real devnet (anvil, the deployed
 * TestStablecoin and ETH/USD feed, real signed transfers), through the public surfaces: the pay
 * endpoints (docs/decisions/0026-pay-page-endpoints.md) and the merchant API. The server runs on a
 * manual clock so expiry happens when the test says (the lifecycle's timers run on
 * `services.scheduler`); the chain follower polls on real time regardless, so every wait polls with
 * a deadline.
 *
 * The merchant API is what the tests poll: the pay endpoints are rate-limited per client IP
 * (docs/decisions/0026-pay-page-endpoints.md) on windows of the manual clock, which stands still.
 */
import { describe, expect, test } from 'bun:test'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { MockAggregatorV3, TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { createDevnetClient, type Devnet, type DevnetClient } from '../../src/chain/devnet.ts'
import type { NetworkConfig } from '../../src/chain/networks-config.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { backends } from '../helpers/databases.ts'
import { payNative, payToken, waitUntil } from '../helpers/chain.ts'
import { expectStatus } from '../helpers/expect.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

const TUSD = 10n ** 6n

for (const backend of backends()) {
  describe(`the payment lifecycle on a real devnet [${backend}]`, () => {
    const clock = manualClock(Date.now())
    let devnet: Devnet
    let mainnet: AnvilNode
    let wallet: DevnetClient
    let t: TestServer
    let key: string

    useStack(
      backend,
      {
        // The feed is stamped with the server's clock and never refreshed on its own during the
        // file.
        devnet: { clock, confirmations: 2, pollIntervalMs: 100, feedRefreshMs: 3_600_000 },
        networks: async ({ devnet, defer }) => {
          // A live network (testnet: false) on a node of its own, whose token nobody transfers:
          // test-mode transactions must not be offered it.
          mainnet = await startAnvil({ chainId: 1 })
          defer(() => mainnet.stop())
          const deployer = createDevnetClient(mainnet.rpcUrl, devnet!.wallet.privateKey, 1)
          const lusd = (
            await deployer.waitForTransactionReceipt({
              hash: await deployer.deployContract({
                abi: TestStablecoin.abi,
                bytecode: TestStablecoin.bytecode,
                args: ['Live USD', 'LUSD'],
              }),
            })
          ).contractAddress!
          const live: NetworkConfig = {
            ...devnet!.networks[0]!,
            name: 'livenet',
            chainId: 1,
            // The devnet's fiat feeds are not on this chain.
            fx: undefined,
            rpcUrl: mainnet.rpcUrl,
            testnet: false,
            tokens: [
              {
                kind: 'erc20',
                symbol: 'LUSD',
                decimals: 6,
                address: lusd,
                price: { kind: 'fixedUsd', usd: '1' },
              },
            ],
          }
          return [devnet!.networks[0]!, live]
        },
        server: { clock },
      },
      (s) => {
        devnet = s.devnet
        wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
        t = s.t
        key = s.key
      },
    )

    const create = async (body: Record<string, unknown> = {}) =>
      ((await (await api(t, key).create({ amount: 25, ...body })).json()) as any).transaction as {
        id: string
        expires_at: string
      }
    const tx = async (id: string) =>
      ((await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any).transaction
    const timeline = async (id: string) =>
      ((await (await api(t, key).get(`/api/transactions/${id}/timeline`)).json()) as any)
        .timeline as any[]
    const payState = async (id: string) => (await (await t.fetch(`/pay/${id}/state`)).json()) as any
    const post = (path: string, body?: unknown) =>
      t.fetch(path, {
        method: 'POST',
        ...(body === undefined
          ? {}
          : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      })
    const select = (id: string, token_symbol: string, blockchain_network = 'devnet') =>
      post(`/pay/${id}/select`, { token_symbol, blockchain_network })
    async function selected(id: string, symbol: string) {
      const r = await select(id, symbol)
      await expectStatus(r, 200)
      const s = (await r.json()) as any
      expect(s.status).toBe('prepared')
      return { address: s.quote.deposit_address as string, units: BigInt(s.quote.token_amount) }
    }
    /** Moves the manual clock to a transaction's deadline and runs the timers that are due. */
    function reachDeadline(expiresAt: string) {
      clock.set(Math.max(clock.now(), Date.parse(expiresAt)))
      t.server.services.scheduler.runDue()
    }

    test('two partial payments add up: pending with the amount due after the first, completed after the second', async () => {
      const { id } = await create({ amount: 25 })
      const { address, units } = await selected(id, 'TUSD')
      expect(units).toBe(25n * TUSD)

      await payToken(wallet, devnet.stablecoin, address, 10n * TUSD)
      const partial = await waitUntil(
        'the first part counted',
        () => tx(id),
        (x) => x.amount_received === (10n * TUSD).toString(),
      )
      expect(partial.status).toBe('pending')
      const state = await payState(id)
      expect(state).toMatchObject({
        status: 'pending',
        amount_received: '10000000',
        amount_due: '15000000',
      })

      const second = await payToken(wallet, devnet.stablecoin, address, 15n * TUSD)
      const done = await waitUntil(
        'completed',
        () => tx(id),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({
        amount_received: '25000000',
        token_amount: '25000000',
        transaction_hash: second,
      })
      expect((await payState(id)).amount_due).toBe('0')
      const detected = (await timeline(id)).filter((e) => e.cause === 'payment.detected')
      expect(
        detected.map((e) => [e.from_status, e.to_status, e.details.amount, e.details.received]),
      ).toEqual([
        ['prepared', 'pending', '10000000', '10000000'],
        ['pending', 'processing', '15000000', '25000000'],
      ])
    })

    test('underpaid at expiry: failed with reason underpaid', async () => {
      const { id, expires_at } = await create({ amount: 25, expires_in_minutes: 1 })
      const { address } = await selected(id, 'TUSD')
      await payToken(wallet, devnet.stablecoin, address, 24n * TUSD)
      // Confirmations pass; a partial payment still waits for the rest.
      const head = await wallet.getBlockNumber()
      await waitUntil(
        'the partial payment counted',
        () => tx(id),
        (x) => x.amount_received === '24000000',
      )
      await waitUntil(
        'two more blocks seen',
        async () => t.server.services.chain.syncedHeights().devnet ?? -1n,
        (n) => n >= head + 2n,
      )
      expect((await tx(id)).status).toBe('pending')

      reachDeadline(expires_at)
      const failed = await waitUntil(
        'failed',
        () => tx(id),
        (x) => x.status === 'failed',
      )
      expect(failed.amount_received).toBe('24000000')
      expect((await payState(id)).failure_reason).toBe('underpaid')
      expect((await timeline(id)).at(-1)).toMatchObject({
        from_status: 'pending',
        to_status: 'failed',
        cause: 'expiry.reached',
        details: { reason: 'underpaid' },
      })
    })

    test('an overpayment completes, and the timeline records by how much', async () => {
      const { id } = await create({ amount: 25 })
      const { address } = await selected(id, 'TUSD')
      const hash = await payToken(wallet, devnet.stablecoin, address, 30n * TUSD)
      const done = await waitUntil(
        'completed',
        () => tx(id),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({
        amount_received: '30000000',
        token_amount: '25000000',
        transaction_hash: hash,
      })
      const detected = (await timeline(id)).find((e) => e.cause === 'payment.detected')
      expect(detected).toMatchObject({
        from_status: 'prepared',
        to_status: 'processing',
        details: { amount: '30000000', overpaid_by: '5000000' },
      })
    })

    test('docs/decisions/0012-transaction-lifecycle.md: another token sent to the address is recorded and moves nothing; the correct payment that follows completes the transaction', async () => {
      const { id } = await create({ amount: 25 })
      const { address, units } = await selected(id, 'TUSD')
      // 1 wei of ETH to a TUSD address: dust, or a customer's honest mix-up.
      const dust = await payNative(wallet, address, 1n)
      const recorded = await waitUntil(
        'the wrong asset recorded',
        () => timeline(id),
        (tl) => tl.some((e) => e.cause === 'wrong_asset.received'),
      )
      expect(recorded.at(-1)).toMatchObject({
        from_status: 'prepared',
        to_status: 'prepared',
        cause: 'wrong_asset.received',
        details: { txHash: dust, tokenSymbol: 'ETH (devnet)', amount: '1' },
      })
      expect(await tx(id)).toMatchObject({ status: 'prepared', amount_received: '0' })
      expect(await payState(id)).toMatchObject({
        status: 'prepared',
        wrong_asset_received: true,
        failure_reason: null,
      })

      const paid = await payToken(wallet, devnet.stablecoin, address, units)
      const done = await waitUntil(
        'completed',
        () => tx(id),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({ amount_received: units.toString(), transaction_hash: paid })
    })

    test('docs/decisions/0012-transaction-lifecycle.md: only another token received by the deadline fails the transaction with reason wrong_asset (ETH paid for TUSD, and TUSD paid for ETH)', async () => {
      const a = await create({ amount: 30, expires_in_minutes: 1 })
      const toA = await selected(a.id, 'TUSD')
      const ethHash = await payNative(wallet, toA.address, 10n ** 16n)
      const b = await create({ amount: 30, expires_in_minutes: 1 })
      const toB = await selected(b.id, 'ETH')
      const tusdHash = await payToken(wallet, devnet.stablecoin, toB.address, 30n * TUSD)
      for (const [id, hash, paid] of [
        [a.id, ethHash, 'ETH (devnet)'],
        [b.id, tusdHash, 'TUSD (devnet)'],
      ] as const) {
        await waitUntil(
          `${id} wrong asset recorded`,
          () => timeline(id),
          (tl) =>
            tl.some(
              (e) =>
                e.cause === 'wrong_asset.received' &&
                e.details.txHash === hash &&
                e.details.tokenSymbol === paid,
            ),
        )
        expect((await tx(id)).status).toBe('prepared')
      }
      reachDeadline(b.expires_at)
      for (const id of [a.id, b.id]) {
        const failed = await waitUntil(
          `${id} failed`,
          () => tx(id),
          (x) => x.status === 'failed',
        )
        expect(failed.amount_received).toBe('0')
        expect((await payState(id)).failure_reason).toBe('wrong_asset')
        expect((await timeline(id)).at(-1)).toMatchObject({
          from_status: 'prepared',
          to_status: 'failed',
          cause: 'expiry.reached',
          details: { reason: 'wrong_asset' },
        })
      }
    })

    test('a payment after expiry is recorded as a late payment; the status stays expired', async () => {
      const { id, expires_at } = await create({ amount: 25, expires_in_minutes: 1 })
      const { address, units } = await selected(id, 'TUSD')
      reachDeadline(expires_at)
      await waitUntil(
        'expired',
        () => tx(id),
        (x) => x.status === 'expired',
      )

      const hash = await payToken(wallet, devnet.stablecoin, address, units)
      const transfers = () =>
        t.server.services.database.query<{
          tx_hash: string
          kind: string
          applied: boolean
          amount: string
        }>(
          `SELECT tx_hash, kind, applied, amount::text AS amount FROM chain_transfers WHERE transaction_id = $1`,
          [id],
        )
      const rows = await waitUntil('the late payment recorded', transfers, (r) =>
        r.some((x) => x.applied),
      )
      expect(rows).toEqual([
        { tx_hash: hash.toLowerCase(), kind: 'late', applied: true, amount: units.toString() },
      ])
      // A few more blocks (confirmations and all): still expired, nothing received on the
      // transaction.
      const head = await wallet.getBlockNumber()
      await waitUntil(
        'two more blocks seen',
        async () => t.server.services.chain.syncedHeights().devnet ?? -1n,
        (n) => n >= head + 2n,
      )
      expect(await tx(id)).toMatchObject({
        status: 'expired',
        amount_received: '0',
        transaction_hash: null,
      })
      // The timeline keeps the late payment as a note after the expiry; it moved nothing.
      const entries = await timeline(id)
      expect(entries.at(-2)).toMatchObject({ to_status: 'expired', cause: 'expiry.reached' })
      expect(entries.at(-1)).toMatchObject({
        from_status: 'expired',
        to_status: 'expired',
        cause: 'payment.late',
        details: {
          txHash: hash.toLowerCase(),
          amount: units.toString(),
          network: 'devnet',
          tokenSymbol: 'TUSD',
        },
      })
    })

    test('a stale price feed: 503 on selecting the feed-priced token, nothing changed; the fixed-price token still selects', async () => {
      const { id } = await create({ amount: 30 })
      const feedTx = async (updatedAt: bigint) => {
        const [roundId, answer] = await wallet.readContract({
          address: devnet.feed,
          abi: MockAggregatorV3.abi,
          functionName: 'latestRoundData',
        })
        const hash = await wallet.writeContract({
          address: devnet.feed,
          abi: MockAggregatorV3.abi,
          functionName: 'setRoundData',
          args: [roundId + 1n, answer, updatedAt, updatedAt, roundId + 1n],
        })
        await wallet.waitForTransactionReceipt({ hash })
      }
      const nowSeconds = () => BigInt(Math.floor(clock.now() / 1000))
      await feedTx(nowSeconds() - 2n * 3600n) // two hours old; the limit is one
      try {
        const refused = await select(id, 'ETH')
        await expectStatus(refused, 503)
        const body = (await refused.json()) as any
        // docs/decisions/0004-one-error-table.md shape; the message tells the customer what
        // happened and what to do.
        expect(body.success).toBe(false)
        expect(body.error.type).toBe('service_unavailable_error')
        expect(body.error.message).toMatch(/ETH price is unavailable.*stale.*try again/)
        expect(body.message).toBe(body.error.message)
        expect(await payState(id)).toMatchObject({ status: 'created', quote: null })
        expect((await timeline(id)).map((e) => e.cause)).toEqual(['transaction.created'])

        const tusd = await selected(id, 'TUSD')
        expect(tusd.units).toBe(30n * TUSD)
      } finally {
        await feedTx(nowSeconds())
      }
      // With a fresh round the same token selects again
      // (docs/decisions/0012-transaction-lifecycle.md: re-selecting replaces the quote).
      const eth = await selected(id, 'ETH')
      expect(eth.units).toBe(10n ** 16n)
    })

    test('select: unknown transaction 404, a token not offered in this mode 400; confirm moves prepared to pending', async () => {
      for (const unknown of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
        const r = await select(unknown, 'TUSD')
        await expectStatus(r, 404)
        expect(((await r.json()) as any).error.type).toBe('not_found_error')
      }
      const { id } = await create()
      const offered = (await payState(id)).tokens
        .map((x: any) => `${x.token_symbol}@${x.blockchain_network}`)
        .sort()
      expect(offered).toEqual(['ETH@devnet', 'TEUR@devnet', 'TUSD@devnet'])
      const live = await select(id, 'LUSD', 'livenet')
      await expectStatus(live, 400)
      expect(((await live.json()) as any).error).toMatchObject({
        type: 'invalid_request_error',
        message: 'LUSD on livenet is not offered for this transaction',
      })
      expect((await payState(id)).status).toBe('created')

      await selected(id, 'TUSD')
      const confirmed = await post(`/pay/${id}/confirm`)
      await expectStatus(confirmed, 200)
      expect(((await confirmed.json()) as any).status).toBe('pending')
      expect((await tx(id)).status).toBe('pending')
      expect((await timeline(id)).at(-1)).toMatchObject({
        from_status: 'prepared',
        to_status: 'pending',
        cause: 'customer.confirmed',
      })
    })

    test('the customer cancels: cancelled, and a second cancel is 409', async () => {
      const { id } = await create()
      await selected(id, 'TUSD')
      const r = await post(`/pay/${id}/cancel`)
      await expectStatus(r, 200)
      expect(((await r.json()) as any).status).toBe('cancelled')
      expect((await timeline(id)).at(-1)).toMatchObject({
        from_status: 'prepared',
        to_status: 'cancelled',
        cause: 'cancel.requested',
        details: { by: 'customer' },
      })
      await expectStatus(await post(`/pay/${id}/cancel`), 409)
      await expectStatus(await post(`/pay/00000000-0000-4000-8000-000000000000/cancel`), 404)
    })

    test('GET /pay/{id}/events streams the state on connect and again after a change', async () => {
      const { id } = await create()
      const abort = new AbortController()
      const res = await t.fetch(`/pay/${id}/events`, { signal: abort.signal })
      try {
        await expectStatus(res, 200)
        expect(res.headers.get('content-type')).toContain('text/event-stream')
        const events = sseReader(res.body!)
        const first = await events.next()
        expect(first.event).toBe('state')
        expect(JSON.parse(first.data)).toMatchObject({ id, status: 'created', quote: null })

        await selected(id, 'TUSD')
        const second = await events.next()
        expect(second.event).toBe('state')
        const s = JSON.parse(second.data)
        expect(s).toMatchObject({
          id,
          status: 'prepared',
          quote: { token_symbol: 'TUSD', token_amount: '25000000' },
        })
        expect(Number(second.id)).toBeGreaterThan(Number(first.id))
        await events.cancel()
      } finally {
        abort.abort()
      }
    })
  })
}

/** Reads Server-Sent Events (`event:`/`data:`/`id:` lines, blank-line separated) from a stream. */
function sseReader(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  return {
    /** The next event with data; fails after `timeoutMs`. */
    async next(timeoutMs = 10_000): Promise<{ event: string; data: string; id: string | null }> {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        let end: number
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const fields: Record<string, string> = {}
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue
            const colon = line.indexOf(':')
            if (colon < 0) continue
            const name = line.slice(0, colon)
            const value = line.slice(colon + 1).replace(/^ /, '')
            fields[name] =
              name === 'data' && fields.data !== undefined ? `${fields.data}\n${value}` : value
          }
          if (fields.data !== undefined)
            return { event: fields.event ?? 'message', data: fields.data, id: fields.id ?? null }
        }
        const left = deadline - Date.now()
        if (left <= 0)
          throw new Error(`no event within ${timeoutMs} ms; buffered: ${JSON.stringify(buffer)}`)
        let timer: ReturnType<typeof setTimeout> | undefined
        const chunk = await Promise.race([
          reader.read(),
          new Promise<never>(
            (_, reject) =>
              (timer = setTimeout(
                () => reject(new Error(`no event within ${timeoutMs} ms`)),
                left,
              )),
          ),
        ]).finally(() => clearTimeout(timer))
        if (chunk.done) throw new Error('the event stream ended')
        buffer += decoder.decode(chunk.value, { stream: true })
      }
    },
    cancel: () => reader.cancel().catch(() => {}),
  }
}
