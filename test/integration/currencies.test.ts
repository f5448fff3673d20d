/**
 * Transactions priced in EUR, GBP and JPY on a real devnet
 * (docs/decisions/0064-priced-in-the-merchants-currency.md): the devnet's `EUR / USD`, `GBP / USD`
 * and `JPY / USD` feeds price them, a test planting its own rounds; TUSD and ETH are quoted
 * through USD, TEUR (a stablecoin of EUR) at par; the payments complete and a real receiver hears
 * `amount_in_currency` and `currency` at every stage. A stale rate refuses the quote, a currency
 * not offered and a JPY amount with decimals are refused, stats per currency add up to the rows,
 * and a refund is stated in the transaction's currency too.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { type Address, erc20Abi } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { MockAggregatorV3 } from '../../src/chain/artifacts/index.ts'
import {
  ANVIL_DEFAULT_MNEMONIC,
  createDevnetClient,
  type Devnet,
  type DevnetClient,
} from '../../src/chain/devnet.ts'
import { waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.ts'

const STAGES = [
  'transaction.created',
  'transaction.payment_received',
  'transaction.confirming',
  'transaction.completed',
]

/** anvil's account 5: plants feed rounds, never racing the paying wallet's nonces. */
const planterKey = () =>
  `0x${Buffer.from(
    mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 5 }).getHdKey().privateKey!,
  ).toString('hex')}` as const

