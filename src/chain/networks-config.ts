/**
 * The networks config of docs/decisions/0016-networks-config-and-devnet.md: the JSON file
 * `NETWORKS_CONFIG` names, validated once at start-up into typed values. Every problem is reported
 * with the path of the field at fault (`networks[1].tokens[0].price.chainlinkFeed: ...`), all at
 * once, so an operator fixes the file in one pass. Unknown keys are refused too: a misspelt
 * optional field (`confirmation`, `maxAgeSecond`) would otherwise silently fall back to its
 * default.
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
 * Presets: `{ "preset": "base", "rpcUrl": "https://..." }` takes every other field from the
 * curated table in presets.ts, and any field given beside it overrides the preset's. `tokens`
 * then may name the preset's tokens by symbol (`"tokens": ["USDC"]`), give objects that
 * override a preset token of the same symbol field by field, or add tokens of its own; absent,
 * every token of the preset is accepted. `name` defaults to the preset's name. The merged entry
 * is validated like any other.
 *
 * Extensions beyond docs/decisions/0016-networks-config-and-devnet.md (all optional):
 * - `wsUrl` (default: none): a ws(s) endpoint whose `newHeads` subscription wakes the follower as
 *   soon as a block is mined; blocks are still fetched over `rpcUrl`, and polling goes on (slower
 *   while the subscription is live).
 * - `maxRequestsPerSecond` (default: unlimited): the follower's JSON-RPC calls per second, to stay
 *   within a provider's plan (a second's worth may go at once, in one batch).
 * - `finality` (default "confirmations"): "safe" or "finalized" completes a payment once the
 *   chain's `safe` / `finalized` block has reached the payment's block, instead of counting
 *   `confirmations`.
 * - a token's `onchainSymbols` (default: its `symbol`): what its contract's `symbol()` answers,
 *   where that is not the label customers see (Tether's USDT0 reads `USD₮0`). Checked at start-up.
 * - a Chainlink price's `descriptions` (default `"<symbol> / USD"`): what the feed's
 *   `description()` answers. Checked at start-up.
 * - `fallbackRpcUrls` (default `[]`): further http(s) endpoints tried when `rpcUrl` fails.
 * - `maxLogRange` (default 1000): the most blocks one `eth_getLogs` call may span; public
 *   providers cap it (often 500-10,000), so a node that refuses larger ranges can be served.
 * - `price.maxAgeSeconds` on a Chainlink price (default 3600): an answer older than this is
 *   stale and refused. Chainlink's ETH/USD heartbeat is an hour; set it to the feed's heartbeat.
 * - a token's `price` may be `{ "par": "EUR" }`: a stablecoin of that currency (Circle's EURC),
 *   one whole token per unit. It pays transactions priced in its currency at par, with no rate;
 *   its USD value is the currency's rate.
 * - `fx` (default none): `{ "EUR": { "chainlinkFeed": "0x...", "maxAgeSeconds": 86400 } }`, the
 *   USD rates of fiat currencies read on this chain (a Chainlink `EUR / USD` feed, or a
 *   `fixedUsd`). Each makes its currency one that transactions of this network's mode may be
 *   priced in (docs/decisions/0064-priced-in-the-merchants-currency.md); a feed's `description()`
 *   defaults to `"<CODE> / USD"` and is checked at start-up like a token's. Beside a preset, a
 *   currency replaces the preset's source for it and `null` drops it.
 * - `relayer` (default `{ "contractPayers": false, "contractPayerGas": 50000 }`): whether the
 *   relayer of payments by signature relays for payers with code (contract wallets, EIP-7702
 *   delegated accounts), how much gas their signature check may add, and `minSettleUsd`, the x402
 *   facilitator's smallest settle (default: what the relay's gas costs at the time)
 *   (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md).
 *
 * The shape is one TypeBox schema (`NetworksFile`), compiled once, as request bodies are; each
 * field's schema carries the words its problems are reported in. Rules beyond the shape run on
 * what it accepted: names and chain ids unique across networks, symbols unique within a network
 * (case-insensitively), at most one native token per network, exactly one of `address` and
 * `native`, http(s) URLs, and EIP-55 checksums. Addresses are returned checksummed.
 */
