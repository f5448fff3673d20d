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
    return { port: server.port, stop: async () => server.stop(true) }
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
    return { port: await bound, stop: () => server.shutdown() }
  }
  throw new Error('Run the server with Bun (npm start) or Deno (npm run start:deno)')
}
