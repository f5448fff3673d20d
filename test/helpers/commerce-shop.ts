import { spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { TestServer } from './server.ts'

const SCRIPT = fileURLToPath(new URL('./commerce-shop.mjs', import.meta.url))

/** A refusal as the SDK raised it: its error class, message and HTTP status. */
export interface ShopError {
  name: string
  message: string
  status: number | null
}

/** What a Commerce-format webhook looked like to the shop. */
export interface ShopHook {
  body: string
  signature: string
  verified: boolean
  error: string | null
  type: string | null
}

/**
 * A shop that ran on Coinbase Commerce (test/helpers/commerce-shop.mjs): the official SDK in its
 * own Node process, trusting the test server's certificate, with a webhook receiver.
 */
export interface CommerceShop {
  /** Its webhook receiver's URL. */
  hookUrl: string
  /** Runs one SDK call; resolves with its value, or rejects with the SDK's error as ShopError. */
  call<T = any>(op: string, fields?: Record<string, unknown>): Promise<T>
  /** The same call, resolving with the SDK's error (the test expects one). */
  refused(op: string, fields?: Record<string, unknown>): Promise<ShopError>
  stop(): Promise<void>
}

export async function startCommerceShop(t: TestServer): Promise<CommerceShop> {
  const ca = join(t.dataDir, 'commerce-shop-ca.pem')
  writeFileSync(ca, t.ca)
  const child: ChildProcess = spawn(process.env.NODE_BIN ?? 'node', [SCRIPT], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, NODE_EXTRA_CA_CERTS: ca },
  })
  const waiting = new Map<number, (a: any) => void>()
  let next = 0
  let buffered = ''
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      buffered += chunk
      for (let i = buffered.indexOf('\n'); i >= 0; i = buffered.indexOf('\n')) {
        const line = buffered.slice(0, i)
        buffered = buffered.slice(i + 1)
        const m = /^listening (\d+)$/.exec(line)
        if (m) {
          resolve(Number(m[1]))
          continue
        }
        const answer = JSON.parse(line)
        waiting.get(answer.id)?.(answer)
        waiting.delete(answer.id)
      }
    })
    child.once('exit', (code) => reject(new Error(`commerce shop exited ${code}`)))
  })
  const send = (op: string, fields: Record<string, unknown> = {}) =>
    new Promise<any>((resolve) => {
      const id = next++
      waiting.set(id, resolve)
      child.stdin!.write(`${JSON.stringify({ id, op, ...fields })}\n`)
    })
  return {
    hookUrl: `http://127.0.0.1:${port}/hook`,
    async call(op, fields) {
      const a = await send(op, fields)
      if (!a.ok)
        throw Object.assign(new Error(`${op}: ${a.error.name} ${a.error.message}`), a.error)
      return a.value
    },
    async refused(op, fields) {
      const a = await send(op, fields)
      if (a.ok)
        throw new Error(`${op} was expected to fail; it answered ${JSON.stringify(a.value)}`)
      return a.error
    },
    async stop() {
      child.stdin!.end()
      child.kill()
    },
  }
}
