/**
 * `bun bench/pay-page.ts`: throughput and latency of the hosted pay page over HTTPS on Bun,
 * against PGlite and PostgreSQL, and a bare `Bun.serve` answering the same HTML bytes, measured
 * in rounds alternating with the page (medians) with the same load tool (wrk) and connection
 * count, so the ratios show what routing, the limiter, the database read and rendering cost on a
 * noisy machine:
 *   GET /pay/{id}             the whole page for a transaction with a token chosen
 *   GET /pay/{id}/state       the same state as JSON
 *   GET /pay/{id}/qr.svg      the QR code, encoded per request
 *   GET /assets/pay-page.js?v=<current>   a static file served from memory
 * then `renderPayPage` and `qrSvg` alone, in-process (median of many calls).
 *
 * The pay routes are limited per client IP and every wrk connection comes from 127.0.0.1, so
 * the service runs with PAY_RATE_LIMITS out of reach: the limiter is still checked on every
 * request but never refuses, as `bench/http.ts` does for the API with `project set-limits`.
 *
 * Env: BENCH_SECONDS (default 10), BENCH_ROUNDS (3: rounds of the page alternating with the bare
 * page, medians), BENCH_WARMUP (10: seconds of unmeasured load before each
 * target), BENCH_CONNECTIONS (32), DATABASE_URL (PostgreSQL server;
 * default postgres://postgres@127.0.0.1:5432/test, a fresh database is created and dropped).
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import {
  alternateRounds,
  medianRound,
  startProcess,
  startService,
  stopProcess,
  timeCalls,
  WARMUP_SECONDS,
  wrk as runWrk,
  type BenchProcess,
  type WrkResult,
  selfSignedTls,
} from './harness.ts'

const OUT_OF_REACH = '100000000/100000000/1000000000'

if (process.argv[2] === '--bare') {
  // The baseline: a plain Bun.serve answering the page's bytes and headers, same certificate.
  const { PAY_PAGE_HEADERS } = await import('../src/modules/pay/page.ts')
  const body = readFileSync(process.env.BENCH_HTML_FILE!)
  const [certFile, keyFile] = [process.env.TLS_CERT_FILE!, process.env.TLS_KEY_FILE!]
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    tls: { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') },
    fetch: () => new Response(body, { headers: PAY_PAGE_HEADERS }),
  })
  console.error(JSON.stringify({ msg: 'listening', port: server.port }))
} else {
  await bench()
}

type Result = WrkResult

async function bench() {
  const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
  const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
  const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
  const BUN = process.execPath
  const started = Date.now()

  /** curl over loopback (the service's certificate is self-signed): status and body. */
  function curl(
    url: string,
    opts: { key?: string; body?: string } = {},
  ): { status: number; body: string } {
    const args = ['-sk', '-w', '\n%{http_code}', url]
    if (opts.key) args.push('-H', `Authorization: Bearer ${opts.key}`)
    if (opts.body) args.push('-H', 'Content-Type: application/json', '-d', opts.body)
    const r = spawnSync('curl', args, { encoding: 'utf8' })
    const i = r.stdout.lastIndexOf('\n')
    return { status: Number(r.stdout.slice(i + 1)), body: r.stdout.slice(0, i) }
  }

  /**
   * Each target is loaded for WARMUP_SECONDS before it is measured. Without it the first route
   * measured after start (the page) paid for the JIT compiling its code: in its first 4 s the
   * compiler threads took ~24% of a core and the page served ~4,300 req/s, then 6,000-6,500 once
   * compiled, while the bare baseline has nothing to compile.
   */
  const wrk = (name: string, url: string): Result => {
    if (WARMUP_SECONDS > 0)
      runWrk(`${name} (warm-up)`, url, { seconds: WARMUP_SECONDS, connections: CONNECTIONS })
    return runWrk(name, url, { seconds: SECONDS, connections: CONNECTIONS })
  }

  /** What the in-process timings and the bare baseline need from a running service. */
  interface Sample {
    html: string
    state: any
    qr: string
    assetPath: string
  }

  /**
   * The page against the bare baseline in alternating rounds (medians), as `npm run bench` does
   * for the API and its floor: one run of the bare server moved by a fifth between two runs.
   */
  const pageAndBare = (backend: string, pageUrl: string, bareUrl: string): Result[] => {
    const page = { name: `GET /pay/{id} (${backend})`, url: pageUrl, args: [] }
    const bare = {
      name: `bare Bun.serve, same HTML bytes (baseline, in rounds with ${backend})`,
      url: bareUrl,
      args: [],
    }
    const [p, b] = alternateRounds([page, bare], {
      rounds: ROUNDS,
      seconds: SECONDS,
      connections: CONNECTIONS,
    })
    return [medianRound(bare.name, b), medianRound(page.name, p)]
  }

  /**
   * Measures every route of a started service, the page in rounds with the bare server `bareFor`
   * gives for its page.
   */
  async function serviceRun(
    backend: 'pglite' | 'postgres',
    bareFor: (sample: Sample) => Promise<string>,
  ): Promise<{ results: Result[]; sample: Sample }> {
    const svc = await startService(backend, { PAY_RATE_LIMITS: OUT_OF_REACH })
    try {
      const { base, key } = svc
      const created = curl(`${base}/api/transactions/create`, {
        key,
        body: '{"amount": 49.99, "order_id": "bench", "order_description": "Bench order"}',
      })
      const id = JSON.parse(created.body).transaction.id as string
      // A token chosen (an ERC-20 if there is one), so the page shows amount, address and QR.
      const before = JSON.parse(curl(`${base}/pay/${id}/state`).body)
      const token = before.tokens.find((t: any) => !t.native) ?? before.tokens[0]
      const selected = curl(`${base}/pay/${id}/select`, {
        body: JSON.stringify({
          token_symbol: token.token_symbol,
          blockchain_network: token.blockchain_network,
        }),
      })
      if (selected.status !== 200) throw new Error(`select: ${selected.status} ${selected.body}`)
      const page = curl(`${base}/pay/${id}`)
      const state = JSON.parse(curl(`${base}/pay/${id}/state`).body)
      const qr = curl(`${base}/pay/${id}/qr.svg`)
      const assetPath = /src="(\/assets\/pay-page\.js\?v=[0-9a-f]+)"/.exec(page.body)?.[1]
      if (
        page.status !== 200 ||
        !state.quote ||
        !page.body.includes(`/pay/${id}/qr.svg`) ||
        !page.body.includes(state.quote.deposit_address) ||
        qr.status !== 200 ||
        !assetPath
      ) {
        throw new Error(
          `the page for ${id} does not show a chosen token: ${page.status} ${page.body.slice(0, 300)}`,
        )
      }
      const sample = { html: page.body, state, qr: qr.body, assetPath }
      console.error(
        `${backend}: ${token.token_symbol} on ${token.blockchain_network}; page ${page.body.length} B, state ${JSON.stringify(state).length} B, qr ${qr.body.length} B`,
      )

      const results: Result[] = pageAndBare(backend, `${base}/pay/${id}`, await bareFor(sample))
      results.push(
        wrk(`GET /pay/{id}/state (${backend})`, `${base}/pay/${id}/state`),
        wrk(`GET /pay/{id}/qr.svg (${backend})`, `${base}/pay/${id}/qr.svg`),
        wrk(`GET /assets/pay-page.js?v=… (${backend})`, `${base}${assetPath}`),
      )
      return { results, sample }
    } finally {
      await svc.stop()
    }
  }

  const work = mkdtempSync(join(tmpdir(), 'crypto-pay-bench-cert-'))
  await selfSignedTls(work)

  const results: Result[] = []
  let pglite: Awaited<ReturnType<typeof serviceRun>>
  let bare: BenchProcess | null = null
  /**
   * The bare server, started on first use with the page the first service rendered; it then runs
   * beside each service and is measured in rounds alternating with the page.
   */
  const bareFor = async (sample: Sample): Promise<string> => {
    if (!bare) {
      writeFileSync(join(work, 'page.html'), sample.html)
      bare = await startProcess(['bench/pay-page.ts', '--bare'], {
        TLS_CERT_FILE: join(work, 'cert.pem'),
        TLS_KEY_FILE: join(work, 'key.pem'),
        BENCH_HTML_FILE: join(work, 'page.html'),
      })
    }
    return `https://127.0.0.1:${bare.port}/pay/x`
  }
  try {
    pglite = await serviceRun('pglite', bareFor)
    results.push(...pglite.results)
    if (!process.env.DATABASE_URL)
      process.env.DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test'
    results.push(...(await serviceRun('postgres', bareFor)).results)
  } finally {
    await stopProcess(bare)
    rmSync(work, { recursive: true, force: true })
  }

  // In-process, nothing else running: the page and the QR code for the state PGlite served.
  const { renderPayPage } = await import('../src/modules/pay/page.ts')
  const { qrSvg } = await import('../src/modules/pay/qr.ts')
  const { PAY_ASSETS_DIR } = await import('../src/modules/pay/index.ts')
  const { loadStaticAssets, SHARED_ASSETS_DIR } = await import('../src/http/static-assets.ts')
  const assets = loadStaticAssets([SHARED_ASSETS_DIR, PAY_ASSETS_DIR])
  const state = pglite.sample.state
  const render = await timeCalls(() => renderPayPage(state, assets.url), 20_000, 2_000)
  const qr = await timeCalls(() => qrSvg(state.quote.payment_uri), 2_000, 200)
  const parse = await timeCalls(() => JSON.parse(JSON.stringify(state)), 20_000, 2_000)

  const bunVersion = spawnSync(BUN, ['--version'], { encoding: 'utf8' }).stdout.trim()
  console.log(
    `\n${new Date().toISOString()} · Bun ${bunVersion} · ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'} · ${(totalmem() / 2 ** 30).toFixed(0)} GiB · wrk -t1 -c${CONNECTIONS} -d${SECONDS}s, HTTPS keep-alive · whole run ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
  )
  console.log('| target | req/s | p50 ms | p99 ms | vs bare | non-2xx |')
  console.log('|---|---:|---:|---:|---:|---:|')
  // Each database's rows against the bare baseline of its own rounds.
  let baseline = 0
  for (const r of results) {
    if (r.name.startsWith('bare ')) baseline = r.rps
    console.log(
      `| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${((100 * r.rps) / baseline).toFixed(1)}% | ${r.errors}${r.errors ? ` of ${r.requests}` : ''} |`,
    )
  }
  const s = pglite.sample
  console.log(
    `\nBodies: page ${s.html.length} B, state ${JSON.stringify(s.state).length} B, qr.svg ${s.qr.length} B, pay-page.js ${assets.get('pay-page.js')!.body.length} B; payment URI ${s.state.quote.payment_uri.length} chars.\n`,
  )
  console.log('| in-process | median µs | p99 µs |')
  console.log('|---|---:|---:|')
  console.log(
    `| renderPayPage (20,000 calls) | ${render.median.toFixed(1)} | ${render.p99.toFixed(1)} |`,
  )
  console.log(
    `| qrSvg of the payment URI (2,000 calls) | ${qr.median.toFixed(1)} | ${qr.p99.toFixed(1)} |`,
  )
  console.log(
    `| JSON round trip of the same state (reference) | ${parse.median.toFixed(1)} | ${parse.p99.toFixed(1)} |`,
  )
}
