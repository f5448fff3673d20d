import type { CommerceFacts } from '../../db/schema.ts'
import type { Clock } from '../../lib/clock.ts'
import { isKnownCurrency } from '../../lib/currency.ts'
import { deny, type FieldProblem, ok, type Outcome } from '../../lib/outcome.ts'
import type { ProjectMode } from '../../projects/mode.ts'
import { COMMERCE_EVENT_OF, COMMERCE_OUTBOX_TYPES } from '../../webhooks/commerce-format.ts'
import type { RunnableDelivery } from '../../webhooks/delivery.repo.ts'
import type { PayService } from '../pay/service.ts'
import { createTransactionRules, type CreateTransactionInput } from '../transactions/model.ts'
import type { TransactionService } from '../transactions/service.ts'
import { type Charge, chargeOf, currentStatus, localAmount } from './charge.ts'
import type {
  ChargeRecord,
  CheckoutRow,
  CommerceRepo,
  Cursor,
  CursorPage,
  EventRow,
} from './commerce.repo.ts'
import {
  COMMERCE_API_VERSION,
  type CreateChargeInput,
  type CreateCheckoutInput,
  type ListQueryInput,
  type UpdateCheckoutInput,
} from './model.ts'

/** The fields each request takes; any other is ignored and named in `warnings`. */
const CHARGE_FIELDS = [
  'name',
  'description',
  'pricing_type',
  'local_price',
  'metadata',
  'redirect_url',
  'cancel_url',
  'checkout_id',
]
const CHECKOUT_FIELDS = ['name', 'description', 'pricing_type', 'local_price', 'requested_info']

/** The native create's field names as a Commerce request names them. */
const RENAMED: Record<string, string> = {
  amount: 'local_price.amount',
  success_url: 'redirect_url',
}

const ignored = (body: object, known: string[]) =>
  Object.keys(body)
    .filter((k) => !known.includes(k))
    .map((k) => `Field ${k.slice(0, 60)} is not supported by this service and was ignored`)

/** A result with the warnings Commerce's clients print. */
export interface WithWarnings<T> {
  data: T
  warnings: string[]
}

export interface CommerceDeps {
  repo: CommerceRepo
  transactions: Pick<TransactionService, 'createCharge' | 'cancel'>
  pay: Pick<PayService, 'pricedTokens'>
  decimals: (network: string, symbol: string) => number | null
  clock: Clock
  baseUrl: string
}

/**
 * The Coinbase Commerce API over this service's transactions
 * (docs/decisions/0065-coinbase-commerce-drop-in.md): a charge is a transaction, made, paid,
 * cancelled and announced as any other; checkouts make charges; events are the outbox's.
 */
