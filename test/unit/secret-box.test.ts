import { describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { createSecretBox, parseSecretKey } from '../../src/lib/secret-box.ts'

describe('secret box', () => {
  const box = createSecretBox(randomBytes(32))
  test('opens what it sealed, for the same record only', () => {
    const sealed = box.seal('whsec_abc', 'ep_1')
    expect(sealed).not.toContain('whsec_abc')
    expect(box.open(sealed, 'ep_1')).toBe('whsec_abc')
    expect(() => box.open(sealed, 'ep_2')).toThrow()
  })
  test('another key cannot open it, and fingerprints differ', () => {
    const other = createSecretBox(randomBytes(32))
    expect(() => other.open(box.seal('x', 'a'), 'a')).toThrow()
    expect(other.fingerprint).not.toBe(box.fingerprint)
  })
  test('two seals of one value differ (random IV)', () =>
    expect(box.seal('x', 'a')).not.toBe(box.seal('x', 'a')))
  test('a tampered value does not open', () => {
    const [v, iv, tag, body] = box.seal('secret', 'a').split(':')
    const flipped = Buffer.from(body, 'base64')
    flipped[0] ^= 1
    expect(() => box.open([v, iv, tag, flipped.toString('base64')].join(':'), 'a')).toThrow()
  })
  test('parseSecretKey takes 64 hex characters or 32 bytes of base64', () => {
    expect(parseSecretKey('ab'.repeat(32))?.length).toBe(32)
    expect(parseSecretKey(randomBytes(32).toString('base64'))?.length).toBe(32)
    expect(parseSecretKey(randomBytes(32).toString('base64url'))?.length).toBe(32)
    expect(parseSecretKey('short')).toBeNull()
    expect(parseSecretKey('ab'.repeat(31))).toBeNull()
  })
})
