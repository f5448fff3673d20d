import { describe, expect, test } from 'bun:test'
import {
  checkDeliveryTarget,
  checkEndpointUrl,
  isBlockedAddress,
  systemResolver,
} from '../../src/webhooks/url-guard.ts'

describe('isBlockedAddress', () => {
  test.each([
    '127.0.0.1',
    '127.8.9.10',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.100.100.200',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fd00:ec2::254',
    'fc00::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '::127.0.0.1',
    'ff02::1',
    'not-an-ip',
  ])('%s is blocked', (a) => expect(isBlockedAddress(a)).toBe(true))
  test.each([
    '93.184.216.34',
    '8.8.8.8',
    '172.32.0.1',
    '2606:4700:4700::1111',
    '::ffff:93.184.216.34',
    '64:ff9b::808:808',
  ])('%s is public', (a) => expect(isBlockedAddress(a)).toBe(false))
})

/** WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS on, and off. */
const ALLOWED = { allowPrivateTestEndpoints: true }
const PUBLIC_ONLY = { allowPrivateTestEndpoints: false }

describe('checkEndpointUrl', () => {
  test('test endpoints may be http and local when private test endpoints are allowed', () => {
    expect(checkEndpointUrl('http://127.0.0.1:8080/hook', 'test', ALLOWED).ok).toBe(true)
    expect(checkEndpointUrl('http://localhost/hook', 'test', ALLOWED).ok).toBe(true)
  })
  test.each([
    ['http://127.0.0.1:8080/hook', 'loopback, private, link-local or metadata address (127.0.0.1)'],
    ['http://[::1]/hook', 'loopback, private, link-local or metadata address (::1)'],
    ['http://10.0.0.5/hook', 'loopback, private, link-local or metadata address (10.0.0.5)'],
    ['http://169.254.169.254/latest/meta-data', 'metadata address (169.254.169.254)'],
    ['http://localhost:8080/hook', 'public host name (localhost)'],
    ['http://db.internal/hook', 'public host name (db.internal)'],
    ['http://intranet/hook', 'public host name (intranet)'],
  ])('when they are not allowed, test %s is refused (%s), naming the variable', (url, why) => {
    const r = checkEndpointUrl(url, 'test', PUBLIC_ONLY)
    expect(r.ok).toBe(false)
    if (!r.ok) {
      expect(r.reason).toStartWith('test endpoints must')
      expect(r.reason).toContain(why)
      expect(r.reason).toContain('WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS')
    }
  })
  test('when private test endpoints are not allowed, a test endpoint may still use http to a public host', () => {
    expect(checkEndpointUrl('http://hooks.shop.example.com/x', 'test', PUBLIC_ONLY).ok).toBe(true)
    expect(checkEndpointUrl('http://93.184.216.34/x', 'test', PUBLIC_ONLY).ok).toBe(true)
  })
  test.each([
    ['http://example.com/hook', 'https'],
    ['https://127.0.0.1/hook', 'loopback'],
    ['https://[::1]/hook', 'loopback'],
    ['https://169.254.169.254/latest/meta-data', 'metadata'],
    ['https://10.0.0.5/hook', 'private'],
    ['https://localhost/hook', 'public host name'],
    ['https://metadata.google.internal/x', 'public host name'],
    ['https://intranet/hook', 'public host name'],
    ['https://user:pw@example.com/hook', 'credentials'],
    ['ftp://example.com/hook', 'http or https'],
    ['not a url', 'absolute URL'],
  ])('live %s is refused (%s)', (url, why) => {
    for (const rules of [ALLOWED, PUBLIC_ONLY]) {
      const r = checkEndpointUrl(url, 'live', rules)
      expect(r.ok).toBe(false)
      if (!r.ok) expect(r.reason).toContain(why)
    }
  })
  test('a public https URL is accepted for live', () =>
    expect(checkEndpointUrl('https://shop.example.com/webhooks', 'live', ALLOWED).ok).toBe(true))
})