for (const backend of backends()) {
  describe(`priced in the merchant's currency on a real devnet [${backend}]`, () => {
    let devnet: Devnet
    let wallet: DevnetClient
    let planter: DevnetClient
    let t: TestServer
    let client: ReturnType<typeof api>
    let projectId: string
    let sink: WebhookSink
    const hook = `/currencies-${backend}`
    useStack(
      backend,
      // The devnet's own refresher stays away while a test plants rounds.
      { devnet: { confirmations: 2, pollIntervalMs: 200, feedRefreshMs: 3_600_000 } },
      async (s) => {
        devnet = s.devnet
        t = s.t
        client = s.api
        projectId = s.projectId
        wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
        planter = createDevnetClient(devnet.rpcUrl, planterKey())
        sink = await startWebhookSink()
        const ep = await t.server.services.endpoints.create({
          projectId,
          mode: 'test',
          url: sink.url(hook),
          eventTypes: STAGES,
        })
        if (!ep.ok) throw new Error(ep.message)
        await sink.configure(hook, { secret: ep.value.secret, mode: 'ok' })
      },
    )
    afterAll(() => sink?.stop())

    /** Publishes a round on a fiat feed: `usd` per unit (8 decimals), dated `ageSeconds` ago. */
    async function plant(currency: string, usd: bigint, ageSeconds = 0) {
      const feed = devnet.fxFeeds[currency]!
      const [roundId] = await planter.readContract({
        address: feed,
        abi: MockAggregatorV3.abi,
        functionName: 'latestRoundData',
      })
      const at = BigInt(Math.floor(Date.now() / 1000) - ageSeconds)
      const hash = await planter.writeContract({
        address: feed,
        abi: MockAggregatorV3.abi,
        functionName: 'setRoundData',
        args: [roundId + 1n, usd, at, at, roundId + 1n],
      })
      await planter.waitForTransactionReceipt({ hash })
      return roundId + 1n
    }

    async function create(body: Record<string, unknown>) {
      const r = await client.create(body)
      return { status: r.status, body: (await r.json()) as any }
    }
    async function select(id: string, token: string) {
      const r = await t.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: token, blockchain_network: 'devnet' }),
      })
      return { status: r.status, body: (await r.json()) as any }
    }
    /** The wallet sends exactly the quote, as a customer would. */
    async function pay(quote: {
      token_symbol: string
      token_amount: string
      deposit_address: string
    }) {
      const to = quote.deposit_address as Address
      const amount = BigInt(quote.token_amount)
      const token =
        quote.token_symbol === 'TUSD'
          ? devnet.stablecoin
          : quote.token_symbol === 'TEUR'
            ? devnet.euroCoin
            : null
      const hash = token
        ? await wallet.writeContract({
            address: token,
            abi: erc20Abi,
            functionName: 'transfer',
            args: [to, amount],
          })
        : await wallet.sendTransaction({ to, value: amount })
      await wallet.waitForTransactionReceipt({ hash })
    }
    const completed = (id: string) =>
      waitUntil(
        'completed',
        () => client.transaction(id),
        (x) => x.status === 'completed',
        30_000,
      )

    /** Every stage's webhook of `id` carries its amount and currency. */
    async function heardAtEveryStage(id: string, amount: number, currency: string) {
      const got = await sink.waitFor(hook, (r) =>
        STAGES.every((e) =>
          r.some((x) => {
            const p = JSON.parse(x.body)
            return p.data.transaction_id === id && p.event === e
          }),
        ),
      )
      for (const r of got) {
        const p = JSON.parse(r.body)
        if (p.data.transaction_id !== id) continue
        expect(r.verified).toBe(true)
        expect([p.event, p.data.amount_in_currency, p.data.currency]).toEqual([
          p.event,
          amount,
          currency,
        ])
      }
    }

    test('EUR through the EUR / USD feed: amount_usd at creation, TUSD quoted through USD, paid, heard at every stage', async () => {
      const round = await plant('EUR', 108_000_000n) // 1.08
      // The rate is read by the quote now; creation uses the last answer read (or reads it).
      await t.server.services.chain.rates.read('test', 'EUR')
      const { status, body } = await create({ amount: 10, currency: 'eur', order_id: 'eur-1' })
      expect(status).toBe(200)
      const tx = body.transaction
      expect([tx.currency, tx.amount_in_currency, tx.amount_usd]).toEqual(['EUR', 10, 10.8])
      expect(tx.usd_rate).toEqual({
        usd: '1.08000000',
        source: 'chainlink',
        network: 'devnet',
        feed: devnet.fxFeeds.EUR,
        round_id: round.toString(),
        updated_at: expect.any(String),
      })
      expect(tx.quote_rates).toBeNull()

      const s = await select(tx.id, 'TUSD')
      expect(s.status).toBe(200)
      expect(s.body.quote.token_amount).toBe('10800000') // EUR 10 = $10.80 = 10.8 TUSD
      const after = await client.transaction(tx.id)
      expect(after.quote_rates).toMatchObject({
        method: 'usd',
        token_usd: { usd: '1', source: 'fixed', feed: null, round_id: null },
        currency_usd: { usd: '1.08000000', feed: devnet.fxFeeds.EUR, round_id: round.toString() },
      })
      await pay(s.body.quote)
      const done = await completed(tx.id)
      expect([done.amount_in_currency, done.currency, done.amount_usd]).toEqual([10, 'EUR', 10.8])
      await heardAtEveryStage(tx.id, 10, 'EUR')

      // A refund is stated in the token and, pro rata to the quote, in euros: 5.4 of 10.8 TUSD.
      const made = await client.post(`/api/transactions/${tx.id}/refunds`, {
        amount: '5400000',
        address: devnet.wallet.address,
      })
      expect(made.status).toBe(200)
      const refund = ((await made.json()) as any).refund
      expect([
        refund.amount,
        refund.token_symbol,
        refund.currency,
        refund.amount_in_currency,
      ]).toEqual(['5400000', 'TUSD', 'EUR', 5])
      const listed = (
        (await (await client.get(`/api/transactions/${tx.id}/refunds`)).json()) as any
      ).refunds
      const one = ((await (await client.get(`/api/refunds/${refund.id}`)).json()) as any).refund
      for (const r of [listed[0], one])
        expect([r.currency, r.amount_in_currency]).toEqual(['EUR', 5])
    }, 60_000)

    test('GBP paid in ETH and JPY paid in TUSD, each through its own feed, rounded up', async () => {
      await plant('GBP', 127_000_000n) // 1.27
      await plant('JPY', 670_000n) // 0.0067
      const gbp = (await create({ amount: 30, currency: 'GBP' })).body.transaction
      expect(gbp.amount_usd).toBe(38.1)
      const eth = await select(gbp.id, 'ETH')
      expect(eth.status).toBe(200)
      // GBP 30 x 1.27 = $38.10 at ETH $3,000 = 0.0127 ETH
      expect(eth.body.quote.token_amount).toBe('12700000000000000')
      const jpy = (await create({ amount: 1500, currency: 'JPY' })).body.transaction
      expect([jpy.amount_in_currency, jpy.amount_usd]).toEqual([1500, 10.05])
      const tusd = await select(jpy.id, 'TUSD')
      expect(tusd.body.quote.token_amount).toBe('10050000')
      await pay(eth.body.quote)
      await pay(tusd.body.quote)
      await completed(gbp.id)
      await completed(jpy.id)
      await heardAtEveryStage(gbp.id, 30, 'GBP')
      await heardAtEveryStage(jpy.id, 1500, 'JPY')
    }, 60_000)

    test('TEUR pays a EUR transaction at par, with no rate; on a USD one it is worth the EUR rate', async () => {
      const eur = (await create({ amount: 19.99, currency: 'EUR' })).body.transaction
      const par = await select(eur.id, 'TEUR')
      expect(par.status).toBe(200)
      expect(par.body.quote.token_amount).toBe('19990000')
      expect((await client.transaction(eur.id)).quote_rates).toMatchObject({
        method: 'par',
        token_usd: null,
        currency_usd: null,
      })
      await pay(par.body.quote)
      await completed(eur.id)
      await heardAtEveryStage(eur.id, 19.99, 'EUR')

      await plant('EUR', 125_000_000n) // 1.25
      const usd = (await create({ amount: 10 })).body.transaction
      const teur = await select(usd.id, 'TEUR')
      expect(teur.body.quote.token_amount).toBe('8000000') // $10 / 1.25 = 8 TEUR
      expect((await client.transaction(usd.id)).quote_rates).toMatchObject({
        method: 'usd',
        token_usd: { usd: '1.25000000', feed: devnet.fxFeeds.EUR },
        currency_usd: null,
      })
    }, 60_000)

    test('a stale EUR rate refuses the quote as a stale token price does, and nothing is locked', async () => {
      const tx = (await create({ amount: 5, currency: 'EUR' })).body.transaction
      const retried = { 'idempotency-key': `stale-${backend}` }
      const first = await client.create({ amount: 6, currency: 'EUR' }, retried)
      expect(first.status).toBe(200)
      await plant('EUR', 108_000_000n, 2 * 3600) // two hours old; the feed's limit is one
      try {
        const refused = await select(tx.id, 'TUSD')
        expect(refused.status).toBe(503)
        expect(refused.body.error.message).toContain('EUR rate is unavailable right now (stale)')
        const still = await client.transaction(tx.id)
        expect([still.status, still.token_amount, still.quote_rates]).toEqual([
          'created',
          null,
          null,
        ])
        // At par no rate is needed: TEUR can still be chosen.
        expect((await select(tx.id, 'TEUR')).status).toBe(200)
        // Nor is a EUR transaction created at the rate read before the feed went stale.
        const create503 = await create({ amount: 5, currency: 'EUR' })
        expect(create503.status).toBe(503)
        expect(create503.body.error.message).toContain('EUR rate is unavailable right now (stale)')
        expect((await create({ amount: 5, currency: 'GBP' })).status).toBe(200)
        // A retry of a create that went through still gets its first response.
        const again = await client.create({ amount: 6, currency: 'EUR' }, retried)
        expect([again.status, again.headers.get('idempotent-replayed')]).toEqual([200, 'true'])
        expect(((await again.json()) as any).transaction.id).toBe(
          ((await first.json()) as any).transaction.id,
        )
        // The operator sees it: a readiness warning (the instance stays ready) and the metric.
        const ready = (await (await t.fetch('/readyz')).json()) as any
        expect(ready.status).toBe('ready')
        expect(ready.warnings).toContain('rate:test:EUR')
        expect(ready.checks.find((c: any) => c.name === 'rate:test:EUR').detail).toContain(
          'EUR transactions of test mode are refused with 503',
        )
        expect(ready.warnings).not.toContain('rate:test:GBP')
      } finally {
        await plant('EUR', 108_000_000n)
      }
      await t.server.services.chain.rates.read('test', 'EUR')
      const ready = (await (await t.fetch('/readyz')).json()) as any
      expect(ready.warnings).not.toContain('rate:test:EUR')
      const metrics = await (await t.fetch('/metrics')).text()
      expect(metrics).toMatch(/cryptopay_fx_rate_age_seconds\{mode="test",currency="EUR"\} \d/)
    }, 60_000)

    test('refused: a currency not offered (naming those that are), JPY with decimals; "eur" and "EUR" are one idempotent request', async () => {
      const chf = await create({ amount: 10, currency: 'CHF' })
      expect(chf.status).toBe(400)
      expect(chf.body.error.message).toContain('USD, EUR, GBP, JPY')
      expect(chf.body.error.details).toEqual([
        { path: 'currency', message: 'must be one of USD, EUR, GBP, JPY' },
      ])
      const jpy = await create({ amount: 10.5, currency: 'JPY' })
      expect(jpy.status).toBe(400)
      expect(jpy.body.error.details[0].path).toBe('amount')
      expect((await create({ amount: 10.55, currency: 'EUR' })).status).toBe(200)
      expect((await create({ amount: 10.555, currency: 'EUR' })).status).toBe(400)
      expect((await create({ amount: 1, currency: 'EURO' })).status).toBe(400)
      // The devnet is a test network: live transactions are offered USD only.
      const live = await t.key(projectId, 'live')
      const liveEur = await api(t, live.key).create({ amount: 10, currency: 'EUR' })
      expect(liveEur.status).toBe(400)
      expect(((await liveEur.json()) as any).error.details).toEqual([
        { path: 'currency', message: 'must be one of USD' },
      ])

      const key = { 'idempotency-key': `cur-${backend}` }
      const first = await client.create({ amount: 7, currency: 'eur' }, key)
      const again = await client.create({ amount: 7, currency: 'EUR' }, key)
      const a = (await first.json()) as any
      const b = (await again.json()) as any
      expect(again.headers.get('idempotent-replayed')).toBe('true')
      expect(b.transaction.id).toBe(a.transaction.id)
      expect((await client.create({ amount: 7, currency: 'GBP' }, key)).status).toBe(409)
    })

    test('the list filters by currency, and stats per currency equal a sum over the rows', async () => {
      const list = async (q: string) =>
        (
          (await (
            await client.get(`/api/transactions/project/${projectId}?limit=100${q}`)
          ).json()) as any
        ).transactions as any[]
      const all = await list('')
      const eur = await list('&currency=eur')
      expect(eur.length).toBeGreaterThan(0)
      expect(eur.every((x) => x.currency === 'EUR')).toBe(true)
      expect(eur.length).toBe(all.filter((x) => x.currency === 'EUR').length)

      const stats = ((await (await client.get('/api/transactions/stats')).json()) as any).stats
      const sums: Record<string, bigint> = {}
      let usdCents = 0n
      for (const x of all.filter((x) => x.status === 'completed')) {
        // Exact: amounts have at most 2 places here.
        sums[x.currency] = (sums[x.currency] ?? 0n) + BigInt(Math.round(x.amount_in_currency * 100))
        usdCents += BigInt(Math.round(x.amount_usd * 100))
      }
      expect(Object.keys(stats.volume_by_currency).sort()).toEqual(
        ['EUR', 'GBP', 'JPY'].filter((c) => c in sums),
      )
      for (const [c, v] of Object.entries(sums))
        expect(stats.volume_by_currency[c]).toBe(Number(v) / 100)
      expect(stats.total_volume_usd).toBe(Number(usdCents) / 100)
    })
  })
}
