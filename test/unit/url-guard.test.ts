import { describe, expect, test } from 'bun:test'
import { checkDeliveryTarget, checkEndpointUrl, isBlockedAddress, systemResolver } from '../../src/webhooks/url-guard.ts'

describe('isBlockedAddress', () => {
  test.each([
    '127.0.0.1', '127.8.9.10', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.100.100.200',
    '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fd00:ec2::254', 'fc00::1', '::ffff:127.0.0.1',
    '::ffff:10.0.0.1', '64:ff9b::a9fe:a9fe', '::127.0.0.1', 'ff02::1', 'not-an-ip',
  ])('%s is blocked', (a) => expect(isBlockedAddress(a)).toBe(true))
  test.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700:4700::1111', '::ffff:93.184.216.34', '64:ff9b::808:808'])(
    '%s is public', (a) => expect(isBlockedAddress(a)).toBe(false))
})

describe('checkEndpointUrl', () => {
  test('test endpoints may be http and local', () => {
    expect(checkEndpointUrl('http://127.0.0.1:8080/hook', 'test').ok).toBe(true)
    expect(checkEndpointUrl('http://localhost/hook', 'test').ok).toBe(true)
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
    const r = checkEndpointUrl(url, 'live')
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.reason).toContain(why)
  })
  test('a public https URL is accepted for live', () => expect(checkEndpointUrl('https://shop.example.com/webhooks', 'live').ok).toBe(true))
})

describe('checkDeliveryTarget', () => {
  const dns = (map: Record<string, string[]>) => async (host: string) => {
    if (!(host in map)) throw new Error('ENOTFOUND')
    return map[host]
  }
  test('a live name that resolves to 127.0.0.1 is refused at delivery time', async () => {
    const r = await checkDeliveryTarget('https://rebind.example.com/hook', 'live', dns({ 'rebind.example.com': ['127.0.0.1'] }))
    expect(r).toEqual({ ok: false, reason: expect.stringContaining('resolves to 127.0.0.1') })
  })
  test('one private address among public ones is enough to refuse', async () => {
    const r = await checkDeliveryTarget('https://mixed.example.com/hook', 'live', dns({ 'mixed.example.com': ['93.184.216.34', '10.0.0.1'] }))
    expect(r.ok).toBe(false)
  })
  test('a public answer passes; an unresolvable name is refused', async () => {
    expect((await checkDeliveryTarget('https://ok.example.com/h', 'live', dns({ 'ok.example.com': ['93.184.216.34'] }))).ok).toBe(true)
    expect((await checkDeliveryTarget('https://gone.example.com/h', 'live', dns({}))).ok).toBe(false)
  })
  test('with the system resolver, a name whose real answer is 127.0.0.1 is refused', async () => {
    expect(await systemResolver('localhost')).toContain('127.0.0.1')
    // shop.example.com stands for any public-looking name; its answer comes from real DNS (/etc/hosts).
    const r = await checkDeliveryTarget('https://shop.example.com/h', 'live', () => systemResolver('localhost'))
    expect(r.ok).toBe(false)
  })
  test('test endpoints skip the address check', async () => {
    expect((await checkDeliveryTarget('http://127.0.0.1:9/h', 'test', dns({}))).ok).toBe(true)
  })
})
