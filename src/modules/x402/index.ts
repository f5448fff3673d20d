import { Elysia } from 'elysia'
import { principalOf, requireScope } from '../../http/api-gate.ts'
import { ApiError, ErrorResponse } from '../../http/errors.ts'
import { strictJsonBody } from '../../http/json-body.ts'
import { type Gathered, json } from '../../http/json-response.ts'
import type { RateLimiter } from '../../limits/rate-limiter.ts'
import type { RateLimits } from '../../projects/project.service.ts'
import {
  FacilitatorRequest,
  PayToResponse,
  SettleResponse,
  SupportedResponse,
  VerifyResponse,
} from './model.ts'
import type { FacilitatorRequest as Request402, FacilitatorService } from './service.ts'

const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((c) => [c, 'ErrorResponse'])) as Record<number, 'ErrorResponse'>

const SCOPE = 'Scope `x402:settle`.'

/**
 * Merchant API: the x402 facilitator for the merchant's own resources
 * (docs/decisions/0063-x402.md), as x402 v2 facilitators answer, so the reference middleware
 * (`@x402/hono`, `@x402/express`) works with this service's URL and an API key.
 */
export function x402Controller(deps: {
  facilitator: FacilitatorService
  limiter: Pick<RateLimiter, 'check'>
  /** Verifies and settles per API key (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md). */
  settleLimits: RateLimits
}) {
  /** A `transform` hook: each key's verifies and settles count against its own limits. */
  const perKey = async ({ request, set }: { request: Request; set: Gathered }) => {
    const caller = principalOf(request)
    const decision = await deps.limiter.check(`x402-key:${caller.keyId}`, deps.settleLimits)
    if (decision.allowed) return
    set.headers['retry-after'] = String(decision.retryAfter)
    throw new ApiError(
      'rate_limited',
      `This API key has reached its x402 verify and settle limit (${deps.settleLimits.minute} a minute, ${deps.settleLimits.hour} an hour, ${deps.settleLimits.day} a day). Retry after ${decision.retryAfter} s.`,
    )
  }
  return new Elysia({ name: 'x402', prefix: '/api/x402' })
    .model({
      ErrorResponse,
      X402FacilitatorRequest: FacilitatorRequest,
      X402VerifyResult: VerifyResponse,
      X402SettleResult: SettleResponse,
      X402SupportedKinds: SupportedResponse,
      X402PayTo: PayToResponse,
    })
    .get(
      '/pay-to',
      async ({ request, set }) => {
        const caller = principalOf(request)
        return json(set, {
          success: true,
          mode: caller.mode,
          ...(await deps.facilitator.payTo(caller)),
        })
      },
      {
        transform: [requireScope('x402:settle')],
        response: { 200: 'X402PayTo', ...errors(400, 401, 403, 413, 429, 500) },
        detail: {
          tags: ['x402'],
          operationId: 'getX402PayTo',
          summary: "Where this project's x402 payments go",
          description: `The \`payTo\` a merchant's x402 middleware must name for its routes (the address the operator set for this key's mode with \`project set-x402-pay-to\`), and the assets it may ask for with the \`extra\` each needs. ${SCOPE}`,
        },
      },
    )
    .get(
      '/supported',
      ({ request, set }) => json(set, deps.facilitator.supported(principalOf(request))),
      {
        transform: [requireScope('x402:settle')],
        response: { 200: 'X402SupportedKinds', ...errors(400, 401, 403, 413, 429, 500) },
        detail: {
          tags: ['x402'],
          operationId: 'x402Supported',
          summary: 'x402: what can be settled',
          description: `The x402 facilitator's \`GET /supported\`: scheme \`exact\` on each network of this key's mode that a relayer serves and where a token takes EIP-3009 signatures. ${SCOPE}`,
        },
      },
    )
    .post(
      '/verify',
      async ({ request, body, set }) => {
        const r = await deps.facilitator.verify(principalOf(request), body as Request402)
        if (!r.ok) throw ApiError.from(r)
        return json(set, r.value)
      },
      {
        parse: 'none',
        transform: [requireScope('x402:settle'), perKey, strictJsonBody(FacilitatorRequest)],
        body: 'X402FacilitatorRequest',
        response: { 200: 'X402VerifyResult', ...errors(400, 401, 403, 413, 429, 500, 503) },
        detail: {
          tags: ['x402'],
          operationId: 'x402Verify',
          summary: 'x402: verify a payment',
          description: `The x402 facilitator's \`POST /verify\`: whether settling this payment would go through now, checked as settle checks it (the requirement is one this service issues for this key's project and mode: scheme \`exact\`, a network of the mode, a token taking signatures with its EIP-712 \`name\` and \`version\` in \`extra\`, \`payTo\` the project's x402 address; the authorization is for it exactly, in its window, signed by \`from\`, its nonce unused, its payer holding the amount, and the token would take it). A refusal is 200 with \`isValid: false\` and x402's reason. Nothing is sent. ${SCOPE}`,
        },
      },
    )
    .post(
      '/settle',
      async ({ request, body, set }) => {
        const r = await deps.facilitator.settle(principalOf(request), body as Request402)
        if (!r.ok) throw ApiError.from(r)
        return json(set, r.value)
      },
      {
        parse: 'none',
        transform: [requireScope('x402:settle'), perKey, strictJsonBody(FacilitatorRequest)],
        body: 'X402FacilitatorRequest',
        response: { 200: 'X402SettleResult', ...errors(400, 401, 403, 413, 429, 500, 503) },
        detail: {
          tags: ['x402'],
          operationId: 'x402Settle',
          summary: 'x402: settle a payment',
          description: `The x402 facilitator's \`POST /settle\`: checks the payment as verify does, records it as a transaction of this key's project and mode (its \`metadata\` names the resource and the payer; it completes at the network's confirmations and sends its webhooks like any payment), has the relayer submit the authorization (the relayer pays the gas; the tokens go from the payer straight to the project's x402 address) and answers once it is mined: \`success\`, \`transaction\` (the relayer's transaction hash), \`network\`, \`payer\`, and \`extra.transaction_id\`. A refusal is 200 with \`success: false\` and x402's reason; 503 when the relayer is over its bounds or a node cannot be reached. Rate-limited per project like every API call. ${SCOPE}`,
        },
      },
    )
}
