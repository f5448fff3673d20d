/**
 * The two per-request metrics, kept in plain numbers and written out in the Prometheus text format
 * at scrape time. prom-client validates and hashes the labels of every `inc` and `observe`, even
 * through a labelled child; on the GET hot path that cost was measured
 * (docs/decisions/0047-metrics-and-probes.md's benchmark), so the request path here is a map lookup
 * and a few additions.
 */
const REQUESTS = 'cryptopay_http_requests_total'
const DURATION = 'cryptopay_http_request_duration_seconds'

interface Series {
  route: string
  method: string
  /** Requests per status code. */
  statuses: Map<number, number>
  /** Observations per bucket, not cumulative; the last one is +Inf. */
  buckets: number[]
  sum: number
  count: number
}

/** Label values as the text format quotes them. */
const quoted = (v: string) =>
  `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`

export function createHttpRequestMetrics(bounds: readonly number[]) {
  const series = new Map<string, Series>()
  return {
    record(route: string, method: string, status: number, seconds: number) {
      const key = `${method} ${route}`
      let s = series.get(key)
      if (!s)
        series.set(
          key,
          (s = {
            route,
            method,
            statuses: new Map(),
            buckets: new Array(bounds.length + 1).fill(0),
            sum: 0,
            count: 0,
          }),
        )
      s.statuses.set(status, (s.statuses.get(status) ?? 0) + 1)
      let i = 0
      while (i < bounds.length && seconds > bounds[i]!) i++
      s.buckets[i]!++
      s.sum += seconds
      s.count++
    },

    /** Both metrics in the text exposition format. */
    text(): string {
      const lines = [
        `# HELP ${REQUESTS} HTTP requests answered, by route template, method and status code`,
        `# TYPE ${REQUESTS} counter`,
      ]
      for (const s of series.values()) {
        for (const [status, n] of s.statuses)
          lines.push(
            `${REQUESTS}{route=${quoted(s.route)},method=${quoted(s.method)},status="${status}"} ${n}`,
          )
      }
      lines.push(
        `# HELP ${DURATION} Time to answer an HTTP request (to the response head), by route template and method`,
        `# TYPE ${DURATION} histogram`,
      )
      for (const s of series.values()) {
        const labels = `route=${quoted(s.route)},method=${quoted(s.method)}`
        let cumulative = 0
        bounds.forEach((le, i) => {
          cumulative += s.buckets[i]!
          lines.push(`${DURATION}_bucket{${labels},le="${le}"} ${cumulative}`)
        })
        lines.push(
          `${DURATION}_bucket{${labels},le="+Inf"} ${s.count}`,
          `${DURATION}_sum{${labels}} ${s.sum}`,
          `${DURATION}_count{${labels}} ${s.count}`,
        )
      }
      return `${lines.join('\n')}\n`
    },
  }
}
