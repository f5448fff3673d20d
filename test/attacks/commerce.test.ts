/**
 * Attacks on the Coinbase Commerce drop-in (docs/decisions/0065-coinbase-commerce-drop-in.md):
 * what another project's key, a key of the other mode, a key lacking a scope, an anonymous visitor
 * of a checkout link and someone holding a captured webhook can do. Charges are transactions, so
 * the money itself moves as every payment does (test/attacks/relayer.test.ts and the payment
 * tests); here, who may see, make, change or replay what.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { manualClock } from '../../src/lib/clock.ts'
import { freshIp } from '../helpers/attack-kit.ts'
import { startCommerceShop, type CommerceShop, type ShopHook } from '../helpers/commerce-shop.ts'
import { waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import type { TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

for (const backend of backends()) {
  describe(`the Commerce API under attack [${backend}]`, () => {
    const clock = manualClock(Date.now())
    let t: TestServer
    /** The merchant's test and live keys, and an attacker's own project's key. */
    let keys: { merchant: string; live: string; readOnly: string; other: string }
    let merchantId: string
    let shop: CommerceShop
    useStack(
      backend,
      {
        devnet: { clock, confirmations: 2, pollIntervalMs: 100, feedRefreshMs: 3_600_000 },
        server: { clock },
        env: { TRUST_PROXY: '1', PAY_RATE_LIMITS: '3/100/1000' },
        project: false,
      },
      async (s) => {
        t = s.t
        const merchant = await t.project({ name: 'Merchant' })
        merchantId = merchant.id
        keys = {
          merchant: merchant.key,
          live: (await t.key(merchant.id, 'live')).key,
          readOnly: (await t.key(merchant.id, 'test', ['transactions:read'])).key,
          other: (await t.project({ name: 'Attacker' })).key,
        }
        shop = await startCommerceShop(t)
        await shop.call('init', { key: keys.merchant, base: `${t.url}/commerce/` })
        const ep = await t.server.services.endpoints.create({
          projectId: merchantId,
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

    /** A Commerce call with `key` from a client address of its own (behind the trusted proxy). */
    async function commerce(key: string, method: string, path: string, body?: unknown) {
      const res = await t.fetch(`/commerce${path}`, {
        method,
        headers: {
          'x-forwarded-proto': 'https',
          'x-forwarded-for': freshIp(),
          'x-cc-api-key': key,
          'x-cc-version': '2018-03-22',
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      })
      return { status: res.status, body: (await res.json().catch(() => null)) as any }
    }
    const charge = {
      name: 'Two coffees',
      description: 'Order #1001',
      pricing_type: 'fixed_price',
      local_price: { amount: '7.00', currency: 'USD' },
      metadata: { order: '1001' },
    }

    test("another project's key, a key of the other mode and a key without the scope see and change nothing of the merchant's", async () => {
      const made = await commerce(keys.merchant, 'POST', '/charges', charge)
      expect(made.status).toBe(201)
      const { id, code } = made.body.data
      const checkout = (
        await commerce(keys.merchant, 'POST', '/checkouts', {
          name: 'Coffee',
          pricing_type: 'fixed_price',
          local_price: { amount: '3.50', currency: 'USD' },
        })
      ).body.data
      const events = (await commerce(keys.merchant, 'GET', '/events')).body.data as any[]
      expect(events.length).toBeGreaterThan(0)
      const attempts: [string, string, string, string, unknown?][] = []
      for (const [who, key] of [
        ['another project', keys.other],
        ['the live key', keys.live],
      ] as const) {
        attempts.push(
          [who, key, 'GET', `/charges/${id}`],
          [who, key, 'GET', `/charges/${code}`],
          [who, key, 'POST', `/charges/${code}/cancel`],
          [who, key, 'POST', `/charges/${code}/resolve`],
          [who, key, 'GET', `/checkouts/${checkout.id}`],
          [who, key, 'PUT', `/checkouts/${checkout.id}`, { name: 'Free coffee' }],
          [who, key, 'DELETE', `/checkouts/${checkout.id}`],
          [who, key, 'GET', `/events/${events[0].id}`],
          [who, key, 'POST', '/charges', { ...charge, checkout_id: checkout.id }],
        )
      }
      for (const [who, key, method, path, body] of attempts) {
        const r = await commerce(key, method, path, body)
        expect({ who, method, path, status: r.status }).toEqual({
          who,
          method,
          path,
          status: 404,
        })
      }
      // Lists of the others hold nothing of the merchant's.
      for (const key of [keys.other, keys.live]) {
        const listed = await commerce(key, 'GET', '/charges')
        expect(listed.body.data.map((c: any) => c.id)).not.toContain(id)
      }
      // A read-only key reads, and makes or changes nothing.
      expect((await commerce(keys.readOnly, 'GET', `/charges/${code}`)).status).toBe(200)
      for (const [method, path, body] of [
        ['POST', '/charges', charge],
        ['POST', `/charges/${code}/cancel`],
        ['POST', '/checkouts', { name: 'x', pricing_type: 'no_price' }],
        ['PUT', `/checkouts/${checkout.id}`, { name: 'Free coffee' }],
        ['DELETE', `/checkouts/${checkout.id}`],
      ] as const) {
        const r = await commerce(keys.readOnly, method, path, body)
        expect({ method, path, status: r.status }).toEqual({ method, path, status: 403 })
      }
      // Untouched by any of it.
      const after = await commerce(keys.merchant, 'GET', `/charges/${code}`)
      expect(after.body.data.timeline.map((s: any) => s.status)).toEqual(['NEW'])
      const still = await commerce(keys.merchant, 'GET', `/checkouts/${checkout.id}`)
      expect(still.body.data).toMatchObject({
        name: 'Coffee',
        local_price: { amount: '3.50', currency: 'USD' },
      })
    })

    test("a visitor of a checkout link makes a charge only at the checkout's own price, for its project, and is counted per client address", async () => {
      const checkout = (
        await commerce(keys.merchant, 'POST', '/checkouts', {
          name: 'Tea',
          pricing_type: 'fixed_price',
          local_price: { amount: '4.20', currency: 'USD' },
        })
      ).body.data
      const visitor = freshIp()
      const open = (query = '') =>
        t.fetch(`/checkout/${checkout.id}${query}`, {
          headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': visitor },
        })
      // The visitor's query string names another price and currency: the checkout's stands.
      const first = await open('?amount=0.01&currency=JPY&local_price=0.01&metadata=evil')
      expect(first.status).toBe(303)
      const chargeId = new URL(first.headers.get('location')!, t.url).pathname.split('/').pop()!
      const made = await commerce(keys.merchant, 'GET', `/charges/${chargeId}`)
      expect(made.body.data).toMatchObject({
        checkout: { id: checkout.id },
        pricing_type: 'fixed_price',
        pricing: { local: { amount: '4.20', currency: 'USD' } },
      })
      expect(made.body.data.metadata ?? {}).not.toHaveProperty('metadata')
      // The attacker's project never sees it.
      expect((await commerce(keys.other, 'GET', `/charges/${chargeId}`)).status).toBe(404)
      // PAY_RATE_LIMITS (3 a minute here) counts the visitor's address like the pay page's.
      const statuses = [(await open()).status, (await open()).status, (await open()).status]
      expect(statuses).toEqual([303, 303, 429])
    })

    test("a captured Commerce-format delivery verifies later too (its format has no timestamp, as Coinbase's had): only its event id tells a replay, so a receiver drops ids it has seen", async () => {
      const made = await commerce(keys.merchant, 'POST', '/charges', charge)
      const { id } = made.body.data
      const hooks = await waitUntil(
        'charge:created delivered',
        async () =>
          ((await shop.call('hooks')) as ShopHook[]).filter(
            (h) => JSON.parse(h.body).event?.data?.id === id,
          ),
        (h) => h.length === 1,
      )
      const captured = hooks[0]!
      const event = JSON.parse(captured.body).event
      expect(event.type).toBe('charge:created')
      // A day later the same bytes and signature still verify with the official SDK: only the
      // event id tells a replay, which is why the guide says to drop ids already seen.
      clock.advance(86_400_000)
      const verified = await shop.call('verify', {
        body: captured.body,
        signature: captured.signature,
      })
      expect(verified.id).toBe(event.id)
      const listed = await commerce(keys.merchant, 'GET', `/events/${event.id}`)
      expect(listed.body.data.id).toBe(event.id)
    })
  })
}
