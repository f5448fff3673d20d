import { fileURLToPath } from 'node:url'
import { Elysia } from 'elysia'
import { factsOf } from '../../http/context.ts'
import { ApiError, ErrorResponse } from '../../http/errors.ts'
import { json, respond, type Gathered } from '../../http/json-response.ts'
import { strictJsonBody } from '../../http/json-body.ts'
import type { Outcome } from '../../lib/outcome.ts'
import type { RateLimiter } from '../../limits/rate-limiter.ts'
import type { RateLimits } from '../../projects/project.service.ts'
import {
  SelectBody,
  SignedAuthorizationBody,
  X402TransactionState,
  type PayState,
  type SignedAuthorization,
} from './model.ts'
import { PAY_PAGE_HEADERS, renderMessagePage, renderPayPage, type AssetUrl } from './page.ts'
import { PAY_TEXT, fill } from './text.ts'
import { qrSvg } from './qr.ts'
import type { PayService } from './service.ts'
import type { StatusStreams } from './status-streams.ts'
import type { X402Answer } from './x402-payment.ts'
import {
  decodeHeader,
  encodeHeader,
  PaymentRequired,
  PAYMENT_REQUIRED_HEADER,
  PAYMENT_RESPONSE_HEADER,
  PAYMENT_SIGNATURE_HEADER,
  parsePaymentPayload,
} from '../../x402/protocol.ts'

/** The page's CSS, icon and bundled script (built from ./client by scripts/build-assets.ts). */
export const PAY_ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url))

const PAGE_ROUTE = '/pay/:id'

/**
 * A page with its headers; with the request's `set`, the headers its hooks gathered too, in one
 * Response (see respond).
 */
const page = (body: string, status: number, set?: Gathered, extra?: Record<string, string>) => {
  const headers = extra ? { ...PAY_PAGE_HEADERS, ...extra } : PAY_PAGE_HEADERS
  return set ? respond(set, body, status, headers) : new Response(body, { status, headers })
}

/**
 * A message page in the pay page's look (a checkout's page uses it for what it refuses): `status`,
 * with extra headers such as Retry-After.
 */
export function payMessage(
  asset: AssetUrl,
  status: number,
  title: string,
  body: string,
  extra?: Record<string, string>,
): Response {
  return page(renderMessagePage(asset, title, body), status, undefined, extra)
}

/** The page for an unknown payment, and for any path under /pay that names nothing. */
export function payNotFound(asset: AssetUrl): Response {
  return page(renderMessagePage(asset, PAY_TEXT.notFoundTitle, PAY_TEXT.notFoundBody), 404)
}

/**
 * The hosted pay page (docs/decisions/0026-pay-page-endpoints.md): the HTML at `GET /pay/{id}`, its
 * QR code and its JSON endpoints, authorised by the transaction's unguessable id alone and not part
 * of the merchant API (so not in its OpenAPI document).
 */
