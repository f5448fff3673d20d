import { describe, expect, test } from 'bun:test'
import {
  currencyToUsdCents,
  ONE_DOLLAR,
  priceToDecimal,
  quoteInCurrency,
  quoteTokenUnits,
  tokenUnitsToCents,
  usdPriceFromDecimal,
} from '../../src/chain/quote.ts'

const ONE_USD = { answer: 1n, decimals: 0 }
/** ETH at $3,000 as a Chainlink ETH/USD feed reports it (8 decimals). */
const ETH_3000 = { answer: 3000_00000000n, decimals: 8 }

describe('quoteTokenUnits()', () => {
  test('converts exactly when the division is exact', () => {
    expect(quoteTokenUnits(1000n, 6, ONE_USD)).toBe(10_000_000n) // $10.00 of a 6-decimal stablecoin
    expect(quoteTokenUnits(300_000n, 18, ETH_3000)).toBe(10n ** 18n) // $3,000 = 1 ETH
    expect(quoteTokenUnits(1n, 6, usdPriceFromDecimal('0.01'))).toBe(1_000_000n)
  })

  test('rounds up so the merchant is never short', () => {
    // 1 cent of ETH at $3,000 = 3,333,333,333,333.33... wei
    expect(quoteTokenUnits(1n, 18, ETH_3000)).toBe(3_333_333_333_334n)
    // $19.99 of a 0-decimal token at $3: 6.663... tokens
    expect(quoteTokenUnits(1999n, 0, { answer: 3n, decimals: 0 })).toBe(7n)
    // $1.00 of a 6-decimal stablecoin priced at $0.9998: 1,000,200.04 units
    expect(quoteTokenUnits(100n, 6, usdPriceFromDecimal('0.9998'))).toBe(1_000_201n)
  })

  test('every quote covers the amount and is the smallest that does', () => {
    const prices = [
      ONE_USD,
      ETH_3000,
      usdPriceFromDecimal('0.9998'),
      { answer: 6_543_210_987n, decimals: 8 },
      { answer: 7n, decimals: 18 },
    ]
    for (const price of prices) {
      for (const decimals of [0, 2, 6, 8, 18]) {
        for (const cents of [1n, 99n, 1999n, 123_456_789n]) {
          const units = quoteTokenUnits(cents, decimals, price)
          // value in cents * 10^(decimals + price.decimals), compared without division
          const paid = units * price.answer * 100n
          const owed = cents * 10n ** BigInt(decimals + price.decimals)
          expect(paid >= owed).toBe(true)
          expect((units - 1n) * price.answer * 100n < owed).toBe(true)
        }
      }
    }
  })

  test('stays exact on large values', () => {
    // $10 billion in an 18-decimal token worth $0.00000001 (1 / 10^8).
    const cents = 1_000_000_000_000n
    const units = quoteTokenUnits(cents, 18, { answer: 1n, decimals: 8 })
    expect(units).toBe(10n ** 36n)
    expect(units.toString()).toBe(`1${'0'.repeat(36)}`)
    // beyond 2^53 at every step, with and without a remainder (expected values computed in Python)
    expect(quoteTokenUnits(123_456_789_012_345_678n, 18, ETH_3000)).toBe(
      411_522_630_041_152_260_000_000_000_000n,
    )
    expect(quoteTokenUnits(123_456_789_012_345_679n, 18, ETH_3000)).toBe(
      411_522_630_041_152_263_333_333_333_334n,
    )
  })

  test('handles 0-decimal tokens and 0-decimal prices', () => {
    expect(quoteTokenUnits(100n, 0, ONE_USD)).toBe(1n)
    expect(quoteTokenUnits(101n, 0, ONE_USD)).toBe(2n)
    expect(quoteTokenUnits(0n, 0, ONE_USD)).toBe(0n)
  })

  test('refuses nonsense input', () => {
    expect(() => quoteTokenUnits(-1n, 6, ONE_USD)).toThrow(RangeError)
    expect(() => quoteTokenUnits(1n, 6, { answer: 0n, decimals: 8 })).toThrow(RangeError)
    expect(() => quoteTokenUnits(1n, 6, { answer: -5n, decimals: 8 })).toThrow(RangeError)
    expect(() => quoteTokenUnits(1n, 6.5, ONE_USD)).toThrow(RangeError)
    expect(() => quoteTokenUnits(1n, -1, ONE_USD)).toThrow(RangeError)
  })
})

describe('usdPriceFromDecimal()', () => {
  test('keeps the decimal exactly', () => {
    expect(usdPriceFromDecimal('1')).toEqual({ answer: 1n, decimals: 0 })
    expect(usdPriceFromDecimal('0.9998')).toEqual({ answer: 9998n, decimals: 4 })
    expect(usdPriceFromDecimal('3000.50')).toEqual({ answer: 300050n, decimals: 2 })
    expect(usdPriceFromDecimal('0.000000000000000001')).toEqual({ answer: 1n, decimals: 18 })
  })

  test('refuses what is not a positive decimal', () => {
    for (const s of ['0', '0.0', '-1', '1e3', '', '.5', '1.', 'abc'])
      expect(() => usdPriceFromDecimal(s)).toThrow(RangeError)
  })
})

