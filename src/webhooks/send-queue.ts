/**
 * Bounded concurrency for webhook attempts (docs/decisions/0033-bounded-webhook-sending.md). Per
 * endpoint at most `perEndpoint` requests are in flight, or `perFailingEndpoint` while its last
 * attempt failed. Healthy and failing endpoints draw on separate pools (`global` and
 * `failingGlobal`), so even a thousand hanging endpoints can hold only the failing pool and never a
 * healthy endpoint's slot. Endpoints take turns (round robin), so none waits behind another's
 * queue.
 */
export interface SendQueueOptions {
  global: number
  failingGlobal: number
  perEndpoint: number
  perFailingEndpoint: number
}

export const DEFAULT_SEND_LIMITS: SendQueueOptions = {
  global: 512,
  failingGlobal: 256,
  perEndpoint: 16,
  perFailingEndpoint: 2,
}

/**
 * A job answers whether its request succeeded, or null when it made none (its delivery stopped
 * meanwhile).
 */
type Job = () => Promise<boolean | null>

interface Lane {
  active: number
  jobs: { key: string; run: Job }[]
}

export function createSendQueue(opts: SendQueueOptions = DEFAULT_SEND_LIMITS) {
  const lanes = new Map<string, Lane>()
  /** Endpoints with queued jobs, in turn order. */
  const ready: string[] = []
  /** Endpoints whose last attempt failed (kept while their lane is idle too). */
  const failing = new Set<string>()
  let activeHealthy = 0
  let activeFailing = 0
  let idleWaiters: (() => void)[] = []

  /** Whether `endpointId` may start one more request now. */
  function mayStart(endpointId: string, lane: Lane): boolean {
    return failing.has(endpointId)
      ? lane.active < opts.perFailingEndpoint && activeFailing < opts.failingGlobal
      : lane.active < opts.perEndpoint && activeHealthy < opts.global
  }

  function pump() {
    // Stop after a whole round of lanes that could not start anything.
    let blocked = 0
    while (ready.length > 0 && blocked < ready.length) {
      const endpointId = ready.shift()!
      const lane = lanes.get(endpointId)!
      if (!mayStart(endpointId, lane)) {
        ready.push(endpointId)
        blocked++
        continue
      }
      blocked = 0
      const job = lane.jobs.shift()!
      if (lane.jobs.length > 0) ready.push(endpointId)
      const pool = failing.has(endpointId) ? 'failing' : 'healthy'
      lane.active++
      if (pool === 'failing') activeFailing++
      else activeHealthy++
      job.run().then(
        (succeeded) => finish(endpointId, pool, succeeded),
        () => finish(endpointId, pool, false),
      )
    }
    if (activeHealthy + activeFailing === 0 && ready.length === 0) {
      const waiters = idleWaiters
      idleWaiters = []
      for (const w of waiters) w()
    }
  }

  function finish(endpointId: string, pool: 'healthy' | 'failing', succeeded: boolean | null) {
    const lane = lanes.get(endpointId)!
    lane.active--
    if (pool === 'failing') activeFailing--
    else activeHealthy--
    if (succeeded === true) failing.delete(endpointId)
    else if (succeeded === false) failing.add(endpointId)
    if (lane.active === 0 && lane.jobs.length === 0) lanes.delete(endpointId)
    pump()
  }

  return {
    /**
     * Queues a job; it resolves to whether the attempt succeeded (failures move the endpoint to the
     * failing pool).
     */
    push(endpointId: string, key: string, run: Job) {
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
    get queued() {
      let n = 0
      for (const l of lanes.values()) n += l.jobs.length
      return n
    },
    /** Resolves when nothing is queued or in flight. */
    idle(): Promise<void> {
      if (activeHealthy + activeFailing === 0 && ready.length === 0) return Promise.resolve()
      return new Promise((resolve) => idleWaiters.push(resolve))
    },
  }
}
