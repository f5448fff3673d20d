/**
 * The Coinbase Commerce drop-in (docs/decisions/0065-coinbase-commerce-drop-in.md) driven by the
 * official SDK, coinbase-commerce-node, unmodified, in its own Node process
 * (test/helpers/commerce-shop.mjs): `Client.init(key, 'https://localhost:…/commerce/')` and
 * nothing else changed. Charges are paid on a real devnet through their `hosted_url`; a shop's
 * webhook receiver verifies every Commerce-format delivery with `Webhook.verifyEventBody`.
 *
 * The server runs on a manual clock so deadlines pass when the test says (the lifecycle's timers
 * run on `services.scheduler`); the chain follower polls on real time, so every wait polls with a
 * deadline.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { formatUnits } from 'viem'
import { createDevnetClient, type Devnet, type DevnetClient } from '../../src/chain/devnet.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { payToken, waitUntil } from '../helpers/chain.ts'
import { startCommerceShop, type CommerceShop, type ShopHook } from '../helpers/commerce-shop.ts'
import { dashboardClient } from '../helpers/dashboard.ts'
import { backends } from '../helpers/databases.ts'
import type { TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

const TUSD = 10n ** 6n

for (const backend of backends()) {
  describe(`Coinbase Commerce drop-in, through the official SDK [${backend}]`, () => {
    const clock = manualClock(Date.now())
    let devnet: Devnet
    let wallet: DevnetClient
    let t: TestServer
    let key: string
    let projectId: string
    let shop: CommerceShop
    let base: string

    useStack(
      backend,
      {
        devnet: { clock, confirmations: 2, pollIntervalMs: 100, feedRefreshMs: 3_600_000 },
        server: { clock },
      },
      async (s) => {
        devnet = s.devnet
        wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
        t = s.t
        key = s.key
        projectId = s.projectId
        base = `${t.url}/commerce/`
        shop = await startCommerceShop(t)
        await shop.call('init', { key, base })
        const ep = await t.server.services.endpoints.create({
          projectId,
          mode: 'test',
          url: shop.hookUrl,
          eventTypes: [],
          format: 'commerce',
        })
        if (!ep.ok) throw new Error(ep.message)
        await shop.call('secret', { secret: ep.value.secret })
      },
    )
    afterAll(() => shop?.stop())

    const status = (c: any) => c.timeline[c.timeline.length - 1]
    const retrieve = (id: string) => shop.call('charge.retrieve', { arg: id })
    /** The customer opens the hosted page and picks a token, as the page does. */
    async function choose(charge: any, token_symbol: string) {
      expect(charge.hosted_url).toBe(`${t.url}/pay/${charge.id}`)
      expect((await t.fetch(new URL(charge.hosted_url).pathname)).status).toBe(200)
      const r = await t.fetch(`/pay/${charge.id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol, blockchain_network: 'devnet' }),
      })
      expect(r.status).toBe(200)
      return ((await r.json()) as any).quote as { token_amount: string; deposit_address: string }
    }
    const hooksOf = async (chargeId: string) =>
      ((await shop.call('hooks')) as ShopHook[]).filter(
        (h) => JSON.parse(h.body).event?.data?.id === chargeId,
      )
    const waitHooks = (chargeId: string, types: string[]) =>
      waitUntil(
        `webhooks ${types.join(', ')}`,
        () => hooksOf(chargeId),
        (hs) => types.every((ty) => hs.some((h) => h.type === ty)),
      )
    function reachDeadline(expiresAt: string) {
      clock.set(Math.max(clock.now(), Date.parse(expiresAt)))
      t.server.services.scheduler.runDue()
    }

    test('a EUR fixed_price charge is paid through its hosted_url and retrieved COMPLETED with its payment; its webhooks verify', async () => {
      const charge = await shop.call('charge.create', {
        arg: {
          name: 'The Sovereign Individual',
          description: 'Mastering the Transition to the Information Age',
          pricing_type: 'fixed_price',
          local_price: { amount: '25.00', currency: 'EUR' },
          metadata: { customer_id: 'c-42' },
          redirect_url: 'https://shop.example/thanks',
          cancel_url: 'https://shop.example/cart',
        },
      })
      expect(charge).toMatchObject({
        resource: 'charge',
        name: 'The Sovereign Individual',
        pricing_type: 'fixed_price',
        local_price: { amount: '25.00', currency: 'EUR' },
        metadata: { customer_id: 'c-42' },
        redirect_url: 'https://shop.example/thanks',
        payments: [],
        addresses: {},
      })
      expect(charge.code).toMatch(/^TX-/)
      expect(status(charge).status).toBe('NEW')
      // Every offered token is priced; TEUR, a euro stablecoin, at par.
      expect(charge.pricing.local).toEqual({ amount: '25.00', currency: 'EUR' })
      expect(charge.pricing.devnet_teur).toEqual({ amount: '25', currency: 'TEUR' })
      expect(Object.keys(charge.pricing)).toContain('devnet_tusd')

      const quote = await choose(charge, 'TEUR')
      expect(quote.token_amount).toBe((25n * TUSD).toString())
      await payToken(wallet, devnet.euroCoin, quote.deposit_address, 25n * TUSD)
      const done = await waitUntil(
        'the charge completed',
        () => retrieve(charge.code),
        (c) => status(c).status === 'COMPLETED',
      )
      expect(done.id).toBe(charge.id)
      expect(done.timeline.map((s: any) => s.status)).toEqual(['NEW', 'PENDING', 'COMPLETED'])
      expect(done.addresses).toEqual({ devnet_teur: quote.deposit_address })
      expect(done.confirmed_at).not.toBeNull()
      expect(done.payments).toHaveLength(1)
      expect(done.payments[0]).toMatchObject({
        network: 'devnet',
        status: 'CONFIRMED',
        value: {
          local: { amount: '25.00', currency: 'EUR' },
          crypto: { amount: '25', currency: 'TEUR' },
        },
      })
      expect(done.payments[0].transaction_id).toMatch(/^0x[0-9a-f]{64}$/)
      expect(done.payments[0].block.confirmations_accumulated).toBeGreaterThanOrEqual(2)

      const hooks = await waitHooks(charge.id, [
        'charge:created',
        'charge:pending',
        'charge:confirmed',
      ])
      expect(hooks.every((h) => h.verified)).toBe(true)
      const confirmed = JSON.parse(hooks.find((h) => h.type === 'charge:confirmed')!.body)
      expect(confirmed).toMatchObject({
        attempt_number: 1,
        event: {
          resource: 'event',
          type: 'charge:confirmed',
          api_version: '2018-03-22',
          data: { id: charge.id, code: charge.code },
        },
      })
      expect(status(confirmed.event.data).status).toBe('COMPLETED')
      expect(typeof confirmed.id).toBe('string')
      expect(typeof confirmed.scheduled_for).toBe('string')
      // The event is the one the events API shows.
      const event = await shop.call('event.retrieve', { arg: confirmed.event.id })
      expect(event).toMatchObject({ id: confirmed.event.id, type: 'charge:confirmed' })
      expect(event.data.id).toBe(charge.id)

      // The merchant's manual re-send reaches the Commerce endpoint too: the same event again, in a
      // new delivery.
      const retried = await t.fetch(`/api/transactions/${charge.id}/retry-webhook`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
      })
      expect(retried.status).toBe(200)
      const again = await waitUntil(
        'the re-sent charge:confirmed',
        () => hooksOf(charge.id),
        (hs) => hs.filter((h) => h.type === 'charge:confirmed').length === 2,
      )
      const [firstSend, secondSend] = again
        .filter((h) => h.type === 'charge:confirmed')
        .map((h) => JSON.parse(h.body))
      expect(secondSend.event.id).toBe(firstSend.event.id)
      expect(secondSend.id).not.toBe(firstSend.id)
      expect(again.every((h) => h.verified)).toBe(true)

      // A tampered body is refused by the SDK's own check.
      const body = hooks[0]!.body.replace('"attempt_number":1', '"attempt_number":2')
      const refused = await shop.refused('verify', { body, signature: hooks[0]!.signature })
      expect(refused.name).toBe('SignatureVerificationError')
      const accepted = await shop.call('verify', {
        body: hooks[0]!.body,
        signature: hooks[0]!.signature,
      })
      expect(accepted.resource).toBe('event')
    })

    test('a no_price charge completes on whatever amount the customer sends', async () => {
      const charge = await shop.call('charge.create', {
        arg: {
          name: 'Tip jar',
          pricing_type: 'no_price',
          local_price: { amount: '1', currency: 'USD' },
        },
      })
      expect(charge).toMatchObject({ pricing_type: 'no_price', local_price: null, pricing: {} })
      const quote = await choose(charge, 'TUSD')
      const sent = 3_141_592n
      await payToken(wallet, devnet.stablecoin, quote.deposit_address, sent)
      const done = await waitUntil(
        'the tip completed',
        () => retrieve(charge.id),
        (c) => status(c).status === 'COMPLETED',
      )
      expect(done.payments[0].value.crypto).toEqual({
        amount: formatUnits(sent, 6),
        currency: 'TUSD',
      })
      expect(done.payments[0].value.local).toEqual({ amount: '3.14', currency: 'USD' })
      expect(done.timeline.some((s: any) => s.status === 'UNRESOLVED')).toBe(false)
      // The merchant's dashboard says what was asked: any amount, not a price of zero.
      const email = 'tips@example.com'
      const password = 'correct horse battery staple'
      const user = await t.server.services.users.create({ email, password, projectId })
      if (!user.ok) throw new Error(user.message)
      const dashboard = dashboardClient(t)
      expect((await dashboard.signIn(email, password)).status).toBe(303)
      for (const page of [`/transactions/${charge.id}`, '/transactions']) {
        const res = await dashboard.get(`/dashboard/${projectId}/test${page}`)
        expect({ page, status: res.status, any: res.text.includes('Any amount (USD)') }).toEqual({
          page,
          status: 200,
          any: true,
        })
        expect(res.text).not.toContain('$0.00')
      }
    })

    test('checkouts: create, update, retrieve, list, a charge made from one (opened and by checkout_id), delete', async () => {
      const made = await shop.call('checkout.create', {
        arg: {
          name: 'Sticker',
          description: 'A round sticker',
          pricing_type: 'fixed_price',
          local_price: { amount: '3.00', currency: 'USD' },
          requested_info: [],
        },
      })
      expect(made).toMatchObject({
        resource: 'checkout',
        name: 'Sticker',
        local_price: { amount: '3.00', currency: 'USD' },
      })
      const updated = await shop.call('checkout.update', {
        arg: made.id,
        data: { name: 'Big sticker', local_price: { amount: '5.00', currency: 'EUR' } },
      })
      expect(updated).toMatchObject({
        id: made.id,
        name: 'Big sticker',
        description: 'A round sticker',
        local_price: { amount: '5.00', currency: 'EUR' },
      })
      expect((await shop.call('checkout.retrieve', { arg: made.id })).name).toBe('Big sticker')
      // A partial update, as the SDK's own example makes it: only the name changes.
      const renamed = await shop.call('checkout.update', {
        arg: made.id,
        data: { name: 'Bigger sticker' },
      })
      expect(renamed).toMatchObject({
        name: 'Bigger sticker',
        description: 'A round sticker',
        pricing_type: 'fixed_price',
        local_price: { amount: '5.00', currency: 'EUR' },
      })
      // The README's other way: a new Checkout with the id and the one field, saved.
      const saved = await shop.call('checkout.save', {
        arg: made.id,
        data: { name: 'Big sticker' },
      })
      expect(saved).toMatchObject({
        name: 'Big sticker',
        local_price: { amount: '5.00', currency: 'EUR' },
      })
      const { list } = await shop.call('checkout.list', { arg: { limit: 10 } })
      expect(list.map((k: any) => k.id)).toContain(made.id)

      // A customer opens the checkout's page: a charge is made, and they land on its pay page.
      const opened = await t.fetch(new URL(made.hosted_url).pathname)
      expect(opened.status).toBe(303)
      const payPath = new URL(opened.headers.get('location')!).pathname
      const fromPage = await retrieve(payPath.split('/').pop()!)
      expect(fromPage).toMatchObject({
        name: 'Big sticker',
        checkout: { id: made.id },
        local_price: { amount: '5.00', currency: 'EUR' },
      })
      const byId = await shop.call('charge.create', {
        arg: {
          checkout_id: made.id,
          name: 'ignored',
          pricing_type: 'no_price',
          metadata: { order: '7' },
        },
      })
      expect(byId).toMatchObject({
        name: 'Big sticker',
        checkout: { id: made.id },
        metadata: { order: '7' },
        pricing_type: 'fixed_price',
      })

      // The instance ways to create and delete, as the SDK's README shows them.
      const inserted = await shop.call('checkout.insert', {
        data: {
          name: 'Mug',
          pricing_type: 'fixed_price',
          local_price: { amount: '12.00', currency: 'USD' },
        },
      })
      expect(inserted).toMatchObject({ resource: 'checkout', name: 'Mug' })
      await shop.call('checkout.instance-delete', { arg: inserted.id })
      expect(await shop.refused('checkout.retrieve', { arg: inserted.id })).toMatchObject({
        status: 404,
      })

      await shop.call('checkout.delete', { arg: made.id })
      expect(await shop.refused('checkout.retrieve', { arg: made.id })).toMatchObject({
        name: 'ResourceNotFoundError',
        status: 404,
      })
      // People open it: what it refuses is a page.
      const gone = await t.fetch(new URL(made.hosted_url).pathname)
      expect(gone.status).toBe(404)
      expect(gone.headers.get('content-type')).toContain('text/html')
      // The charges made from it stay.
      expect((await retrieve(byId.id)).checkout).toEqual({ id: made.id })
    })

    test('an underpaid charge is UNRESOLVED (UNDERPAID) at its deadline; resolve makes it RESOLVED and sends charge:resolved', async () => {
      const charge = await shop.call('charge.create', {
        arg: {
          name: 'Half paid',
          pricing_type: 'fixed_price',
          local_price: { amount: '10.00', currency: 'USD' },
        },
      })
      const quote = await choose(charge, 'TUSD')
      await payToken(wallet, devnet.stablecoin, quote.deposit_address, 4n * TUSD)
      await waitUntil(
        'the part seen',
        () => retrieve(charge.id),
        (c) => status(c).status === 'PENDING',
      )
      // Not unresolved yet: it cannot be resolved.
      const early = await shop.refused('charge.resolve', { arg: charge.id })
      expect(early).toMatchObject({ name: 'InvalidRequestError', status: 400 })

      reachDeadline(charge.expires_at)
      const unresolved = await waitUntil(
        'unresolved',
        () => retrieve(charge.id),
        (c) => status(c).status === 'UNRESOLVED',
      )
      expect(status(unresolved).context).toBe('UNDERPAID')
      expect(unresolved.payments[0].value.local).toEqual({ amount: '4.00', currency: 'USD' })

      const resolved = await shop.call('charge.resolve', { arg: charge.code })
      expect(status(resolved).status).toBe('RESOLVED')
      expect(resolved.timeline.map((s: any) => s.status)).toEqual([
        'NEW',
        'PENDING',
        'UNRESOLVED',
        'RESOLVED',
      ])
      await waitHooks(charge.id, ['charge:failed', 'charge:resolved'])
      expect(await shop.refused('charge.resolve', { arg: charge.id })).toMatchObject({
        name: 'InvalidRequestError',
      })
    })

    test('a payment after expiry is UNRESOLVED (DELAYED) and sends charge:delayed; an expired charge cannot be cancelled, a new one can', async () => {
      const charge = await shop.call('charge.create', {
        arg: {
          name: 'Too late',
          pricing_type: 'fixed_price',
          local_price: { amount: '2.00', currency: 'USD' },
        },
      })
      const quote = await choose(charge, 'TUSD')
      reachDeadline(charge.expires_at)
      await waitUntil(
        'expired',
        () => retrieve(charge.id),
        (c) => status(c).status === 'EXPIRED',
      )
      await payToken(wallet, devnet.stablecoin, quote.deposit_address, 2n * TUSD)
      const late = await waitUntil(
        'the late payment seen',
        () => retrieve(charge.id),
        (c) => status(c).status === 'UNRESOLVED',
      )
      expect(status(late).context).toBe('DELAYED')
      expect(late.payments).toHaveLength(1)
      await waitHooks(charge.id, ['charge:failed', 'charge:delayed'])
      expect(await shop.refused('charge.cancel', { arg: charge.id })).toMatchObject({
        name: 'InvalidRequestError',
      })

      const fresh = await shop.call('charge.create', {
        arg: {
          name: 'Changed my mind',
          pricing_type: 'fixed_price',
          local_price: { amount: '2.00', currency: 'USD' },
        },
      })
      const cancelled = await shop.call('charge.cancel', { arg: fresh.id })
      expect(status(cancelled).status).toBe('CANCELED')
    })

    test('Event.list shows the charge events, newest first, each with its charge', async () => {
      const { list, pagination } = await shop.call('event.list', { arg: { limit: 100 } })
      expect(list.length).toBeGreaterThan(5)
      expect(pagination.limit).toBe(100)
      for (const e of list) {
        expect(e.resource).toBe('event')
        expect(e.api_version).toBe('2018-03-22')
        expect(e.data.resource).toBe('charge')
      }
      const types = new Set(list.map((e: any) => e.type))
      for (const ty of [
        'charge:created',
        'charge:pending',
        'charge:confirmed',
        'charge:failed',
        'charge:delayed',
        'charge:resolved',
      ])
        expect(types).toContain(ty)
      const times = list.map((e: any) => Date.parse(e.created_at))
      expect([...times].sort((a, b) => b - a)).toEqual(times)
      const oldest = await shop.call('event.list', { arg: { limit: 1, order: 'asc' } })
      expect(oldest.list[0].type).toBe('charge:created')
      // Every Commerce-format delivery so far passed the SDK's own check.
      const hooks = (await shop.call('hooks')) as ShopHook[]
      expect(hooks.length).toBeGreaterThan(10)
      expect(hooks.filter((h) => !h.verified)).toEqual([])
    })

    test('Charge.list and Charge.all page through 120 charges by cursor', async () => {
      const other = await t.project({ name: 'Paging shop' })
      await shop.call('init', { key: other.key, base })
      try {
        const made: string[] = []
        for (let i = 0; i < 120; i++) {
          // A millisecond apart, so creation order is the list's order.
          clock.advance(1)
          made.push(
            (
              await shop.call('charge.create', {
                arg: {
                  name: `Item ${i}`,
                  pricing_type: 'fixed_price',
                  local_price: { amount: `${i + 1}.00`, currency: 'USD' },
                },
              })
            ).id,
          )
        }
        const first = await shop.call('charge.list', { arg: { limit: 25 } })
        expect(first.list.map((c: any) => c.id)).toEqual(made.slice(-25).reverse())
        expect(first.pagination).toMatchObject({
          limit: 25,
          yielded: 25,
          total: 120,
          order: 'desc',
          previous_uri: null,
        })
        expect(first.pagination.cursor_range).toEqual([made[119], made[95]])
        expect(first.pagination.next_uri).toContain(`starting_after=${made[95]}`)
        const second = await shop.call('charge.list', {
          arg: { limit: 25, starting_after: made[95] },
        })
        expect(second.list.map((c: any) => c.id)).toEqual(made.slice(70, 95).reverse())
        const back = await shop.call('charge.list', { arg: { limit: 25, ending_before: made[94] } })
        expect(back.list.map((c: any) => c.id)).toEqual(made.slice(95).reverse())
        expect(back.pagination.previous_uri).toBeNull()
        const asc = await shop.call('charge.list', { arg: { limit: 10, order: 'asc' } })
        expect(asc.list.map((c: any) => c.id)).toEqual(made.slice(0, 10))

        const all = await shop.call('charge.all', { arg: { limit: 50 } })
        expect(all.map((c: any) => c.id)).toEqual([...made].reverse())
      } finally {
        await shop.call('init', { key, base })
      }
    })

    test("another project's key, a revoked key and no key get Commerce's errors; bad input names the field", async () => {
      const charge = await shop.call('charge.create', {
        arg: {
          name: 'Mine',
          pricing_type: 'fixed_price',
          local_price: { amount: '1.00', currency: 'USD' },
        },
      })
      const stranger = await t.project({ name: 'Another shop' })
      await shop.call('init', { key: stranger.key, base })
      try {
        expect(await shop.refused('charge.retrieve', { arg: charge.id })).toMatchObject({
          name: 'ResourceNotFoundError',
          status: 404,
        })
        expect(await shop.refused('charge.retrieve', { arg: charge.code })).toMatchObject({
          name: 'ResourceNotFoundError',
        })
        expect((await shop.call('charge.list', {})).list).toEqual([])
        const revoked = await t.key(stranger.id, 'test')
        expect((await t.server.services.keys.revoke(revoked.keyId)).ok).toBe(true)
        await shop.call('init', { key: revoked.key, base })
        expect(await shop.refused('charge.list', {})).toMatchObject({
          name: 'AuthenticationError',
          status: 401,
        })
      } finally {
        await shop.call('init', { key, base })
      }
      // The SDK will not send without a key: a plain request without one.
      const bare = await t.fetch('/commerce/charges')
      expect(bare.status).toBe(401)
      expect(await bare.json()).toEqual({
        error: {
          type: 'authentication_error',
          message: 'Missing API key: send "X-CC-Api-Key: sk_test_..." or sk_live_...',
        },
      })

      expect(
        await shop.refused('charge.create', {
          arg: { name: 'No price', pricing_type: 'fixed_price' },
        }),
      ).toMatchObject({ name: 'ParamRequiredError', status: 400 })
      const notOffered = await shop.refused('charge.create', {
        arg: {
          name: 'Francs',
          pricing_type: 'fixed_price',
          local_price: { amount: '5.00', currency: 'CHF' },
        },
      })
      expect(notOffered).toMatchObject({ name: 'ValidationError', status: 400 })
      expect(notOffered.message).toContain('CHF')
      expect(
        await shop.refused('charge.create', {
          arg: {
            name: 'Too fine',
            pricing_type: 'fixed_price',
            local_price: { amount: '5.001', currency: 'USD' },
          },
        }),
      ).toMatchObject({ name: 'ValidationError' })
      const badUrl = await shop.refused('charge.create', {
        arg: {
          name: 'Elsewhere',
          pricing_type: 'fixed_price',
          local_price: { amount: '5.00', currency: 'USD' },
          redirect_url: 'ftp://shop.example/thanks',
        },
      })
      expect(badUrl).toMatchObject({ name: 'ValidationError', status: 400 })
      expect(badUrl.message).toContain('redirect_url')
      expect(await shop.refused('charge.retrieve', { arg: 'TX-NONE-NONE' })).toMatchObject({
        name: 'ResourceNotFoundError',
      })
    })

    test('/metrics counts the Commerce routes by template, refusals included', async () => {
      const text = await (await t.fetch('/metrics')).text()
      const count = (route: string, method: string, status: number) =>
        Number(
          new RegExp(
            `cryptopay_http_requests_total\\{[^}]*route="${route.replace(/[/:]/g, (c) => `\\${c}`)}"[^}]*method="${method}"[^}]*status="${status}"[^}]*\\} (\\d+)`,
          ).exec(text)?.[1] ?? 0,
        )
      expect(count('/commerce/charges', 'POST', 201)).toBeGreaterThan(120)
      expect(count('/commerce/charges/:id', 'GET', 200)).toBeGreaterThan(0)
      expect(count('/commerce/charges', 'GET', 401)).toBeGreaterThan(0)
      expect(count('/commerce/charges/:id/resolve', 'POST', 200)).toBeGreaterThan(0)
    })
  })
}
