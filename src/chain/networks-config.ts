/**
 * The networks config of rulings R16: the JSON file `NETWORKS_CONFIG` names, validated once at
 * start-up into typed values. Every problem is reported with the path of the field at fault
 * (`networks[1].tokens[0].price.chainlinkFeed: ...`), all at once, so an operator fixes the
 * file in one pass. Unknown keys are refused too: a misspelt optional field (`confirmation`,
 * `maxAgeSecond`) would otherwise silently fall back to its default.
 *
 * The file is a list of networks:
 *
 * ```json
 * [{
 *   "name": "sepolia", "chainId": 11155111, "rpcUrl": "https://rpc.example/sepolia",
 *   "confirmations": 3, "pollIntervalMs": 4000, "testnet": true,
 *   "tokens": [
 *     { "symbol": "USDC", "decimals": 6, "address": "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238",
 *       "price": { "fixedUsd": "1" } },
 *     { "symbol": "ETH", "decimals": 18, "native": true,
 *       "price": { "chainlinkFeed": "0x694AA1769357215DE4FAC081bf1f309aDC325306", "maxAgeSeconds": 3600 } }
 *   ]
 * }]
 * ```
 *
 * Extensions beyond R16 (all optional):
 * - `fallbackRpcUrls` (default `[]`): further http(s) endpoints tried when `rpcUrl` fails.
 * - `maxLogRange` (default 1000): the most blocks one `eth_getLogs` call may span; public
 *   providers cap it (often 500-10,000), so a node that refuses larger ranges can be served.
 * - `price.maxAgeSeconds` on a Chainlink price (default 3600): an answer older than this is
 *   stale and refused. Chainlink's ETH/USD heartbeat is an hour; set it to the feed's heartbeat.
 *
 * Checks beyond the field types: names and chain ids unique across networks (two entries for
 * one chain would watch it twice), symbols unique within a network (case-insensitively: the
 * pay page selects by symbol), at most one native token per network, addresses valid (a
 * mixed-case address must carry a correct EIP-55 checksum: a wrong one is usually a typo) and
 * returned checksummed.
 */
import { readFileSync } from 'node:fs'
import { getAddress, isAddress, zeroAddress, type Address } from 'viem'

export type PriceSource =
  | { kind: 'fixedUsd'; /** Positive decimal string, e.g. "1" or "0.9995". */ usd: string }
  | { kind: 'chainlink'; feed: Address; maxAgeSeconds: number }

interface TokenBase {
  symbol: string
  decimals: number
  price: PriceSource
}
export type TokenConfig = (TokenBase & { kind: 'erc20'; address: Address }) | (TokenBase & { kind: 'native' })

export interface NetworkConfig {
  /** The `blockchain_network` value of the API. */
  name: string
  chainId: number
  rpcUrl: string
  fallbackRpcUrls: string[]
  confirmations: number
  pollIntervalMs: number
  /** Most blocks one eth_getLogs request may span. */
  maxLogRange: number
  /** true: used by test-mode transactions; false: live. */
  testnet: boolean
  tokens: TokenConfig[]
}

export interface ConfigProblem {
  path: string
  message: string
}

export const NETWORK_DEFAULTS = { fallbackRpcUrls: [] as string[], maxLogRange: 1000, maxAgeSeconds: 3600 } as const

/** Thrown by parse/load: start-up configuration errors are fatal, and each problem names its field. */
export class NetworksConfigError extends Error {
  constructor(
    readonly problems: ConfigProblem[],
    source = 'networks config',
  ) {
    super(`invalid ${source}:\n${problems.map((p) => `  ${p.path}: ${p.message}`).join('\n')}`)
    this.name = 'NetworksConfigError'
  }
}

/** Validates without throwing: either the networks or every problem found. */
export function validateNetworksConfig(value: unknown): { ok: true; networks: NetworkConfig[] } | { ok: false; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = []
  const networks = parseNetworks(value, problems)
  return problems.length ? { ok: false, problems } : { ok: true, networks }
}

