/**
 * `bun bench/signature-payment.ts` (docs/decisions/0062-pay-by-signature.md): paying by one
 * signature against paying by a plain transfer, on the service's devnet (src/chain/devnet.ts:
 * anvil from npm, Prague, automine plus a block every second, `--mixed-mining`, as `npm start`
 * runs it) followed by the real server (`bun src/main.ts` in its own process, PostgreSQL by
 * default) whose relayer is anvil's account 8 (RELAYER_KEY_FILE, as
 * test/integration/pay-by-signature.test.ts sets it up). Automine puts every transaction in a
 * block as soon as the node takes it, so what is measured is the service's own path, the
 * follower's poll included.
 *
 * 1. Sent -> `processing`: a customer holding TUSD and no ETH signs a TransferWithAuthorization
 *    of what is due and the page POSTs it to /pay/{id}/authorization (the relayer submits it); a
 *    customer holding TUSD and ETH sends a signed ERC-20 `transfer` to the deposit address
 *    (eth_sendRawTransaction). Each is timed from the moment its signed payload leaves the
 *    customer to the `processing` entry of the transaction's timeline (stamped by the service as
 *    it commits the transition; read through the API, so the bench's polling does not move it).
 *    BENCH_PAYMENTS of each, one at a time, in pairs (one of each kind; the order flips every
 *    pair) after BENCH_WARMUP_PAYMENTS unmeasured pairs. Each payment waits a point of the
 *    follower's poll cycle before it is sent, as chain-latency.ts mines at a random one; both of
 *    a pair wait the same point, and the points of successive pairs spread evenly over the cycle
 *    (a golden-ratio sequence from a random start), so the two kinds meet the same mix of phases
 *    and their quantiles differ by what the paths add, not by luck of the draw. Almost all of
 *    either latency is that wait for the poll. The plain transfer is the floor; the signature is
 *    a ratio against it. A POST answered 503 (a node error while checking it: nothing was sent,
 *    try again) is sent again as the page's customer would, timed from the first attempt, and
 *    counted in the table.
 * 2. Gas: gasUsed of the relayer's transferWithAuthorization receipts against that of the plain
 *    `transfer` receipts (same token, same amount, a payer left with nothing, a fresh deposit
 *    address: the same storage writes but the authorization's nonce), medians.
 * 3. Settles per second on one instance: BENCH_SETTLES signed authorizations for as many
 *    prepared transactions, POSTed with BENCH_IN_FLIGHT in flight; accepted submissions (200 with
 *    the relayer's transaction hash, i.e. the node took it) per second, from the first request
 *    to the last answer (a 503 counts as not accepted and is shown). Floor: the same number of transferWithAuthorization transactions, signed
 *    beforehand by one funded account, sent straight to anvil with as many in flight.
 *
 * Env: BENCH_PAYMENTS (40), BENCH_WARMUP_PAYMENTS (3), BENCH_SETTLES (60), BENCH_IN_FLIGHT (8),
 * BENCH_POLL_MS (500, the devnet's default), BENCH_CONFIRMATIONS (2, the devnet's default),
 * BENCH_DATABASE (postgres | pglite; DATABASE_URL names the PostgreSQL server, default
 * postgres://postgres@127.0.0.1:5432/test), BENCH_TIME_LIMIT (170 s: past it everything started
 * is stopped and the bench exits 2).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { type Address, bytesToHex, encodeFunctionData, getAddress, type Hex } from 'viem'
import {
  generatePrivateKey,
  mnemonicToAccount,
  type PrivateKeyAccount,
  privateKeyToAccount,
} from 'viem/accounts'
import { TestStablecoin } from '../src/chain/artifacts/index.ts'
import {
  ANVIL_DEFAULT_MNEMONIC,
  createDevnetClient,
  type Devnet,
  startDevnet,
} from '../src/chain/devnet.ts'
import {
  type AuthorizationDomain,
  eip3009Abi,
  transferAuthorizationTypedData,
} from '../src/chain/eip3009.ts'
import { writeNetworksFile } from '../test/helpers/chain.ts'
import { type BenchService, liftRateLimits, startService } from './harness.ts'

const PAYMENTS = Number(process.env.BENCH_PAYMENTS ?? 40)
const WARMUP = Number(process.env.BENCH_WARMUP_PAYMENTS ?? 3)
const SETTLES = Number(process.env.BENCH_SETTLES ?? 60)
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 8)
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 500)
const CONFIRMATIONS = Number(process.env.BENCH_CONFIRMATIONS ?? 2)
const TIME_LIMIT_S = Number(process.env.BENCH_TIME_LIMIT ?? 170)
const BACKEND: 'postgres' | 'pglite' =
  process.env.BENCH_DATABASE === 'pglite' ? 'pglite' : 'postgres'
if (BACKEND === 'postgres') process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test'
// The embedded database: the server must not inherit a DATABASE_URL.
else delete process.env.DATABASE_URL
const OUT_OF_REACH = '100000000/100000000/1000000000'
const AMOUNT_USD = 12
const ANVIL_VERSION = (
  JSON.parse(
    readFileSync(
      new URL('../node_modules/@foundry-rs/anvil/package.json', import.meta.url),
      'utf8',
    ),
  ) as { version: string }
).version

const RELAYER = mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 8 })
/** The floor's sender: another of anvil's funded accounts, so its nonces never meet the relayer's. */
const DIRECT_KEY = bytesToHex(
  mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 9 }).getHdKey().privateKey!,
)
const dir = mkdtempSync(join(tmpdir(), 'bench-signature-'))
const keyFile = join(dir, 'relayer.key')
writeFileSync(keyFile, `${bytesToHex(RELAYER.getHdKey().privateKey!)}\n`, { mode: 0o600 })

