/**
 * The viem client the chain watcher talks through.
 *
 * Why these settings:
 * - `cacheTime: 0`: viem caches `eth_blockNumber` otherwise, and freshly mined blocks look
 *   unchanged (docs/development.md#viem).
 * - JSON-RPC batching (100 calls a request): catch-up fetches hundreds of headers per tick;
 *   one HTTP round trip per 100 is what makes 10,000 blocks take seconds, not minutes.
 * - Retries live on the `fallback` transport, not on each `http` (viem's fallback forces its
 *   children to `retryCount: 0`): one attempt walks primary -> fallbacks in order, and a
 *   failed walk is retried with exponential backoff (`retryDelayMs * 2^n`, viem's schedule,
 *   honouring `Retry-After`).
 */
import { createPublicClient, defineChain, fallback, http, type PublicClient } from 'viem'

export interface ChainClientOptions {
  rpcUrl: string
  /** Tried in order when the primary fails a request (errors, timeouts, 5xx, refused). */
  fallbackRpcUrls?: string[]
  /** Only labels the client; the follower never relies on it. */
  chainId?: number
  /** Retries of a whole primary -> fallbacks walk. Default 3. */
  retryCount?: number
  /** Base delay of the exponential backoff between retries. Default 150 ms. */
  retryDelayMs?: number
  /** Per HTTP request. Default 10 s. */
  timeoutMs?: number
  /** Calls per JSON-RPC batch. Default 100 (public nodes often refuse more). */
  batchSize?: number
  /**
   * Told of every rate-limit answer, also those a retry gets past (metrics and the log count them):
   * HTTP 429, or a short JSON-RPC error answer saying so ("rate limit", "too many requests").
   */
  onRateLimited?: (url: string, retryAfter: string | null) => void
}

/** The slice of a viem client the follower needs; tests may pass anything that fits. */
export interface RpcClient {
  request(
    args: { method: string; params?: unknown },
    options?: { signal?: AbortSignal },
  ): Promise<unknown>
}

/**
 * Error answers, even to a batch of 100 calls, are shorter than this; a batch of block headers is
 * not.
 */
const SHORT_ANSWER_BYTES = 16_384
/**
 * A JSON-RPC error answer for a rate limit, as providers word it (-32005 alone is also "too many
 * results").
 */
const RATE_LIMIT_ANSWER =
  /"error"\s*:\s*\{[^}]*(rate.?limit|too many requests|exceeded [^"]*(capacity|rate))/i

export function createChainClient(options: ChainClientOptions): PublicClient {
  const {
    rpcUrl,
    fallbackRpcUrls = [],
    chainId,
    retryCount = 3,
    retryDelayMs = 150,
    timeoutMs = 10_000,
    batchSize = 100,
    onRateLimited,
  } = options
  const transports = [rpcUrl, ...fallbackRpcUrls].map((url) =>
    http(url, {
      batch: { batchSize },
      timeout: timeoutMs,
      onFetchResponse:
        onRateLimited &&
        ((response: Response) => {
          if (response.status === 429)
            return onRateLimited(url, response.headers.get('retry-after'))
          // An error answer is short; a batch of blocks is not. Only answers not known to be long
          // are read twice, in the background.
          const length = Number(response.headers.get('content-length') ?? 0)
          if (length > SHORT_ANSWER_BYTES) return
          void response
            .clone()
            .text()
            .then(
              (text) => {
                if (RATE_LIMIT_ANSWER.test(text))
                  onRateLimited(url, response.headers.get('retry-after'))
              },
              () => {},
            )
        }),
    }),
  )
  return createPublicClient({
    chain: chainId === undefined ? undefined : customChain(chainId, rpcUrl),
    transport: fallback(transports, { retryCount, retryDelay: retryDelayMs }),
    cacheTime: 0,
    pollingInterval: 250,
  })
}

function customChain(id: number, rpcUrl: string) {
  return defineChain({
    id,
    name: `chain-${id}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  })
}
