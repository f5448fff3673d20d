import { describe, expect, test } from 'bun:test'
import { centsToDecimal, usdToCents } from '../../src/lib/money.ts'
import {
  amountToMinor,
  decimalAmountNumber,
  decimalToMinor,
  minorToDecimal,
} from '../../src/lib/currency.ts'

describe('money', () => {
  test("amountToMinor() takes positive amounts with at most the currency's places, as written", () => {
    for (const n of [0.01, 0.1, 0.29, 1, 10.5, 19.99, 1_000_000])
      expect(amountToMinor(n, 'USD')).toBe(BigInt(Math.round(n * 100)))
    for (const n of [0, -1, 0.001, 10.001, 0.1 + 0.2, NaN, Infinity, 1e-7])
      expect(amountToMinor(n, 'USD')).toBeNull()
    expect(amountToMinor(1500, 'JPY')).toBe(1500n)
    expect(amountToMinor(10.5, 'JPY')).toBeNull()
    expect(amountToMinor(1.234, 'KWD')).toBe(1234n)
    expect(amountToMinor(1.2345, 'KWD')).toBeNull()
    expect(amountToMinor(1e21, 'EUR')).toBeNull()
  })
  test("minor units read and write with the currency's places, exactly", () => {
    expect(minorToDecimal(1999n, 'EUR')).toBe('19.99')
    expect(minorToDecimal(5n, 'EUR')).toBe('0.05')
    expect(minorToDecimal(1999n, 'JPY')).toBe('1999')
    expect(minorToDecimal(7n, 'KWD')).toBe('0.007')
    expect(decimalToMinor('19.990', 'EUR')).toBe(1999n)
    expect(decimalToMinor('1999.000', 'JPY')).toBe(1999n)
    expect(() => decimalToMinor('10.500', 'JPY')).toThrow(RangeError)
    expect(decimalAmountNumber('123456789.120', 'GBP')).toBe(123456789.12)
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
