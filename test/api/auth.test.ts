import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { backends } from '../helpers/databases.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'

/**
 * The full docs/decisions/0022-api-keys-and-scopes.md matrix: every way a key can be wrong, against
 * every route.
 */
for (const backend of backends()) {
  describe(`authentication and permissions [${backend}]`, () => {
    let t: TestServer
    let own: { id: string; key: string; keyId: string }
    let other: { id: string; key: string; keyId: string }
    let liveKey: string
    let txId: string
    let otherTxId: string
    let liveTxId: string

    beforeAll(async () => {
      t = await startTestServer(backend)
      own = await t.project({ name: 'Own' })
      other = await t.project({ name: 'Other' })
      liveKey = (await t.key(own.id, 'live')).key
      txId = (await (await api(t, own.key).create({ amount: 1 })).json()).transaction.id
      otherTxId = (await (await api(t, other.key).create({ amount: 1 })).json()).transaction.id
      liveTxId = (await (await api(t, liveKey).create({ amount: 1 })).json()).transaction.id
    })
    afterAll(() => t?.stop())

    const routes = () => [
      {
        name: 'create',
        call: (h: Record<string, string>) =>
          t.fetch('/api/transactions/create', {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...h },
            body: '{"amount":1}',
          }),
      },
      {
        name: 'get',
        call: (h: Record<string, string>) => t.fetch(`/api/transactions/${txId}`, { headers: h }),
      },
      {
        name: 'list',
        call: (h: Record<string, string>) =>
          t.fetch(`/api/transactions/project/${own.id}`, { headers: h }),
      },
      {
        name: 'stats',
        call: (h: Record<string, string>) => t.fetch('/api/transactions/stats', { headers: h }),
      },
    ]

    const expectError = async (res: Response, status: number, type: string) => {
      expect(res.status).toBe(status)
      const body = await res.json()
      expect(body).toMatchObject({ success: false, error: { type } })
      expect(typeof body.message).toBe('string')
      expect(body.error.message).toBe(body.message)
      expect(res.headers.get('x-request-id')).toMatch(/^req_/)
      expect(res.headers.get('x-ratelimit-limit-minute')).not.toBeNull()
    }

    const bad: [string, () => Record<string, string>][] = [
      ['no Authorization header', () => ({})],
      ['a Basic scheme', () => ({ authorization: `Basic ${btoa('user:pass')}` })],
      ['Bearer with nothing after it', () => ({ authorization: 'Bearer ' })],
      ['a key without the sk_ prefix', () => ({ authorization: `Bearer ${own.key.slice(8)}` })],
      ['a pk_ key', () => ({ authorization: `Bearer pk_test_${'a'.repeat(40)}` })],
      ['an unknown well-formed key', () => ({ authorization: `Bearer sk_test_${'A'.repeat(40)}` })],
      ['a truncated key', () => ({ authorization: `Bearer ${own.key.slice(0, -1)}` })],
      [
        'a key with one character changed',
        () => ({
          authorization: `Bearer ${own.key.slice(0, -1)}${own.key.endsWith('a') ? 'b' : 'a'}`,
        }),
      ],
    ]
    for (const [name, headers] of bad) {
      test(`401 authentication_error for ${name}, on every route`, async () => {
        for (const r of routes())
          await expectError(await r.call(headers()), 401, 'authentication_error')
      })
    }

    test('a revoked key is refused with 401 on the very next request', async () => {
      const k = await t.key(own.id, 'test')
      expect((await api(t, k.key).get(`/api/transactions/${txId}`)).status).toBe(200)
      const revoked = await t.server.services.keys.revoke(k.keyId)
      expect(revoked.ok).toBe(true)
      for (const r of routes())
        await expectError(
          await r.call({ authorization: `Bearer ${k.key}` }),
          401,
          'authentication_error',
        )
    })

    test('a key without the scope a route needs is refused with 403 permission_error', async () => {
      const readOnly = await t.key(own.id, 'test', ['transactions:read'])
      const writeOnly = await t.key(own.id, 'test', ['transactions:write'])
      const statsOnly = await t.key(own.id, 'test', ['stats:read'])
      const [create, get, list, stats] = routes()
      await expectError(
        await create.call({ authorization: `Bearer ${readOnly.key}` }),
        403,
        'permission_error',
      )
      await expectError(
        await stats.call({ authorization: `Bearer ${readOnly.key}` }),
        403,
        'permission_error',
      )
      await expectError(
        await get.call({ authorization: `Bearer ${writeOnly.key}` }),
        403,
        'permission_error',
      )
      await expectError(
        await list.call({ authorization: `Bearer ${writeOnly.key}` }),
        403,
        'permission_error',
      )
      await expectError(
        await get.call({ authorization: `Bearer ${statsOnly.key}` }),
        403,
        'permission_error',
      )
      expect((await get.call({ authorization: `Bearer ${readOnly.key}` })).status).toBe(200)
      expect((await create.call({ authorization: `Bearer ${writeOnly.key}` })).status).toBe(200)
      expect((await stats.call({ authorization: `Bearer ${statsOnly.key}` })).status).toBe(200)
    })

    test('the scope check comes before body validation: no scope, bad body -> 403', async () => {
      const readOnly = await t.key(own.id, 'test', ['transactions:read'])
      const res = await t.fetch('/api/transactions/create', {
        method: 'POST',
        headers: { authorization: `Bearer ${readOnly.key}`, 'content-type': 'application/json' },
        body: '{not json',
      })
      await expectError(res, 403, 'permission_error')
    })

    test('authentication comes before validation: no key, bad body -> 401', async () => {
      const res = await t.fetch('/api/transactions/create', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"amount":-1}',
      })
      await expectError(res, 401, 'authentication_error')
    })

    test('an inactive project is refused with 403 on every route, and served again once active', async () => {
      const p = await t.project({ name: 'Sleepy' })
      await t.server.services.projects.setStatus(p.id, 'inactive')
      for (const r of [
        () => api(t, p.key).create({ amount: 1 }),
        () => api(t, p.key).get('/api/transactions/stats'),
        () => api(t, p.key).get(`/api/transactions/project/${p.id}`),
      ])
        await expectError(await r(), 403, 'permission_error')
      await t.server.services.projects.setStatus(p.id, 'active')
      expect((await api(t, p.key).create({ amount: 1 })).status).toBe(200)
    })

    test('an IP allow-list without the caller is refused with 403; one with it is served', async () => {
      const p = await t.project({ name: 'Fenced' })
      await t.server.services.projects.setIpAllowlist(p.id, ['203.0.113.0/24'])
      await expectError(await api(t, p.key).get('/api/transactions/stats'), 403, 'permission_error')
      await t.server.services.projects.setIpAllowlist(p.id, [
        '203.0.113.0/24',
        '127.0.0.0/8',
        '::1/128',
      ])
      expect((await api(t, p.key).get('/api/transactions/stats')).status).toBe(200)
      await t.server.services.projects.setIpAllowlist(p.id, [])
      expect((await api(t, p.key).get('/api/transactions/stats')).status).toBe(200)
    })

    test("requests refused by the allow-list count against the caller's IP, never the project's quota", async () => {
      const p = await t.project({ name: 'Quota', limits: { minute: 7, hour: 100, day: 1000 } })
      await t.server.services.projects.setIpAllowlist(p.id, ['203.0.113.0/24'])
      for (let i = 0; i < 3; i++) {
        const res = await api(t, p.key).get('/api/transactions/stats')
        expect(res.status).toBe(403)
        expect(res.headers.get('x-ratelimit-limit-minute')).toBe('60')
      }
      await t.server.services.projects.setIpAllowlist(p.id, [])
      const served = await api(t, p.key).get('/api/transactions/stats')
      expect(served.status).toBe(200)
      expect(served.headers.get('x-ratelimit-limit-minute')).toBe('7')
      expect(served.headers.get('x-ratelimit-remaining-minute')).toBe('6')
    })

    test("another project's transaction is 404, exactly like one that does not exist", async () => {
      const res = await api(t, own.key).get(`/api/transactions/${otherTxId}`)
      await expectError(res, 404, 'not_found_error')
      const none = await api(t, own.key).get(
        '/api/transactions/00000000-0000-4000-8000-000000000000',
      )
      expect(none.status).toBe(404)
      expect((await none.json()).error.message.replace(/[0-9a-f-]{36}/, 'ID')).toBe(
        (
          await (await api(t, own.key).get(`/api/transactions/${otherTxId}`)).json()
        ).error.message.replace(/[0-9a-f-]{36}/, 'ID'),
      )
    })

    test("another project's list is 403", async () => {
      await expectError(
        await api(t, own.key).get(`/api/transactions/project/${other.id}`),
        403,
        'permission_error',
      )
    })

    test('a test key does not see live transactions and a live key does not see test ones (docs/decisions/0009-keys-see-their-own-mode.md)', async () => {
      await expectError(
        await api(t, own.key).get(`/api/transactions/${liveTxId}`),
        404,
        'not_found_error',
      )
      await expectError(
        await api(t, liveKey).get(`/api/transactions/${txId}`),
        404,
        'not_found_error',
      )
      const testList = await (
        await api(t, own.key).get(`/api/transactions/project/${own.id}?limit=100`)
      ).json()
      const liveList = await (
        await api(t, liveKey).get(`/api/transactions/project/${own.id}?limit=100`)
      ).json()
      expect(testList.transactions.every((x: { testing_mode: boolean }) => x.testing_mode)).toBe(
        true,
      )
      expect(liveList.transactions.every((x: { testing_mode: boolean }) => !x.testing_mode)).toBe(
        true,
      )
      expect(liveList.transactions.map((x: { id: string }) => x.id)).toContain(liveTxId)
    })

    test('error responses never leak internals', async () => {
      const res = await api(t, own.key).get('/api/transactions/stats?start_date=%00%ff')
      const text = await res.text()
      expect(res.status).toBe(400)
      expect(text).not.toMatch(/stack|at .*\.ts|drizzle|postgres|pglite|SELECT/i)
    })

    test('the key never appears in any response', async () => {
      const res = await api(t, own.key).create({ amount: 2, order_id: 'leak-check' })
      let headers = ''
      res.headers.forEach((v, k) => (headers += `${k}: ${v}\n`))
      expect((await res.text()) + headers).not.toContain(own.key)
    })
  })
}