import { readFileSync } from 'node:fs'
import { Type, type Static, type TObject } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { ValueError } from '@sinclair/typebox/errors'
import { getAddress, isAddress, zeroAddress, type Address } from 'viem'
import { explainErrors, type SchemaProblem, type Segment } from '../lib/typebox-errors.ts'
import { MAX_CONFIRMATIONS, WINDOW_MARGIN } from './follower/cursor.ts'
import { NETWORK_PRESETS, PRESET_NAMES, presetPollIntervalMs, type Finality } from './presets.ts'
import { isKnownCurrency, MINOR_UNITS } from '../lib/currency.ts'

export type { Finality } from './presets.ts'

export type PriceSource =
  | { kind: 'fixedUsd' /** Positive decimal string, e.g. "1" or "0.9995". */; usd: string }
  | {
      kind: 'chainlink'
      feed: Address
      maxAgeSeconds: number
      /** What the feed's `description()` may answer (absent: `"<symbol> / USD"`). */
      descriptions?: string[]
    }
  /**
   * A stablecoin of a fiat currency: one whole token is one unit of `currency` (ISO 4217). It pays
   * transactions priced in that currency at par, with no rate; any other through the currency's
   * USD rate (fx-rates.ts).
   */
  | { kind: 'par'; currency: string }

/** A source of a fiat currency's USD rate: what one unit of it is worth in dollars. */
export type RateSource = Exclude<PriceSource, { kind: 'par' }>

interface TokenBase {
  /** The label customers see. */
  symbol: string
  decimals: number
  price: PriceSource
}
export type TokenConfig =
  | (TokenBase & {
      kind: 'erc20'
      address: Address
      /** What the contract's `symbol()` may answer (absent: the label). */
      onchainSymbols?: string[]
      /**
       * The contract takes EIP-3009 authorizations (`transferWithAuthorization`, as Circle's USDC
       * and EURC): customers may pay it by one signature, a relayer paying the gas. Its EIP-712
       * domain is read from the chain and checked at start (network-verification.ts).
       */
      eip3009?: true
    })
  | (TokenBase & { kind: 'native' })

export interface NetworkConfig {
  /** The `blockchain_network` value of the API. */
  name: string
  chainId: number
  rpcUrl: string
  fallbackRpcUrls: string[]
  /** ws(s) endpoint pushing new heads; null: polling only. */
  wsUrl: string | null
  confirmations: number
  /**
   * What completes a payment: `confirmations` counted, or the chain's safe / finalized block
   * reaching it.
   */
  finality: Finality
  pollIntervalMs: number
  /** Most blocks one eth_getLogs request may span. */
  maxLogRange: number
  /** The follower's JSON-RPC calls per second at most; null: unlimited. */
  maxRequestsPerSecond: number | null
  /** true: used by test-mode transactions; false: live. */
  testnet: boolean
  tokens: TokenConfig[]
  /**
   * Fiat currencies' USD rates read on this chain (Chainlink's `<CODE> / USD` feeds): each makes its
   * currency one that transactions of this network's mode may be priced in (fx-rates.ts). Absent:
   * none.
   */
  fx?: { currency: string; rate: RateSource }[]
  /**
   * What the relayer of payments by signature may do here
   * (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md). Absent: the defaults.
   */
  relayer?: RelayerRules
}

/** A network's rules for the relayer (the networks file's `relayer`). */
export interface RelayerRules {
  /**
   * Relay authorizations whose payer has code (an EIP-1271 contract wallet, an EIP-7702 delegated
   * account); false (the default): such payers pay by transfer.
   */
  contractPayers: boolean
  /** Gas a contract payer's signature check may add to the token's transfer cost (default 50,000). */
  contractPayerGas: number
  /**
   * The facilitator's smallest settle here, in USD; null (the default): what the relay's gas costs
   * at the moment of the settle.
   */
  minSettleUsd: string | null
}

export const RELAYER_RULE_DEFAULTS: RelayerRules = {
  contractPayers: false,
  contractPayerGas: 50_000,
  minSettleUsd: null,
}

/** The relayer's rules on `n`, defaults filled in. */
export const relayerRules = (n: Pick<NetworkConfig, 'relayer'>): RelayerRules =>
  n.relayer ?? RELAYER_RULE_DEFAULTS

/** The network's native coin, when it accepts one. */
export const nativeToken = (n: Pick<NetworkConfig, 'tokens'>) =>
  n.tokens.find((t) => t.kind === 'native') ?? null

