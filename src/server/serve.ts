import { setPeerIp } from '../http/context.ts'

/** A bound listener, whichever runtime serves it. */
export interface Listener {
  port: number
  stop(): Promise<void>
}

export interface ServeOptions {
  port: number
  host: string
  tls?: { cert: string; key: string }
  fetch: (req: Request) => Response | Promise<Response>
}

declare const Deno: any
declare const Bun: any

/** R1: the only place that knows Bun.serve from Deno.serve; records the peer address for the app. */
export async function serve(opts: ServeOptions): Promise<Listener> {
  if (typeof Bun !== 'undefined') {
    const server = Bun.serve({
      port: opts.port,
      hostname: opts.host,
      tls: opts.tls,
      // Our own 64 KiB limit answers 413 first; this only stops runaway uploads early.
      maxRequestBodySize: 1024 * 1024,
      fetch(req: Request, srv: any) {
        setPeerIp(req, srv.requestIP(req)?.address)
        return opts.fetch(req)
      },
    })
    // Graceful: stop accepting, let requests in flight finish; force after a grace period.
    return { port: server.port, stop: () => withGrace(Promise.resolve(server.stop(false)), () => server.stop(true)) }
  }
  if (typeof Deno !== 'undefined') {
    let ready!: (port: number) => void
    const bound = new Promise<number>((r) => (ready = r))
    const server = Deno.serve(
      { port: opts.port, hostname: opts.host, ...(opts.tls ?? {}), onListen: (addr: { port: number }) => ready(addr.port) },
      (req: Request, info: { remoteAddr: { hostname: string } }) => {
        setPeerIp(req, info.remoteAddr?.hostname)
        return opts.fetch(req)
      },
    )
    return { port: await bound, stop: () => withGrace(Promise.resolve(server.shutdown()), () => server.shutdown()) }
  }
  throw new Error('Run the server with Bun (npm start) or Deno (npm run start:deno)')
}

const GRACE_MS = 10_000

async function withGrace(graceful: Promise<unknown>, force: () => unknown): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      force()
      resolve()
    }, GRACE_MS)
  })
  await Promise.race([graceful.then(() => {}), late])
  clearTimeout(timer)
}
