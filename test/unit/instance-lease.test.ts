import { expect, test } from 'bun:test'
import { createInstanceLease } from '../../src/instances/lease.ts'
import type { InstanceRepo } from '../../src/instances/instance.repo.ts'
import { systemClock } from '../../src/lib/clock.ts'
import { createLogger } from '../../src/lib/logger.ts'

/**
 * A database whose first renewal answers and every later one hangs (a stalled connection, a starved
 * process).
 */
function stallingRepo(): InstanceRepo {
  let calls = 0
  return {
    renew: () => (calls++ === 0 ? Promise.resolve() : new Promise<void>(() => {})),
    prune: async () => {},
  } as unknown as InstanceRepo
}

test("a lease that is not renewed in time stops its actors, unless the database is this process's alone (the embedded one: nobody can take over)", async () => {
  const lost: string[] = []
  const leases = (['shared', 'exclusive'] as const).map((kind) => {
    const lease = createInstanceLease({
      repo: stallingRepo(),
      clock: systemClock,
      logger: createLogger('silent'),
      instanceId: `inst_${kind}`,
      leaseMs: 300,
      exclusive: kind === 'exclusive',
    })
    lease.listen({ lost: () => void lost.push(kind) })
    return lease
  })
  await Promise.all(leases.map((l) => l.start()))
  // Both started together with the same lease: wait until the shared one gives its actors up.
  for (let i = 0; i < 200 && lost.length === 0; i++) await new Promise((r) => setTimeout(r, 10))
  expect(lost).toEqual(['shared'])
  expect(leases.map((l) => l.held())).toEqual([false, true])
})