export interface ConfigProblem {
  path: string
  message: string
}

export const NETWORK_DEFAULTS = {
  fallbackRpcUrls: [] as string[],
  maxLogRange: 1000,
  maxAgeSeconds: 3600,
  finality: 'confirmations' as Finality,
} as const

/**
 * Thrown by parse/load: start-up configuration errors are fatal, and each problem names its field.
 */
export class NetworksConfigError extends Error {
  constructor(
    readonly problems: ConfigProblem[],
    source = 'networks config',
  ) {
    super(`invalid ${source}:\n${problems.map((p) => `  ${p.path}: ${p.message}`).join('\n')}`)
    this.name = 'NetworksConfigError'
  }
}

// ---------------------------------------------------------------------------------------------
// The shape of the file. Each schema carries the words its problems are reported in: `message`
// for a bad value, `missing` for an absent field.

const say = (message: string, missing = 'is required') => ({ message, missing })
const anObject = { additionalProperties: false, message: 'must be an object' } as const
const closed = { additionalProperties: false } as const
const integer = (minimum: number, maximum: number, message: string) =>
  Type.Integer({ minimum, maximum, ...say(message) })
/** Checksum and zero address are rules (below). */
const EvmAddress = Type.String({
  pattern: '^0x[0-9a-fA-F]{40}$',
  ...say('must be a 0x-prefixed 20-byte address'),
})
/** `new URL` judges the rest (a rule below): a pattern would accept what it refuses. */
const HttpUrl = Type.String(say('must be an http(s) URL'))
const WsUrl = Type.String(say('must be a ws(s) URL'))
const PRICE_SHAPE = '{ "fixedUsd": "1" }, { "chainlinkFeed": "0x..." } or { "par": "EUR" }'
const RATE_SHAPE = '{ "chainlinkFeed": "0x..." } or { "fixedUsd": "1.08" }'
const CURRENCY_WORDS = `an ISO 4217 code in capitals, one of ${Object.keys(MINOR_UNITS).join(', ')}`
/** Answers a contract gives (a symbol, a feed's description), to check it by at start-up. */
const Answers = (what: string) =>
  Type.Array(
    Type.String({ minLength: 1, maxLength: 64, ...say(`must be ${what}: 1-64 characters`) }),
    {
      minItems: 1,
      maxItems: 8,
      tooFew: `must list at least one ${what}`,
      ...say(`must be a list of 1-8 ${what}s`),
    },
  )

/** Each source is told apart by its first (required) key; see explainChoice. */
const RATE_VARIANTS = [
  Type.Object(
    // The lookahead asks for a non-zero digit: the price must be positive.
    {
      fixedUsd: Type.String({
        pattern: '^(?=[0-9.]*[1-9])[0-9]+(\\.[0-9]{1,18})?$',
        ...say(
          'must be a positive decimal string such as "1" or "0.9998" (at most 18 decimal places)',
        ),
      }),
    },
    closed,
  ),
  Type.Object(
    {
      chainlinkFeed: EvmAddress,
      maxAgeSeconds: Type.Optional(
        integer(1, 31_536_000, 'must be an integer number of seconds from 1 to 31536000'),
      ),
      descriptions: Type.Optional(Answers('feed description such as "ETH / USD"')),
    },
    closed,
  ),
]
const Price = Type.Union(
  [
    ...RATE_VARIANTS,
    Type.Object(
      { par: Type.String({ pattern: '^[A-Z]{3}$', ...say(`must be ${CURRENCY_WORDS}`) }) },
      closed,
    ),
  ],
  say(`must be ${PRICE_SHAPE}`, `is required: ${PRICE_SHAPE}`),
)
const Rate = Type.Union(RATE_VARIANTS, say(`must be ${RATE_SHAPE}`))
/** Keys are checked by a rule (so a bad one is named); values are rate sources. */
const Fx = Type.Record(Type.String(), Rate, {
  ...say(`must be an object of currency codes to rate sources: { "EUR": ${RATE_SHAPE} }`),
})

/**
 * `address` (ERC-20) or `native`: exactly one of them, a rule, so a token with neither is told so
 * plainly.
 */