let devnet: Devnet | null = null
let svc: BenchService | null = null
let cleaning: Promise<void> | null = null
const cleanup = () =>
  (cleaning ??= (async () => {
    await svc?.stop().catch((e) => console.error(`stopping the service: ${e}`))
    await devnet?.stop().catch((e) => console.error(`stopping the devnet: ${e}`))
    rmSync(dir, { recursive: true, force: true })
  })())
const watchdog = setTimeout(async () => {
  console.error(`time limit of ${TIME_LIMIT_S} s reached: stopping what the bench started`)
  await Promise.race([cleanup(), Bun.sleep(15_000)])
  svc?.server.proc.kill('SIGKILL')
  process.exit(2)
}, TIME_LIMIT_S * 1000)

const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}
const medianBig = (xs: bigint[]) =>
  [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))[xs.length >> 1]!
const randomNonce = () => bytesToHex(crypto.getRandomValues(new Uint8Array(32)))
const n0 = (x: number | bigint) => Math.round(Number(x)).toLocaleString('en')
const log = (m: string) =>
  console.error(`[${((performance.now() - started) / 1000).toFixed(1)} s] ${m}`)
const started = performance.now()

/** The pay state fields this bench reads. */
interface Offer {
  id: string
  status: string
  quote: { deposit_address: Address; token_amount: string }
  authorization: {
    domain: AuthorizationDomain
    to: Address
    value: string
    valid_before: string
  } | null
}

