/**
 * `bun bench/currency-create.ts`: POST /api/transactions/create in a fiat currency (EUR) against
 * the same create in USD on the same service, on PGlite and on PostgreSQL
 * (docs/decisions/0064-priced-in-the-merchants-currency.md). The claim: a EUR create takes its USD
 * value from the rate book's last answer (src/chain/fx-rates.ts), so it makes no JSON-RPC round
 * trip on the request path and runs at the speed of a USD create. The USD create is the floor
 * here (docs/decisions/0053-speed-measured-against-a-floor.md): both are measured in alternating
 * wrk rounds (the order reverses every round) and the median rounds compared.
 *
 * The chain: a devnet (src/chain/devnet.ts: anvil with its EUR/GBP/JPY feeds) behind the counting
 * JSON-RPC proxy (test/helpers/rpc-proxy.ts); the service's NETWORKS_CONFIG is the devnet's network
 * with the proxy as its rpcUrl, so every call the service makes is counted. The proxy's `eth_call`
 * calls are counted during each wrk run, so each target gets its own: a rate read is one
 * `eth_call` (latestRoundData; a feed's decimals are read once). The rate book also refreshes
 * every currency every 30 s (three eth_call on the devnet) whatever the load, so both targets see
 * a few of those; what a EUR create adds is its count above the USD create's. The service
 * process's CPU time (/proc/PID/stat) is read around every run too: CPU per create, which the
 * machine's other load moves much less than req/s on two shared cores.
 *
 * Both run in this process, in a worker thread: wrk runs synchronously (bench/harness.ts), which
 * stops this thread's event loop for the whole run, and a proxy on it would hold the service's
 * calls until the run ended. The worker counts calls into shared memory this thread reads
 * between runs.
 *
 * Env: BENCH_SECONDS per round (default 5), BENCH_ROUNDS (3), BENCH_WARMUP (10 s of unmeasured
 * load on each target first, bench/harness.ts), BENCH_CONNECTIONS (32), DATABASE_URL
 * (PostgreSQL server; default postgres://postgres@127.0.0.1:5432/test; a fresh database is
 * created and dropped), BENCH_DATABASES (`pglite,postgres`: which to measure).
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import {
  liftRateLimits,
  medianRound,
  startService,
  WARMUP_SECONDS,
  wrk,
  type BenchService,
  type WrkResult,
  type WrkTarget,
  selfSignedTls,
} from './harness.ts'

/**
 * Slots of the shared counters: every JSON-RPC call the proxy forwarded, its eth_call, and those
 * of them made to the EUR / USD feed (the only feed a EUR create could read).
 */
const ALL = 0
const ETH_CALL = 1
const EUR_FEED = 2
const SLOTS = 3

type FromChain = { ready: true; networksFile: string } | { error: string } | { stopped: true }

if (isMainThread) await main()
else await chainThread()

/** The worker: devnet, proxy in front of it, the networks file; stops all on 'stop'. */
async function chainThread() {
  const { startDevnet } = await import('../src/chain/devnet.ts')
  const { startRpcProxy } = await import('../test/helpers/rpc-proxy.ts')
  const { writeNetworksFile } = await import('../test/helpers/chain.ts')
  const counts = new Int32Array(workerData.counts as SharedArrayBuffer)
  const port = parentPort!
  const dir = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-currency-'))
  let devnet: Awaited<ReturnType<typeof startDevnet>> | null = null
  let proxy: Awaited<ReturnType<typeof startRpcProxy>> | null = null
  const stop = async () => {
    await proxy?.close()
    await devnet?.stop()
    rmSync(dir, { recursive: true, force: true })
  }
  port.on('message', async (m) => {
    if (m !== 'stop') return
    await stop()
    port.postMessage({ stopped: true } satisfies FromChain)
  })
  try {
    devnet = await startDevnet()
    proxy = await startRpcProxy(devnet.rpcUrl)
    // The proxy's call list, counted as it grows.
    const calls = proxy.calls
    const eurFeed = devnet.fxFeeds.EUR!.toLowerCase()
    calls.push = (...items) => {
      for (const c of items) {
        Atomics.add(counts, ALL, 1)
        if (c.method !== 'eth_call') continue
        Atomics.add(counts, ETH_CALL, 1)
        const to = (c.params as Array<{ to?: string }> | undefined)?.[0]?.to
        if (to?.toLowerCase() === eurFeed) Atomics.add(counts, EUR_FEED, 1)
      }
      return Array.prototype.push.apply(calls, items)
    }
    const networksFile = writeNetworksFile(
      dir,
      devnet.networks.map((n) => ({ ...n, rpcUrl: proxy!.url })),
    )
    port.postMessage({ ready: true, networksFile } satisfies FromChain)
  } catch (e) {
    await stop()
    port.postMessage({ error: String((e as Error)?.stack ?? e) } satisfies FromChain)
  }
}

