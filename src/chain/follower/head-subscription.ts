/**
 * New heads pushed over a WebSocket (`eth_subscribe("newHeads")`, viem's WebSocket transport):
 * each notification wakes the network's follower at once, which then fetches over HTTP as it
 * always does. While the subscription is live the follower polls ten times less often, as a
 * safety net for a lost push; once the socket drops it polls every `pollIntervalMs` again, so a
 * dropped socket loses nothing (the next poll, or the next push after reconnecting, catches up
 * from the stored cursor).
 *
 * viem's own reconnection is off (it gives up after a few tries and keeps the closed socket in its
 * cache): a socket that closes or fails is closed here and opened again after 1 s, doubling up to
 * 30 s, for as long as the network is followed. Each drop is logged once with the network.
 */
import { webSocket } from 'viem'
import { errorSummary, type Logger } from '../../lib/logger.ts'

const SUBSCRIBE_TIMEOUT_MS = 10_000

export interface HeadSubscription {
  /** Whether the subscription is live now. */
  connected(): boolean
  stop(): void
}

/**
 * `onHead`: a head was announced; `onDown`: the socket dropped (the follower should poll at its
 * normal pace again, starting now).
 */
export function subscribeHeads(o: {
  wsUrl: string
  network: string
  onHead: () => void
  onDown?: () => void
  logger?: Logger
  retry?: { baseMs?: number; maxMs?: number }
}): HeadSubscription {
  const baseMs = o.retry?.baseMs ?? 1000
  const maxMs = o.retry?.maxMs ?? 30_000
  // The host only: a WebSocket URL often carries an API key.
  const host = URL.parse(o.wsUrl)?.host ?? '?'
  let transport = open()
  let connected = false
  let stopped = false
  let attempts = 0
  let retry: ReturnType<typeof setTimeout> | null = null

  function open() {
    return webSocket(o.wsUrl, {
      reconnect: false,
      keepAlive: { interval: 15_000 },
      retryCount: 0,
      timeout: 10_000,
    })({ retryCount: 0 })
  }

  function close(t: typeof transport) {
    void t.value?.getRpcClient().then(
      (c) => c.close(),
      () => {},
    )
  }

  async function connect() {
    retry = null
    if (stopped) return
    const current = transport
    let timer: ReturnType<typeof setTimeout> | undefined
    try {
      // A server that never answers the subscription is down too.
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(new Error(`no answer to eth_subscribe within ${SUBSCRIBE_TIMEOUT_MS / 1000} s`)),
          SUBSCRIBE_TIMEOUT_MS,
        )
      })
      const subscription = await Promise.race([
        current.value!.subscribe({
          params: ['newHeads'],
          onData: () => o.onHead(),
          onError: (error: unknown) => dropped(current, error),
        }),
        timeout,
      ])
      clearTimeout(timer)
      if (stopped) {
        void subscription.unsubscribe().catch(() => {})
        return close(current)
      }
      connected = true
      if (attempts > 0)
        o.logger?.info('new heads pushed over the WebSocket again', { network: o.network, host })
      attempts = 0
      o.onHead() // a head may have come while the socket was down
    } catch (error) {
      clearTimeout(timer)
      dropped(current, error)
    }
  }

  /**
   * A socket closed or failed (said once, however many of its requests report it): open a new one
   * later.
   */
  function dropped(t: typeof transport, error: unknown) {
    if (stopped || t !== transport) return
    const was = connected
    connected = false
    if (was) o.onDown?.()
    close(t)
    transport = open()
    attempts++
    const retryInMs = Math.min(baseMs * 2 ** (attempts - 1), maxMs)
    o.logger?.warn('the WebSocket for new heads is down; polling meanwhile and reconnecting', {
      network: o.network,
      host,
      attempts,
      retryInMs,
      error: errorSummary(error),
    })
    retry = setTimeout(connect, retryInMs)
  }

  void connect()
  return {
    connected: () => connected,
    stop() {
      stopped = true
      connected = false
      if (retry) clearTimeout(retry)
      close(transport)
    },
  }
}
