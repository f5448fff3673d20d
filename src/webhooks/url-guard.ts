import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { cidrContains, parseCidr, parseIp, type Cidr } from '../lib/cidr.ts'

/**
 * docs/decisions/0021-webhook-endpoints-and-private-addresses.md: live endpoints are https and
 * never reach loopback, private, link-local or metadata addresses. Test endpoints may use http;
 * they may reach local addresses (so merchants can try a receiver on their laptop) only where the
 * operator allows it (WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS), otherwise they are held to the live
 * address rules. Checked when an endpoint is saved and again at every delivery against what the
 * name resolves to then, so a DNS change cannot turn a saved endpoint into an internal one.
 * Whatever is allowed, a delivery to a private address is marked so, and its response is never
 * kept: an endpoint must not become a way to read internal services.
 *
 * Left open: the check and the connection resolve separately (fetch cannot be pinned to an
 * address on all three runtimes), so a name whose answer flips between the two lookups within
 * milliseconds could still slip through (and, for an allowed test endpoint, have its answer
 * kept). Redirects are never followed.
 */

/**
 * Ranges no live endpoint may resolve to: every non-public IPv4 and IPv6 block (IANA
 * special-purpose registries).
 */
const BLOCKED: Cidr[] = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '::/96',
  '100::/64',
  '2001::/23',
  '2001:db8::/32',
  '2002::/16',
  'fc00::/7',
  'fe80::/10',
  'fec0::/10',
  'ff00::/8',
].map((c) => parseCidr(c)!)

/**
 * NAT64 addresses carry an IPv4 address: the embedded one decides. (IPv4-mapped ones are IPv4
 * already.)
 */
const NAT64 = parseCidr('64:ff9b::/96')!

/** True when a live endpoint must not be sent to `address` (unparsable counts as blocked). */
export function isBlockedAddress(address: string): boolean {
  const ip = parseIp(address)
  if (ip === null) return true
  const embedded = cidrContains(NAT64, ip) ? 0xffff_0000_0000n | (ip & 0xffff_ffffn) : ip
  return BLOCKED.some((c) => cidrContains(c, embedded))
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string }

/**
 * The operator's choice for test endpoints (WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS); live endpoints
 * are always public-only.
 */
export interface AddressRules {
  allowPrivateTestEndpoints: boolean
}

/**
 * The check before a delivery: where it may go, and whether that is a private address (its answer
 * must not be kept).
 */
export type DeliveryTarget =
  | { ok: true; url: URL; privateAddress: boolean }
  | { ok: false; reason: string }

const PRIVATE = 'a loopback, private, link-local or metadata address'
/** Whether an endpoint of `mode` must reach public addresses only. */
const publicOnly = (mode: 'test' | 'live', rules: AddressRules) =>
  mode === 'live' || !rules.allowPrivateTestEndpoints
/** A refusal's reason; a test endpoint's names the setting that would allow it. */
const refusal = (
  mode: 'test' | 'live',
  reason: string,
  separator = ' ',
): { ok: false; reason: string } => ({
  ok: false,
  reason:
    mode === 'test'
      ? `${reason}${separator}while WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS is off`
      : reason,
})

const MAX_URL_LENGTH = 2048
/** Names that always mean this machine or its cloud metadata service, whatever DNS says. */
const LOCAL_NAMES = /(^|\.)(localhost|localdomain|internal|local)$|^metadata(\.google\.internal)?$/i

/**
 * The shape check made when an endpoint is saved (no DNS): scheme, credentials, literal addresses.
 */
export function checkEndpointUrl(
  raw: string,
  mode: 'test' | 'live',
  rules: AddressRules,
): UrlCheck {
  if (raw.length > MAX_URL_LENGTH)
    return { ok: false, reason: `must be at most ${MAX_URL_LENGTH} characters` }
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { ok: false, reason: 'must be an absolute URL' }
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return { ok: false, reason: 'must be an http or https URL' }
  if (url.username || url.password)
    return { ok: false, reason: 'must not contain credentials; use the signature to authenticate' }
  if (url.hash) return { ok: false, reason: 'must not contain a fragment' }
  if (mode === 'live' && url.protocol !== 'https:')
    return { ok: false, reason: 'live endpoints must use https' }
  if (!publicOnly(mode, rules)) return { ok: true, url }
  const host = hostOf(url)
  if (isIP(host)) {
    if (isBlockedAddress(host))
      return refusal(mode, `${mode} endpoints must not target ${PRIVATE} (${host})`)
  } else if (isLocalName(host)) {
    return refusal(mode, `${mode} endpoints must use a public host name (${host})`)
  }
  return { ok: true, url }
}

export type Resolver = (host: string) => Promise<string[]>
export const systemResolver: Resolver = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address)

/**
 * The check made right before each delivery, against what the host resolves to now. Where only
 * public addresses may be reached, every resolved address must be public. Where a test endpoint
 * may reach private ones, it passes, and is marked private when any address it resolves to is
 * (or when it cannot tell: the request may still find its way somewhere inside).
 */
export async function checkDeliveryTarget(
  raw: string,
  mode: 'test' | 'live',
  rules: AddressRules,
  resolve: Resolver = systemResolver,
): Promise<DeliveryTarget> {
  const shape = checkEndpointUrl(raw, mode, rules)
  if (!shape.ok) return shape
  const strict = publicOnly(mode, rules)
  const host = hostOf(shape.url)
  let addresses: string[]
  try {
    addresses = isIP(host) ? [host] : await resolve(host)
  } catch (error) {
    if (!strict) return { ok: true, url: shape.url, privateAddress: true }
    return { ok: false, reason: `could not resolve ${host}: ${(error as Error).message}` }
  }
  const blocked = addresses.find(isBlockedAddress)
  if (!strict)
    return {
      ok: true,
      url: shape.url,
      privateAddress: addresses.length === 0 || blocked !== undefined || isLocalName(host),
    }
  if (addresses.length === 0) return { ok: false, reason: `${host} has no address` }
  if (blocked) return refusal(mode, `${host} resolves to ${blocked}, ${PRIVATE}`, ', ')
  return { ok: true, url: shape.url, privateAddress: false }
}

/**
 * A name that means this machine or a network inside, whatever DNS says (a single label is an
 * intranet name).
 */
const isLocalName = (host: string) => !isIP(host) && (LOCAL_NAMES.test(host) || !host.includes('.'))

const hostOf = (url: URL) => url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '')
