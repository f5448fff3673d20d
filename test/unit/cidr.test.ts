import { describe, expect, test } from 'bun:test'
import { ipAllowed, parseCidr, parseIp } from '../../src/lib/cidr.ts'

describe('cidr', () => {
  test('parseIp() maps IPv4 into IPv6 so both spellings of one address are equal', () => {
    expect(parseIp('127.0.0.1')).toBe(parseIp('::ffff:127.0.0.1')!)
    expect(parseIp('::1')).toBe(1n)
    expect(parseIp('::')).toBe(0n)
    expect(parseIp('2001:db8::1')!.toString(16)).toBe('20010db8000000000000000000000001')
    expect(parseIp('[::1]')).toBe(1n)
    for (const bad of ['', 'localhost', '1.2.3', '1.2.3.256', '1::2::3', 'g::1'])
      expect(parseIp(bad)).toBeNull()
  })
  test('parseCidr() refuses bad prefixes', () => {
    expect(parseCidr('10.0.0.0/8')).not.toBeNull()
    expect(parseCidr('10.0.0.1')).not.toBeNull()
    for (const bad of ['10.0.0.0/33', '::/129', '10.0.0.0/x', '10.0.0.0/8/1', 'nope'])
      expect(parseCidr(bad)).toBeNull()
  })
  test('ipAllowed() checks v4 and v6 ranges; an empty list allows all; no address is refused by a list', () => {
    expect(ipAllowed([], '8.8.8.8')).toBe(true)
    expect(ipAllowed(['10.0.0.0/8'], '10.255.0.1')).toBe(true)
    expect(ipAllowed(['10.0.0.0/8'], '11.0.0.1')).toBe(false)
    expect(ipAllowed(['192.168.1.0/24'], '::ffff:192.168.1.7')).toBe(true)
    expect(ipAllowed(['2001:db8::/32'], '2001:db8:ffff::1')).toBe(true)
    expect(ipAllowed(['2001:db8::/32'], '2001:db9::1')).toBe(false)
    expect(ipAllowed(['0.0.0.0/0'], '1.2.3.4')).toBe(true)
    expect(ipAllowed(['10.0.0.0/8'], null)).toBe(false)
  })
})
