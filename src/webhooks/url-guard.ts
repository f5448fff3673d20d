import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { cidrContains, parseCidr, parseIp, type Cidr } from '../lib/cidr.ts'

/**
 * R21: live endpoints are https and never reach loopback, private, link-local or metadata
 * addresses; test endpoints may use http and local addresses (so merchants can try a receiver
 * on their laptop). Checked when an endpoint is saved and again at every delivery against what
 * the name resolves to then, so a DNS change cannot turn a saved endpoint into an internal one.
 *
 * Left open: the check and the connection resolve separately (fetch cannot be pinned to an
 * address on all three runtimes), so a name whose answer flips between the two lookups within
 * milliseconds could still slip through. Redirects are never followed.
 */

/** Ranges no live endpoint may resolve to: every non-public IPv4 and IPv6 block (IANA special-purpose registries). */
const BLOCKED: Cidr[] = [
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12',
  '192.0.0.0/24', '192.0.2.0/24', '192.88.99.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24',
  '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4',
  '::/96', '100::/64', '2001::/23', '2001:db8::/32', '2002::/16', 'fc00::/7', 'fe80::/10', 'fec0::/10', 'ff00::/8',
].map((c) => parseCidr(c)!)

/** NAT64 addresses carry an IPv4 address: the embedded one decides. (IPv4-mapped ones are IPv4 already.) */
const NAT64 = parseCidr('64:ff9b::/96')!

/** True when a live endpoint must not be sent to `address` (unparsable counts as blocked). */
export function isBlockedAddress(address: string): boolean {
  const ip = parseIp(address)
  if (ip === null) return true
  const embedded = cidrContains(NAT64, ip) ? 0xffff_0000_0000n | (ip & 0xffff_ffffn) : ip
  return BLOCKED.some((c) => cidrContains(c, embedded))
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string }

const MAX_URL_LENGTH = 2048
/** Names that always mean this machine or its cloud metadata service, whatever DNS says. */
const LOCAL_NAMES = /(^|\.)(localhost|localdomain|internal|local)$|^metadata(\.google\.internal)?$/i

/** The shape check made when an endpoint is saved (no DNS): scheme, credentials, literal addresses. */
export function checkEndpointUrl(raw: string, mode: 'test' | 'live'): UrlCheck {
  if (raw.length > MAX_URL_LENGTH) return { ok: false, reason: `must be at most ${MAX_URL_LENGTH} characters` }
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { ok: false, reason: 'must be an absolute URL' }
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { ok: false, reason: 'must be an http or https URL' }
  if (url.username || url.password) return { ok: false, reason: 'must not contain credentials; use the signature to authenticate' }
  if (url.hash) return { ok: false, reason: 'must not contain a fragment' }
  if (mode === 'test') return { ok: true, url }
  if (url.protocol !== 'https:') return { ok: false, reason: 'live endpoints must use https' }
  const host = hostOf(url)
  if (isIP(host)) {
    if (isBlockedAddress(host)) return { ok: false, reason: `live endpoints must not target a loopback, private, link-local or metadata address (${host})` }
  } else if (LOCAL_NAMES.test(host) || !host.includes('.')) {
    return { ok: false, reason: `live endpoints must use a public host name (${host})` }
  }
  return { ok: true, url }
}

export type Resolver = (host: string) => Promise<string[]>
export const systemResolver: Resolver = async (host) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address)

/** The check made right before each delivery: for live endpoints every resolved address must be public. */
export async function checkDeliveryTarget(raw: string, mode: 'test' | 'live', resolve: Resolver = systemResolver): Promise<UrlCheck> {
  const shape = checkEndpointUrl(raw, mode)
  if (!shape.ok || mode === 'test') return shape
  const host = hostOf(shape.url)
  let addresses: string[]
  try {
    addresses = isIP(host) ? [host] : await resolve(host)
  } catch (error) {
    return { ok: false, reason: `could not resolve ${host}: ${(error as Error).message}` }
  }
  if (addresses.length === 0) return { ok: false, reason: `${host} has no address` }
  const blocked = addresses.find(isBlockedAddress)
  if (blocked) return { ok: false, reason: `${host} resolves to ${blocked}, a loopback, private, link-local or metadata address` }
  return shape
}

const hostOf = (url: URL) => url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '')