describe('tokenUnitsToCents()', () => {
  test('values token units in cents, rounded down so what was received is never overstated', () => {
    expect(tokenUnitsToCents(1_500_000n, 6, ONE_USD)).toBe(150n) // 1.50 of a $1 stablecoin
    expect(tokenUnitsToCents(9_999n, 6, ONE_USD)).toBe(0n) // under a cent
    expect(tokenUnitsToCents(10n ** 18n, 18, ETH_3000)).toBe(300_000n)
    expect(tokenUnitsToCents(3_333_333_333_334n, 18, ETH_3000)).toBe(1n)
    expect(tokenUnitsToCents(3_333_333_333_332n, 18, ETH_3000)).toBe(0n)
  })

  test('undoes quoteTokenUnits to the cent', () => {
    for (const cents of [1n, 99n, 2500n, 123_456n])
      expect(tokenUnitsToCents(quoteTokenUnits(cents, 18, ETH_3000), 18, ETH_3000)).toBe(cents)
  })

  test('refuses nonsense', () => {
    expect(() => tokenUnitsToCents(-1n, 6, ONE_USD)).toThrow(RangeError)
    expect(() => tokenUnitsToCents(1n, 78, ONE_USD)).toThrow(RangeError)
  })
})

describe('quoteInCurrency()', () => {
  const EUR_108 = { answer: 108_000_000n, decimals: 8 } // EUR / USD 1.08
  const JPY = { answer: 670_000n, decimals: 8 } // JPY / USD 0.0067

  test('a stablecoin of the currency itself is at par: one whole token per unit, no rate', () => {
    expect(quoteInCurrency({ minor: 1999n, places: 2 }, 6, 'par', ONE_DOLLAR)).toBe(19_990_000n)
    expect(quoteInCurrency({ minor: 1500n, places: 0 }, 6, 'par', ONE_DOLLAR)).toBe(1_500_000_000n)
    // A token with fewer places than the currency rounds up.
    expect(quoteInCurrency({ minor: 1999n, places: 2 }, 0, 'par', ONE_DOLLAR)).toBe(20n)
  })

  test('any other token goes through USD: amount x rate / price, rounded up', () => {
    // EUR 10.00 at 1.08 = $10.80 = 10.8 TUSD at $1
    expect(quoteInCurrency({ minor: 1000n, places: 2 }, 6, ONE_DOLLAR, EUR_108)).toBe(10_800_000n)
    // JPY 1,500 at 0.0067 = $10.05 = 0.00335 ETH at $3,000
    expect(quoteInCurrency({ minor: 1500n, places: 0 }, 18, ETH_3000, JPY)).toBe(
      3_350_000_000_000_000n,
    )
    // USD is the special case of a rate of one: the same as quoteTokenUnits.
    expect(quoteInCurrency({ minor: 1n, places: 2 }, 18, ETH_3000, ONE_DOLLAR)).toBe(
      quoteTokenUnits(1n, 18, ETH_3000),
    )
  })

  test('every quote covers the amount at the rates and is the smallest that does', () => {
    for (const rate of [EUR_108, JPY, { answer: 127_123_457n, decimals: 8 }])
      for (const price of [ONE_USD, ETH_3000, usdPriceFromDecimal('0.9998')])
        for (const minor of [1n, 99n, 1999n, 123_456_789n])
          for (const tokenDecimals of [0, 6, 18]) {
            const units = quoteInCurrency({ minor, places: 2 }, tokenDecimals, price, rate)
            // value(units) >= amount: units * price / 10^(dec+pd) >= minor/100 * rate / 10^rd
            const lhs = units * price.answer * 100n * 10n ** BigInt(rate.decimals)
            const rhs = minor * rate.answer * 10n ** BigInt(tokenDecimals + price.decimals)
            expect(lhs >= rhs).toBe(true)
            if (units > 0n)
              expect((units - 1n) * price.answer * 100n * 10n ** BigInt(rate.decimals) < rhs).toBe(
                true,
              )
          }
  })
})

describe('currencyToUsdCents()', () => {
  test('the USD value at creation, to the nearest cent, half a cent up', () => {
    const EUR = { answer: 108_345_000n, decimals: 8 } // 1.08345
    expect(currencyToUsdCents({ minor: 1000n, places: 2 }, EUR)).toBe(1083n) // 10.8345
    expect(currencyToUsdCents({ minor: 100n, places: 2 }, EUR)).toBe(108n) // 1.08345
    expect(currencyToUsdCents({ minor: 1n, places: 0 }, { answer: 5n, decimals: 3 })).toBe(1n) // 0.005 up
    expect(currencyToUsdCents({ minor: 1n, places: 0 }, { answer: 4n, decimals: 3 })).toBe(0n)
    expect(currencyToUsdCents({ minor: 4999n, places: 2 }, ONE_DOLLAR)).toBe(4999n)
  })

  test('priceToDecimal() writes the exact answer', () => {
    expect(priceToDecimal({ answer: 108_000_000n, decimals: 8 })).toBe('1.08000000')
    expect(priceToDecimal({ answer: 670_000n, decimals: 8 })).toBe('0.00670000')
    expect(priceToDecimal(ONE_DOLLAR)).toBe('1')
  })
})
