/**
 * The treasury tool's client of the service's HTTPS API: the only way it talks to the service.
 * It sends the API key and what it records (signed transactions, never a key). A 429 is waited
 * out (Retry-After, at most two minutes) and the request made again; every write it makes is
 * idempotent on the service's side, so a retry after a lost answer records nothing twice.
 */
import type { Static } from '@sinclair/typebox'
import type { RefundObject } from '../modules/refunds/model.ts'
import type {
  DepositAddressObject,
  DepositKeyResponse,
  NetworkObject,
  SweepObject,
} from '../modules/treasury/model.ts'
import { fetchTrusting } from './https.ts'

export type ApiNetwork = Static<typeof NetworkObject>
export type ApiDepositKey = Static<typeof DepositKeyResponse>
export type ApiDepositAddress = Static<typeof DepositAddressObject>
export type ApiSweep = Static<typeof SweepObject>
export type ApiRefund = Static<typeof RefundObject>

/** The service refused a request (or could not be reached): `status` 0 for no answer. */
export class ApiRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

const MAX_RETRY_AFTER_S = 120

export function createApiClient(o: {
  url: string
  key: string
  ca: string | null
  sleep?: (ms: number) => Promise<void>
}) {
  const http = fetchTrusting(o.ca)
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)))
  const base = o.url.replace(/\/+$/, '')

  async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let res: Response
      try {
        res = await http(`${base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${o.key}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        })
      } catch (e) {
        throw new ApiRefusal(
          0,
          `cannot reach the service at ${base} (${e instanceof Error ? e.message : String(e)})`,
        )
      }
      const text = await res.text()
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        throw new ApiRefusal(
          res.status,
          `the service answered ${method} ${path} with HTTP ${res.status} and no JSON: is ${base} the service's address?`,
        )
      }
      const retryAfter = Number(res.headers.get('retry-after') ?? NaN)
      if (
        res.status === 429 &&
        attempt < 5 &&
        Number.isFinite(retryAfter) &&
        retryAfter <= MAX_RETRY_AFTER_S
      ) {
        await sleep(Math.max(1, retryAfter) * 1000)
        continue
      }
      if (!res.ok)
        throw new ApiRefusal(
          res.status,
          `${method} ${path}: ${(json as { message?: string } | null)?.message ?? `HTTP ${res.status}`}`,
        )
      return json as T
    }
  }

  const query = (q: Record<string, string | number | undefined>) => {
    const s = new URLSearchParams(
      Object.entries(q).flatMap(([k, v]) => (v === undefined ? [] : [[k, String(v)]])),
    ).toString()
    return s ? `?${s}` : ''
  }

  return {
    networks: async () => (await call<{ networks: ApiNetwork[] }>('GET', '/api/networks')).networks,
    depositKey: () => call<ApiDepositKey>('GET', '/api/deposit-key'),

    /** Every deposit address (on `network`, when given), page after page. */
    async depositAddresses(
      f: { network?: string; address?: string } = {},
    ): Promise<ApiDepositAddress[]> {
      const all: ApiDepositAddress[] = []
      let after: number | null = -1
      while (after !== null) {
        const page: { deposit_addresses: ApiDepositAddress[]; next_after: number | null } =
          await call(
            'GET',
            `/api/deposit-addresses${query({ blockchain_network: f.network, address: f.address, after, limit: 1000 })}`,
          )
        all.push(...page.deposit_addresses)
        after = page.next_after
      }
      return all
    },

    async sweeps(f: { network?: string; status?: string }): Promise<ApiSweep[]> {
      const all: ApiSweep[] = []
      for (let offset = 0; ; offset += 100) {
        const page: { sweeps: ApiSweep[]; pagination: { has_more: boolean } } = await call(
          'GET',
          `/api/sweeps${query({ blockchain_network: f.network, status: f.status, limit: 100, offset })}`,
        )
        all.push(...page.sweeps)
        if (!page.pagination.has_more) return all
      }
    },

    recordSweep: async (body: {
      blockchain_network: string
      raw_transaction: string
      items: { address: string; token_symbol: string; amount: string }[]
    }) => (await call<{ sweep: ApiSweep }>('POST', '/api/sweeps', body)).sweep,

    async refunds(f: {
      network?: string
      status?: string
      depositAddress?: string
    }): Promise<ApiRefund[]> {
      const all: ApiRefund[] = []
      for (let offset = 0; ; offset += 100) {
        const page: { refunds: ApiRefund[]; pagination: { has_more: boolean } } = await call(
          'GET',
          `/api/refunds${query({ blockchain_network: f.network, status: f.status, deposit_address: f.depositAddress, limit: 100, offset })}`,
        )
        all.push(...page.refunds)
        if (!page.pagination.has_more) return all
      }
    },

    refund: async (id: string) =>
      (await call<{ refund: ApiRefund }>('GET', `/api/refunds/${encodeURIComponent(id)}`)).refund,
    recordRefundPayment: async (id: string, raw: string) =>
      (
        await call<{ refund: ApiRefund }>(
          'POST',
          `/api/refunds/${encodeURIComponent(id)}/payment`,
          { raw_transaction: raw },
        )
      ).refund,
    markUnpayable: async (id: string, reason: string) =>
      (
        await call<{ refund: ApiRefund }>(
          'POST',
          `/api/refunds/${encodeURIComponent(id)}/unpayable`,
          { reason: reason.slice(0, 500) },
        )
      ).refund,
  }
}

export type ApiClient = ReturnType<typeof createApiClient>
