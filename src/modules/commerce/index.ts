import { Type } from '@sinclair/typebox'
import { Elysia } from 'elysia'
import { principalOf, requireScope } from '../../http/api-gate.ts'
import { factsOf } from '../../http/context.ts'
import { ApiError } from '../../http/errors.ts'
import { json } from '../../http/json-response.ts'
import { strictJsonBody } from '../../http/json-body.ts'
import { openApiParameters, strictParams } from '../../http/strict-params.ts'
import { UUID_RE } from '../../lib/ids.ts'
import { deny, type Outcome } from '../../lib/outcome.ts'
import { payMessage, payNotFound } from '../pay/index.ts'
import type { AssetUrl } from '../pay/page.ts'
import { fill, PAY_TEXT } from '../pay/text.ts'
import type { RateLimiter } from '../../limits/rate-limiter.ts'
import type { RateLimits } from '../../projects/project.service.ts'
import {
  ChargeObject,
  CheckoutObject,
  CommerceError,
  CreateChargeBody,
  CreateCheckoutBody,
  EventObject,
  ListQuery,
  many,
  one,
  UpdateCheckoutBody,
} from './model.ts'
import type { CommerceService } from './service.ts'

const IdParams = Type.Object({
  id: Type.String({
    minLength: 1,
    maxLength: 100,
    description: 'The id (or, for a charge, code).',
  }),
})
const CheckoutParams = Type.Object({ id: Type.String({ format: 'uuid' }) })
const CHECKOUT_UNAVAILABLE_TITLE = 'This payment link cannot take a payment right now'

const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((c) => [c, 'CommerceError'])) as Record<number, 'CommerceError'>
const COMMON = [400, 401, 403, 404, 413, 429, 500]

const TAG = 'Coinbase Commerce'
const doc = (operationId: string, summary: string, description: string) => ({
  tags: [TAG],
  operationId,
  summary,
  description,
  security: [{ CommerceApiKey: [] }],
})

/** The Outcome's value, or the refusal thrown for the app's error rendering. */
function unwrap<T>(r: Outcome<T>): T {
  if (!r.ok) throw ApiError.from(r)
  return r.value
}

/** `{data}` with `warnings` only when there are any, as Commerce answered. */
const wrapped = (v: { data: unknown; warnings: string[] }) =>
  v.warnings.length ? { data: v.data, warnings: v.warnings } : { data: v.data }

/**
 * The Coinbase Commerce API, version 2018-03-22, at /commerce
 * (docs/decisions/0065-coinbase-commerce-drop-in.md, docs/integrating/coinbase-commerce.md): the
 * gate authenticates `X-CC-Api-Key` with the project's API keys and counts it under the same
 * limits; errors are rendered in Commerce's shape (src/http/errors.ts).
 */
