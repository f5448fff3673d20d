/**
 * `start_date` and `end_date` (docs/decisions/0010-stats.md) and the rollups' day arithmetic
 * (docs/decisions/0066-stats-from-settled-days.md), as properties over seeded random bounds that
 * crowd the calendar's edges (years 1 and 9999, leap days, a millisecond either side of midnight,
 * offsets of a day): parsing never throws and answers a range or a refusal naming the field; the
 * rolled-up days of any range are real calendar days (PostgreSQL takes them), inside the range,
 * never past the last day rolled up.
 */
import { describe, expect, test } from 'bun:test'
import { createdRange } from '../../src/modules/stats/service.ts'
import { rolledDays } from '../../src/modules/transactions/rollups.ts'

const DAY = 86_400_000
const ISO_DAY = /^\d{4}-\d{2}-\d{2}$/

/** Mulberry32: the same bounds on every run. */
function rng(seed: number) {
  let a = seed
  return () => {
    a |= 0
    a = (a + 0x6d2b79f5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296
  }
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0')
const random = rng(48)
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!

/** A bound as a caller might write one: a date or a timestamp, near an edge or anywhere. */
function bound(): string {
  const year = pick([1, 2, 1970, 2000, 2024, 2030, 9998, 9999, Math.floor(random() * 9999) + 1])
  const month = pick([1, 2, 12, Math.floor(random() * 12) + 1, 13, 0])
  const day = pick([1, 28, 29, 30, 31, Math.floor(random() * 31) + 1, 32, 0])
  const date = `${pad(year, 4)}-${pad(month)}-${pad(day)}`
  if (random() < 0.35) return date
  const time = pick([
    '00:00:00.000',
    '00:00:00.001',
    '23:59:59.999',
    '23:59:59',
    '12:00',
    `${pad(Math.floor(random() * 24))}:${pad(Math.floor(random() * 60))}:${pad(Math.floor(random() * 60))}.${pad(Math.floor(random() * 1000), 3)}`,
  ])
  const zone = pick(['Z', '+00:00', '-23:59', '+23:59', '+01:00', '-05:30'])
  return `${date}T${time}${zone}`
}

describe('date bounds at the edges of the calendar', () => {
  test('createdRange() answers a range or a refusal naming the field, for 20,000 random bounds', () => {
    for (let i = 0; i < 20_000; i++) {
      const q = {
        ...(random() < 0.8 ? { start_date: bound() } : {}),
        ...(random() < 0.8 ? { end_date: bound() } : {}),
      }
      const r = createdRange(q)
      if (r.ok) {
        for (const d of [r.value.start, r.value.end])
          if (d) {
            expect(Number.isNaN(d.getTime())).toBe(false)
            // A bound PostgreSQL takes: a four-digit year, as an ISO string writes it.
            expect(d.toISOString()).toMatch(/^\d{4}-/)
          }
      } else {
        expect(r.code).toBe('invalid_request')
        expect(r.details!.every((p) => p.path === 'start_date' || p.path === 'end_date')).toBe(true)
      }
    }
  })

  test('rolledDays() names real days inside the range and never past the last one rolled up, for 20,000 random ranges', () => {
    for (let i = 0; i < 20_000; i++) {
      const q = {
        ...(random() < 0.8 ? { start_date: bound() } : {}),
        ...(random() < 0.8 ? { end_date: bound() } : {}),
      }
      const r = createdRange(q)
      if (!r.ok) continue
      const through = pick(['0001-01-01', '1999-12-31', '2030-01-10', '9999-12-30', '9999-12-31'])
      const days = rolledDays(r.value, through)
      if (days === null) continue
      const { first, last } = days
      const context = { q, through, days }
      expect({ ...context, ok: ISO_DAY.test(last) && last <= through }).toEqual({
        ...context,
        ok: true,
      })
      const startOf = (d: string) => Date.parse(`${d}T00:00:00Z`)
      if (first !== null) {
        expect({ ...context, ok: ISO_DAY.test(first) && first <= last }).toEqual({
          ...context,
          ok: true,
        })
        expect(startOf(first)).toBeGreaterThanOrEqual(r.value.start!.getTime())
      }
      if (r.value.end) {
        const endExclusive = r.value.end.getTime() + (r.value.endInclusive ? 1 : 0)
        expect(startOf(last) + DAY).toBeLessThanOrEqual(endExclusive)
      }
    }
  })

  test('the bound that answered 500: a start at the last millisecond of 9999 has no whole day, and stats read it directly', () => {
    const r = createdRange({ start_date: '9999-12-31T23:59:59.999Z' })
    expect(r.ok).toBe(true)
    if (r.ok) expect(rolledDays(r.value, '2030-01-10')).toBeNull()
  })
})
