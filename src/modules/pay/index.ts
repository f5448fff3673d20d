import { fileURLToPath } from 'node:url'
import { Elysia } from 'elysia'
import { FINAL_STATUSES } from '../../../machines/transaction.machine.ts'
import { factsOf } from '../../http/context.ts'
import { ApiError } from '../../http/errors.ts'
import { json } from '../../http/json-response.ts'
import { strictJsonBody } from '../../http/json-body.ts'
import type { Outcome } from '../../lib/outcome.ts'
import type { RateLimiter } from '../../limits/rate-limiter.ts'
import type { RateLimits } from '../../projects/project.service.ts'
import { SelectBody, type PayState } from './model.ts'
import { PAY_PAGE_HEADERS, renderMessagePage, renderPayPage, type AssetUrl } from './page.ts'
import { PAY_TEXT, fill } from './text.ts'
import { qrSvg } from './qr.ts'
import type { PayService } from './service.ts'

/** The page's CSS, icon and bundled script (built from ./client by scripts/build-assets.ts). */
export const PAY_ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url))

/** How often an open event stream checks its transaction for a change. */
const STREAM_POLL_MS = 1000
/**
 * A comment line this often keeps an idle stream open: Bun.serve closes a connection that sends
 * nothing for 10 s, and proxies do the same after their own idle time.
 */
const KEEPALIVE_TICKS = 5
const PAGE_ROUTE = '/pay/:id'
const FINAL = new Set<string>(FINAL_STATUSES)

const page = (body: string, status: number, extra: Record<string, string> = {}) => new Response(body, { status, headers: { ...PAY_PAGE_HEADERS, ...extra } })

/** The page for an unknown payment, and for any path under /pay that names nothing. */
export function payNotFound(asset: AssetUrl): Response {
  return page(renderMessagePage(asset, PAY_TEXT.notFoundTitle, PAY_TEXT.notFoundBody), 404)
}

/**
 * The hosted pay page (R26): the HTML at `GET /pay/{id}`, its QR code and its JSON endpoints,
 * authorised by the transaction's unguessable id alone and not part of the merchant API (so not
 * in its OpenAPI document).
 */
export function payController(deps: { pay: PayService; limiter: RateLimiter; limits: RateLimits; asset: AssetUrl; stopping: AbortSignal }) {
  const out = async (p: Promise<Outcome<PayState>>) => {
    const r = await p
    if (!r.ok) throw ApiError.from(r)
    return json(r.value)
  }
  /** Seconds to wait when this client is over the per-IP limit, else null. */
  const overLimit = async (request: Request): Promise<number | null> => {
    // R26: per client IP.
    const decision = await deps.limiter.check(`pay:${factsOf(request)?.clientIp ?? 'unknown'}`, deps.limits)
    return decision.allowed ? null : decision.retryAfter
  }
  return new Elysia({ name: 'pay', prefix: '/pay' })
    .onTransform(async ({ request, set, route }) => {
      set.headers['cache-control'] = 'no-store'
      // The page itself answers people, in HTML: it checks the limit in its handler.
      if (route === PAGE_ROUTE) return
      const wait = await overLimit(request)
      if (wait !== null) {
        set.headers['retry-after'] = String(wait)
        throw new ApiError('rate_limited', `Too many requests; retry after ${wait} s`)
      }
    })
    .get('/:id', async ({ params, request }) => {
      const wait = await overLimit(request)
      if (wait !== null) return page(renderMessagePage(deps.asset, PAY_TEXT.tooManyTitle, fill(PAY_TEXT.tooManyBody, { seconds: wait })), 429, { 'retry-after': String(wait) })
      const r = await deps.pay.state(params.id)
      if (!r.ok) {
        if (r.code !== 'not_found') throw ApiError.from(r)
        return payNotFound(deps.asset)
      }
      return page(renderPayPage(r.value, deps.asset), 200)
    }, { detail: { hide: true } })
    .get('/:id/qr.svg', async ({ params }) => {
      const r = await deps.pay.state(params.id)
      if (!r.ok) throw ApiError.from(r)
      if (!r.value.quote) throw new ApiError('not_found', 'No token is chosen yet, so there is no payment request to show')
      return new Response(qrSvg(r.value.quote.payment_uri), {
        headers: { 'content-type': 'image/svg+xml', 'cache-control': 'no-store', 'content-security-policy': "default-src 'none'" },
      })
    }, { detail: { hide: true } })
    .get('/:id/state', ({ params }) => out(deps.pay.state(params.id)), { detail: { hide: true } })
    .post('/:id/select', ({ params, body, request }) => out(deps.pay.select(params.id, body as { token_symbol: string; blockchain_network: string }, factsOf(request)?.clientIp ?? null)), {
      parse: 'none',
      transform: [strictJsonBody(SelectBody)],
      detail: { hide: true },
    })
    .post('/:id/confirm', ({ params }) => out(deps.pay.confirm(params.id)), { detail: { hide: true } })
    .post('/:id/cancel', ({ params }) => out(deps.pay.cancel(params.id)), { detail: { hide: true } })
    .post('/:id/test-wallet', async ({ params }) => {
      const r = await deps.pay.payWithTestWallet(params.id)
      if (!r.ok) throw ApiError.from(r)
      return json({ transaction_hash: r.value.txHash })
    }, { detail: { hide: true } })
    .get('/:id/events', async ({ params, request }) => {
      const first = await deps.pay.state(params.id)
      if (!first.ok) throw ApiError.from(first)
      return eventStream(deps.pay, params.id, first.value, request.signal, deps.stopping)
    }, { detail: { hide: true } })
}

/**
 * Server-Sent Events: the state now, then the state after every change, until a final status,
 * the client goes away or the server begins its graceful stop (the page's EventSource then
 * reconnects, to another instance). `retry` tells EventSource how soon to reconnect.
 */
function eventStream(pay: PayService, id: string, initial: PayState, signal: AbortSignal, stopping: AbortSignal): Response {
  const encoder = new TextEncoder()
  let timer: ReturnType<typeof setTimeout> | null = null
  let closed = false
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (s: PayState) => controller.enqueue(encoder.encode(`id: ${s.version}\nevent: state\ndata: ${JSON.stringify(s)}\n\n`))
      const close = () => {
        if (closed) return
        closed = true
        stopping.removeEventListener('abort', close)
        if (timer) clearTimeout(timer)
        try {
          controller.close()
        } catch {}
      }
      signal.addEventListener('abort', close)
      stopping.addEventListener('abort', close)
      if (stopping.aborted) return close()
      controller.enqueue(encoder.encode('retry: 2000\n\n'))
      send(initial)
      if (FINAL.has(initial.status)) return close()
      let version = initial.version
      let idle = 0
      const tick = async () => {
        if (closed) return
        try {
          const v = await pay.version(id)
          if (v !== null && v !== version) {
            const s = await pay.state(id)
            if (s.ok) {
              version = s.value.version
              send(s.value)
              if (FINAL.has(s.value.status)) return close()
            }
          } else if (++idle % KEEPALIVE_TICKS === 0) controller.enqueue(encoder.encode(': keep-alive\n\n'))
        } catch {
          // A database hiccup: try again on the next tick; the page also polls /state.
        }
        if (!closed) timer = setTimeout(tick, STREAM_POLL_MS)
      }
      timer = setTimeout(tick, STREAM_POLL_MS)
    },
    cancel() {
      closed = true
      if (timer) clearTimeout(timer)
    },
  })
  return new Response(stream, { headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' } })
}