export function createCommerceService(deps: CommerceDeps) {
  const { repo } = deps

  /** The price fields of a charge or checkout request, checked: currency, amount, places. */
  function pricing(
    body: Pick<CreateChargeInput, 'pricing_type' | 'local_price'>,
  ): Outcome<{ anyAmount: boolean; amount: number; currency: string }> {
    const problems: FieldProblem[] = []
    const lp = body.local_price
    if (body.pricing_type === 'fixed_price' && !lp)
      return deny('invalid_request', 'local_price is required for a fixed_price charge', [
        { path: 'local_price', message: 'is required for fixed_price' },
      ])
    const currency = (lp?.currency ?? 'USD').toUpperCase()
    if (!isKnownCurrency(currency))
      problems.push({ path: 'local_price.currency', message: 'must be an ISO 4217 currency code' })
    const amount = lp ? Number(lp.amount) : 1
    if (body.pricing_type === 'fixed_price' && !(amount > 0))
      problems.push({ path: 'local_price.amount', message: 'must be greater than 0' })
    if (problems.length === 0 && body.pricing_type === 'fixed_price')
      for (const p of createTransactionRules({ amount, currency }))
        problems.push({ ...p, path: `local_price.${p.path}` })
    if (problems.length)
      return deny(
        'invalid_request',
        problems.map((p) => `${p.path} ${p.message}`).join('; '),
        problems,
      )
    return ok({ anyAmount: body.pricing_type === 'no_price', amount, currency })
  }

  /**
   * Charges rendered together: each as it is, or as of a moment (an event's time: its timeline and
   * transfers up to then).
   */
  async function facts(items: { record: ChargeRecord; asOf?: Date }[]): Promise<Charge[]> {
    const tokens = await Promise.all(items.map((x) => deps.pay.pricedTokens(x.record.row)))
    return items.map(({ record, asOf }, i) =>
      chargeOf({
        row: record.row,
        timeline: record.timeline.filter((s) => !asOf || s.at <= asOf),
        transfers: record.transfers.filter((t) => !asOf || t.seenAt <= asOf),
        tokens: tokens[i]!,
        decimals: deps.decimals,
        baseUrl: deps.baseUrl,
      }),
    )
  }
  const charge = async (record: ChargeRecord) => (await facts([{ record }]))[0]!

  async function makeCharge(
    caller: ProjectMode,
    body: CreateChargeInput,
    checkout: CheckoutRow | null,
  ): Promise<Outcome<Charge>> {
    const priced = pricing(body)
    if (!priced.ok) return priced
    const input: CreateTransactionInput = {
      amount: priced.value.amount,
      currency: priced.value.currency,
      order_description: body.description ?? body.name,
      metadata: body.metadata ?? null,
      success_url: body.redirect_url ?? null,
      cancel_url: body.cancel_url ?? null,
    }
    // The native rules (places, URLs, metadata keys), named as this request names the fields.
    const problems = createTransactionRules(input).map((p) => ({
      ...p,
      path: RENAMED[p.path] ?? p.path,
    }))
    if (problems.length)
      return deny(
        'invalid_request',
        problems.map((p) => `${p.path} ${p.message}`).join('; '),
        problems,
      )
    const commerce: CommerceFacts = {
      name: body.name,
      description: body.description ?? null,
      pricingType: body.pricing_type,
      checkoutId: checkout?.id ?? null,
    }
    const row = await deps.transactions.createCharge(caller, input, {
      anyAmount: priced.value.anyAmount,
      commerce,
    })
    // A new charge: its first timeline entry and no transfers, as just committed.
    return row.ok
      ? ok(
          await charge({
            row: row.value,
            timeline: [
              {
                fromStatus: null,
                toStatus: 'created',
                cause: 'transaction.created',
                details: {},
                at: row.value.createdAt,
              },
            ],
            transfers: [],
          }),
        )
      : row
  }

  /** A checkout's request body, as a charge's. */
  const chargeBodyOf = (k: CheckoutRow): CreateChargeInput => ({
    name: k.name,
    description: k.description,
    pricing_type: k.pricingType,
    ...(k.pricingType === 'fixed_price' && k.amount !== null && k.currency !== null
      ? { local_price: { amount: localAmount(k.amount, k.currency), currency: k.currency } }
      : k.currency !== null
        ? { local_price: { amount: '1', currency: k.currency } }
        : {}),
  })

  const checkoutView = (k: CheckoutRow) => ({
    id: k.id,
    resource: 'checkout' as const,
    name: k.name,
    description: k.description,
    logo_url: null,
    requested_info: [] as string[],
    pricing_type: k.pricingType,
    local_price:
      k.amount !== null && k.currency !== null && k.pricingType === 'fixed_price'
        ? { amount: localAmount(k.amount, k.currency), currency: k.currency }
        : null,
    hosted_url: `${deps.baseUrl}/checkout/${k.id}`,
    created_at: k.createdAt.toISOString(),
    updated_at: k.updatedAt.toISOString(),
  })

  /** Events as the API shows them, each with its charge as of the event (one read per kind). */
  async function eventViews(events: EventRow[], scope: ProjectMode | null) {
    const rows = await repo.chargesByIds(
      scope,
      events.map((e) => e.transactionId),
    )
    const found = events.filter((e) => rows.has(e.transactionId))
    const charges = await facts(
      found.map((e) => ({ record: rows.get(e.transactionId)!, asOf: e.createdAt })),
    )
    return found.map((e, i) => ({
      id: e.eventId,
      resource: 'event' as const,
      type: COMMERCE_EVENT_OF[e.eventType]!,
      api_version: COMMERCE_API_VERSION,
      created_at: e.createdAt.toISOString(),
      data: charges[i]!,
    }))
  }

  const notFound = (what: string, id: string) => deny('not_found', `No ${what} ${id}`)

  async function retrieveCharge(caller: ProjectMode, idOrCode: string): Promise<Outcome<Charge>> {
    const row = await repo.findCharge(caller, idOrCode)
    return row ? ok(await charge(row)) : notFound('charge', idOrCode)
  }

  return {
    async createCharge(
      caller: ProjectMode,
      body: CreateChargeInput,
    ): Promise<Outcome<WithWarnings<Charge>>> {
      let checkout: CheckoutRow | null = null
      if (body.checkout_id !== undefined) {
        checkout = await repo.findCheckout(caller, body.checkout_id)
        if (!checkout) return notFound('checkout', body.checkout_id)
      }
      const made = await makeCharge(
        caller,
        checkout
          ? { ...chargeBodyOf(checkout), ...pick(body, ['metadata', 'redirect_url', 'cancel_url']) }
          : body,
        checkout,
      )
      return made.ok ? ok({ data: made.value, warnings: ignored(body, CHARGE_FIELDS) }) : made
    },

    retrieveCharge,

    async listCharges(caller: ProjectMode, q: ListQueryInput) {
      const c = cursorOf(q)
      const page = await repo.charges(caller, c)
      if (page === 'unknown') return unknownCursor(c)
      const charges = await facts(page.rows.map((record) => ({ record })))
      return ok(await listed(page, c, charges, (x) => x.id, 'charges', deps.baseUrl))
    },

    /** Commerce cancels only a charge nobody paid: here, one in created, prepared or pending. */
    async cancelCharge(caller: ProjectMode, idOrCode: string): Promise<Outcome<Charge>> {
      const found = await repo.findCharge(caller, idOrCode)
      if (!found) return notFound('charge', idOrCode)
      const r = await deps.transactions.cancel(caller, found.row.id)
      if (!r.ok) return r.code === 'conflict' ? deny('invalid_request', r.message) : r
      return retrieveCharge(caller, found.row.id)
    },

    /** The merchant accepts an UNRESOLVED charge as it is (charge:resolved). */
    async resolveCharge(caller: ProjectMode, idOrCode: string): Promise<Outcome<Charge>> {
      const found = await repo.findCharge(caller, idOrCode)
      if (!found) return notFound('charge', idOrCode)
      const row = found.row
      const now = currentStatus(await charge(found))
      if (now.status !== 'UNRESOLVED')
        return deny(
          'invalid_request',
          `Only an UNRESOLVED charge can be resolved; this one is ${now.status}`,
        )
      const done = await repo.resolve(
        row.id,
        new Date(deps.clock.now()),
        row.commerce?.resolvedAt ?? null,
      )
      if (!done) return deny('invalid_request', 'This charge was resolved meanwhile')
      return retrieveCharge(caller, row.id)
    },

    // --- Checkouts ---

    async createCheckout(
      caller: ProjectMode,
      body: CreateCheckoutInput,
    ): Promise<Outcome<WithWarnings<ReturnType<typeof checkoutView>>>> {
      const priced = pricing(body)
      if (!priced.ok) return priced
      const at = new Date(deps.clock.now())
      const row = await repo.insertCheckout({
        id: crypto.randomUUID(),
        projectId: caller.projectId,
        mode: caller.mode,
        name: body.name,
        description: body.description ?? null,
        pricingType: body.pricing_type,
        amount: priced.value.anyAmount ? null : (body.local_price?.amount ?? null),
        currency: priced.value.currency,
        createdAt: at,
        updatedAt: at,
      })
      return ok({ data: checkoutView(row), warnings: ignored(body, CHECKOUT_FIELDS) })
    },

    async retrieveCheckout(caller: ProjectMode, id: string) {
      const k = await repo.findCheckout(caller, id)
      return k ? ok(checkoutView(k)) : notFound('checkout', id)
    },

    async updateCheckout(caller: ProjectMode, id: string, body: UpdateCheckoutInput) {
      const k = await repo.findCheckout(caller, id)
      if (!k) return notFound('checkout', id)
      const current = chargeBodyOf(k)
      const merged = {
        name: body.name ?? k.name,
        description: body.description === undefined ? k.description : body.description,
        pricing_type: body.pricing_type ?? k.pricingType,
        local_price: body.local_price ?? current.local_price,
      }
      const priced = pricing(merged)
      if (!priced.ok) return priced
      const row = await repo.updateCheckout(caller, id, {
        name: merged.name,
        description: merged.description ?? null,
        pricingType: merged.pricing_type,
        amount: priced.value.anyAmount ? null : (merged.local_price?.amount ?? null),
        currency: priced.value.currency,
        updatedAt: new Date(deps.clock.now()),
      })
      return row
        ? ok({ data: checkoutView(row), warnings: ignored(body, CHECKOUT_FIELDS) })
        : notFound('checkout', id)
    },

    async deleteCheckout(caller: ProjectMode, id: string) {
      const k = await repo.findCheckout(caller, id)
      if (!k || !(await repo.deleteCheckout(caller, id))) return notFound('checkout', id)
      return ok(checkoutView(k))
    },

    async listCheckouts(caller: ProjectMode, q: ListQueryInput) {
      const c = cursorOf(q)
      const page = await repo.checkouts(caller, c)
      if (page === 'unknown') return unknownCursor(c)
      return ok(
        await listed(page, c, page.rows.map(checkoutView), (x) => x.id, 'checkouts', deps.baseUrl),
      )
    },

    /**
     * Someone opened a checkout's hosted page: a charge is made from it (in the checkout's
     * project and mode), and its pay page is where they go.
     */
    async openCheckout(id: string): Promise<Outcome<string>> {
      const k = await repo.findCheckout(null, id)
      if (!k) return notFound('checkout', id)
      const made = await makeCharge({ projectId: k.projectId, mode: k.mode }, chargeBodyOf(k), k)
      return made.ok ? ok(made.value.hosted_url) : made
    },

    // --- Events ---

    async retrieveEvent(caller: ProjectMode, id: string) {
      const e = await repo.findEvent(caller, id, COMMERCE_OUTBOX_TYPES)
      const [view] = e ? await eventViews([e], caller) : []
      return view ? ok(view) : notFound('event', id)
    },

    async listEvents(caller: ProjectMode, q: ListQueryInput) {
      const c = cursorOf(q)
      const page = await repo.events(caller, c, COMMERCE_OUTBOX_TYPES)
      if (page === 'unknown') return unknownCursor(c)
      return ok(
        await listed(
          page,
          c,
          await eventViews(page.rows, caller),
          (x) => x.id,
          'events',
          deps.baseUrl,
        ),
      )
    },

    /**
     * The event a delivery to a Commerce-format endpoint carries: the charge as it was at the
     * event; for a test event from the dashboard or CLI, a sample charge marked as a test.
     */
    async deliveryEvent(d: RunnableDelivery): Promise<Record<string, unknown> | null> {
      if (d.test)
        return {
          id: d.eventId,
          resource: 'event',
          type: 'charge:created',
          api_version: COMMERCE_API_VERSION,
          created_at: new Date(d.eventAt).toISOString(),
          data: { resource: 'charge', code: 'TEST', metadata: { test: true }, timeline: [] },
        }
      // A manual re-send of a completion is a new delivery of the event first sent: the same
      // event id, so receivers see the one event again.
      const e =
        (await repo.findEvent(null, d.eventId, COMMERCE_OUTBOX_TYPES)) ??
        (typeof d.data.transaction_id === 'string'
          ? await repo.firstEventOf(d.data.transaction_id, d.eventType)
          : null)
      return e ? ((await eventViews([e], null))[0] ?? null) : null
    },
  }
}

