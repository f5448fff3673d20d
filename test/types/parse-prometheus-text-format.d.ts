/** The package ships no types; what the tests use of it (prom2json's shape). */
declare module 'parse-prometheus-text-format' {
  export default function parsePrometheusTextFormat(text: string): {
    name: string
    help: string
    type: string
    metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string> }[]
  }[]
}