describe('checkDeliveryTarget', () => {
  const dns = (map: Record<string, string[]>) => async (host: string) => {
    if (!(host in map)) throw new Error('ENOTFOUND')
    return map[host]
  }
  test('a live name that resolves to 127.0.0.1 is refused at delivery time', async () => {
    const r = await checkDeliveryTarget(
      'https://rebind.example.com/hook',
      'live',
      ALLOWED,
      dns({ 'rebind.example.com': ['127.0.0.1'] }),
    )
    expect(r).toEqual({ ok: false, reason: expect.stringContaining('resolves to 127.0.0.1') })
  })
  test('one private address among public ones is enough to refuse', async () => {
    const r = await checkDeliveryTarget(
      'https://mixed.example.com/hook',
      'live',
      ALLOWED,
      dns({ 'mixed.example.com': ['93.184.216.34', '10.0.0.1'] }),
    )
    expect(r.ok).toBe(false)
  })
  test('a public answer passes, as a public address; an unresolvable name is refused', async () => {
    const r = await checkDeliveryTarget(
      'https://ok.example.com/h',
      'live',
      ALLOWED,
      dns({ 'ok.example.com': ['93.184.216.34'] }),
    )
    expect(r).toMatchObject({ ok: true, privateAddress: false })
    expect(
      (await checkDeliveryTarget('https://gone.example.com/h', 'live', ALLOWED, dns({}))).ok,
    ).toBe(false)
  })
  test('with the system resolver, a name whose real answer is 127.0.0.1 is refused', async () => {
    expect(await systemResolver('localhost')).toContain('127.0.0.1')
    // shop.example.com stands for any public-looking name; its answer comes from real DNS
    // (/etc/hosts).
    const r = await checkDeliveryTarget('https://shop.example.com/h', 'live', ALLOWED, () =>
      systemResolver('localhost'),
    )
    expect(r.ok).toBe(false)
  })

  test('private test endpoints allowed: local targets pass, marked private by what they resolve to', async () => {
    const resolve = dns({
      'hooks.lan.example': ['10.1.2.3'],
      'mixed.example.com': ['93.184.216.34', '192.168.1.9'],
      'ok.example.com': ['93.184.216.34'],
    })
    const cases: [string, boolean][] = [
      ['http://127.0.0.1:9/h', true],
      ['http://[::1]:9/h', true],
      ['http://hooks.lan.example/h', true],
      ['http://mixed.example.com/h', true],
      // Names that always mean this machine or the network inside, whatever DNS says.
      ['http://localhost:9/h', true],
      // Not resolvable by this check: the request may still reach something, so nothing of it is
      // kept.
      ['http://unknown.example.com/h', true],
      ['http://ok.example.com/h', false],
      ['http://93.184.216.34/h', false],
    ]
    for (const [url, privateAddress] of cases) {
      expect({ url, target: await checkDeliveryTarget(url, 'test', ALLOWED, resolve) }).toEqual({
        url,
        target: { ok: true, url: new URL(url), privateAddress },
      })
    }
  })
  test('private test endpoints not allowed: a test endpoint is checked like a live one at delivery time, except that http passes', async () => {
    const resolve = dns({ 'hooks.lan.example': ['10.1.2.3'], 'ok.example.com': ['93.184.216.34'] })
    const lan = await checkDeliveryTarget(
      'http://hooks.lan.example/h',
      'test',
      PUBLIC_ONLY,
      resolve,
    )
    expect(lan).toEqual({
      ok: false,
      reason: expect.stringContaining('hooks.lan.example resolves to 10.1.2.3'),
    })
    if (!lan.ok) expect(lan.reason).toContain('WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS')
    expect(
      (await checkDeliveryTarget('http://127.0.0.1:9/h', 'test', PUBLIC_ONLY, resolve)).ok,
    ).toBe(false)
    expect(
      (await checkDeliveryTarget('http://unknown.example.com/h', 'test', PUBLIC_ONLY, resolve)).ok,
    ).toBe(false)
    expect(
      await checkDeliveryTarget('http://ok.example.com/h', 'test', PUBLIC_ONLY, resolve),
    ).toEqual({ ok: true, url: new URL('http://ok.example.com/h'), privateAddress: false })
  })
})
