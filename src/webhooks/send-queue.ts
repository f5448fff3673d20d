/**
 * Bounded concurrency for webhook attempts (issue 5): at most `global` requests in flight, and
 * per endpoint at most `perEndpoint`, or `perFailingEndpoint` while its last attempt failed.
 * Endpoints take turns (round robin), so a slow or failing endpoint holds a few slots at most
 * and never delays a healthy one behind its queue.
 */
export interface SendQueueOptions {
  global: number
  perEndpoint: number
  perFailingEndpoint: number
}

export const DEFAULT_SEND_LIMITS: SendQueueOptions = { global: 512, perEndpoint: 16, perFailingEndpoint: 2 }

interface Lane {
  active: number
  jobs: { key: string; run: () => Promise<boolean> }[]
}

export function createSendQueue(opts: SendQueueOptions = DEFAULT_SEND_LIMITS) {
  const lanes = new Map<string, Lane>()
  /** Endpoints with queued jobs, in turn order. */
  const ready: string[] = []
  /** Endpoints whose last attempt failed (kept while their lane is idle too). */
  const failing = new Set<string>()
  let active = 0
  let idleWaiters: (() => void)[] = []

  const limitOf = (endpointId: string) => (failing.has(endpointId) ? opts.perFailingEndpoint : opts.perEndpoint)

  function pump() {
    let scanned = 0
    while (active < opts.global && ready.length > 0 && scanned < ready.length) {
      const endpointId = ready.shift()!
      const lane = lanes.get(endpointId)!
      if (lane.active >= limitOf(endpointId)) {
        // At its limit: back of the line; it is woken when one of its requests ends.
        ready.push(endpointId)
        scanned++
        continue
      }
      scanned = 0
      const job = lane.jobs.shift()!
      if (lane.jobs.length > 0) ready.push(endpointId)
      lane.active++
      active++
      job.run().then(
        (succeeded) => finish(endpointId, succeeded),
        () => finish(endpointId, false),
      )
    }
    if (active === 0 && ready.length === 0) {
      const waiters = idleWaiters
      idleWaiters = []
      waiters.forEach((w) => w())
    }
  }

  function finish(endpointId: string, succeeded: boolean) {
    const lane = lanes.get(endpointId)!
    lane.active--
    active--
    if (succeeded) failing.delete(endpointId)
    else failing.add(endpointId)
    if (lane.active === 0 && lane.jobs.length === 0) lanes.delete(endpointId)
    pump()
  }

  return {
    /** Queues a job; it resolves to whether the attempt succeeded (failures narrow the endpoint's lane). */
    push(endpointId: string, key: string, run: () => Promise<boolean>) {
      let lane = lanes.get(endpointId)
      if (!lane) lanes.set(endpointId, (lane = { active: 0, jobs: [] }))
      if (lane.jobs.length === 0) ready.push(endpointId)
      lane.jobs.push({ key, run })
      pump()
    },
    /** Drops every job not started yet and returns their keys. */
    clear(): string[] {
      const keys: string[] = []
      for (const [id, lane] of lanes) {
        keys.push(...lane.jobs.map((j) => j.key))
        lane.jobs = []
        if (lane.active === 0) lanes.delete(id)
      }
      ready.length = 0
      pump()
      return keys
    },
    get active() {
      return active
    },
    get queued() {
      let n = 0
      for (const l of lanes.values()) n += l.jobs.length
      return n
    },
    /** Resolves when nothing is queued or in flight. */
    idle(): Promise<void> {
      if (active === 0 && ready.length === 0) return Promise.resolve()
      return new Promise((resolve) => idleWaiters.push(resolve))
    },
  }
}
