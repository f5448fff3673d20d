import { describe, expect, test } from 'bun:test'
import { parsePaymentUri, paymentUri } from '../../src/chain/payment-uri.ts'

const TO = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'
const USDC = '0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238'

describe('paymentUri()', () => {
  test('writes a native payment as ethereum:<to>@<chainId>?value=<wei>', () => {
    expect(
      paymentUri({
        chainId: 11155111,
        to: TO,
        amount: 3_333_333_333_334n,
        token: { kind: 'native' },
      }),
    ).toBe(`ethereum:${TO}@11155111?value=3333333333334`)
  })

  test('writes an ERC-20 payment as a transfer call on the token', () => {
    expect(
      paymentUri({
        chainId: 1,
        to: TO,
        amount: 10_000_000n,
        token: { kind: 'erc20', address: USDC },
      }),
    ).toBe(`ethereum:${USDC}@1/transfer?address=${TO}&uint256=10000000`)
  })

  test('checksums lower-case addresses and writes large amounts as plain integers', () => {
    const uri = paymentUri({
      chainId: 31337,
      to: TO.toLowerCase() as `0x${string}`,
      amount: 10n ** 30n,
      token: { kind: 'erc20', address: USDC.toLowerCase() as `0x${string}` },
    })
    expect(uri).toBe(`ethereum:${USDC}@31337/transfer?address=${TO}&uint256=1${'0'.repeat(30)}`)
  })

  test('refuses a bad chain id, a negative amount and a malformed address', () => {
    const token = { kind: 'native' } as const
    expect(() => paymentUri({ chainId: 0, to: TO, amount: 1n, token })).toThrow(RangeError)
    expect(() => paymentUri({ chainId: 1.5, to: TO, amount: 1n, token })).toThrow(RangeError)
    expect(() => paymentUri({ chainId: 1, to: TO, amount: -1n, token })).toThrow(RangeError)
    expect(() => paymentUri({ chainId: 1, to: '0x1234', amount: 1n, token })).toThrow()
  })
})

describe('parsePaymentUri()', () => {
  test('reads back both shapes', () => {
    expect(
      parsePaymentUri(paymentUri({ chainId: 5, to: TO, amount: 42n, token: { kind: 'native' } })),
    ).toEqual({
      kind: 'native',
      chainId: 5,
      to: TO,
      amount: 42n,
    })
    expect(
      parsePaymentUri(
        paymentUri({ chainId: 5, to: TO, amount: 42n, token: { kind: 'erc20', address: USDC } }),
      ),
    ).toEqual({
      kind: 'erc20',
      chainId: 5,
      token: USDC,
      to: TO,
      amount: 42n,
    })
  })

  test('returns null for anything else', () => {
    for (const uri of [
      '',
      'bitcoin:abc',
      `ethereum:${TO}`,
      `ethereum:${TO}@1?value=1e18`,
      `ethereum:${USDC}@1/approve?address=${TO}&uint256=1`,
    ])
      expect(parsePaymentUri(uri)).toBeNull()
  })
})
