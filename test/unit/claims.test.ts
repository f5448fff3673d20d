import { describe, expect, test } from 'bun:test'
import { createClaims } from '../../src/instances/claims.ts'
import type { InstanceLease, LeaseListener } from '../../src/instances/lease.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { manualClock } from '../../src/lib/clock.ts'

/** A lease the test drives: ticks, losses and renewals happen when the test says. */
function drivenLease() {
  const listeners = new Set<LeaseListener>()
  let held = false
  const lease: InstanceLease = {
    instanceId: 'inst_a',
    held: () => held,
    listen(l) {
      listeners.add(l)
      return () => listeners.delete(l)
    },
    start: async () => {
      held = true
    },
    stop: async () => {
      held = false
    },
  }
  return {
    lease,
    tick: async () => {
      for (const l of listeners) await l.tick?.()
    },
    lose: () => {
      held = false
      for (const l of listeners) l.lost?.()
    },
    regain: async () => {
      held = true
      for (const l of listeners) await l.regained?.()
    },
    listeners: () => listeners.size,
  }
}

/** A table of units with a claimer each, claimed as the repositories' statements do. */
function table(ids: string[], owners: Record<string, string | null> = {}) {
  const claimer = new Map(ids.map((id) => [id, owners[id] ?? null]))
  const live = new Set<string>(['inst_a'])
  return {
    claimer,
    live,
    claim(o: { all: boolean; limit: number }) {
      const free = [...claimer].filter(([, c]) =>
        o.all ? c !== 'inst_a' : c === null || !live.has(c),
      )
      const taken = free.slice(0, o.limit).map(([id]) => id)
      for (const id of taken) claimer.set(id, 'inst_a')
      return Promise.resolve(taken)
    },
    ours: () => [...claimer].filter(([, c]) => c === 'inst_a').map(([id]) => id),
  }
}

function setup(
  ids: string[],
  o: { owners?: Record<string, string | null>; refuse?: string; singleInstance?: boolean } = {},
) {
  const lease = drivenLease()
  const t = table(ids, o.owners)
  const running = new Set<string>()
  const log: string[] = []
  const claims = createClaims<string>({
    lease: lease.lease,
    clock: manualClock(),
    logger: createLogger('silent'),
    what: 'unit',
    batchSize: 2,
    reconcileEvery: 3,
    singleInstance: o.singleInstance ?? false,
    work: {
      batch: {
        claim: (q) => t.claim(q),
        take: (id) => {
          if (id === o.refuse) throw new Error('cannot start')
          running.add(id)
        },
        releaseOne: async (id) => void t.claimer.set(id, null),
        describe: (id) => ({ id }),
      },
      resume: async () => {
        log.push('resume')
        await claims.take(t.ours().filter((id) => !running.has(id)))
      },
      reconcile: async () => void log.push('reconcile'),
      drop: () => running.clear(),
      releaseAll: async () => {
        for (const id of t.ours()) t.claimer.set(id, null)
      },
    },
  })
  return { lease, t, running, log, claims }
}

describe('createClaims()', () => {
  test('start() takes the lease, resumes what is ours, then claims every free unit in batches; one unit that cannot start is released', async () => {
    const s = setup(['a', 'b', 'c', 'd', 'e'], {
      owners: { a: 'inst_a', b: 'inst_dead', c: 'inst_live' },
      refuse: 'e',
    })
    s.t.live.add('inst_live')
    await s.claims.start()
    expect(s.lease.lease.held()).toBe(true)
    expect([...s.running].sort()).toEqual(['a', 'b', 'd'])
    // The other live instance's unit stays its own; the refused one is free again for another try.
    expect(s.t.claimer.get('c')).toBe('inst_live')
    expect(s.t.claimer.get('e')).toBeNull()
  })

  test('on a database only this instance uses, the first claim takes every unit whatever its claimer', async () => {
    const s = setup(['a', 'b', 'c'], {
      owners: { a: 'inst_old', b: 'inst_live' },
      singleInstance: true,
    })
    s.t.live.add('inst_live')
    await s.claims.start()
    expect([...s.running].sort()).toEqual(['a', 'b', 'c'])
  })

  test('a lost lease drops every unit and claims nothing until renewed; regained, what is still ours resumes', async () => {
    const s = setup(['a', 'b'])
    await s.claims.start()
    expect(s.running.size).toBe(2)
    s.lease.lose()
    expect(s.running.size).toBe(0)
    s.t.claimer.set('c', null)
    await s.lease.tick()
    expect(s.running.size).toBe(0)
    expect(s.t.claimer.get('c')).toBeNull()
    await s.lease.regain()
    expect([...s.running].sort()).toEqual(['a', 'b'])
    expect(s.log.filter((l) => l === 'resume').length).toBe(2)
  })

  test('each tick claims units freed meanwhile; the work is reconciled every reconcileEvery ticks', async () => {
    const s = setup(['a'])
    await s.claims.start()
    s.t.claimer.set('b', 'inst_dead')
    await s.lease.tick()
    expect([...s.running].sort()).toEqual(['a', 'b'])
    await s.lease.tick()
    await s.lease.tick()
    await s.lease.tick()
    expect(s.log.filter((l) => l === 'reconcile').length).toBe(2)
  })

  test('stop() stops following the lease, runs the work’s own stop, then gives every claim back', async () => {
    const s = setup(['a', 'b'])
    await s.claims.start()
    const order: string[] = []
    await s.claims.stop(() => {
      order.push(`stopped with ${s.t.ours().length} claims`)
      s.running.clear()
    })
    expect(order).toEqual(['stopped with 2 claims'])
    expect(s.t.ours()).toEqual([])
    expect(s.lease.listeners()).toBe(0)
    expect(s.claims.active()).toBe(false)
  })
})
