/**
 * The relayer's limits as a pure judgement (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md):
 * which limit refuses first, and the bound on reverts the failures and in-flight limits give;
 * and the client key a cool-down is kept by.
 */
import { describe, expect, test } from 'bun:test'
import {
  judgeRelay,
  type RelayLimits,
  worstFailuresPerHour,
} from '../../src/chain/signature-pay/relay-limits.ts'
import type { Exposure } from '../../src/chain/signature-pay/relayer.repo.ts'
import { clientKey } from '../../src/chain/signature-pay/relayer.ts'

const LIMITS: RelayLimits = {
  maxFeePerGasWei: 200n * 10n ** 9n,
  maxSpendPerHourWei: 1000n,
  projectSpendPerHourWei: 300n,
  payerSpendPerHourWei: 100n,
  failuresPerHour: 3,
  inFlight: 4,
}
const CLEAR: Exposure = {
  networkSpent: 0n,
  projectSpent: 0n,
  payerSpent: 0n,
  projectFailures: 0,
  projectInFlight: 0,
  cooling: null,
}
const reason = (e: Partial<Exposure>, cost = 10n) =>
  judgeRelay({ ...CLEAR, ...e }, cost, LIMITS, 'base')?.reason ?? null

describe('judgeRelay()', () => {
  test('nothing spent, nothing failed: the relay goes out', () => {
    expect(reason({})).toBeNull()
  })

  test('each limit refuses at its edge, and not before', () => {
    expect(reason({ networkSpent: 990n })).toBeNull()
    expect(reason({ networkSpent: 991n })).toBe('network_budget')
    expect(reason({ projectSpent: 290n })).toBeNull()
    expect(reason({ projectSpent: 291n })).toBe('project_budget')
    expect(reason({ payerSpent: 90n })).toBeNull()
    expect(reason({ payerSpent: 91n })).toBe('payer_budget')
    expect(reason({ projectFailures: 2 })).toBeNull()
    expect(reason({ projectFailures: 3 })).toBe('failures')
    expect(reason({ projectInFlight: 3 })).toBeNull()
    expect(reason({ projectInFlight: 4 })).toBe('in_flight')
  })

  test('a cool-down refuses first, naming what failed, and tells the customer to pay by transfer', () => {
    for (const cooling of ['payer', 'transaction', 'client'] as const) {
      const r = judgeRelay({ ...CLEAR, cooling, networkSpent: 10_000n }, 1n, LIMITS, 'base')
      expect(r?.reason).toBe('cooldown')
      expect(r?.message).toMatch(/pay by transfer/)
    }
  })

  test('at most failuresPerHour - 1 + inFlight relays of a project can revert in an hour, whatever the order of sends and reverts', () => {
    expect(worstFailuresPerHour(LIMITS)).toBe(6)
    // Simulate an attacker who sends whenever allowed and makes every relay revert, resolving
    // any number of in-flight relays between sends: the count of reverts never passes the bound.
    let seed = 7
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    for (let run = 0; run < 2000; run++) {
      let failures = 0
      let inFlight = 0
      for (let step = 0; step < 100; step++) {
        if (next() < 0.5) {
          if (reason({ projectFailures: failures, projectInFlight: inFlight }, 0n) === null)
            inFlight++
        } else {
          const resolved = Math.floor(next() * (inFlight + 1))
          inFlight -= resolved
          failures += resolved
        }
        expect(failures + inFlight).toBeLessThanOrEqual(worstFailuresPerHour(LIMITS))
      }
    }
  })
})

describe('clientKey()', () => {
  test('an IPv4 address is itself; an IPv6 one is its /64; an IPv4-mapped one is the IPv4', () => {
    expect(clientKey('203.0.113.7')).toBe('ip:203.0.113.7')
    expect(clientKey('::ffff:203.0.113.7')).toBe('ip:203.0.113.7')
    expect(clientKey('2001:db8:1:2:aaaa::1')).toBe('ip:2001:db8:1:2::/64')
    expect(clientKey('2001:0db8:0001:0002:bbbb:cccc:dddd:eeee')).toBe('ip:2001:db8:1:2::/64')
    expect(clientKey('2001:db8::1')).toBe('ip:2001:db8:0:0::/64')
    expect(clientKey('::1')).toBe('ip:0:0:0:0::/64')
    expect(clientKey(null)).toBeNull()
  })
})
