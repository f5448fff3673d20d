/**
 * `fetch` that trusts one more certificate authority (`--ca-file`): the service's own self-signed
 * certificate on a local install, without turning verification off. The only runtime-specific
 * code of the treasury tool: Bun takes `tls.ca`, Deno an HTTP client made with the certificate.
 */
export type Fetch = (input: string | URL, init?: RequestInit) => Promise<Response>

export function fetchTrusting(ca: string | null): Fetch {
  if (!ca) return (input, init) => fetch(input, init)
  const deno = (globalThis as { Deno?: { createHttpClient(o: { caCerts: string[] }): unknown } })
    .Deno
  if (deno) {
    const client = deno.createHttpClient({ caCerts: [ca] })
    return (input, init) => fetch(input, { ...init, client } as RequestInit)
  }
  return (input, init) => fetch(input, { ...init, tls: { ca } } as RequestInit)
}
