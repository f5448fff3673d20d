import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { assertDelivery } from './openapi-validator.ts'

const SCRIPT = fileURLToPath(new URL('./webhook-receiver.mjs', import.meta.url))

export interface Received {
  path: string
  at: number
  headers: Record<string, string>
  body: string
  verified: boolean
}

export type ReceiverMode = 'ok' | 'fail' | 'fail-then-ok' | 'hang' | 'redirect' | 'slow' | 'answer'

/** A merchant's receiver in its own Node process (node:crypto only), verifying every signature. */
export interface WebhookSink {
  url(path: string): string
  /** Sets what `path` does and which secret it verifies with. */
  configure(
    path: string,
    opts: {
      secret: string
      mode: ReceiverMode
      failures?: number
      location?: string
      delayMs?: number
      status?: number
      headers?: Record<string, string>
    },
  ): Promise<void>
  received(path?: string): Promise<Received[]>
  /** Requests held open right now by `hang` endpoints. */
  hanging(): Promise<number>
  /** Polls until `pred` holds for what `path` received (or throws after `timeoutMs`). */
  waitFor(path: string, pred: (r: Received[]) => boolean, timeoutMs?: number): Promise<Received[]>
  stop(): Promise<void>
}

export async function startWebhookSink(): Promise<WebhookSink> {
  const child: ChildProcess = spawn(process.env.NODE_BIN ?? 'node', [SCRIPT], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (c) => {
      out += c
      const m = /listening (\d+)/.exec(out)
      if (m) resolve(Number(m[1]))
    })
    child.once('exit', (code) => reject(new Error(`webhook receiver exited ${code}`)))
  })
  const base = `http://127.0.0.1:${port}`
  const get = async (path?: string) => {
    const got = (await (
      await fetch(`${base}/_received${path ? `?path=${encodeURIComponent(path)}` : ''}`)
    ).json()) as { received: Received[]; hanging: number }
    // Every delivery the service sent, in every test that receives one, is what the document says:
    // its body and its headers.
    for (const r of got.received)
      if (r.headers['x-service-signature']) assertDelivery(r.body, r.headers)
    return got
  }
  const sink: WebhookSink = {
    url: (path) => `${base}${path}`,
    async configure(path, opts) {
      await fetch(`${base}/_control`, { method: 'POST', body: JSON.stringify({ path, ...opts }) })
    },
    received: async (path) => (await get(path)).received,
    hanging: async () => (await get()).hanging,
    async waitFor(path, pred, timeoutMs = 30_000) {
      const end = Date.now() + timeoutMs
      for (;;) {
        const r = await sink.received(path)
        if (pred(r)) return r
        if (Date.now() > end)
          throw new Error(
            `waitFor ${path}: condition not met; received ${r.length}: ${r.map((x) => `${x.headers['x-service-attempt']}:${JSON.parse(x.body).event}`).join(', ')}`,
          )
        await new Promise((res) => setTimeout(res, 25))
      }
    },
    async stop() {
      if (child.exitCode !== null) return
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      await exited
    },
  }
  return sink
}