/** Validates parsed JSON; throws NetworksConfigError listing every problem. */
export function parseNetworksConfig(value: unknown): NetworkConfig[] {
  const result = validateNetworksConfig(value)
  if (!result.ok) throw new NetworksConfigError(result.problems)
  return result.networks
}

/** Reads, parses and validates the file at `path`, with a clear error for each way it can fail. */
export function loadNetworksConfig(path: string): NetworkConfig[] {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const why = code === 'ENOENT' ? 'file not found' : code === 'EISDIR' ? 'is a directory' : (error as Error).message
    throw new Error(`networks config ${path}: ${why}`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new Error(`networks config ${path} is not valid JSON: ${(error as Error).message}`)
  }
  const result = validateNetworksConfig(json)
  if (!result.ok) throw new NetworksConfigError(result.problems, `networks config ${path}`)
  return result.networks
}

// ---------------------------------------------------------------------------------------------

const NETWORK_KEYS = ['name', 'chainId', 'rpcUrl', 'fallbackRpcUrls', 'confirmations', 'pollIntervalMs', 'maxLogRange', 'testnet', 'tokens']
const TOKEN_KEYS = ['symbol', 'decimals', 'address', 'native', 'price']
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
const SYMBOL_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,15}$/
const DECIMAL_RE = /^\d+(\.\d{1,18})?$/

/** A problem sink scoped to one path, so checks read as `at.field('x').fail('...')`. */
class At {
  constructor(
    readonly path: string,
    private readonly problems: ConfigProblem[],
  ) {}
  field(key: string) {
    return new At(`${this.path}.${key}`, this.problems)
  }
  index(i: number) {
    return new At(`${this.path}[${i}]`, this.problems)
  }
  fail(message: string): undefined {
    this.problems.push({ path: this.path, message })
    return undefined
  }
}

type Obj = Record<string, unknown>
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
/** Present and not undefined (JSON has no undefined, but callers building objects in code may). */
const has = (o: Obj, k: string) => Object.hasOwn(o, k) && o[k] !== undefined

function parseNetworks(value: unknown, problems: ConfigProblem[]): NetworkConfig[] {
  const at = new At('networks', problems)
  if (!Array.isArray(value)) return at.fail('must be a list of networks') ?? []
  // An empty list is allowed: the service then takes no payments (an API-only deployment, tests).
  const networks: NetworkConfig[] = []
  const names = new Map<string, number>()
  const chainIds = new Map<number, number>()
  value.forEach((raw, i) => {
    const n = parseNetwork(raw, at.index(i))
    if (!n) return
    const key = n.name.toLowerCase()
    if (names.has(key)) at.index(i).field('name').fail(`duplicate network name "${n.name}" (also networks[${names.get(key)}])`)
    else names.set(key, i)
    if (chainIds.has(n.chainId)) at.index(i).field('chainId').fail(`duplicate chain id ${n.chainId} (also networks[${chainIds.get(n.chainId)}])`)
    else chainIds.set(n.chainId, i)
    networks.push(n)
  })
  return networks
}

function rejectUnknownKeys(o: Obj, allowed: readonly string[], at: At) {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) at.field(k).fail(`unknown field (allowed: ${allowed.join(', ')})`)
}

