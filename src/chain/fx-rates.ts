/**
 * The USD rates of the fiat currencies a deployment prices in
 * (docs/decisions/0064-priced-in-the-merchants-currency.md). A currency is offered to a mode when
 * a network of that mode (testnets: test mode) carries a rate for it in its `fx` config; USD always
 * is. Where several networks carry one, they are asked in config order, the next when one cannot
 * answer; a network not (yet) verified against its chain is never asked.
 *
 * Two ways to get a rate:
 * - `read`: asks the feed now, as the pay page does for a token's price: a quote locks the rate
 *   for the transaction's lifetime, so it is read fresh, and refused when stale like a token's.
 * - `current`: the last answer read, with no call, for pricing at creation (amount_usd): the
 *   request path gains no round trip. It is refreshed every `refreshMs` (30 s) and on every
 *   `read`; an answer read longer than `maxCachedMs` ago (5 min: the node has been silent), or
 *   whose round is older than the feed's `maxAgeSeconds` by the clock, is not current (null: the
 *   caller reads); a feed that answers stale or invalid drops what was read before.
 */
import type { Clock } from '../lib/clock.ts'
import type { Mode } from '../projects/mode.ts'
import type { NetworkConfig, RateSource } from './networks-config.ts'
import type { PriceReader, PriceResult } from './prices.ts'

const DEFAULT_REFRESH_MS = 30_000
const DEFAULT_MAX_CACHED_MS = 300_000

export type RateResult = PriceResult

interface Source {
  network: string
  rate: RateSource
}

interface Cached {
  result: Extract<PriceResult, { ok: true }>
  maxAgeSeconds: number | null
  readAt: number
}

export interface RateBookDeps {
  networks: readonly NetworkConfig[]
  /** The price reader of a network (null: unknown network). */
  readers: (network: string) => PriceReader | null
  /** Whether a network was checked against its chain and agrees (absent: all are). */
  verified?: (network: string) => boolean
  clock: Clock
  refreshMs?: number
  maxCachedMs?: number
}

export function createRateBook(deps: RateBookDeps) {
  const sources = new Map<string, Source[]>()
  for (const n of deps.networks)
    for (const f of n.fx ?? []) {
      const key = keyOf(n.testnet ? 'test' : 'live', f.currency)
      sources.set(key, [...(sources.get(key) ?? []), { network: n.name, rate: f.rate }])
    }
  const cache = new Map<string, Cached>()
  /** Why the last read of each currency failed (cleared by an answer). */
  const refusals = new Map<string, string>()
  const refreshMs = deps.refreshMs ?? DEFAULT_REFRESH_MS
  const maxCachedMs = deps.maxCachedMs ?? DEFAULT_MAX_CACHED_MS
  let timer: ReturnType<typeof setInterval> | null = null
  let refreshing: Promise<void> | null = null

  const dollar = (): RateResult => ({
    ok: true,
    answer: 1n,
    decimals: 0,
    updatedAt: new Date(deps.clock.now()),
    source: { kind: 'fixed' },
  })

  /** Reads of each currency in flight: callers arriving meanwhile share the one answer. */
  const reading = new Map<string, Promise<RateResult>>()

  function read(mode: Mode, currency: string): Promise<RateResult> {
    if (currency === 'USD') return Promise.resolve(dollar())
    const key = keyOf(mode, currency)
    let r = reading.get(key)
    if (!r) {
      r = readNow(key, mode, currency).finally(() => reading.delete(key))
      reading.set(key, r)
    }
    return r
  }

  async function readNow(key: string, mode: Mode, currency: string): Promise<RateResult> {
    const list = (sources.get(key) ?? []).filter((s) => deps.verified?.(s.network) ?? true)
    if (!list.length)
      return {
        ok: false,
        reason: 'unavailable',
        message: `no ${currency} rate can be read for ${mode} mode now (its networks are not verified)`,
      }
    let last: RateResult | null = null
    for (const s of list) {
      const reader = deps.readers(s.network)
      if (!reader) continue
      const r = await reader.read({ price: s.rate })
      if (r.ok) {
        cache.set(key, {
          result: r,
          maxAgeSeconds: s.rate.kind === 'chainlink' ? s.rate.maxAgeSeconds : null,
          readAt: deps.clock.now(),
        })
        refusals.delete(key)
        return r
      }
      last = r
      // A stale or wrong answer is the feed's verdict: what was read before is not used either,
      // and another network's copy of the same pair is asked only when this one could not be
      // reached.
      if (r.reason !== 'unavailable') {
        cache.delete(key)
        break
      }
    }
    const refused: RateResult = last ?? {
      ok: false,
      reason: 'unavailable',
      message: `no ${currency} rate source`,
    }
    if (!refused.ok) refusals.set(key, `${refused.reason}: ${refused.message}`)
    return refused
  }

  function currentOf(key: string): RateResult | null {
    const c = cache.get(key)
    const now = deps.clock.now()
    if (!c || now - c.readAt > maxCachedMs) return null
    if (c.maxAgeSeconds !== null && now - c.result.updatedAt.getTime() > c.maxAgeSeconds * 1000)
      return null
    return c.result
  }

  async function refresh() {
    await Promise.all(
      [...sources.keys()].map((key) => {
        const [mode, currency] = key.split(':') as [Mode, string]
        return read(mode, currency)
      }),
    )
  }

  return {
    /** The currencies transactions of `mode` may be priced in: USD first, then by code. */
    offered(mode: Mode): string[] {
      const codes = [...sources.keys()]
        .filter((k) => k.startsWith(`${mode}:`))
        .map((k) => k.slice(mode.length + 1))
        .sort()
      return ['USD', ...codes]
    },

    read,

    /** The last answer read for the currency while it is still good; null: read it. */
    current(mode: Mode, currency: string): RateResult | null {
      return currency === 'USD' ? dollar() : currentOf(keyOf(mode, currency))
    },

    /**
     * Every configured currency of each mode as it stands, for readiness and metrics: whether its
     * last answer is current, and how old its round is (null: never read).
     */
    status(): {
      mode: Mode
      currency: string
      current: boolean
      roundAgeSeconds: number | null
      readAgoSeconds: number | null
      /** Why the last read failed; null when it answered. */
      problem: string | null
    }[] {
      const now = deps.clock.now()
      return [...sources.keys()].sort().map((key) => {
        const [mode, currency] = key.split(':') as [Mode, string]
        const c = cache.get(key)
        return {
          mode,
          currency,
          current: currentOf(key) !== null,
          roundAgeSeconds: c ? Math.max(0, (now - c.result.updatedAt.getTime()) / 1000) : null,
          readAgoSeconds: c ? Math.max(0, (now - c.readAt) / 1000) : null,
          problem: refusals.get(key) ?? null,
        }
      })
    },

    /** Reads every rate now (start-up), then every `refreshMs` until `stop`. */
    async start() {
      if (!sources.size || timer) return
      await refresh()
      timer = setInterval(() => {
        // Readers answer failures as values; anything thrown leaves the old rate to age out.
        refreshing ??= refresh()
          .catch(() => {})
          .finally(() => {
            refreshing = null
          })
      }, refreshMs)
      timer.unref?.()
    },

    async stop() {
      if (timer) clearInterval(timer)
      timer = null
      await refreshing
    },
  }
}

export type RateBook = ReturnType<typeof createRateBook>

/** The rate book of a service that prices in USD only (no network carries a rate). */
export const USD_ONLY: RateBook = createRateBook({
  networks: [],
  readers: () => null,
  clock: { now: () => Date.now() },
})

const keyOf = (mode: Mode, currency: string) => `${mode}:${currency}`