export function commerceController(deps: { commerce: CommerceService }) {
  const c = deps.commerce
  return new Elysia({ name: 'commerce', prefix: '/commerce' })
    .model({
      CommerceError,
      CommerceChargeRequest: CreateChargeBody,
      CommerceCheckoutRequest: CreateCheckoutBody,
      CommerceCheckoutUpdate: UpdateCheckoutBody,
      CommerceChargeResult: one(ChargeObject, 'CommerceChargeResult'),
      CommerceChargeList: many(ChargeObject, 'CommerceChargeList'),
      CommerceCheckoutResult: one(CheckoutObject, 'CommerceCheckoutResult'),
      CommerceCheckoutList: many(CheckoutObject, 'CommerceCheckoutList'),
      CommerceEventResult: one(EventObject, 'CommerceEventResult'),
      CommerceEventList: many(EventObject, 'CommerceEventList'),
    })
    .post(
      '/charges',
      async ({ request, body, set }) =>
        json(set, wrapped(unwrap(await c.createCharge(principalOf(request), body))), 201),
      {
        parse: 'none',
        transform: [requireScope('transactions:write'), strictJsonBody(CreateChargeBody)],
        body: 'CommerceChargeRequest',
        response: { 201: 'CommerceChargeResult', ...errors(...COMMON) },
        detail: doc(
          'commerceCreateCharge',
          'Create a charge',
          'A transaction of this service, priced `fixed_price` in `local_price` (any currency the service offers) or `no_price` (any amount pays it), returned as Commerce returned a charge; `hosted_url` is its pay page. With `checkout_id`, the checkout gives name, description and price. Scope `transactions:write`.',
        ),
      },
    )
    .get(
      '/charges',
      async ({ request, query, set }) =>
        json(set, unwrap(await c.listCharges(principalOf(request), query))),
      {
        transform: [requireScope('transactions:read'), strictParams('query', ListQuery)],
        response: { 200: 'CommerceChargeList', ...errors(...COMMON) },
        detail: {
          ...doc(
            'commerceListCharges',
            'List charges',
            "The key's project's transactions of its mode as charges, newest first by default, paged by cursor (`starting_after`, `ending_before`). Scope `transactions:read`.",
          ),
          parameters: openApiParameters('query', ListQuery),
        },
      },
    )
    .get(
      '/charges/:id',
      async ({ request, params, set }) =>
        json(set, { data: unwrap(await c.retrieveCharge(principalOf(request), params.id)) }),
      {
        transform: [requireScope('transactions:read'), strictParams('params', IdParams)],
        response: { 200: 'CommerceChargeResult', ...errors(...COMMON) },
        detail: {
          ...doc(
            'commerceGetCharge',
            'Retrieve a charge',
            "By its id or its code. Another project's or mode's charge is 404. Scope `transactions:read`.",
          ),
          parameters: openApiParameters('path', IdParams),
        },
      },
    )
    .post(
      '/charges/:id/cancel',
      async ({ request, params, set }) =>
        json(set, { data: unwrap(await c.cancelCharge(principalOf(request), params.id)) }),
      {
        transform: [requireScope('transactions:write'), strictParams('params', IdParams)],
        response: { 200: 'CommerceChargeResult', ...errors(...COMMON) },
        detail: {
          ...doc(
            'commerceCancelCharge',
            'Cancel a charge',
            'Only a charge nobody has paid yet (400 otherwise). Scope `transactions:write`.',
          ),
          parameters: openApiParameters('path', IdParams),
        },
      },
    )
    .post(
      '/charges/:id/resolve',
      async ({ request, params, set }) =>
        json(set, { data: unwrap(await c.resolveCharge(principalOf(request), params.id)) }),
      {
        transform: [requireScope('transactions:write'), strictParams('params', IdParams)],
        response: { 200: 'CommerceChargeResult', ...errors(...COMMON) },
        detail: {
          ...doc(
            'commerceResolveCharge',
            'Resolve a charge',
            'The merchant accepts an UNRESOLVED charge as it is: its timeline ends RESOLVED and `charge:resolved` is sent. 400 for a charge that is not UNRESOLVED. Scope `transactions:write`.',
          ),
          parameters: openApiParameters('path', IdParams),
        },
      },
    )
    .post(
      '/checkouts',
      async ({ request, body, set }) =>
        json(set, wrapped(unwrap(await c.createCheckout(principalOf(request), body))), 201),
      {
        parse: 'none',
        transform: [requireScope('transactions:write'), strictJsonBody(CreateCheckoutBody)],
        body: 'CommerceCheckoutRequest',
        response: { 201: 'CommerceCheckoutResult', ...errors(...COMMON) },
        detail: doc(
          'commerceCreateCheckout',
          'Create a checkout',
          'A reusable payment page: each opening of its `hosted_url` makes a charge from it. Scope `transactions:write`.',
        ),
      },
    )
    .get(
      '/checkouts',
      async ({ request, query, set }) =>
        json(set, unwrap(await c.listCheckouts(principalOf(request), query))),
      {
        transform: [requireScope('transactions:read'), strictParams('query', ListQuery)],
        response: { 200: 'CommerceCheckoutList', ...errors(...COMMON) },
        detail: {
          ...doc('commerceListCheckouts', 'List checkouts', 'Scope `transactions:read`.'),
          parameters: openApiParameters('query', ListQuery),
        },
      },
    )
    .get(
      '/checkouts/:id',
      async ({ request, params, set }) =>
        json(set, { data: unwrap(await c.retrieveCheckout(principalOf(request), params.id)) }),
      {
        transform: [requireScope('transactions:read'), strictParams('params', CheckoutParams)],
        response: { 200: 'CommerceCheckoutResult', ...errors(...COMMON) },
        detail: {
          ...doc('commerceGetCheckout', 'Retrieve a checkout', 'Scope `transactions:read`.'),
          parameters: openApiParameters('path', CheckoutParams),
        },
      },
    )
    .put(
      '/checkouts/:id',
      async ({ request, params, body, set }) =>
        json(set, wrapped(unwrap(await c.updateCheckout(principalOf(request), params.id, body)))),
      {
        parse: 'none',
        transform: [
          requireScope('transactions:write'),
          strictParams('params', CheckoutParams),
          strictJsonBody(UpdateCheckoutBody),
        ],
        body: 'CommerceCheckoutUpdate',
        response: { 200: 'CommerceCheckoutResult', ...errors(...COMMON) },
        detail: {
          ...doc(
            'commerceUpdateCheckout',
            'Update a checkout',
            'Changes the fields given; charges already made keep theirs. Scope `transactions:write`.',
          ),
          parameters: openApiParameters('path', CheckoutParams),
        },
      },
    )
    .delete(
      '/checkouts/:id',
      async ({ request, params, set }) =>
        json(set, { data: unwrap(await c.deleteCheckout(principalOf(request), params.id)) }),
      {
        transform: [requireScope('transactions:write'), strictParams('params', CheckoutParams)],
        response: { 200: 'CommerceCheckoutResult', ...errors(...COMMON) },
        detail: {
          ...doc(
            'commerceDeleteCheckout',
            'Delete a checkout',
            'Its hosted page stops making charges; charges made from it stay. Scope `transactions:write`.',
          ),
          parameters: openApiParameters('path', CheckoutParams),
        },
      },
    )
    .get(
      '/events',
      async ({ request, query, set }) =>
        json(set, unwrap(await c.listEvents(principalOf(request), query))),
      {
        transform: [requireScope('transactions:read'), strictParams('query', ListQuery)],
        response: { 200: 'CommerceEventList', ...errors(...COMMON) },
        detail: {
          ...doc(
            'commerceListEvents',
            'List events',
            "The charge events of the key's project and mode (`charge:created`, `charge:pending`, `charge:confirmed`, `charge:failed`, `charge:delayed`, `charge:resolved`), newest first by default, each with the charge as it was then. Scope `transactions:read`.",
          ),
          parameters: openApiParameters('query', ListQuery),
        },
      },
    )
    .get(
      '/events/:id',
      async ({ request, params, set }) =>
        json(set, { data: unwrap(await c.retrieveEvent(principalOf(request), params.id)) }),
      {
        transform: [requireScope('transactions:read'), strictParams('params', IdParams)],
        response: { 200: 'CommerceEventResult', ...errors(...COMMON) },
        detail: {
          ...doc('commerceGetEvent', 'Retrieve an event', 'Scope `transactions:read`.'),
          parameters: openApiParameters('path', IdParams),
        },
      },
    )
}