export type CommerceService = ReturnType<typeof createCommerceService>

const pick = <T extends object>(o: T, keys: (keyof T)[]) =>
  Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) as Partial<T>

function cursorOf(q: ListQueryInput): Cursor {
  return {
    limit: q.limit ?? 25,
    order: q.order ?? 'desc',
    ...(q.starting_after !== undefined ? { startingAfter: q.starting_after } : {}),
    ...(q.ending_before !== undefined ? { endingBefore: q.ending_before } : {}),
  }
}

const unknownCursor = (c: Cursor) =>
  deny(
    'invalid_request',
    `No item ${c.startingAfter ?? c.endingBefore} to page from (starting_after / ending_before must be the id of an item of this list)`,
    [
      {
        path: c.startingAfter !== undefined ? 'starting_after' : 'ending_before',
        message: 'must be the id of an item of this list',
      },
    ],
  )

/**
 * A list response: `data` in order, and Commerce's `pagination` (`cursor_range` the first and
 * last ids shown; `next_uri` and `previous_uri` the pages beyond each end, null where there is
 * none).
 */
async function listed<T>(
  page: CursorPage<unknown>,
  c: Cursor,
  data: T[],
  idOf: (x: T) => string,
  path: string,
  baseUrl: string,
) {
  const first = data[0]
  const last = data[data.length - 1]
  const backwards = c.endingBefore !== undefined && c.startingAfter === undefined
  // Reading forwards, more rows lie after the page; backwards, before it. The other side has rows
  // when the page was reached from a cursor.
  const moreAfter = backwards ? c.endingBefore !== undefined : page.more
  const moreBefore = backwards ? page.more : c.startingAfter !== undefined
  const uri = (k: string, id: string) =>
    `${baseUrl}/commerce/${path}?${new URLSearchParams({ limit: String(c.limit), order: c.order, [k]: id })}`
  return {
    pagination: {
      order: c.order,
      starting_after: c.startingAfter ?? null,
      ending_before: c.endingBefore ?? null,
      total: page.total,
      yielded: data.length,
      limit: c.limit,
      previous_uri: moreBefore && first ? uri('ending_before', idOf(first)) : null,
      next_uri: moreAfter && last ? uri('starting_after', idOf(last)) : null,
      cursor_range: first && last ? [idOf(first), idOf(last)] : [],
    },
    data,
  }
}
