import { describe, expect, test } from 'bun:test'
import { createSendQueue } from '../../src/webhooks/send-queue.ts'

/** A job the test finishes by hand. */
function deferred() {
  let settle!: (ok: boolean) => void
  const promise = new Promise<boolean>((r) => (settle = r))
  return { promise, settle }
}

describe('send queue', () => {
  test('one endpoint gets at most perEndpoint requests in flight; the rest wait their turn', async () => {
    const q = createSendQueue({
      global: 100,
      failingGlobal: 10,
      perEndpoint: 3,
      perFailingEndpoint: 1,
    })
    const jobs = Array.from({ length: 5 }, () => deferred())
    let started = 0
    jobs.forEach((j, i) => q.push('ep_a', `k${i}`, () => (started++, j.promise)))
    expect(started).toBe(3)
    expect(q.queued).toBe(2)
    jobs[0].settle(true)
    await Promise.resolve()
    await Promise.resolve()
    expect(started).toBe(4)
  })

  test('a failing endpoint is narrowed to perFailingEndpoint and to the failing pool', async () => {
    const q = createSendQueue({
      global: 100,
      failingGlobal: 2,
      perEndpoint: 10,
      perFailingEndpoint: 1,
    })
    // Three endpoints fail once each.
    for (const ep of ['f1', 'f2', 'f3']) {
      q.push(ep, ep, async () => false)
    }
    await q.idle()
    const hang = Array.from({ length: 9 }, () => deferred())
    let started = 0
    hang.forEach((h, i) => q.push(`f${(i % 3) + 1}`, `h${i}`, () => (started++, h.promise)))
    // One per failing endpoint, and only two in the failing pool.
    expect(started).toBe(2)
    // A healthy endpoint is not held up by the failing pool being full.
    let healthy = 0
    for (let i = 0; i < 5; i++) q.push('healthy', `ok${i}`, async () => (healthy++, true))
    await Promise.resolve()
    expect(healthy).toBe(5)
    hang.forEach((h) => h.settle(false))
    await q.idle()
    expect(started).toBe(9)
  })

  test('clear() drops the queued jobs and returns their keys; idle() waits for those in flight', async () => {
    const q = createSendQueue({
      global: 1,
      failingGlobal: 1,
      perEndpoint: 1,
      perFailingEndpoint: 1,
    })
    const first = deferred()
    q.push('a', 'k1', () => first.promise)
    q.push('a', 'k2', async () => true)
    q.push('b', 'k3', async () => true)
    expect(q.clear().sort()).toEqual(['k2', 'k3'])
    let idle = false
    const waiting = q.idle().then(() => (idle = true))
    await Promise.resolve()
    expect(idle).toBe(false)
    first.settle(true)
    await waiting
    expect(idle).toBe(true)
  })
})
