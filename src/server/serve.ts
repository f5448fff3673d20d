import { setHostless, setPeerIp } from '../http/context.ts'

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

// The one place that touches both runtimes' globals (bun-types would claim Bun exists under Deno).
// biome-ignore lint/suspicious/noExplicitAny: see above
declare const Deno: any
// biome-ignore lint/suspicious/noExplicitAny: as above
declare const Bun: any

/**
 * docs/decisions/0001-runtimes-bun-and-deno.md: the only place that knows Bun.serve from
 * Deno.serve; records the peer address for the app.
 */
export async function serve(opts: ServeOptions): Promise<Listener> {
  if (typeof Bun !== 'undefined') {
    const server = Bun.serve({
      port: opts.port,
      hostname: opts.host,
      tls: opts.tls,
      // Our own 64 KiB limit answers 413 first; this only stops runaway uploads early.
      maxRequestBodySize: 1024 * 1024,
      // biome-ignore lint/suspicious/noExplicitAny: Bun's server, untyped like the global above
      fetch(req: Request, srv: any) {
        const ip = srv.requestIP(req)?.address
        req = withAbsoluteUrl(req)
        setPeerIp(req, ip)
        return opts.fetch(req)
      },
    })
    // Graceful: stop accepting, let requests in flight finish; force after a grace period.
    return {
      port: server.port,
      stop: () => withGrace(Promise.resolve(server.stop(false)), () => server.stop(true)),
    }
  }
  if (typeof Deno !== 'undefined') {
    let ready!: (port: number) => void
    const bound = new Promise<number>((r) => (ready = r))
    const server = Deno.serve(
      {
        port: opts.port,
        hostname: opts.host,
        ...(opts.tls ?? {}),
        onListen: (addr: { port: number }) => ready(addr.port),
      },
      (req: Request, info: { remoteAddr: { hostname: string } }) => {
        req = withAbsoluteUrl(req)
        setPeerIp(req, info.remoteAddr?.hostname)
        return opts.fetch(req)
      },
    )
    return {
      port: await bound,
      stop: () => withGrace(Promise.resolve(server.shutdown()), () => server.shutdown()),
    }
  }
  throw new Error('Run the server with Bun (npm start) or Deno (npm run start:deno)')
}

/** Never a real host (RFC 2606), so a URL built on it cannot be mistaken for one. */
const STAND_IN_HOST = 'host.invalid'

/**
 * The app reads `request.url` as an absolute URL. Bun hands over a bare path when the Host
 * header is missing (HTTP/1.0 needs none) or empty or not a host, and an unparsable URL for
 * some (`[::`, `x:99999`): such a request gets the same path on a stand-in host and is marked,
 * so the app can answer it properly (400) instead of failing on the URL.
 */
function withAbsoluteUrl(req: Request): Request {
  const url = req.url
  if (URL.canParse(url)) return req
  const start = url.startsWith('/') ? 0 : url.indexOf('/', url.indexOf('//') + 2)
  const fixed = new Request(`https://${STAND_IN_HOST}${start < 0 ? '/' : url.slice(start)}`, req)
  setHostless(fixed)
  return fixed
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
