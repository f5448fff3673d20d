import { describe, expect, test } from 'bun:test'
import { html } from '../../src/lib/html.ts'
import { readCookie, safeNext } from '../../src/modules/dashboard/access/cookies.ts'
import { fillDays } from '../../src/modules/dashboard/overview/page.ts'
import { layout, type Frame } from '../../src/modules/dashboard/layout.ts'

describe('safeNext() keeps a sign-in on this dashboard', () => {
  for (const ok of [
    '/dashboard',
    '/dashboard/proj_1/test/keys',
    '/dashboard/proj_1/live/transactions?status=failed',
    '/dashboard?x=1',
  ]) {
    test(`keeps ${ok}`, () => expect(safeNext(ok)).toBe(ok))
  }
  for (const bad of [
    null,
    '',
    '//evil.example',
    'https://evil.example/dashboard',
    '/dashboardx',
    '/dashboard//evil.example',
    '/dashboard/\\evil',
    '/dashboard/%2F%2Fevil',
    '/api/transactions',
    `/dashboard/${'a'.repeat(2001)}`,
  ]) {
    test(`sends ${JSON.stringify(bad)?.slice(0, 40)} to /dashboard`, () =>
      expect(safeNext(bad)).toBe('/dashboard'))
  }
})

describe('readCookie()', () => {
  const req = (cookie: string) => new Request('https://x/', { headers: { cookie } })
  test('finds a cookie among others, by exact name', () => {
    expect(readCookie(req('a=1; __Host-cp_session=tok; b=2'), '__Host-cp_session')).toBe('tok')
    expect(readCookie(req('x__Host-cp_session=nope'), '__Host-cp_session')).toBeUndefined()
  })
  test('an empty value is no cookie', () =>
    expect(readCookie(req('__Host-cp_session='), '__Host-cp_session')).toBeUndefined())
})

describe('fillDays() makes a continuous daily series for the chart', () => {
  const day = (date: string, n: number) => ({
    date,
    total_transactions: n,
    completed_transactions: n,
    total_volume_usd: n * 10,
    conversion_rate: 100,
  })
  test('every day of the range, both ends included, zeros where nothing happened', () => {
    const out = fillDays('2026-02-27', '2026-03-02', [day('2026-02-28', 2), day('2026-03-02', 1)])
    expect(out.map((d) => [d.date, d.total_transactions])).toEqual([
      ['2026-02-27', 0],
      ['2026-02-28', 2],
      ['2026-03-01', 0],
      ['2026-03-02', 1],
    ])
  })
  test('an inverted range is empty', () =>
    expect(fillDays('2026-03-02', '2026-03-01', [])).toEqual([]))
})

describe('layout()', () => {
  const frame = (mode: 'test' | 'live', name = 'Shop'): Frame => ({
    asset: (n) => `/assets/${n}`,
    email: 'a@example.com',
    project: { id: 'proj_1', name, status: 'active' },
    projects: [{ id: 'proj_1', name, status: 'active' }],
    mode,
    csrf: 'tok',
  })
  test('test mode has its banner and the switch leads to the same section in live mode', () => {
    const page = layout(frame('test'), 'keys', 'API keys', html``)
    expect(page).toContain('Test mode')
    expect(page).toContain('href="/dashboard/proj_1/live/keys"')
  })
  test('live mode has no test banner and switches back to test', () => {
    const page = layout(frame('live'), 'overview', 'Overview', html``)
    expect(page).not.toContain('class="test-banner"')
    expect(page).toContain('href="/dashboard/proj_1/test"')
  })
  test('a project name is text, never markup', () => {
    const page = layout(
      frame('test', '<img src=x onerror=alert(1)>'),
      'overview',
      'Overview',
      html``,
    )
    expect(page).not.toContain('<img src=x')
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;')
  })
})