function parseNetwork(raw: unknown, at: At): NetworkConfig | undefined {
  if (!isObject(raw)) return at.fail('must be an object')
  rejectUnknownKeys(raw, NETWORK_KEYS, at)
  const name = requireString(raw, 'name', at, NAME_RE, 'must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit')
  const chainId = requireInteger(raw, 'chainId', at, 1, Number.MAX_SAFE_INTEGER, 'must be a positive integer')
  const rpcUrl = requireUrl(raw.rpcUrl, at.field('rpcUrl'))
  let fallbackRpcUrls: string[] | undefined = [...NETWORK_DEFAULTS.fallbackRpcUrls]
  if (has(raw, 'fallbackRpcUrls')) {
    const list = raw.fallbackRpcUrls
    if (!Array.isArray(list)) fallbackRpcUrls = at.field('fallbackRpcUrls').fail('must be a list of http(s) URLs')
    else {
      const urls = list.map((u, i) => requireUrl(u, at.field('fallbackRpcUrls').index(i)))
      fallbackRpcUrls = urls.every((u) => u !== undefined) ? (urls as string[]) : undefined
    }
  }
  const confirmations = requireInteger(raw, 'confirmations', at, 1, 10_000, 'must be an integer from 1 to 10000')
  const pollIntervalMs = requireInteger(raw, 'pollIntervalMs', at, 100, 86_400_000, 'must be an integer number of milliseconds, at least 100')
  const maxLogRange = has(raw, 'maxLogRange')
    ? requireInteger(raw, 'maxLogRange', at, 1, 1_000_000, 'must be an integer from 1 to 1000000 (blocks per eth_getLogs)')
    : NETWORK_DEFAULTS.maxLogRange
  let testnet: boolean | undefined
  if (!has(raw, 'testnet')) at.field('testnet').fail('is required (true: test-mode transactions; false: live)')
  else if (typeof raw.testnet !== 'boolean') at.field('testnet').fail('must be true or false')
  else testnet = raw.testnet
  const tokens = parseTokens(raw.tokens, has(raw, 'tokens'), at.field('tokens'))

  if (
    name === undefined || chainId === undefined || rpcUrl === undefined || fallbackRpcUrls === undefined ||
    confirmations === undefined || pollIntervalMs === undefined || maxLogRange === undefined ||
    testnet === undefined || tokens === undefined
  ) return undefined
  return { name, chainId, rpcUrl, fallbackRpcUrls, confirmations, pollIntervalMs, maxLogRange, testnet, tokens }
}

function parseTokens(raw: unknown, present: boolean, at: At): TokenConfig[] | undefined {
  if (!present) return at.fail('is required: a list of tokens')
  if (!Array.isArray(raw)) return at.fail('must be a list of tokens')
  if (raw.length === 0) return at.fail('must list at least one token')
  const tokens: TokenConfig[] = []
  const symbols = new Map<string, number>()
  let native: number | undefined
  let failed = false
  raw.forEach((r, i) => {
    const t = parseToken(r, at.index(i))
    if (!t) return void (failed = true)
    const key = t.symbol.toUpperCase()
    if (symbols.has(key)) {
      failed = true
      at.index(i).field('symbol').fail(`duplicate symbol "${t.symbol}" in this network (also tokens[${symbols.get(key)}])`)
    } else symbols.set(key, i)
    if (t.kind === 'native') {
      if (native !== undefined) {
        failed = true
        at.index(i).field('native').fail(`a network has at most one native token (also tokens[${native}])`)
      } else native = i
    }
    tokens.push(t)
  })
  return failed ? undefined : tokens
}

function parseToken(raw: unknown, at: At): TokenConfig | undefined {
  if (!isObject(raw)) return at.fail('must be an object')
  rejectUnknownKeys(raw, TOKEN_KEYS, at)
  const symbol = requireString(raw, 'symbol', at, SYMBOL_RE, 'must be 1-16 letters, digits, ".", "_" or "-", starting with a letter or digit')
  const decimals = requireInteger(raw, 'decimals', at, 0, 36, 'must be an integer from 0 to 36')
  const price = parsePrice(raw.price, has(raw, 'price'), at.field('price'))

  const isNative = has(raw, 'native')
  const hasAddress = has(raw, 'address')
  let address: Address | undefined
  let kindOk = true
  if (isNative && hasAddress) {
    kindOk = false
    at.fail('give either "address" (ERC-20) or "native": true, not both')
  } else if (isNative) {
    if (raw.native !== true) {
      kindOk = false
      at.field('native').fail('must be true (omit it and give "address" for an ERC-20 token)')
    }
  } else if (hasAddress) {
    address = requireAddress(raw.address, at.field('address'))
    kindOk = address !== undefined
  } else {
    kindOk = false
    at.fail('needs "address" (an ERC-20 token) or "native": true (the chain\'s own coin)')
  }
  if (symbol === undefined || decimals === undefined || price === undefined || !kindOk) return undefined
  return address ? { kind: 'erc20', symbol, decimals, address, price } : { kind: 'native', symbol, decimals, price }
}

