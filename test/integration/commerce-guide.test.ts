/**
 * The Coinbase Commerce migration guide's "Try it" (docs/integrating/coinbase-commerce.md), run as
 * it says: docs/examples/commerce-shop.mjs in its own Node process, the official SDK unmodified,
 * given the project's key, the service's `/commerce/` base URL and its certificate in
 * NODE_EXTRA_CA_CERTS. The test is the customer: it reads the printed hosted_url, opens the pay
 * page, chooses TEUR and pays as "Pay with test wallet" does (the devnet's funded wallet sends the
 * quote), on a real devnet and a real clock. The snippet exits 0 having printed COMPLETED and the
 * payment.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Devnet } from '../../src/chain/devnet.ts'
import { createTestWallet } from '../../src/chain/test-wallet.ts'
import { backends } from '../helpers/databases.ts'
import { ROOT } from '../helpers/processes.ts'
import type { TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

const GUIDE = join(ROOT, 'docs/integrating/coinbase-commerce.md')
const SNIPPET = join(ROOT, 'docs/examples/commerce-shop.mjs')
/** How long the snippet may take in all; it is told a little less, so it exits by itself first. */
const BOUND_MS = 90_000

/** The snippet running: its output so far, waiting for a line, and its exit. */
interface Snippet {
  child: ChildProcess
  stdout(): string
  stderr(): string
  /** Resolves with the first match in stdout; rejects when the process exits or `BOUND_MS` passes. */
  waitFor(pattern: RegExp): Promise<RegExpMatchArray>
  exited: Promise<number | null>
}

/** `p`, or a failure naming `what` and the snippet's output once `ms` have passed. */
async function within<T>(p: Promise<T>, ms: number, what: string, snippet: Snippet): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `timed out after ${ms} ms waiting for ${what}\n--- stdout ---\n${snippet.stdout()}\n--- stderr ---\n${snippet.stderr()}`,
          ),
        ),
      ms,
    )
  })
  try {
    return await Promise.race([p, late])
  } finally {
    clearTimeout(timer)
  }
}

function runSnippet(env: Record<string, string>): Snippet {
  const child = spawn(process.env.NODE_BIN ?? 'node', [SNIPPET], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  const listeners = new Set<() => void>()
  const changed = () => {
    for (const l of listeners) l()
  }
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    out += c
    changed()
  })
  child.stderr!.setEncoding('utf8').on('data', (c: string) => {
    err += c
    changed()
  })
  let done = false
  const exited = new Promise<number | null>((resolve) => {
    child.on('close', (code) => {
      done = true
      resolve(code)
      changed()
    })
    child.on('error', (e) => {
      err += `\n[spawn error] ${e.message}\n`
    })
  })
  const output = () => `--- stdout ---\n${out}\n--- stderr ---\n${err}`
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    waitFor(pattern) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          off()
          reject(new Error(`no ${pattern} within ${BOUND_MS} ms\n${output()}`))
        }, BOUND_MS)
        const check = () => {
          const m = out.match(pattern)
          if (m || done) {
            off()
            if (m) resolve(m)
            else reject(new Error(`the snippet exited before printing ${pattern}\n${output()}`))
          }
        }
        const off = () => {
          clearTimeout(timer)
          listeners.delete(check)
        }
        listeners.add(check)
        check()
      })
    },
    exited,
  }
}

test('the guide names the two lines a Commerce shop changes, and its snippet is where it says', () => {
  expect(existsSync(SNIPPET)).toBe(true)
  const guide = readFileSync(GUIDE, 'utf8')
  expect(guide).toMatch(/Client\.init\([^)\n]*\/commerce\/[^)\n]*\)/)
  expect(guide).toContain('node docs/examples/commerce-shop.mjs')
  expect(readFileSync(SNIPPET, 'utf8')).toMatch(/Client\.init\(apiKey, baseUrl\)/)
})

for (const backend of backends()) {
  describe(`the Coinbase Commerce guide's "Try it", run as written [${backend}]`, () => {
    let devnet: Devnet
    let t: TestServer
    let key: string
    let dir: string
    let running: Snippet | null = null

    useStack(backend, { devnet: { confirmations: 2, pollIntervalMs: 100 } }, (s) => {
      devnet = s.devnet
      t = s.t
      key = s.key
      dir = s.dir
    })
    // A snippet left running by a failed test is ended here, by its own handle.
    afterEach(() => {
      if (running && running.child.exitCode === null && running.child.signalCode === null)
        running.child.kill('SIGKILL')
      running = null
    })

    test('the snippet creates a 25.00 EUR charge, prints its hosted_url, and once the customer pays there prints COMPLETED and the payment and exits 0', async () => {
      const ca = join(dir, 'service-cert.pem')
      writeFileSync(ca, t.ca)
      const snippet = runSnippet({
        COMMERCE_API_KEY: key,
        COMMERCE_BASE_URL: `${t.url}/commerce/`,
        COMMERCE_TIMEOUT_SECONDS: String(BOUND_MS / 1000 - 15),
        NODE_EXTRA_CA_CERTS: ca,
      })
      running = snippet

      const [, code] = await snippet.waitFor(/^charge (TX-[A-Z0-9-]+) created: 25\.00 EUR$/m)
      const [, hostedUrl] = await snippet.waitFor(/^hosted_url (\S+)$/m)
      expect(hostedUrl).toMatch(new RegExp(`^${t.url}/pay/[0-9a-f-]{36}$`))
      await snippet.waitFor(/^status NEW$/m)

      // The customer opens the page, chooses TEUR on the devnet, and presses "Pay with test
      // wallet": the devnet's funded wallet sends what is due (the same code the button runs).
      const path = new URL(hostedUrl!).pathname
      expect((await t.fetch(path)).status).toBe(200)
      const selected = await t.fetch(`${path}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: 'TEUR', blockchain_network: 'devnet' }),
      })
      expect(selected.status).toBe(200)
      const { quote } = (await selected.json()) as {
        quote: { token_amount: string; deposit_address: string }
      }
      // TEUR pays euros at par: 25 tokens of 6 decimals.
      expect(quote.token_amount).toBe('25000000')
      const wallet = createTestWallet({
        network: devnet.networks[0]!,
        privateKey: devnet.wallet.privateKey,
      })
      const hash = await wallet.pay('TEUR', quote.deposit_address, BigInt(quote.token_amount))

      const exit = await within(snippet.exited, BOUND_MS, 'the snippet to exit', snippet)
      const stdout = snippet.stdout()
      expect({ exit, stdout, stderr: snippet.stderr() }).toMatchObject({ exit: 0 })
      const statuses = [...stdout.matchAll(/^status (.+)$/gm)].map((m) => m[1])
      expect(statuses).toEqual(['NEW', 'PENDING', 'COMPLETED'])
      expect(stdout).toContain(
        `payment 25 TEUR (25.00 EUR) on devnet, transaction ${hash}, CONFIRMED`,
      )
      expect(stdout).toContain('paid: ship order order-1001')

      // What it printed is the charge the API holds.
      const charge = (await (
        await t.fetch(`/commerce/charges/${code}`, { headers: { 'x-cc-api-key': key } })
      ).json()) as any
      expect(charge.data).toMatchObject({
        code,
        hosted_url: hostedUrl,
        metadata: { customer_id: 'c-42', order_id: 'order-1001' },
        payments: [{ transaction_id: hash, status: 'CONFIRMED' }],
      })
    })
  })
}