try {
  devnet = await startDevnet({ confirmations: CONFIRMATIONS, pollIntervalMs: POLL_MS })
  const d = devnet
  const token = d.stablecoin
  svc = await startService(BACKEND, {
    // An older tree (BENCH_SERVER_ROOT) refuses the networks file's `relayer` block.
    NETWORKS_CONFIG: writeNetworksFile(
      dir,
      process.env.BENCH_SERVER_ROOT ? d.networks.map(({ relayer: _, ...n }) => n) : d.networks,
    ),
    RELAYER_KEY_FILE: keyFile,
    // The default 0.05 ETH an hour counts ~0.00015 ETH (gas limit x max fee) per payment at the
    // devnet's fees, ~300 an hour: raised so a longer run (more BENCH_PAYMENTS or BENCH_SETTLES,
    // or runs back to back) is never refused for the budget.
    RELAYER_MAX_SPEND_PER_HOUR: '100',
    // The same for each project and payer, and relays in flight per project (4 by default, which
    // would refuse part of the settles below at 8 in flight): BENCH_RELAYER_IN_FLIGHT sets it,
    // to measure the limit itself (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md).
    RELAYER_PROJECT_SPEND_PER_HOUR: '100',
    RELAYER_PAYER_SPEND_PER_HOUR: '100',
    RELAYER_IN_FLIGHT: process.env.BENCH_RELAYER_IN_FLIGHT ?? '10000',
    PAY_RATE_LIMITS: OUT_OF_REACH,
  })
  const s = svc
  liftRateLimits(s)
  log(`devnet ${d.rpcUrl}, service ${s.base} (${BACKEND}), relayer ${RELAYER.address}`)

  const call = (path: string, init: RequestInit = {}) =>
    fetch(`${s.base}${path}`, { ...init, tls: { rejectUnauthorized: false } } as RequestInit)
  const post = (path: string, body: unknown, key?: string) =>
    call(path, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(key ? { authorization: `Bearer ${key}` } : {}),
      },
      body: JSON.stringify(body),
    })

  /** A transaction of AMOUNT_USD with TUSD chosen on the pay page: its state and offer. */
  async function prepared(): Promise<Offer> {
    const c = await post('/api/transactions/create', { amount: AMOUNT_USD }, s.key)
    if (c.status !== 200 && c.status !== 201)
      throw new Error(`create: ${c.status} ${await c.text()}`)
    const id = ((await c.json()) as { transaction: { id: string } }).transaction.id
    const r = await post(`/pay/${id}/select`, {
      token_symbol: 'TUSD',
      blockchain_network: 'devnet',
    })
    const st = (await r.json()) as Offer
    if (r.status !== 200 || st.status !== 'prepared' || !st.authorization)
      throw new Error(`select ${id}: ${r.status} ${JSON.stringify(st).slice(0, 300)}`)
    return st
  }

  /** When the transaction's timeline says it reached `processing` (ms since the epoch). */
  async function processingAt(id: string, timeoutMs = 30_000): Promise<number> {
    const end = Date.now() + timeoutMs
    for (;;) {
      const r = await call(`/api/transactions/${id}/timeline`, {
        headers: { authorization: `Bearer ${s.key}` },
      })
      if (r.status !== 200) throw new Error(`timeline ${id}: ${r.status} ${await r.text()}`)
      const { timeline } = (await r.json()) as { timeline: { to_status: string; at: string }[] }
      const entry = timeline.find((e) => e.to_status === 'processing')
      if (entry) return Date.parse(entry.at)
      if (Date.now() > end)
        throw new Error(
          `${id} not processing after ${timeoutMs} ms: ${timeline.map((e) => e.to_status).join(' -> ')}`,
        )
      await Bun.sleep(25)
    }
  }

  /** What the customer's wallet sends to the page: the offer signed, valid until expiry. */
  async function signOffer(payer: PrivateKeyAccount, o: Offer) {
    const a = o.authorization!
    const message = {
      from: payer.address,
      to: getAddress(a.to),
      value: BigInt(a.value),
      validAfter: 0n,
      validBefore: BigInt(a.valid_before),
      nonce: randomNonce(),
    }
    const signature = await payer.signTypedData(
      transferAuthorizationTypedData(a.domain, message) as never,
    )
    return {
      from: payer.address,
      value: a.value,
      valid_after: '0',
      valid_before: a.valid_before,
      nonce: message.nonce,
      signature,
    }
  }

  // ---- Set-up: transactions, customers and their funds (automine: each lands at once).
  const total = WARMUP + PAYMENTS
  const wallet = createDevnetClient(d.rpcUrl, d.wallet.privateKey)
  let walletNonce = await wallet.getTransactionCount({
    address: wallet.account.address,
    blockTag: 'pending',
  })
  const funding: Hex[] = []
  const mint = async (to: Address, amount: bigint) =>
    funding.push(
      await wallet.writeContract({
        address: token,
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [to, amount],
        nonce: walletNonce++,
        gas: 100_000n,
      }),
    )
  const units = BigInt(AMOUNT_USD) * 10n ** 6n

  const transferPayments: { offer: Offer; key: Hex }[] = []
  const signaturePayments: { offer: Offer; body: Awaited<ReturnType<typeof signOffer>> }[] = []
  for (let i = 0; i < total; i++) {
    const offer = await prepared()
    const key = generatePrivateKey()
    const payer = privateKeyToAccount(key)
    if (BigInt(offer.quote.token_amount) !== units)
      throw new Error(`quote of ${offer.quote.token_amount}, not ${units}`)
    await mint(payer.address, units)
    funding.push(
      await wallet.sendTransaction({
        to: payer.address,
        value: 10n ** 16n,
        nonce: walletNonce++,
        gas: 21_000n,
      }),
    )
    transferPayments.push({ offer, key })
  }
  const sigPayers: PrivateKeyAccount[] = []
  for (let i = 0; i < total; i++) {
    const payer = privateKeyToAccount(generatePrivateKey())
    await mint(payer.address, units)
    sigPayers.push(payer)
  }
  const settleOffers: Offer[] = []
  const settlePayers: PrivateKeyAccount[] = []
  const floorPayers: PrivateKeyAccount[] = []
  for (let i = 0; i < SETTLES; i++) {
    settleOffers.push(await prepared())
    settlePayers.push(privateKeyToAccount(generatePrivateKey()))
    floorPayers.push(privateKeyToAccount(generatePrivateKey()))
    await mint(settlePayers[i]!.address, units)
    await mint(floorPayers[i]!.address, units)
  }
  for (const hash of funding) {
    const r = await wallet.waitForTransactionReceipt({ hash })
    if (r.status !== 'success') throw new Error(`funding ${hash} failed`)
  }
  for (let i = 0; i < total; i++) {
    const offer = await prepared()
    signaturePayments.push({ offer, body: await signOffer(sigPayers[i]!, offer) })
  }
  log(`set up: ${funding.length} funding transactions, ${2 * total + SETTLES} transactions`)
  if ((await wallet.getBalance({ address: sigPayers[0]!.address })) !== 0n)
    throw new Error('a signing customer holds ETH')

  // ---- 1 and 2: one payment at a time, the kinds alternating.
  const latency = { transfer: [] as number[], signature: [] as number[] }
  const sendMs = { transfer: [] as number[], signature: [] as number[] }
  const gas = { transfer: [] as bigint[], signature: [] as bigint[] }

  async function payByTransfer(p: (typeof transferPayments)[number]) {
    const customer = createDevnetClient(d.rpcUrl, p.key)
    const data = encodeFunctionData({
      abi: TestStablecoin.abi,
      functionName: 'transfer',
      args: [p.offer.quote.deposit_address, units],
    })
    // What the customer's wallet does before sending: estimate, price and sign.
    const [estimate, fees] = await Promise.all([
      customer.estimateGas({ account: customer.account, to: token, data }),
      customer.estimateFeesPerGas(),
    ])
    const raw = await customer.account.signTransaction({
      type: 'eip1559',
      chainId: d.networks[0]!.chainId,
      nonce: 0,
      to: token,
      data,
      gas: (estimate * 6n) / 5n,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    })
    const t0 = Date.now()
    const p0 = performance.now()
    const hash = await customer.sendRawTransaction({ serializedTransaction: raw })
    const sent = performance.now() - p0
    const at = await processingAt(p.offer.id)
    const receipt = await customer.getTransactionReceipt({ hash })
    if (receipt.status !== 'success') throw new Error(`transfer ${hash} reverted`)
    return { latency: at - t0, sent, gasUsed: receipt.gasUsed }
  }

  /** Refusals of a submission the service answered with 503 and a retry (see below). */
  const retried: string[] = []
  async function payBySignature(p: (typeof signaturePayments)[number]) {
    const t0 = Date.now()
    const p0 = performance.now()
    let r = await post(`/pay/${p.offer.id}/authorization`, p.body)
    // A 503 says nothing was sent and to try again (a node error while checking it): the page's
    // customer would, with the same signature. Timed from the first attempt.
    for (let tries = 1; r.status === 503 && tries < 3; tries++) {
      retried.push(await r.text())
      r = await post(`/pay/${p.offer.id}/authorization`, p.body)
    }
    const sent = performance.now() - p0
    if (r.status !== 200)
      throw new Error(`authorization ${p.offer.id}: ${r.status} ${await r.text()}`)
    const { transaction_hash: hash } = (await r.json()) as { transaction_hash: Hex }
    const at = await processingAt(p.offer.id)
    const receipt = await wallet.getTransactionReceipt({ hash })
    if (receipt.status !== 'success' || getAddress(receipt.from) !== RELAYER.address)
      throw new Error(`relayed ${hash}: ${receipt.status} from ${receipt.from}`)
    gasLimits.push((await wallet.getTransaction({ hash })).gas)
    return { latency: at - t0, sent, gasUsed: receipt.gasUsed }
  }
  /** The relayer's gas limit per payment: what its allowances count until the receipt. */
  const gasLimits: bigint[] = []

  const phase0 = Math.random()
  for (let i = 0; i < total; i++) {
    // The pair's point of the poll cycle (see the head of this file).
    const wait = ((phase0 + i * 0.6180339887) % 1) * POLL_MS
    const order =
      i % 2 === 0 ? (['transfer', 'signature'] as const) : (['signature', 'transfer'] as const)
    for (const kind of order) {
      await Bun.sleep(wait)
      const r =
        kind === 'transfer'
          ? await payByTransfer(transferPayments[i]!)
          : await payBySignature(signaturePayments[i]!)
      if (i < WARMUP) continue
      latency[kind].push(r.latency)
      sendMs[kind].push(r.sent)
      gas[kind].push(r.gasUsed)
    }
  }
  log(
    `latency: transfer p50 ${pct(latency.transfer, 0.5)} ms, signature p50 ${pct(latency.signature, 0.5)} ms`,
  )

  // ---- 3, floor: the same calls signed beforehand by one funded account, sent straight to anvil.
  /** `jobs` run with IN_FLIGHT at once; their wall time in seconds and each one's ms. */
  async function inFlight<T>(jobs: (() => Promise<T>)[]) {
    const each: number[] = []
    const results: T[] = []
    let next = 0
    const t0 = performance.now()
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < jobs.length) {
          const j = next++
          const s0 = performance.now()
          results[j] = await jobs[j]!()
          each.push(performance.now() - s0)
        }
      }),
    )
    return { seconds: (performance.now() - t0) / 1000, each, results }
  }

  const direct = createDevnetClient(d.rpcUrl, DIRECT_KEY)
  const validBefore = BigInt(Math.floor(Date.now() / 1000) + 3600)
  const floorCalls = await Promise.all(
    floorPayers.map(async (payer) => {
      const message = {
        from: payer.address,
        // A fresh address that is no deposit address: the service ignores these transfers.
        to: privateKeyToAccount(generatePrivateKey()).address,
        value: units,
        validAfter: 0n,
        validBefore,
        nonce: randomNonce(),
      }
      const signature = await payer.signTypedData(
        transferAuthorizationTypedData(
          {
            name: 'Test USD',
            version: '2',
            chainId: d.networks[0]!.chainId,
            verifyingContract: token,
          },
          message,
        ) as never,
      )
      return encodeFunctionData({
        abi: eip3009Abi,
        functionName: 'transferWithAuthorization',
        args: [
          message.from,
          message.to,
          message.value,
          message.validAfter,
          message.validBefore,
          message.nonce,
          signature,
        ],
      })
    }),
  )
  const [floorEstimate, floorFees, floorNonce] = await Promise.all([
    direct.estimateGas({ account: direct.account, to: token, data: floorCalls[0]! }),
    direct.estimateFeesPerGas(),
    direct.getTransactionCount({ address: direct.account.address, blockTag: 'pending' }),
  ])
  const floorRaw = await Promise.all(
    floorCalls.map((data, i) =>
      direct.account.signTransaction({
        type: 'eip1559',
        chainId: d.networks[0]!.chainId,
        nonce: floorNonce + i,
        to: token,
        data,
        gas: (floorEstimate * 6n) / 5n,
        maxFeePerGas: floorFees.maxFeePerGas * 2n,
        maxPriorityFeePerGas: floorFees.maxPriorityFeePerGas,
      }),
    ),
  )
  const floor = await inFlight(
    floorRaw.map((raw) => () => direct.sendRawTransaction({ serializedTransaction: raw })),
  )
  for (const hash of floor.results) {
    const r = await direct.waitForTransactionReceipt({ hash })
    if (r.status !== 'success') throw new Error(`floor ${hash} reverted`)
  }
  log(`floor: ${SETTLES} sent in ${floor.seconds.toFixed(2)} s`)

  // ---- 3, the service: signed authorizations POSTed, IN_FLIGHT at once.
  const bodies = await Promise.all(settleOffers.map((o, i) => signOffer(settlePayers[i]!, o)))
  const settleStart = Date.now()
  const service = await inFlight(
    settleOffers.map((o, i) => async () => {
      const r = await post(`/pay/${o.id}/authorization`, bodies[i])
      return { status: r.status, text: await r.text() }
    }),
  )
  const accepted = service.results.flatMap((r, i) => (r.status === 200 ? [i] : []))
  const refused = service.results.filter((r) => r.status !== 200)
  for (const r of refused) console.error(`refused: ${r.status} ${r.text}`)
  if (refused.some((r) => r.status !== 503))
    throw new Error('a settle was refused for another reason than a node error (503)')
  for (const i of accepted) {
    const hash = (JSON.parse(service.results[i]!.text) as { transaction_hash: Hex })
      .transaction_hash
    const receipt = await wallet.waitForTransactionReceipt({ hash })
    if (receipt.status !== 'success') throw new Error(`relayed ${hash} reverted`)
  }
  let lastProcessing = 0
  for (const i of accepted)
    lastProcessing = Math.max(lastProcessing, await processingAt(settleOffers[i]!.id))
  log(`service: ${accepted.length} accepted in ${service.seconds.toFixed(2)} s`)

  // ---- Report.
  const x = (a: number, b: number) => `${(a / b).toFixed(2)}x`
  const ms = (v: number) => `${n0(v)} ms`
  const gT = medianBig(gas.transfer)
  const gS = medianBig(gas.signature)
  const range = (xs: bigint[]) => {
    const s = [...xs].sort((a, b) => (a < b ? -1 : 1))
    return s[0] === s.at(-1) ? '' : ` (${n0(s[0]!)}-${n0(s.at(-1)!)})`
  }
  const floorRate = SETTLES / floor.seconds
  const serviceRate = accepted.length / service.seconds
  console.log(
    `\nMachine: ${cpus().length} x ${cpus()[0]?.model ?? '?'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Bun ${Bun.version}, ${BACKEND === 'postgres' ? 'PostgreSQL' : 'PGlite'}, anvil ${ANVIL_VERSION} (the devnet: Prague, automine plus a block every 1 s), confirmations ${CONFIRMATIONS}, poll ${POLL_MS} ms; ${PAYMENTS} payments of each kind after ${WARMUP} unmeasured, ${SETTLES} settles at ${IN_FLIGHT} in flight; whole run ${((performance.now() - started) / 1000).toFixed(0)} s`,
  )
  console.log(
    '\n| payment | plain transfer (floor) | by signature | signature / floor |\n|---|---:|---:|---:|',
  )
  for (const [label, q] of [
    ['signed payload sent -> processing, p50', 0.5],
    ['signed payload sent -> processing, p99', 0.99],
  ] as const) {
    const a = pct(latency.transfer, q)
    const b = pct(latency.signature, q)
    console.log(`| ${label} | ${ms(a)} | ${ms(b)} | ${x(b, a)} |`)
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
  console.log(
    `| signed payload sent -> processing, mean | ${ms(mean(latency.transfer))} | ${ms(mean(latency.signature))} | ${x(mean(latency.signature), mean(latency.transfer))} |`,
  )
  console.log(
    `| the send itself (eth_sendRawTransaction / POST authorization), p50 / p99 | ${pct(sendMs.transfer, 0.5).toFixed(1)} / ${pct(sendMs.transfer, 0.99).toFixed(1)} ms | ${pct(sendMs.signature, 0.5).toFixed(1)} / ${pct(sendMs.signature, 0.99).toFixed(1)} ms | ${x(pct(sendMs.signature, 0.5), pct(sendMs.transfer, 0.5))} (p50) |`,
  )
  if (retried.length)
    console.log(
      `| POSTs answered 503 and sent again (a node error while checking; nothing sent) | | ${retried.length} of ${PAYMENTS + WARMUP} | |`,
    )
  console.log(
    `| gas per payment (gasUsed, median) | ${n0(gT)}${range(gas.transfer)} | ${n0(gS)}${range(gas.signature)} | ${x(Number(gS), Number(gT))} |`,
  )
  console.log(
    `| the relayer's gas limit per payment (median; counted at limit x max fee until the receipt) | | ${n0(medianBig(gasLimits))}${range(gasLimits)} | |`,
  )
  console.log(
    '\n| settles on one instance | floor: signed beforehand, sent straight to anvil | POST /pay/{id}/authorization (relayer) | service / floor |\n|---|---:|---:|---:|',
  )
  console.log(
    `| accepted submissions/s, ${SETTLES} at ${IN_FLIGHT} in flight | ${floorRate.toFixed(0)}/s (${floor.seconds.toFixed(2)} s) | ${serviceRate.toFixed(1)}/s (${service.seconds.toFixed(2)} s, ${accepted.length} of ${SETTLES} accepted${refused.length ? `; ${refused.length} answered 503 (a node error while checking; nothing sent)` : ''}) | ${((100 * serviceRate) / floorRate).toFixed(1)}% |`,
  )
  console.log(
    `| one submission, p50 / p99 | ${pct(floor.each, 0.5).toFixed(1)} / ${pct(floor.each, 0.99).toFixed(1)} ms | ${n0(pct(service.each, 0.5))} / ${n0(pct(service.each, 0.99))} ms | |`,
  )
  console.log(
    `| first submission -> the last of them processing | | ${((lastProcessing - settleStart) / 1000).toFixed(2)} s | |`,
  )
} finally {
  clearTimeout(watchdog)
  await cleanup()
}
process.exit(0)
