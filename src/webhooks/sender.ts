/**
 * One HTTP attempt (docs/decisions/0018-webhook-request.md): POST, 10 s time-out, redirects not
 * followed, any 2xx is success. Never throws: a network error, a time-out or a refused target is a
 * failed attempt.
 */
export interface SendOutcome {
  ok: boolean
  statusCode: number | null
  /** At most RESPONSE_LIMIT bytes of the answer, for the delivery log. */
  responseBody: string | null
  error: string | null
  durationMs: number
  /** A 429 or 503 answer's `Retry-After` as sent (seconds or an HTTP date); null otherwise. */
  retryAfter: string | null
}

export const SEND_TIMEOUT_MS = 10_000
export const RESPONSE_LIMIT = 2048

export async function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs = SEND_TIMEOUT_MS,
): Promise<SendOutcome> {
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  const signal = AbortSignal.timeout(timeoutMs)
  try {
    const res = await fetch(url, { method: 'POST', body, headers, redirect: 'manual', signal })
    const responseBody = await readLimited(res, signal)
    const ok = res.status >= 200 && res.status < 300
    const redirect = res.status >= 300 && res.status < 400
    return {
      ok,
      statusCode: res.status,
      responseBody,
      error: ok
        ? null
        : redirect
          ? `redirect to ${res.headers.get('location') ?? '?'} not followed`
          : `HTTP ${res.status}`,
      durationMs: elapsed(),
      retryAfter: res.status === 429 || res.status === 503 ? res.headers.get('retry-after') : null,
    }
  } catch (e) {
    const timedOut = signal.aborted
    return {
      ok: false,
      statusCode: null,
      responseBody: null,
      error: timedOut ? `timed out after ${timeoutMs} ms` : networkError(e),
      durationMs: elapsed(),
      retryAfter: null,
    }
  }
}

/**
 * RFC 9110 10.2.3: delay-seconds or an HTTP date (IMF-fixdate), as ms from `now`; null when absent
 * or unreadable.
 */
export function retryAfterMs(header: string | null, now: number): number | null {
  if (header === null) return null
  const text = header.trim()
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000
  // IMF-fixdate, the form senders must use (Date.parse alone takes "-5" for a year).
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(text)) return null
  const at = Date.parse(text)
  return Number.isNaN(at) ? null : Math.max(0, at - now)
}

/** Reads at most RESPONSE_LIMIT bytes and lets the rest go. */
async function readLimited(res: Response, signal: AbortSignal): Promise<string | null> {
  if (!res.body) return null
  const reader = res.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    while (size < RESPONSE_LIMIT && !signal.aborted) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      size += value.byteLength
    }
  } catch {
    // A body cut off mid-way still leaves the status, which decides the attempt.
  } finally {
    reader.cancel().catch(() => {})
  }
  const bytes = new Uint8Array(Math.min(size, RESPONSE_LIMIT))
  let at = 0
  for (const c of chunks) {
    const part = c.subarray(0, bytes.length - at)
    bytes.set(part, at)
    at += part.length
    if (at >= bytes.length) break
  }
  return new TextDecoder().decode(bytes)
}

function networkError(e: unknown): string {
  const err = e as { code?: string; message?: string; cause?: { code?: string; message?: string } }
  const code = err?.cause?.code ?? err?.code
  const message = err?.cause?.message ?? err?.message ?? String(e)
  return code ? `${code}: ${message}` : message
}
