import { FINAL_STATUSES } from '../../../machines/transaction.machine.ts'
import type { Outcome } from '../../lib/outcome.ts'
import type { TransactionChange } from '../../actors/transaction-registry.ts'
import type { PayState } from './model.ts'

/**
 * A comment line this often keeps an idle stream open: Bun.serve closes a connection that sends
 * nothing for 10 s, and proxies do the same after their own idle time.
 */
export const KEEPALIVE_MS = 5_000
/** After a failed read (a database hiccup), the next try. */
const RETRY_MS = 1_000
const FINAL = new Set<string>(FINAL_STATUSES)
const encoder = new TextEncoder()
const KEEPALIVE = encoder.encode(': keep-alive\n\n')

export interface StatusStreamDeps {
  /** The pay page's state of a transaction: one query. */
  state(id: string): Promise<Outcome<PayState>>
  /** Committed transaction changes, on this instance and (by NOTIFY) on every other one. */
  changes(listener: (change: TransactionChange) => void): () => void
  /**
   * Aborted when the graceful stop begins: every stream ends and EventSource reconnects elsewhere.
   */
  stopping: AbortSignal
}

interface Stream {
  /** The version of the last state this stream was sent. */
  version: number
  send(state: PayState): void
  keepAlive(): void
  close(): void
}

interface Watch {
  streams: Set<Stream>
  /**
   * The highest version announced so far: a change heard twice (a commit here, then its own NOTIFY)
   * is read once.
   */
  heard: number
  /** A read is running; `again`: a change arrived meanwhile and needs another. */
  busy: boolean
  again: boolean
  retry: ReturnType<typeof setTimeout> | null
}

/**
 * The pay page's Server-Sent Events, driven by committed changes instead of polling: every
 * stream of a transaction on this instance shares one watch; a change announced for it costs
 * one read, whose state goes to each of its streams that has not seen that version, in order.
 * Nothing is read while nothing changes. Changes announced while the change feed was
 * reconnecting are lost, so then every watched transaction is read once again.
 */
export function createStatusStreams(deps: StatusStreamDeps) {
  const watches = new Map<string, Watch>()
  let keepAliveTimer: ReturnType<typeof setInterval> | null = null
  let open = 0

  deps.changes((change) => {
    if ('resync' in change) {
      for (const id of watches.keys()) void refresh(id)
      return
    }
    const w = watches.get(change.id)
    if (!w || change.version <= w.heard) return
    w.heard = change.version
    // Only a version some stream has not seen yet is worth a read.
    if ([...w.streams].some((s) => s.version < change.version)) void refresh(change.id)
  })

  async function refresh(id: string): Promise<void> {
    const w = watches.get(id)
    if (!w) return
    if (w.busy) {
      w.again = true
      return
    }
    w.busy = true
    try {
      do {
        w.again = false
        const r = await deps.state(id)
        if (!r.ok) break
        const s = r.value
        for (const stream of w.streams) if (stream.version < s.version) stream.send(s)
        if (FINAL.has(s.status)) {
          for (const stream of [...w.streams]) stream.close()
          break
        }
      } while (w.again && watches.get(id) === w)
    } catch {
      // A database hiccup: read again shortly (the page also polls /state as a fallback).
      if (watches.get(id) === w && w.retry === null) {
        w.retry = setTimeout(() => {
          w.retry = null
          void refresh(id)
        }, RETRY_MS)
      }
    } finally {
      w.busy = false
    }
  }

  function keepAlive() {
    for (const w of watches.values()) for (const s of w.streams) s.keepAlive()
  }

  function add(id: string, stream: Stream) {
    let w = watches.get(id)
    if (!w)
      watches.set(
        id,
        (w = { streams: new Set(), heard: -1, busy: false, again: false, retry: null }),
      )
    w.streams.add(stream)
    if (open++ === 0) {
      keepAliveTimer = setInterval(keepAlive, KEEPALIVE_MS)
      ;(keepAliveTimer as { unref?: () => void }).unref?.()
    }
  }

  function remove(id: string, stream: Stream) {
    const w = watches.get(id)
    if (!w?.streams.delete(stream)) return
    if (w.streams.size === 0) {
      if (w.retry) clearTimeout(w.retry)
      watches.delete(id)
    }
    if (--open === 0 && keepAliveTimer) clearInterval(keepAliveTimer)
  }

  return {
    /**
     * Watches `id` first, then reads its state, so no change committed in between is missed;
     * null for an unknown transaction (nothing is kept). The response is the state now, then
     * the state after every change, until a final status, the client goes away or the server
     * begins its graceful stop. `retry` tells EventSource how soon to reconnect.
     */
    async open(id: string, signal: AbortSignal): Promise<Outcome<Response>> {
      let controller!: ReadableStreamDefaultController<Uint8Array>
      let closed = false
      const stream: Stream = {
        version: -1,
        send(s) {
          stream.version = s.version
          if (!closed)
            controller.enqueue(
              encoder.encode(`id: ${s.version}\nevent: state\ndata: ${JSON.stringify(s)}\n\n`),
            )
        },
        keepAlive() {
          if (!closed) controller.enqueue(KEEPALIVE)
        },
        close() {
          if (closed) return
          closed = true
          remove(id, stream)
          signal.removeEventListener('abort', stream.close)
          deps.stopping.removeEventListener('abort', stream.close)
          try {
            controller.close()
          } catch {}
        },
      }
      const body = new ReadableStream<Uint8Array>({
        start: (c) => {
          controller = c
          c.enqueue(encoder.encode('retry: 2000\n\n'))
        },
        cancel: () => stream.close(),
      })
      const response = new Response(body, {
        headers: {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          connection: 'keep-alive',
        },
      })
      add(id, stream)
      const first = await deps.state(id).catch((e) => {
        stream.close()
        throw e
      })
      if (!first.ok) {
        stream.close()
        return first
      }
      // A change announced during the read may have sent a newer state already (and closed the
      // stream at a final one).
      if (stream.version < first.value.version) stream.send(first.value)
      if (closed) return { ok: true, value: response }
      if (signal.aborted || deps.stopping.aborted || FINAL.has(first.value.status)) stream.close()
      else {
        signal.addEventListener('abort', stream.close)
        deps.stopping.addEventListener('abort', stream.close)
      }
      return { ok: true, value: response }
    },

    /** Streams open on this instance. */
    get size() {
      return open
    },
  }
}

export type StatusStreams = ReturnType<typeof createStatusStreams>
