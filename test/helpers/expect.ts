import { expect } from 'bun:test'

/** Asserts a response's status; on a mismatch the failure shows the body, which says why. */
export async function expectStatus(res: Response, status: number): Promise<void> {
  const body = res.status === status ? '' : await res.clone().text()
  expect({ status: res.status, body }).toEqual({ status, body: '' })
}

/**
 * On the real clock: `after` was the only request counted against its limit since `before`.
 * Its Remaining is one less than before's, or, when the window ended in between (their reset
 * times differ), the window's limit less one.
 */
export function expectCountedOnceSince(
  before: Response,
  after: Response,
  window: 'minute' | 'hour' | 'day' = 'minute',
): void {
  const header = (res: Response, name: string) => res.headers.get(`x-ratelimit-${name}-${window}`)
  const sameWindow = header(after, 'reset') === header(before, 'reset')
  const expected = sameWindow
    ? Number(header(before, 'remaining')) - 1
    : Number(header(after, 'limit')) - 1
  expect(Number(header(after, 'remaining'))).toBe(expected)
}

/**
 * On the real clock, the one allowed wait: the fixed minute window
 * (docs/decisions/0023-rate-limits-exact.md) must not roll over between requests a test counts
 * together, so when the minute is about to end, this waits for the next one (polling the clock) and
 * returns once the minute has at least `marginMs` left.
 */
export async function awayFromMinuteEnd(marginMs = 10_000): Promise<void> {
  while (Date.now() % 60_000 > 60_000 - marginMs) await Bun.sleep(100)
}