const Token = Type.Object(
  {
    symbol: Type.String({
      pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,15}$',
      ...say('must be 1-16 letters, digits, ".", "_" or "-", starting with a letter or digit'),
    }),
    decimals: integer(0, 36, 'must be an integer from 0 to 36'),
    address: Type.Optional(EvmAddress),
    native: Type.Optional(
      Type.Literal(true, say('must be true (omit it and give "address" for an ERC-20 token)')),
    ),
    onchainSymbols: Type.Optional(Answers('symbol the contract answers')),
    eip3009: Type.Optional(
      Type.Boolean(
        say(
          'must be true or false (true: the contract takes EIP-3009 transferWithAuthorization, as USDC does)',
        ),
      ),
    ),
    price: Price,
  },
  anObject,
)

const FINALITY = ['confirmations', 'safe', 'finalized'] as const

const Network = Type.Object(
  {
    preset: Type.Optional(Type.String(say(`must be one of ${PRESET_NAMES.join(', ')}`))),
    name: Type.String({
      pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$',
      ...say('must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit'),
    }),
    chainId: integer(1, Number.MAX_SAFE_INTEGER, 'must be a positive integer'),
    rpcUrl: HttpUrl,
    fallbackRpcUrls: Type.Optional(Type.Array(HttpUrl, say('must be a list of http(s) URLs'))),
    wsUrl: Type.Optional(WsUrl),
    // The follower remembers this many block hashes and more, saved with every block: the bound
    // keeps that write small (follower/cursor.ts).
    confirmations: integer(
      1,
      MAX_CONFIRMATIONS,
      `must be an integer from 1 to ${MAX_CONFIRMATIONS} (the follower remembers confirmations + ${WINDOW_MARGIN} block hashes and saves them with every block; for deeper finality use "finality": "safe" or "finalized")`,
    ),
    finality: Type.Optional(
      Type.Union(
        FINALITY.map((f) => Type.Literal(f)),
        say(`must be ${FINALITY.map((f) => `"${f}"`).join(', ')}`),
      ),
    ),
    pollIntervalMs: integer(
      100,
      86_400_000,
      'must be an integer number of milliseconds, at least 100',
    ),
    maxLogRange: Type.Optional(
      integer(1, 1_000_000, 'must be an integer from 1 to 1000000 (blocks per eth_getLogs)'),
    ),
    maxRequestsPerSecond: Type.Optional(
      integer(1, 100_000, 'must be an integer from 1 to 100000 (JSON-RPC calls per second)'),
    ),
    testnet: Type.Boolean(
      say('must be true or false', 'is required (true: test-mode transactions; false: live)'),
    ),
    tokens: Type.Array(Token, {
      minItems: 1,
      tooFew: 'must list at least one token',
      ...say('must be a list of tokens', 'is required: a list of tokens'),
    }),
    fx: Type.Optional(Fx),
    relayer: Type.Optional(
      Type.Object(
        {
          contractPayers: Type.Optional(
            Type.Boolean(
              say(
                'must be true or false (true: relay payments signed by contract wallets and EIP-7702 delegated accounts)',
              ),
            ),
          ),
          contractPayerGas: Type.Optional(
            integer(0, 5_000_000, 'must be an integer amount of gas from 0 to 5000000'),
          ),
          minSettleUsd: Type.Optional(
            Type.String({
              pattern: '^[0-9]{1,9}(\\.[0-9]{1,2})?$',
              ...say('must be a decimal amount of US dollars with at most 2 places, like "0.05"'),
            }),
          ),
        },
        anObject,
      ),
    ),
  },
  anObject,
)

// An empty list is allowed: the service then takes no payments (an API-only deployment, tests).
const NetworksFile = Type.Array(Network, { message: 'must be a list of networks' })
const checkFile = TypeCompiler.Compile(NetworksFile)

// ---------------------------------------------------------------------------------------------

