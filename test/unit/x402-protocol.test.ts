import { describe, expect, test } from 'bun:test'
import { decodePaymentResponseHeader } from '@x402/fetch'
import {
  caip2,
  chainIdOf,
  decodeHeader,
  encodeHeader,
  parsePaymentPayload,
} from '../../src/x402/protocol.ts'

const payment = {
  x402Version: 2,
  accepted: {
    scheme: 'exact',
    network: 'eip155:8453',
    asset: `0x${'a'.repeat(40)}`,
    amount: '10000',
    payTo: `0x${'b'.repeat(40)}`,
    maxTimeoutSeconds: 300,
    extra: { name: 'USD Coin', version: '2' },
  },
  payload: {
    authorization: {
      from: `0x${'c'.repeat(40)}`,
      to: `0x${'b'.repeat(40)}`,
      value: '10000',
      validAfter: '0',
      validBefore: '1900000000',
      nonce: `0x${'1'.repeat(64)}`,
    },
    signature: `0x${'2'.repeat(130)}`,
  },
}

describe('x402 headers', () => {
  test('encodeHeader() writes what the reference client reads, UTF-8 included', () => {
    const settled = { success: true, transaction: '0xabc', network: 'eip155:8453', note: 'é€' }
    expect(decodePaymentResponseHeader(encodeHeader(settled)) as unknown).toEqual(settled)
    expect(decodeHeader(encodeHeader(settled))).toEqual(settled)
  })

  test('decodeHeader() gives null for anything that is not base64 of JSON, and for oversized values', () => {
    for (const bad of ['not base64!', btoa('{not json'), btoa('\xff\xfe'), 'A'.repeat(20_000)])
      expect(decodeHeader(bad)).toBeNull()
  })

  test('parsePaymentPayload() takes a v2 exact EVM payment and names the first field at fault otherwise', () => {
    expect(parsePaymentPayload(payment)).toEqual({ ok: true, payload: payment as never })
    expect(parsePaymentPayload(null)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/not base64/),
    })
    expect(parsePaymentPayload({ ...payment, x402Version: 1 })).toMatchObject({
      ok: false,
      reason: 'x402Version 1 is not spoken here (2 is)',
    })
    const short = {
      ...payment,
      payload: { ...payment.payload, signature: '0x1234' },
    }
    expect(parsePaymentPayload(short)).toMatchObject({
      ok: false,
      reason: expect.stringContaining('/payload/signature'),
    })
    const noAmount = { ...payment, accepted: { ...payment.accepted, amount: '1.5' } }
    expect(parsePaymentPayload(noAmount)).toMatchObject({
      ok: false,
      reason: expect.stringContaining('/accepted/amount'),
    })
  })

  test('CAIP-2 ids of EVM chains, both ways', () => {
    expect(caip2(8453)).toBe('eip155:8453')
    expect(chainIdOf('eip155:8453')).toBe(8453)
    for (const bad of ['eip155:', 'eip155:0', 'eip155:01', 'solana:mainnet', 'eip155:8453 '])
      expect(chainIdOf(bad)).toBeNull()
  })
})
