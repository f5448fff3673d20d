import { expect, test } from 'bun:test'
import type { InspectionEvent } from 'xstate'
import { createScheduler } from '../../src/actors/scheduler.ts'
import { manualClock } from '../../src/lib/clock.ts'
import { createLogger } from '../../src/lib/logger.ts'
import type {
  DeliveryRepo,
  DeliveryStep,
  RunnableDelivery,
} from '../../src/webhooks/delivery.repo.ts'
import { createDeliveryRunner } from '../../src/webhooks/delivery-runner.ts'

/**
 * A delivery actor moves only on a committed step: what the attempt led to is judged by the
 * machine and committed with the snapshot before the actor hears it, so an instance whose step
 * is refused (its claim went to another instance) never moves on to act on it.
 */
type DeliverySnapshotLike = { value?: unknown; context?: { deliveryId?: string } }

function runnerWith(record: boolean) {
  const clock = manualClock(Date.parse('2026-01-01T00:00:00Z'))
  const scheduler = createScheduler(clock)
  const committed: DeliveryStep[] = []
  const states: string[] = []
  const repo = {
    commitSteps: async (_owner: string, steps: DeliveryStep[]) => {
      committed.push(...steps)
      return new Set(record ? steps.map((s) => s.id) : [])
    },
  } as unknown as DeliveryRepo
  const runner = createDeliveryRunner({
    repo,
    // Disabled: the attempt makes no request and the machine waits for the endpoint (a step all the
    // same).
    endpoints: {
      forSending: async () => ({
        url: 'https://example.com/hook',
        mode: 'test',
        format: 'standard',
        secret: 's',
        enabled: false,
        failingSince: null,
      }),
    },
    health: { attempted: async () => {} },
    metrics: { webhookAttempt: () => {}, webhookFirstAttemptLag: () => {} },
    changes: { subscribe: () => () => {} } as never,
    clock,
    logger: createLogger('silent'),
    scheduler,
    instanceId: 'inst_a',
    scheduleMs: [60_000],
    addressRules: { allowPrivateTestEndpoints: false },
    inspect: (e: InspectionEvent) => {
      // The delivery actor's own snapshots (its children have no delivery context).
      const snap = e.type === '@xstate.snapshot' ? (e.snapshot as DeliverySnapshotLike) : null
      if (snap?.context?.deliveryId) states.push(String(snap.value))
    },
  })
  const delivery: RunnableDelivery = {
    id: 'dlv_1',
    eventId: 'evt_1',
    endpointId: 'ep_1',
    mode: 'test',
    eventType: 'transaction.completed',
    data: {},
    test: true,
    sequence: 0,
    snapshot: null,
    machineVersion: 2,
    eventAt: clock.now(),
    nextAttemptAt: clock.now(),
  }
  return { runner, delivery, committed, states, scheduler }
}

test('a step that is recorded is committed first, then the actor moves to it', async () => {
  const h = runnerWith(true)
  h.runner.run(h.delivery)
  for (let i = 0; i < 100 && h.committed.length === 0; i++)
    await new Promise((r) => setTimeout(r, 1))
  await h.runner.settled()
  expect(h.committed.map((s) => s.status)).toEqual(['pending'])
  expect(h.states.at(-1)).toBe('scheduled')
  expect(h.runner.has('dlv_1')).toBe(true)
  await h.runner.stop()
  h.scheduler.stop()
})

test('a step this instance can no longer record never reaches the actor: it stops where it was', async () => {
  const h = runnerWith(false)
  h.runner.run(h.delivery)
  for (let i = 0; i < 100 && h.committed.length === 0; i++)
    await new Promise((r) => setTimeout(r, 1))
  await h.runner.settled()
  expect(h.committed.length).toBe(1)
  // It was attempting when the step was refused, and never went on to wait for another attempt.
  expect(h.states.filter((s) => s === 'scheduled').length).toBe(1)
  expect(h.states.at(-1)).toBe('attempting')
  expect(h.runner.has('dlv_1')).toBe(false)
  await h.runner.stop()
  h.scheduler.stop()
})
