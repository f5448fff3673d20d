import { isIP } from 'node:net'

/** An address as a 128-bit integer (IPv4 mapped into ::ffff:0:0/96), or null when unparsable. */
export function parseIp(raw: string): bigint | null {
  const s = raw
    .trim()
    .replace(/^\[|\]$/g, '')
    .replace(/%.*$/, '')
  const kind = isIP(s)
  if (kind === 4) return 0xffff_0000_0000n | v4(s)
  if (kind !== 6) return null
  // A trailing dotted IPv4 part (::ffff:1.2.3.4) becomes its two hex groups.
  const text = s.replace(/(\d+\.\d+\.\d+\.\d+)$/, (q) => {
    const n = v4(q)
    return `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`
  })
  const [head, rest] = text.split('::') as [string, string | undefined]
  const parts = (x: string) =>
    x
      ? x
          .split(':')
          .filter(Boolean)
          .map((h) => BigInt(`0x${h}`))
      : []
  const h = parts(head)
  const r = rest === undefined ? [] : parts(rest)
  const groups = rest === undefined ? h : [...h, ...Array(8 - h.length - r.length).fill(0n), ...r]
  if (groups.length !== 8) return null
  return groups.reduce((acc, g) => (acc << 16n) | g, 0n)
}

function v4(s: string): bigint {
  return s.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n)
}

export interface Cidr {
  base: bigint
  /** Prefix length in the 128-bit space. */
  bits: number
}

/** Parses `a.b.c.d/n`, `x::y/n` or a bare address; null when invalid. */
export function parseCidr(raw: string): Cidr | null {
  const [addr, len, extra] = raw.trim().split('/')
  if (extra !== undefined) return null
  const ip = parseIp(addr)
  if (ip === null) return null
  const v4only = isIP(addr) === 4
  const max = v4only ? 32 : 128
  const n = len === undefined ? max : /^\d{1,3}$/.test(len) ? Number(len) : NaN
  if (!(n >= 0 && n <= max)) return null
  const bits = v4only ? n + 96 : n
  const mask = bits === 0 ? 0n : ((1n << 128n) - 1n) ^ ((1n << BigInt(128 - bits)) - 1n)
  return { base: ip & mask, bits }
}

export function cidrContains(c: Cidr, ip: bigint): boolean {
  const shift = BigInt(128 - c.bits)
  return c.bits === 0 || ip >> shift === c.base >> shift
}

/** True when `ip` falls in any of `cidrs` (already validated strings). */
export function ipAllowed(cidrs: readonly string[], ip: string | null): boolean {
  if (cidrs.length === 0) return true
  const addr = ip === null ? null : parseIp(ip)
  if (addr === null) return false
  return cidrs.some((c) => {
    const parsed = parseCidr(c)
    return parsed !== null && cidrContains(parsed, addr)
  })
}

const LOOPBACK = [parseCidr('127.0.0.0/8')!, parseCidr('::1/128')!]

/** True for 127.0.0.0/8 and ::1 (an IPv4-mapped 127.x too). */
export function isLoopback(ip: string): boolean {
  const addr = parseIp(ip)
  return addr !== null && LOOPBACK.some((c) => cidrContains(c, addr))
}
