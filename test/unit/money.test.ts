import { describe, expect, test } from 'bun:test'
import { centsToDecimal, isUsdAmount, usdToCents } from '../../src/lib/money.ts'

describe('money', () => {
  test('isUsdAmount() accepts positive amounts with up to two decimals as written', () => {
    for (const n of [0.01, 0.1, 0.29, 1, 10.5, 19.99, 1_000_000]) expect(isUsdAmount(n)).toBe(true)
    for (const n of [0, -1, 0.001, 10.001, 0.1 + 0.2, NaN, Infinity, 1e-7])
      expect(isUsdAmount(n)).toBe(false)
  })
  test('usdToCents() is exact where float arithmetic is not', () => {
    expect(usdToCents(0.29)).toBe(29n)
    expect(usdToCents(19.99)).toBe(1999n)
    expect(usdToCents(1_000_000)).toBe(100_000_000n)
    expect(usdToCents('123.4')).toBe(12340n)
    expect(usdToCents('0.05')).toBe(5n)
  })
  test('centsToDecimal() writes two places', () => {
    expect(centsToDecimal(5n)).toBe('0.05')
    expect(centsToDecimal(123456n)).toBe('1234.56')
    expect(centsToDecimal(-5n)).toBe('-0.05')
  })
})