/** Validates without throwing: either the networks or every problem found. */
export function validateNetworksConfig(
  given: unknown,
): { ok: true; networks: NetworkConfig[] } | { ok: false; problems: ConfigProblem[] } {
  const problems = new Problems()
  const value = withPresets(given, problems)
  if (!checkFile.Check(value)) explain(checkFile.Errors(value), value, problems)
  applyRules(value, problems)
  if (problems.size) return { ok: false, problems: problems.list() }
  return { ok: true, networks: (value as Static<typeof NetworksFile>).map(toNetwork) }
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
    const why =
      code === 'ENOENT'
        ? 'file not found'
        : code === 'EISDIR'
          ? 'is a directory'
          : (error as Error).message
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

function toNetwork(n: Static<typeof Network>): NetworkConfig {
  return {
    name: n.name,
    chainId: n.chainId,
    rpcUrl: n.rpcUrl,
    fallbackRpcUrls: [...(n.fallbackRpcUrls ?? NETWORK_DEFAULTS.fallbackRpcUrls)],
    wsUrl: n.wsUrl ?? null,
    confirmations: n.confirmations,
    finality: n.finality ?? NETWORK_DEFAULTS.finality,
    pollIntervalMs: n.pollIntervalMs,
    maxLogRange: n.maxLogRange ?? NETWORK_DEFAULTS.maxLogRange,
    maxRequestsPerSecond: n.maxRequestsPerSecond ?? null,
    testnet: n.testnet,
    tokens: n.tokens.map(
      ({ symbol, decimals, address, onchainSymbols, eip3009, price: p }): TokenConfig => {
        const price: PriceSource = 'par' in p ? { kind: 'par', currency: p.par } : toRate(p)
        if (address === undefined) return { kind: 'native', symbol, decimals, price }
        return {
          kind: 'erc20',
          symbol,
          decimals,
          address: getAddress(address),
          ...(onchainSymbols ? { onchainSymbols: [...onchainSymbols] } : {}),
          ...(eip3009 ? { eip3009: true as const } : {}),
          price,
        }
      },
    ),
    ...(n.fx && Object.keys(n.fx).length
      ? {
          fx: Object.entries(n.fx).map(([currency, rate]) => ({ currency, rate: toRate(rate) })),
        }
      : {}),
    ...(n.relayer
      ? {
          relayer: {
            contractPayers: n.relayer.contractPayers ?? RELAYER_RULE_DEFAULTS.contractPayers,
            contractPayerGas: n.relayer.contractPayerGas ?? RELAYER_RULE_DEFAULTS.contractPayerGas,
            minSettleUsd: n.relayer.minSettleUsd ?? RELAYER_RULE_DEFAULTS.minSettleUsd,
          },
        }
      : {}),
  }
}

/**
 * Networks as a NETWORKS_CONFIG file writes them (the inverse of parsing it): what the devnet
 * leaves in DATA_DIR/devnet/networks.json for other instances, and what tests write.
 */
export function networksFileJson(networks: readonly NetworkConfig[]): unknown[] {
  const rate = (p: RateSource) =>
    p.kind === 'fixedUsd'
      ? { fixedUsd: p.usd }
      : {
          chainlinkFeed: p.feed,
          maxAgeSeconds: p.maxAgeSeconds,
          ...(p.descriptions ? { descriptions: p.descriptions } : {}),
        }
  return networks.map((n) => ({
    name: n.name,
    chainId: n.chainId,
    rpcUrl: n.rpcUrl,
    ...(n.fallbackRpcUrls.length ? { fallbackRpcUrls: n.fallbackRpcUrls } : {}),
    ...(n.wsUrl ? { wsUrl: n.wsUrl } : {}),
    confirmations: n.confirmations,
    ...(n.finality !== 'confirmations' ? { finality: n.finality } : {}),
    pollIntervalMs: n.pollIntervalMs,
    ...(n.maxLogRange !== NETWORK_DEFAULTS.maxLogRange ? { maxLogRange: n.maxLogRange } : {}),
    ...(n.maxRequestsPerSecond ? { maxRequestsPerSecond: n.maxRequestsPerSecond } : {}),
    testnet: n.testnet,
    tokens: n.tokens.map((t) => ({
      symbol: t.symbol,
      decimals: t.decimals,
      ...(t.kind === 'erc20'
        ? {
            address: t.address,
            ...(t.onchainSymbols ? { onchainSymbols: t.onchainSymbols } : {}),
            ...(t.eip3009 ? { eip3009: true } : {}),
          }
        : { native: true }),
      price: t.price.kind === 'par' ? { par: t.price.currency } : rate(t.price),
    })),
    ...(n.fx?.length
      ? { fx: Object.fromEntries(n.fx.map((f) => [f.currency, rate(f.rate)])) }
      : {}),
    ...(n.relayer
      ? {
          relayer: {
            contractPayers: n.relayer.contractPayers,
            contractPayerGas: n.relayer.contractPayerGas,
            ...(n.relayer.minSettleUsd === null ? {} : { minSettleUsd: n.relayer.minSettleUsd }),
          },
        }
      : {}),
  }))
}

function toRate(p: Static<typeof Rate>): RateSource {
  return 'fixedUsd' in p
    ? { kind: 'fixedUsd', usd: p.fixedUsd }
    : {
        kind: 'chainlink',
        feed: getAddress(p.chainlinkFeed),
        maxAgeSeconds: p.maxAgeSeconds ?? NETWORK_DEFAULTS.maxAgeSeconds,
        ...(p.descriptions ? { descriptions: [...p.descriptions] } : {}),
      }
}

// ---------------------------------------------------------------------------------------------
// Presets: an entry naming one is the preset's fields with the entry's over them. What cannot be
// merged (an unknown preset, a token symbol the preset lacks) is a problem at that field; the
// rest of the file is validated as usual.

function withPresets(value: unknown, problems: Problems): unknown {
  if (!Array.isArray(value)) return value
  return value.map((n, i) => {
    if (!isObject(n)) return n
    if (!has(n, 'preset')) {
      if (Array.isArray(n.tokens))
        for (const [j, t] of n.tokens.entries())
          if (typeof t === 'string')
            problems.add(
              [i, 'tokens', j],
              `names a token by symbol, which needs a "preset" for this network (or give the token in full)`,
            )
      return n
    }
    const name = n.preset
    const preset =
      typeof name === 'string' && Object.hasOwn(NETWORK_PRESETS, name)
        ? NETWORK_PRESETS[name]!
        : null
    if (!preset) {
      problems.add(
        [i, 'preset'],
        `unknown preset ${JSON.stringify(name)} (presets: ${PRESET_NAMES.join(', ')})`,
      )
      return n
    }
    const { blockTimeSeconds: _, depth: __, tokens: presetTokens, fx, ...fields } = preset
    const tokens =
      n.tokens === undefined
        ? presetTokens
        : Array.isArray(n.tokens)
          ? n.tokens.map((t, j) =>
              presetToken(t, presetTokens, name as string, [i, 'tokens', j], problems),
            )
          : n.tokens
    // A currency given beside the preset replaces the preset's source for it, `null` drops it;
    // the others stay.
    const rates =
      fx && (n.fx === undefined || isObject(n.fx))
        ? {
            fx: Object.fromEntries(
              Object.entries({ ...fx, ...(n.fx as Obj) }).filter(([, v]) => v !== null),
            ),
          }
        : {}
    return { name, pollIntervalMs: presetPollIntervalMs(preset), ...fields, ...n, tokens, ...rates }
  })
}

/**
 * A token of a preset network: by symbol, an object over the preset's token of that symbol, or one
 * of its own.
 */
function presetToken(
  t: unknown,
  tokens: readonly object[],
  preset: string,
  at: Segment[],
  problems: Problems,
): unknown {
  const bySymbol = (symbol: unknown) =>
    tokens.find(
      (p) =>
        typeof symbol === 'string' &&
        (p as { symbol: string }).symbol.toUpperCase() === symbol.toUpperCase(),
    ) as Obj | undefined
  const symbols = () => tokens.map((p) => (p as { symbol: string }).symbol).join(', ')
  if (typeof t === 'string') {
    const found = bySymbol(t)
    if (!found)
      problems.add(
        at,
        `preset ${preset} has no token ${JSON.stringify(t)} (its tokens: ${symbols()}); give the token in full to add one`,
      )
    return found ?? t
  }
  if (!isObject(t)) return t
  const base = bySymbol(t.symbol)
  if (!base) return t
  const merged: Obj = { ...base, ...t }
  // Another contract (or the native coin) is another token: the preset's answers do not describe
  // it.
  if (has(t, 'address') || has(t, 'native')) {
    if (!has(t, 'native')) delete merged.native
    if (!has(t, 'address')) delete merged.address
    if (!has(t, 'onchainSymbols')) delete merged.onchainSymbols
    if (!has(t, 'eip3009')) delete merged.eip3009
  }
  return merged
}

// ---------------------------------------------------------------------------------------------
// Problems, kept by path as segments (`[1, 'tokens', 0, 'price']`) until listed. An unknown
// field is reported, but it leaves the values it sits beside sound.

const pathOf = (at: Segment[]) =>
  `networks${at.map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`)).join('')}`
const within = (at: Segment[], node: Segment[]) => node.every((s, i) => at[i] === s)

/** Fields in file order, for listing problems as an operator reads the file. */
const FIELD_ORDER = [Network, Token, ...Price.anyOf].flatMap((o) => Object.keys(o.properties))

class Problems {
  private readonly byPath = new Map<string, SchemaProblem>()
  get size() {
    return this.byPath.size
  }
  /**
   * The first word on a field stands: the schema's, then the rules', which judge only what it
   * accepted.
   */
  add(at: Segment[], message: string, unknown = false) {
    const path = pathOf(at)
    if (!this.byPath.has(path)) this.byPath.set(path, { at, message, unknown })
  }
  drop(at: Segment[]) {
    this.byPath.delete(pathOf(at))
  }
  /**
   * No problem within `node` but unknown fields beside its values: those can be compared with its
   * siblings'. A stray key in a price counts, as it may be the price source misspelt.
   */
  sound(node: Segment[]) {
    return ![...this.byPath.values()].some(
      (p) => within(p.at, node) && !(p.unknown && p.at.at(-2) !== 'price'),
    )
  }
  /** In file order; a node's own problem after its fields', as the fields are read first. */
  list(): ConfigProblem[] {
    const rank = (p: SchemaProblem) =>
      p.at.map((s, i) =>
        typeof s === 'number'
          ? s
          : p.unknown && i === p.at.length - 1
            ? -1
            : FIELD_ORDER.indexOf(s),
      )
    const order = (a: number[], b: number[]) => {
      for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!
      return b.length - a.length
    }
    return [...this.byPath.values()]
      .sort((a, b) => order(rank(a), rank(b)))
      .map((p) => ({ path: pathOf(p.at), message: p.message }))
  }
}

type Obj = Record<string, unknown>
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
/** Present and not undefined (JSON has no undefined, but callers building objects in code may). */
const has = (o: Obj, k: string) => Object.hasOwn(o, k) && o[k] !== undefined
const unknownField = (keys: string[]) => `unknown field (allowed: ${keys.join(', ')})`

/** The schema's problems, in the words its fields carry. */
function explain(errors: Iterable<ValueError>, root: unknown, problems: Problems) {
  for (const p of explainErrors(errors, root, { unknownField, union: explainChoice }))
    problems.add(p.at, p.message, p.unknown)
}

/**
 * A variant is chosen by its first key: with exactly one given, its own problems are reported;
 * otherwise which keys to give.
 */
function explainChoice(e: ValueError, at: Segment[]): number | SchemaProblem[] {
  const value = e.value
  const problem = (message: string, where = at, unknown = false) => ({
    at: where,
    message,
    unknown,
  })
  if (!isObject(value)) return [problem(e.schema.message)]
  const variants = e.schema.anyOf as TObject[]
  const keys = variants.map((v) => v.required![0]!)
  const given = keys.flatMap((k, i) => (has(value, k) ? [i] : []))
  const quoted = keys.map((k) => `"${k}"`).join(' or ')
  if (given.length > 1) return [problem(`give either ${quoted}, not both`)]
  if (given.length === 1) return given[0]!
  const allowed = [...new Set(variants.flatMap((v) => Object.keys(v.properties)))]
  const strays = Object.keys(value).filter((key) => !allowed.includes(key))
  return [
    ...strays.map((key) => problem(unknownField(allowed), [...at, key], true)),
    problem(`needs ${quoted}`),
  ]
}

// ---------------------------------------------------------------------------------------------
// Rules the schema cannot state. They walk the value as it is, so each guards its own types.

function applyRules(value: unknown, problems: Problems) {
  if (!Array.isArray(value)) return
  value.forEach((n, i) => {
    if (!isObject(n)) return
    urlRule(n.rpcUrl, [i, 'rpcUrl'], problems)
    urlRule(n.wsUrl, [i, 'wsUrl'], problems, ['ws:', 'wss:'])
    if (Array.isArray(n.fallbackRpcUrls))
      for (const [j, u] of n.fallbackRpcUrls.entries())
        urlRule(u, [i, 'fallbackRpcUrls', j], problems)
    if (isObject(n.fx))
      for (const [code, rate] of Object.entries(n.fx)) {
        if (code === 'USD') problems.add([i, 'fx', code], 'USD needs no rate (it is 1)')
        else if (!isKnownCurrency(code))
          problems.add([i, 'fx', code], `must be keyed by ${CURRENCY_WORDS}`)
        else if (isObject(rate) && has(rate, 'chainlinkFeed'))
          addressRule(rate.chainlinkFeed, [i, 'fx', code, 'chainlinkFeed'], problems)
      }
    if (!Array.isArray(n.tokens)) return
    for (const [j, t] of n.tokens.entries())
      if (isObject(t)) tokenRules(t, [i, 'tokens', j], problems)
    // The pay page selects a token by symbol.
    unique(n.tokens, [i, 'tokens'], problems, [
      [
        'symbol',
        (t) => String(t.symbol).toUpperCase(),
        (t, first) => `duplicate symbol "${t.symbol}" in this network (also tokens[${first}])`,
      ],
      [
        'native',
        (t) => (has(t, 'native') ? true : undefined),
        (_, first) => `a network has at most one native token (also tokens[${first}])`,
      ],
    ])
  })
  // Two entries for one chain would watch it twice.
  unique(value, [], problems, [
    [
      'name',
      (n) => String(n.name).toLowerCase(),
      (n, first) => `duplicate network name "${n.name}" (also networks[${first}])`,
    ],
    [
      'chainId',
      (n) => n.chainId,
      (n, first) => `duplicate chain id ${n.chainId} (also networks[${first}])`,
    ],
  ])
}

function tokenRules(t: Obj, at: Segment[], problems: Problems) {
  const erc20 = has(t, 'address')
  const native = has(t, 'native')
  if (erc20 && native) {
    // Which one was meant is unknown, so neither is judged.
    problems.drop([...at, 'address'])
    problems.drop([...at, 'native'])
    problems.add(at, 'give either "address" (ERC-20) or "native": true, not both')
  } else if (!erc20 && !native) {
    problems.add(at, 'needs "address" (an ERC-20 token) or "native": true (the chain\'s own coin)')
  } else if (erc20) addressRule(t.address, [...at, 'address'], problems)
  // A native coin moves with the transaction that sends it: there is nothing to authorize.
  if (native && t.eip3009 === true)
    problems.add(
      [...at, 'eip3009'],
      'applies to ERC-20 tokens only (a native coin cannot be sent by signature)',
    )
  if (isObject(t.price) && has(t.price, 'chainlinkFeed'))
    addressRule(t.price.chainlinkFeed, [...at, 'price', 'chainlinkFeed'], problems)
  if (isObject(t.price) && typeof t.price.par === 'string' && !isKnownCurrency(t.price.par))
    problems.add([...at, 'price', 'par'], `must be ${CURRENCY_WORDS}`)
}

/** A mixed-case address must carry a correct EIP-55 checksum: a wrong one is usually a typo. */
function addressRule(v: unknown, at: Segment[], problems: Problems) {
  if (typeof v !== 'string') return
  if (!isAddress(v, { strict: true }))
    problems.add(at, 'has a wrong EIP-55 checksum (mixed case must match; check for a typo)')
  else if (v.toLowerCase() === zeroAddress) problems.add(at, 'must not be the zero address')
}

function urlRule(v: unknown, at: Segment[], problems: Problems, protocols = ['http:', 'https:']) {
  if (typeof v !== 'string') return
  const url = URL.parse(v)
  const kind = protocols[0] === 'ws:' ? 'a ws(s)' : 'an http(s)'
  if (!url) problems.add(at, `must be ${kind} URL`)
  else if (!protocols.includes(url.protocol))
    problems.add(at, `must be ${kind} URL, not ${url.protocol}`)
}

type Unique = [field: string, key: (o: Obj) => unknown, message: (o: Obj, first: number) => string]

/**
 * Reports each element whose key repeats an earlier one's. Only elements found sound take part:
 * a duplicate among values already refused would be noise.
 */
function unique(list: unknown[], at: Segment[], problems: Problems, checks: Unique[]) {
  const sound = list.flatMap((o, i) =>
    isObject(o) && problems.sound([...at, i]) ? [[o, i] as const] : [],
  )
  for (const [field, key, message] of checks) {
    const seen = new Map<unknown, number>()
    for (const [o, i] of sound) {
      const k = key(o)
      if (k === undefined) continue
      if (seen.has(k)) problems.add([...at, i, field], message(o, seen.get(k)!))
      else seen.set(k, i)
    }
  }
}