export function payController(deps: {
  pay: PayService
  streams: StatusStreams
  limiter: RateLimiter
  limits: RateLimits
  asset: AssetUrl
}) {
  const out = async (set: Gathered, p: Promise<Outcome<PayState>>) => {
    const r = await p
    if (!r.ok) throw ApiError.from(r)
    return json(set, r.value)
  }
  /**
   * A transaction's x402_url (docs/decisions/0063-x402.md), for any method: 402 with what to pay,
   * or 200 with the transaction (and the settlement when this request paid it).
   */
  const x402 = async ({
    params,
    request,
    set,
  }: {
    params: { id: string }
    request: Request
    set: Gathered
  }) => {
    const header = request.headers.get(PAYMENT_SIGNATURE_HEADER)
    const parsed = header === null ? null : parsePaymentPayload(decodeHeader(header))
    const r =
      parsed?.ok === true
        ? await deps.pay.x402Pay(params.id, parsed.payload, factsOf(request)?.clientIp ?? null)
        : await deps.pay.x402Required(params.id)
    if (!r.ok) throw ApiError.from(r)
    const answer: X402Answer =
      parsed?.ok === false && r.value.kind === 'required'
        ? { ...r.value, paymentRequired: { ...r.value.paymentRequired, error: parsed.reason } }
        : r.value
    if (answer.kind === 'required')
      return json(set, answer.paymentRequired, 402, {
        [PAYMENT_REQUIRED_HEADER]: encodeHeader(answer.paymentRequired),
        ...(answer.settlement
          ? { [PAYMENT_RESPONSE_HEADER]: encodeHeader(answer.settlement) }
          : {}),
      })
    return json(
      set,
      answer.state,
      200,
      answer.settlement
        ? { [PAYMENT_RESPONSE_HEADER]: encodeHeader(answer.settlement) }
        : undefined,
    )
  }
  /** Seconds to wait when this client is over the per-IP limit, else null. */
  const overLimit = async (request: Request): Promise<number | null> => {
    // docs/decisions/0026-pay-page-endpoints.md: per client IP.
    const decision = await deps.limiter.check(
      `pay:${factsOf(request)?.clientIp ?? 'unknown'}`,
      deps.limits,
    )
    return decision.allowed ? null : decision.retryAfter
  }
  return (
    new Elysia({ name: 'pay', prefix: '/pay' })
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
      .get(
        '/:id',
        async ({ params, request, set }) => {
          const wait = await overLimit(request)
          if (wait !== null)
            return page(
              renderMessagePage(
                deps.asset,
                PAY_TEXT.tooManyTitle,
                fill(PAY_TEXT.tooManyBody, { seconds: wait }),
              ),
              429,
              set,
              { 'retry-after': String(wait) },
            )
          const r = await deps.pay.state(params.id)
          if (!r.ok) {
            if (r.code !== 'not_found') throw ApiError.from(r)
            return payNotFound(deps.asset)
          }
          return page(renderPayPage(r.value, deps.asset), 200, set)
        },
        { detail: { hide: true } },
      )
      .get(
        '/:id/qr.svg',
        async ({ params }) => {
          const r = await deps.pay.state(params.id)
          if (!r.ok) throw ApiError.from(r)
          if (!r.value.quote)
            throw new ApiError(
              'not_found',
              'No token is chosen yet, so there is no payment request to show',
            )
          return new Response(qrSvg(r.value.quote.payment_uri), {
            headers: {
              'content-type': 'image/svg+xml',
              'cache-control': 'no-store',
              'content-security-policy': "default-src 'none'",
            },
          })
        },
        { detail: { hide: true } },
      )
      .get('/:id/state', ({ params, set }) => out(set, deps.pay.state(params.id)), {
        detail: { hide: true },
      })
      .post(
        '/:id/select',
        ({ params, body, request, set }) =>
          out(
            set,
            deps.pay.select(
              params.id,
              body as { token_symbol: string; blockchain_network: string },
              factsOf(request)?.clientIp ?? null,
            ),
          ),
        {
          parse: 'none',
          transform: [strictJsonBody(SelectBody)],
          detail: { hide: true },
        },
      )
      .post('/:id/confirm', ({ params, set }) => out(set, deps.pay.confirm(params.id)), {
        detail: { hide: true },
      })
      .post('/:id/cancel', ({ params, set }) => out(set, deps.pay.cancel(params.id)), {
        detail: { hide: true },
      })
      .post(
        '/:id/authorization',
        async ({ params, body, request, set }) => {
          const r = await deps.pay.payBySignature(
            params.id,
            body as SignedAuthorization,
            factsOf(request)?.clientIp ?? null,
          )
          if (!r.ok) throw ApiError.from(r)
          return json(set, { transaction_hash: r.value.transactionHash })
        },
        {
          parse: 'none',
          transform: [strictJsonBody(SignedAuthorizationBody)],
          detail: { hide: true },
        },
      )
      .model({ ErrorResponse, X402PaymentRequired: PaymentRequired, X402TransactionState })
      .get('/:id/x402', x402, {
        response: {
          200: 'X402TransactionState',
          402: 'X402PaymentRequired',
          404: 'ErrorResponse',
          409: 'ErrorResponse',
          429: 'ErrorResponse',
          500: 'ErrorResponse',
          503: 'ErrorResponse',
        },
        detail: {
          tags: ['x402'],
          operationId: 'payTransactionX402',
          summary: 'Pay a transaction over x402 (its x402_url)',
          description:
            "A transaction's `x402_url`, for programs paying with x402 v2; authorised by the transaction's unguessable id (no API key), rate-limited per client IP like the pay page. Without `PAYMENT-SIGNATURE`: 402 with `PAYMENT-REQUIRED` (and the same JSON as the body), one `exact` EIP-3009 requirement per token that takes signatures and that the transaction can be paid in, quoted now, to its deposit address. With a `PAYMENT-SIGNATURE` naming one of them exactly: the payment is checked and the service's relayer submits it, paying the gas; 200 with `PAYMENT-RESPONSE` and the transaction. A refused payment is 402 with the reason in `PAYMENT-REQUIRED`'s `error`. A transaction already paid (or being confirmed) answers 200 and takes nothing. 409: the transaction cannot be paid (expired, failed, cancelled), or the service has no relayer or no such token; 503: the relayer is over its bounds or a node cannot be reached. POST answers the same.",
          security: [],
          parameters: [
            {
              name: 'PAYMENT-SIGNATURE',
              in: 'header',
              required: false,
              description:
                'x402 v2: base64 of the JSON payment payload (`x402Version` 2, `accepted`: the requirement chosen, `payload`: the signed EIP-3009 authorization and its signature).',
              schema: { type: 'string' },
            },
          ],
        },
      })
      .post('/:id/x402', x402, { parse: 'none', detail: { hide: true } })
      .post(
        '/:id/test-wallet',
        async ({ params, set }) => {
          const r = await deps.pay.payWithTestWallet(params.id)
          if (!r.ok) throw ApiError.from(r)
          return json(set, { transaction_hash: r.value.txHash })
        },
        { detail: { hide: true } },
      )
      // Server-Sent Events: the state now, then after every committed change (./status-streams.ts).
      .get(
        '/:id/events',
        async ({ params, request }) => {
          const r = await deps.streams.open(params.id, request.signal)
          if (!r.ok) throw ApiError.from(r)
          return r.value
        },
        { detail: { hide: true } },
      )
  )
}