/**
 * A checkout's hosted page (`/checkout/{id}`): each opening makes a charge and sends the customer
 * to its pay page (303). People open it, without a key: counted per client IP under the pay page's
 * limits, so nobody makes charges faster than a pay page is used.
 */
export function checkoutPageController(deps: {
  commerce: CommerceService
  limiter: RateLimiter
  limits: RateLimits
  asset: AssetUrl
}) {
  return new Elysia({ name: 'commerce-checkout-page' }).get(
    '/checkout/:id',
    async ({ request, params }) => {
      const decision = await deps.limiter.check(
        `pay:${factsOf(request)?.clientIp ?? 'unknown'}`,
        deps.limits,
      )
      // People read what it refuses: pages in the pay page's look.
      if (!decision.allowed)
        return payMessage(
          deps.asset,
          429,
          PAY_TEXT.tooManyTitle,
          fill(PAY_TEXT.tooManyBody, { seconds: decision.retryAfter ?? 1 }),
          { 'retry-after': String(decision.retryAfter ?? 1) },
        )
      const opened = UUID_RE.test(params.id)
        ? await deps.commerce.openCheckout(params.id)
        : deny('not_found', 'No such checkout')
      if (!opened.ok)
        return opened.code === 'not_found'
          ? payNotFound(deps.asset)
          : payMessage(deps.asset, 503, CHECKOUT_UNAVAILABLE_TITLE, opened.message)
      return new Response(null, {
        status: 303,
        headers: { location: opened.value, 'cache-control': 'no-store' },
      })
    },
    {
      params: Type.Object({ id: Type.String() }),
      detail: {
        tags: [TAG],
        operationId: 'commerceOpenCheckout',
        // People open it: no key.
        security: [],
        summary: "A checkout's hosted page",
        description:
          "Makes a charge from the checkout and redirects (303) to the charge's pay page. No key: counted per client IP.",
        parameters: openApiParameters('path', CheckoutParams),
        responses: {
          303: { description: "To the new charge's pay page." },
          ...Object.fromEntries(
            [404, 429, 503].map((st) => [
              st,
              {
                description: 'A page saying why',
                content: { 'text/html': { schema: { type: 'string' } } },
              },
            ]),
          ),
        },
      },
    },
  )
}