async function main() {
  const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
  const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
  const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
  const pgServer = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  delete process.env.DATABASE_URL

  const work = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-currency-'))
  const BODIES = {
    USD: '{"amount": 25.5, "order_id": "bench"}',
    EUR: '{"amount": 25.5, "currency": "EUR", "order_id": "bench"}',
  } as const
  const lua: Record<string, string> = {}
  for (const [currency, body] of Object.entries(BODIES)) {
    lua[currency] = join(work, `post-${currency}.lua`)
    writeFileSync(
      lua[currency],
      `wrk.method = "POST"\nwrk.body = '${body}'\nwrk.headers["Content-Type"] = "application/json"\n`,
    )
  }
  const tls = await selfSignedTls(work)

  const counts = new Int32Array(new SharedArrayBuffer(SLOTS * Int32Array.BYTES_PER_ELEMENT))
  const chain = new Worker(import.meta.path, { workerData: { counts: counts.buffer } })
  const messages: FromChain[] = []
  const waiters: Array<() => void> = []
  chain.on('message', (m: FromChain) => {
    messages.push(m)
    for (const w of waiters.splice(0)) w()
  })
  chain.on('error', (e: Error) => {
    messages.push({ error: String(e?.stack ?? e) })
    for (const w of waiters.splice(0)) w()
  })
  const next = async (): Promise<FromChain> => {
    while (!messages.length) await new Promise<void>((r) => waiters.push(r))
    return messages.shift()!
  }
  /** The counters now, to subtract. */
  const snapshot = () => Array.from({ length: SLOTS }, (_, i) => Atomics.load(counts, i))
  const since = (before: number[]) => snapshot().map((n, i) => n - before[i]!)
  const stopChain = async () => {
    chain.postMessage('stop')
    await Promise.race([next(), Bun.sleep(30_000)])
    await chain.terminate()
  }

  /** One target's median round, its requests and the proxy's calls during its measured runs. */
  interface Measured {
    result: WrkResult
    ethCalls: number
    eurFeedCalls: number
    allCalls: number
    /** The service process's CPU time (user + system) per create over the measured runs, µs. */
    cpuPerCreate: number
  }
  const TICK_US =
    1e6 / Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout || 100)
  /** utime + stime of a process, in clock ticks (/proc/PID/stat; NaN where there is none). */
  const cpuTicks = (pid: number | undefined) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      return Number(f[11]) + Number(f[12])
    } catch {
      return Number.NaN
    }
  }
  /**
   * Alternating rounds as bench/harness.ts `alternateRounds` runs them (a warm-up of each, then
   * the order reversed every round), with the proxy's counters read around every measured run.
   */
  function alternate(targets: WrkTarget[], servicePid: number | undefined): Measured[] {
    const run = (t: WrkTarget, seconds = SECONDS) =>
      wrk(t.name, t.url, { seconds, connections: CONNECTIONS, extraArgs: t.args })
    if (WARMUP_SECONDS > 0) for (const t of targets) run(t, WARMUP_SECONDS)
    const rounds: WrkResult[][] = targets.map(() => [])
    const calls = targets.map(() => Array<number>(SLOTS).fill(0))
    const cpu = targets.map(() => 0)
    const order = targets.map((_, i) => i)
    for (let r = 0; r < ROUNDS; r++) {
      for (const i of r % 2 === 0 ? order : [...order].reverse()) {
        const before = snapshot()
        const c0 = cpuTicks(servicePid)
        const result = run(targets[i]!)
        rounds[i]!.push(result)
        const c = cpuTicks(servicePid) - c0
        const d = since(before)
        for (let k = 0; k < SLOTS; k++) calls[i]![k]! += d[k]!
        cpu[i]! += c
        console.error(
          `  during that run: ${d[ETH_CALL]} eth_call (${d[EUR_FEED]} to the EUR feed), ${d[ALL]} JSON-RPC calls in all, service CPU ${Math.round((c * TICK_US) / result.requests)} µs per create`,
        )
      }
    }
    return targets.map((t, i) => ({
      result: medianRound(t.name, rounds[i]!),
      ethCalls: calls[i]![ETH_CALL]!,
      eurFeedCalls: calls[i]![EUR_FEED]!,
      allCalls: calls[i]![ALL]!,
      cpuPerCreate: (cpu[i]! * TICK_US) / rounds[i]!.reduce((n, x) => n + x.requests, 0),
    }))
  }

  interface Row {
    backend: 'pglite' | 'postgres'
    usd: Measured
    eur: Measured
    check: { amountUsd: string; usdRate: string; ethCalls: number }
  }
  const rows: Row[] = []
  const BACKENDS = (['pglite', 'postgres'] as const).filter((b) =>
    (process.env.BENCH_DATABASES ?? 'pglite,postgres').split(',').includes(b),
  )
  try {
    const ready = await next()
    if (!('ready' in ready))
      throw new Error(`the devnet did not start: ${'error' in ready ? ready.error : ready}`)
    for (const backend of BACKENDS) {
      if (backend === 'postgres') process.env.DATABASE_URL = pgServer
      let svc: BenchService | null = null
      try {
        svc = await startService(backend, { NETWORKS_CONFIG: ready.networksFile, ...tls })
        liftRateLimits(svc)
        const auth = ['-H', `Authorization: Bearer ${svc.key}`]
        const url = `${svc.base}/api/transactions/create`
        // Once, before measuring: a EUR create answers 200 in EUR with the rate it used. Retried
        // while the service is still verifying the devnet network (until then: 503).
        const create = (body: string) => {
          const c = spawnSync(
            'curl',
            [
              '-sk',
              '-w',
              '\n%{http_code}',
              url,
              ...auth,
              '-H',
              'Content-Type: application/json',
              '-d',
              body,
            ],
            { encoding: 'utf8' },
          )
          const at = c.stdout.lastIndexOf('\n')
          return { status: Number(c.stdout.slice(at + 1)), body: c.stdout.slice(0, at) }
        }
        let check: Row['check'] | null = null
        const until = Date.now() + 60_000
        for (;;) {
          const before = snapshot()
          const r = create(BODIES.EUR)
          const ethCalls = since(before)[ETH_CALL]!
          if (r.status === 200) {
            const tx = JSON.parse(r.body).transaction
            if (tx.currency !== 'EUR' || !tx.usd_rate)
              throw new Error(`a EUR create answered 200 without EUR and its rate: ${r.body}`)
            check = { amountUsd: tx.amount_usd, usdRate: tx.usd_rate.usd, ethCalls }
            console.error(
              `EUR create (${backend}): 200, currency EUR, amount_usd ${tx.amount_usd}, usd_rate ${JSON.stringify(tx.usd_rate)}, ${ethCalls} eth_call`,
            )
            break
          }
          if (r.status !== 503 || Date.now() > until)
            throw new Error(`a EUR create answered ${r.status}: ${r.body}`)
          await Bun.sleep(500)
        }
        const [usd, eur] = alternate(
          [
            { name: `POST create, USD (${backend})`, url, args: [...auth, '-s', lua.USD!] },
            { name: `POST create, EUR (${backend})`, url, args: [...auth, '-s', lua.EUR!] },
          ],
          svc.server.proc.pid,
        )
        rows.push({ backend, usd: usd!, eur: eur!, check })
      } finally {
        await svc?.stop()
      }
    }
  } finally {
    await stopChain()
    rmSync(work, { recursive: true, force: true })
  }

  const bunVersion = spawnSync(process.execPath, ['--version'], { encoding: 'utf8' }).stdout.trim()
  const fmt = (n: number) => Math.round(n).toLocaleString('en')
  console.log(
    `\n${new Date().toISOString()} · Bun ${bunVersion} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · anvil devnet behind a counting JSON-RPC proxy · wrk -t1 -c${CONNECTIONS}, ${ROUNDS} alternating rounds of ${SECONDS} s after ${WARMUP_SECONDS} s warm-up each, HTTPS keep-alive, medians\n`,
  )
  console.log(
    '| create | database | req/s | p50 / p99 ms | vs USD | service CPU per create | creates measured | eth_call during them (to the EUR feed) | eth_call per 1,000 creates | all JSON-RPC calls during them | non-2xx |',
  )
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of rows) {
    for (const [label, m] of [
      ['USD', r.usd],
      ['EUR', r.eur],
    ] as const) {
      const x = m.result
      console.log(
        `| ${label} | ${r.backend === 'pglite' ? 'PGlite' : 'PostgreSQL'} | ${fmt(x.rps)} | ${x.p50.toFixed(2)} / ${x.p99.toFixed(2)} | ${label === 'USD' ? '–' : `**${((100 * x.rps) / r.usd.result.rps).toFixed(1)}%**`} | ${fmt(m.cpuPerCreate)} µs | ${fmt(x.requests)} | ${m.ethCalls} (${m.eurFeedCalls}) | ${((1000 * m.ethCalls) / Math.max(1, x.requests)).toFixed(3)} | ${fmt(m.allCalls)} | ${x.errors} |`,
      )
    }
  }
  console.log(
    `\neth_call counts cover each target's ${ROUNDS} measured runs (${ROUNDS * SECONDS} s); the rate book refreshes EUR, GBP and JPY every 30 s (one eth_call to each feed) whatever the load and wherever it falls (a USD create reads no rate, so its count is that background), and the follower polls the chain (the other JSON-RPC calls). Before measuring, one EUR create answered 200 in EUR: ${rows.map((r) => `${r.backend} amount_usd ${r.check.amountUsd} at ${r.check.usdRate}, ${r.check.ethCalls} eth_call`).join('; ')}.`,
  )
  process.exit(0)
}
