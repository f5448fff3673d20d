import { describe, expect, test } from 'bun:test'
import {
  decodeCursor,
  describeHalt,
  encodeCursor,
  resumeCursor,
  type Cursor,
} from '../../src/chain/follower/cursor.ts'

const H = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as const
const halted: Cursor = {
  height: 500n,
  recent: [
    { number: 499n, hash: H(499) },
    { number: 500n, hash: H(500) },
  ],
  genesis: H(0),
  origin: 10n,
  halted: {
    at: Date.UTC(2026, 10, 27, 12),
    windowFrom: 499n,
    windowTo: 500n,
    head: 503n,
    resumeFrom: 497n,
  },
}

describe('follower cursor', () => {
  test('encodeCursor() / decodeCursor() round-trip the origin, the halt and a resume request', () => {
    expect(decodeCursor(encodeCursor(halted))).toEqual(halted)
    const { halted: _, ...following } = halted
    const resuming = { ...following, recheckFrom: 400n }
    expect(decodeCursor(encodeCursor(resuming))).toEqual(resuming)
  })

  test('a cursor saved before halts existed still reads, with no origin: nothing is assumed about what was followed', () => {
    const old = decodeCursor(JSON.stringify({ height: '7', recent: [['7', H(7)]] }))
    expect(old).toEqual({ height: 7n, recent: [{ number: 7n, hash: H(7) }] })
  })

  test('decodeCursor() refuses a malformed halt or resume request rather than follow on', () => {
    const base = { height: '7', recent: [['7', H(7)]] }
    for (const extra of [
      { halted: {} },
      { halted: { at: 'now', windowFrom: '1', windowTo: '2', head: '3', resumeFrom: '0' } },
      { halted: { at: 1, windowFrom: 1, windowTo: '2', head: '3', resumeFrom: '0' } },
      { recheckFrom: -1 },
      { origin: 'x' },
    ]) {
      expect(() => decodeCursor(JSON.stringify({ ...base, ...extra }))).toThrow()
    }
  })

  test("resumeCursor() drops the halt and asks for a re-check from the halt's default, or from the block given", () => {
    const byDefault = resumeCursor(halted, 'mainnet')
    expect(byDefault).toMatchObject({ ok: true, value: { from: 497n } })
    if (!byDefault.ok) throw new Error(byDefault.message)
    expect(byDefault.value.cursor).not.toHaveProperty('halted')
    expect(byDefault.value.cursor).toMatchObject({
      height: 500n,
      recheckFrom: 497n,
      origin: 10n,
      genesis: H(0),
    })
    expect(resumeCursor(halted, 'mainnet', 100n)).toMatchObject({
      ok: true,
      value: { from: 100n, cursor: { recheckFrom: 100n } },
    })
  })

  test('resumeCursor() refuses a network that is not halted, and a block above the lowest one remembered at the halt', () => {
    const { halted: _, ...following } = halted
    expect(resumeCursor(following, 'mainnet')).toMatchObject({
      ok: false,
      code: 'conflict',
      message: 'Network mainnet is not halted: nothing to resume',
    })
    expect(resumeCursor(null, 'mainnet')).toMatchObject({ ok: false, code: 'conflict' })
    expect(resumeCursor(halted, 'mainnet', 499n)).toMatchObject({ ok: true })
    expect(resumeCursor(halted, 'mainnet', 500n)).toMatchObject({
      ok: false,
      code: 'invalid_request',
      message: expect.stringContaining('--from-block must be at most 499'),
    })
  })

  test('describeHalt() says what was found and names the exact command', () => {
    expect(describeHalt('mainnet', halted.halted!)).toBe(
      'halted since 2026-11-27T12:00:00.000Z: a reorg went deeper than the 2 blocks remembered (499-500, none of them on the chain any more; head 503), ' +
        'so payments on it neither complete nor are taken back. Check the chain (an explorer, another node), then run: npm run cli -- network resume --network mainnet ' +
        '(re-checks what was recorded from block 497 on against the chain; --from-block N to go further back)',
    )
  })
})