function parsePrice(raw: unknown, present: boolean, at: At): PriceSource | undefined {
  if (!present) return at.fail('is required: { "fixedUsd": "1" } or { "chainlinkFeed": "0x..." }')
  if (!isObject(raw)) return at.fail('must be { "fixedUsd": "1" } or { "chainlinkFeed": "0x..." }')
  const fixed = has(raw, 'fixedUsd')
  const feed = has(raw, 'chainlinkFeed')
  if (fixed && feed) return at.fail('give either "fixedUsd" or "chainlinkFeed", not both')
  if (fixed) {
    rejectUnknownKeys(raw, ['fixedUsd'], at)
    const usd = raw.fixedUsd
    if (typeof usd !== 'string' || !DECIMAL_RE.test(usd) || !/[1-9]/.test(usd)) {
      return at.field('fixedUsd').fail('must be a positive decimal string such as "1" or "0.9998" (at most 18 decimal places)')
    }
    return Object.keys(raw).length === 1 ? { kind: 'fixedUsd', usd } : undefined
  }
  if (feed) {
    rejectUnknownKeys(raw, ['chainlinkFeed', 'maxAgeSeconds'], at)
    const address = requireAddress(raw.chainlinkFeed, at.field('chainlinkFeed'))
    const maxAgeSeconds = has(raw, 'maxAgeSeconds')
      ? requireInteger(raw, 'maxAgeSeconds', at, 1, 31_536_000, 'must be an integer number of seconds from 1 to 31536000')
      : NETWORK_DEFAULTS.maxAgeSeconds
    const unknown = Object.keys(raw).some((k) => k !== 'chainlinkFeed' && k !== 'maxAgeSeconds')
    if (!address || maxAgeSeconds === undefined || unknown) return undefined
    return { kind: 'chainlink', feed: address, maxAgeSeconds }
  }
  rejectUnknownKeys(raw, ['fixedUsd', 'chainlinkFeed', 'maxAgeSeconds'], at)
  return at.fail('needs "fixedUsd" or "chainlinkFeed"')
}

function requireString(o: Obj, key: string, at: At, re: RegExp, message: string): string | undefined {
  const v = o[key]
  if (!has(o, key)) return at.field(key).fail('is required')
  if (typeof v !== 'string' || !re.test(v)) return at.field(key).fail(message)
  return v
}

function requireInteger(o: Obj, key: string, at: At, min: number, max: number, message: string): number | undefined {
  const v = o[key]
  if (!has(o, key)) return at.field(key).fail('is required')
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) return at.field(key).fail(message)
  return v
}

function requireUrl(v: unknown, at: At): string | undefined {
  if (v === undefined) return at.fail('is required')
  if (typeof v !== 'string') return at.fail('must be an http(s) URL')
  let url: URL
  try {
    url = new URL(v)
  } catch {
    return at.fail('must be an http(s) URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return at.fail(`must be an http(s) URL, not ${url.protocol}`)
  return v
}

function requireAddress(v: unknown, at: At): Address | undefined {
  if (v === undefined) return at.fail('is required')
  if (typeof v !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(v)) return at.fail('must be a 0x-prefixed 20-byte address')
  if (!isAddress(v, { strict: true })) return at.fail('has a wrong EIP-55 checksum (mixed case must match; check for a typo)')
  if (v.toLowerCase() === zeroAddress) return at.fail('must not be the zero address')
  return getAddress(v)
}
