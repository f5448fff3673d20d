import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  loadNetworksConfig,
  NetworksConfigError,
  parseNetworksConfig,
  validateNetworksConfig,
} from '../../src/chain/networks-config.ts'
import { MAX_CONFIRMATIONS, MAX_WINDOW, windowFor } from '../../src/chain/follower/cursor.ts'
import { NETWORK_PRESETS } from '../../src/chain/presets.ts'
import { getAddress, isAddress } from 'viem'

const USDC = '0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238'
const FEED = '0x694AA1769357215DE4FAC081bf1f309aDC325306'

function network(overrides: Record<string, unknown> = {}) {
  return {
    name: 'sepolia',
    chainId: 11155111,
    rpcUrl: 'https://rpc.example/sepolia',
    confirmations: 3,
    pollIntervalMs: 4000,
    testnet: true,
    tokens: [
      { symbol: 'USDC', decimals: 6, address: USDC, price: { fixedUsd: '1' } },
      { symbol: 'ETH', decimals: 18, native: true, price: { chainlinkFeed: FEED } },
    ],
    ...overrides,
  }
}

/** The problems a config yields, as "path: message" lines. */
function problems(value: unknown): string[] {
  const result = validateNetworksConfig(value)
  if (result.ok) throw new Error('expected the config to be refused')
  return result.problems.map((p) => `${p.path}: ${p.message}`)
}

function problemAt(value: unknown, path: string): string {
  const found = problems(value).filter((p) => p.startsWith(`${path}: `))
  if (found.length === 0)
    throw new Error(`no problem at ${path}; got:\n${problems(value).join('\n')}`)
  return found[0]!
}

const withToken = (token: Record<string, unknown>) => [network({ tokens: [token] })]
const erc20 = (overrides: Record<string, unknown> = {}) => ({
  symbol: 'USDC',
  decimals: 6,
  address: USDC,
  price: { fixedUsd: '1' },
  ...overrides,
})

describe('parseNetworksConfig()', () => {
  test('parses a valid config into typed networks with defaults filled in', () => {
    const [n] = parseNetworksConfig([network()])
    expect(n).toEqual({
      name: 'sepolia',
      chainId: 11155111,
      rpcUrl: 'https://rpc.example/sepolia',
      fallbackRpcUrls: [],
      wsUrl: null,
      confirmations: 3,
      finality: 'confirmations',
      pollIntervalMs: 4000,
      maxLogRange: 1000,
      maxRequestsPerSecond: null,
      testnet: true,
      tokens: [
        {
          kind: 'erc20',
          symbol: 'USDC',
          decimals: 6,
          address: USDC,
          price: { kind: 'fixedUsd', usd: '1' },
        },
        {
          kind: 'native',
          symbol: 'ETH',
          decimals: 18,
          price: { kind: 'chainlink', feed: FEED, maxAgeSeconds: 3600 },
        },
      ],
    })
  })

  test('keeps the optional extensions when given', () => {
    const [n] = parseNetworksConfig([
      network({
        fallbackRpcUrls: ['http://127.0.0.1:8545'],
        maxLogRange: 500,
        tokens: [
          {
            symbol: 'ETH',
            decimals: 18,
            native: true,
            price: { chainlinkFeed: FEED, maxAgeSeconds: 90 },
          },
        ],
      }),
    ])
    expect(n!.fallbackRpcUrls).toEqual(['http://127.0.0.1:8545'])
    expect(n!.maxLogRange).toBe(500)
    expect(n!.tokens[0]!.price).toEqual({ kind: 'chainlink', feed: FEED, maxAgeSeconds: 90 })
  })

  test('checksums lower-case addresses', () => {
    const [n] = parseNetworksConfig([
      network({
        tokens: [
          erc20({ address: USDC.toLowerCase(), price: { chainlinkFeed: FEED.toLowerCase() } }),
        ],
      }),
    ])
    const token = n!.tokens[0]!
    expect(token.kind === 'erc20' && token.address).toBe(USDC)
    expect(token.price).toEqual({ kind: 'chainlink', feed: FEED, maxAgeSeconds: 3600 })
  })

  test('keeps eip3009: true on an ERC-20 token; false or absent leaves no eip3009 key', () => {
    const parsed = (token: Record<string, unknown>) => parseNetworksConfig(withToken(token))[0]!
    expect(parsed(erc20({ eip3009: true })).tokens).toEqual([
      {
        kind: 'erc20',
        symbol: 'USDC',
        decimals: 6,
        address: USDC,
        eip3009: true,
        price: { kind: 'fixedUsd', usd: '1' },
      },
    ])
    for (const token of [erc20({ eip3009: false }), erc20()]) {
      const [t] = parsed(token).tokens
      expect(t).toEqual({
        kind: 'erc20',
        symbol: 'USDC',
        decimals: 6,
        address: USDC,
        price: { kind: 'fixedUsd', usd: '1' },
      })
      expect(Object.keys(t!)).not.toContain('eip3009')
    }
  })

  test('throws a NetworksConfigError that lists every problem with its path', () => {
    try {
      parseNetworksConfig([network({ chainId: 0, confirmations: 0 })])
      throw new Error('not thrown')
    } catch (error) {
      expect(error).toBeInstanceOf(NetworksConfigError)
      const e = error as NetworksConfigError
      expect(e.problems.map((p) => p.path)).toEqual([
        'networks[0].chainId',
        'networks[0].confirmations',
      ])
      expect(e.message).toContain('networks[0].chainId: must be a positive integer')
      expect(e.message).toContain('networks[0].confirmations: must be an integer from 1 to 1000 (')
    }
  })
})

describe('validateNetworksConfig() refuses', () => {
  test('anything but a non-empty list', () => {
    expect(problems({ networks: [] })).toEqual(['networks: must be a list of networks'])
    // No networks is a deliberate choice (no payments taken), not a mistake.
    expect(validateNetworksConfig([])).toEqual({ ok: true, networks: [] })
    expect(problems([42])).toEqual(['networks[0]: must be an object'])
  })

  test('a bad chainlink feed address, naming the full path', () => {
    const config = [
      network(),
      network({
        name: 'other',
        chainId: 1,
        tokens: [erc20({ price: { chainlinkFeed: '0x1234' } })],
      }),
    ]
    expect(problemAt(config, 'networks[1].tokens[0].price.chainlinkFeed')).toBe(
      'networks[1].tokens[0].price.chainlinkFeed: must be a 0x-prefixed 20-byte address',
    )
  })

  test('unknown keys at every level (typos must not fall back to defaults)', () => {
    expect(problemAt([network({ confirmation: 3 })], 'networks[0].confirmation')).toContain(
      'unknown field',
    )
    expect(problemAt(withToken(erc20({ decimal: 6 })), 'networks[0].tokens[0].decimal')).toContain(
      'unknown field',
    )
    expect(
      problemAt(
        withToken(erc20({ price: { chainlinkFeed: FEED, maxAgeSecond: 60 } })),
        'networks[0].tokens[0].price.maxAgeSecond',
      ),
    ).toContain('unknown field')
    expect(
      problemAt(
        withToken(erc20({ price: { fixedUsd: '1', maxAgeSeconds: 60 } })),
        'networks[0].tokens[0].price.maxAgeSeconds',
      ),
    ).toContain('unknown field')
  })

  test('missing required fields', () => {
    const { name: _n, testnet: _t, tokens: _k, ...rest } = network()
    const found = problems([rest])
    expect(found).toContain('networks[0].name: is required')
    expect(found.some((p) => p.startsWith('networks[0].testnet: is required'))).toBe(true)
    expect(found.some((p) => p.startsWith('networks[0].tokens: is required'))).toBe(true)
  })

  test('duplicate network names and chain ids', () => {
    expect(
      problemAt([network(), network({ name: 'SEPOLIA', chainId: 1 })], 'networks[1].name'),
    ).toContain('duplicate network name')
    expect(problemAt([network(), network({ name: 'other' })], 'networks[1].chainId')).toContain(
      'duplicate chain id 11155111',
    )
  })

  test("confirmations above the bound the follower's remembered window is sized for, naming the field, the bound and why", () => {
    expect(MAX_CONFIRMATIONS).toBe(1000)
    expect(validateNetworksConfig([network({ confirmations: 1000 })]).ok).toBe(true)
    for (const confirmations of [1001, 10_000]) {
      expect(problemAt([network({ confirmations })], 'networks[0].confirmations')).toBe(
        'networks[0].confirmations: must be an integer from 1 to 1000 (the follower remembers confirmations + 64 block hashes and saves them with every block; for deeper finality use "finality": "safe" or "finalized")',
      )
    }
    // A preset's confirmations overridden past the bound is refused like any other.
    expect(
      problemAt(
        [{ preset: 'polygon', rpcUrl: 'https://rpc.example/node', confirmations: 5000 }],
        'networks[0].confirmations',
      ),
    ).toContain('from 1 to 1000')
  })

  test("the window remembered: confirmations + 64, never fewer than 128, at most the bound's", () => {
    expect([1, 64, 65, 200, 256, 1000].map(windowFor)).toEqual([128, 128, 129, 264, 320, 1064])
    expect(MAX_WINDOW).toBe(1064)
  })

  test('bad numbers', () => {
    for (const chainId of [0, -1, 1.5, '1', null])
      expect(problemAt([network({ chainId })], 'networks[0].chainId')).toContain('positive integer')
    for (const confirmations of [0, 2.5, '3'])
      expect(problemAt([network({ confirmations })], 'networks[0].confirmations')).toBeString()
    for (const pollIntervalMs of [99, 0, 1000.5])
      expect(problemAt([network({ pollIntervalMs })], 'networks[0].pollIntervalMs')).toContain(
        'at least 100',
      )
    expect(problemAt([network({ maxLogRange: 0 })], 'networks[0].maxLogRange')).toBeString()
    for (const decimals of [-1, 37, 6.5, '6'])
      expect(problemAt(withToken(erc20({ decimals })), 'networks[0].tokens[0].decimals')).toContain(
        '0 to 36',
      )
  })

  test('non-http(s) urls', () => {
    expect(problemAt([network({ rpcUrl: 'wss://rpc.example' })], 'networks[0].rpcUrl')).toContain(
      'not wss:',
    )
    expect(problemAt([network({ rpcUrl: 'not a url' })], 'networks[0].rpcUrl')).toContain(
      'http(s) URL',
    )
    expect(
      problemAt(
        [network({ fallbackRpcUrls: ['https://ok.example', 'ftp://x'] })],
        'networks[0].fallbackRpcUrls[1]',
      ),
    ).toContain('http(s)')
    expect(
      problemAt([network({ fallbackRpcUrls: 'https://a.example' })], 'networks[0].fallbackRpcUrls'),
    ).toContain('list')
  })

  test('testnet that is not a boolean', () => {
    expect(problemAt([network({ testnet: 'yes' })], 'networks[0].testnet')).toContain(
      'true or false',
    )
  })

  test('duplicate symbols in a network, case-insensitively', () => {
    expect(
      problemAt(
        [network({ tokens: [erc20(), erc20({ symbol: 'usdc' })] })],
        'networks[0].tokens[1].symbol',
      ),
    ).toContain('duplicate symbol')
  })

  test('a second native token', () => {
    const eth = { symbol: 'ETH', decimals: 18, native: true, price: { fixedUsd: '3000' } }
    expect(
      problemAt(
        [network({ tokens: [eth, { ...eth, symbol: 'WEI' }] })],
        'networks[0].tokens[1].native',
      ),
    ).toContain('at most one native')
  })

  test('a token that is neither or both ERC-20 and native', () => {
    const { address: _, ...noAddress } = erc20()
    expect(problemAt(withToken(noAddress), 'networks[0].tokens[0]')).toContain('needs "address"')
    expect(problemAt(withToken(erc20({ native: true })), 'networks[0].tokens[0]')).toContain(
      'not both',
    )
    expect(
      problemAt(withToken({ ...noAddress, native: false }), 'networks[0].tokens[0].native'),
    ).toContain('must be true')
  })

  test('eip3009 that is not a boolean, or declared on the native coin', () => {
    for (const eip3009 of ['true', 1, 0, null, {}])
      expect(problemAt(withToken(erc20({ eip3009 })), 'networks[0].tokens[0].eip3009')).toBe(
        'networks[0].tokens[0].eip3009: must be true or false (true: the contract takes EIP-3009 transferWithAuthorization, as USDC does)',
      )
    const eth = { symbol: 'ETH', decimals: 18, native: true, price: { fixedUsd: '3000' } }
    expect(
      problems([network({ tokens: [erc20({ eip3009: true }), { ...eth, eip3009: true }] })]),
    ).toEqual([
      'networks[0].tokens[1].eip3009: applies to ERC-20 tokens only (a native coin cannot be sent by signature)',
    ])
    // false on the native coin says what is true of it anyway.
    expect(validateNetworksConfig(withToken({ ...eth, eip3009: false })).ok).toBe(true)
  })

  test('bad addresses: malformed, wrong checksum, zero', () => {
    const path = 'networks[0].tokens[0].address'
    expect(problemAt(withToken(erc20({ address: USDC.slice(0, 40) })), path)).toContain(
      '20-byte address',
    )
    expect(problemAt(withToken(erc20({ address: `x${USDC.slice(1)}` })), path)).toContain(
      '20-byte address',
    )
    const badChecksum = USDC.replace('D4B', 'd4B')
    expect(problemAt(withToken(erc20({ address: badChecksum })), path)).toContain('checksum')
    expect(problemAt(withToken(erc20({ address: `0x${'0'.repeat(40)}` })), path)).toContain(
      'zero address',
    )
  })

  test('prices: not exactly one source, or a fixedUsd that is not a positive decimal string', () => {
    const path = 'networks[0].tokens[0].price'
    expect(problemAt(withToken(erc20({ price: undefined })), path)).toContain('is required')
    expect(problemAt(withToken(erc20({ price: {} })), path)).toContain(
      'needs "fixedUsd" or "chainlinkFeed"',
    )
    expect(
      problemAt(withToken(erc20({ price: { fixedUsd: '1', chainlinkFeed: FEED } })), path),
    ).toContain('not both')
    for (const fixedUsd of [1, '0', '0.00', '-1', '1.', '.5', '1e3', ' 1', '1.0000000000000000001'])
      expect(problemAt(withToken(erc20({ price: { fixedUsd } })), `${path}.fixedUsd`)).toContain(
        'positive decimal string',
      )
    expect(
      problemAt(
        withToken(erc20({ price: { chainlinkFeed: FEED, maxAgeSeconds: 0 } })),
        `${path}.maxAgeSeconds`,
      ),
    ).toBeString()
  })

  test('accepts fixedUsd written with decimals', () => {
    const [n] = parseNetworksConfig(withToken(erc20({ price: { fixedUsd: '0.9998' } })))
    expect(n!.tokens[0]!.price).toEqual({ kind: 'fixedUsd', usd: '0.9998' })
  })
})

describe('loadNetworksConfig()', () => {
  const dir = mkdtempSync(join(tmpdir(), 'networks-config-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  test('reads and validates a file', () => {
    const path = join(dir, 'ok.json')
    writeFileSync(path, JSON.stringify([network()]))
    expect(loadNetworksConfig(path)[0]!.name).toBe('sepolia')
  })

  test('names a missing file', () => {
    const path = join(dir, 'missing.json')
    expect(() => loadNetworksConfig(path)).toThrow(`networks config ${path}: file not found`)
  })

  test('names a file that is not JSON', () => {
    const path = join(dir, 'bad.json')
    writeFileSync(path, '[{ "name": "x", }]')
    expect(() => loadNetworksConfig(path)).toThrow(`networks config ${path} is not valid JSON`)
  })

  test('names the file and the field of a validation problem', () => {
    const path = join(dir, 'invalid.json')
    writeFileSync(path, JSON.stringify([network({ pollIntervalMs: 5 })]))
    expect(() => loadNetworksConfig(path)).toThrow(
      `invalid networks config ${path}:\n  networks[0].pollIntervalMs: must be`,
    )
  })
})

describe('presets', () => {
  const RPC = 'https://rpc.example/node'

  test("every preset, given only an RPC URL, is a valid network whose addresses are the table's, checksummed", () => {
    for (const [name, preset] of Object.entries(NETWORK_PRESETS)) {
      const [n] = parseNetworksConfig([{ preset: name, rpcUrl: RPC }])
      expect(n).toMatchObject({
        name,
        chainId: preset.chainId,
        testnet: preset.testnet,
        confirmations: preset.confirmations,
        finality: preset.finality,
        rpcUrl: RPC,
      })
      expect(n!.tokens.map((t) => t.symbol)).toEqual(preset.tokens.map((t) => t.symbol))
      for (const t of n!.tokens) {
        if (t.kind === 'erc20')
          expect(
            isAddress(t.address, { strict: true }) && t.address === getAddress(t.address),
          ).toBe(true)
        if (t.price.kind === 'chainlink') expect(t.price.feed).toBe(getAddress(t.price.feed))
      }
      expect(n!.pollIntervalMs).toBeGreaterThanOrEqual(1000)
      expect(n!.pollIntervalMs).toBeLessThanOrEqual(4000)
      expect(n!.confirmations).toBeLessThanOrEqual(MAX_CONFIRMATIONS)
    }
  })

  test('the labels customers see and the on-chain answers are kept apart (USDT0, USDt, MATIC/POL, 18-decimal pegs)', () => {
    const tokens = (preset: string) => parseNetworksConfig([{ preset, rpcUrl: RPC }])[0]!.tokens
    const usdt = (preset: string) => tokens(preset).find((t) => t.symbol === 'USDT')!
    expect(usdt('arbitrum')).toMatchObject({
      kind: 'erc20',
      decimals: 6,
      onchainSymbols: ['USDT0', 'USD₮0'],
    })
    expect(usdt('avalanche')).toMatchObject({ onchainSymbols: ['USDt'] })
    expect(usdt('ethereum')).not.toHaveProperty('onchainSymbols')
    expect(usdt('bsc').decimals).toBe(18)
    expect(tokens('bsc').find((t) => t.symbol === 'USDC')!.decimals).toBe(18)
    const pol = tokens('polygon').find((t) => t.kind === 'native')!
    expect(pol.symbol).toBe('POL')
    expect(pol.price).toMatchObject({
      kind: 'chainlink',
      descriptions: ['POL / USD', 'MATIC / USD'],
    })
    expect(tokens('base').map((t) => t.symbol)).toEqual(['USDC', 'USDT', 'ETH', 'EURC'])
  })

  test("Circle's EURC is a stablecoin of EUR (par) where Circle issues it, with Chainlink's fiat feeds beside it", () => {
    const network = (preset: string) => parseNetworksConfig([{ preset, rpcUrl: RPC }])[0]!
    for (const preset of ['ethereum', 'base', 'avalanche', 'sepolia', 'base-sepolia']) {
      expect(network(preset).tokens.find((t) => t.symbol === 'EURC')).toMatchObject({
        kind: 'erc20',
        decimals: 6,
        eip3009: true,
        price: { kind: 'par', currency: 'EUR' },
      })
    }
    for (const preset of ['arbitrum', 'optimism', 'polygon', 'bsc'])
      expect(network(preset).tokens.some((t) => t.symbol === 'EURC')).toBe(false)
    const eth = network('ethereum')
    expect(eth.fx!.map((f) => f.currency)).toEqual(['EUR', 'GBP', 'JPY', 'CHF', 'CAD', 'AUD'])
    expect(eth.fx![0]!.rate).toEqual({
      kind: 'chainlink',
      feed: '0xb49f677943BC038e9857d61E7d053CaA2C1734C1',
      maxAgeSeconds: 86_700,
    })
    // Base has no JPY feed; a currency given beside the preset replaces that one source only.
    const base = parseNetworksConfig([
      { preset: 'base', rpcUrl: RPC, fx: { EUR: { fixedUsd: '1.1' } } },
    ])[0]!
    expect(base.fx!.map((f) => f.currency)).toEqual(['EUR', 'GBP', 'CHF', 'CAD', 'AUD'])
    expect(base.fx![0]!.rate).toEqual({ kind: 'fixedUsd', usd: '1.1' })
    // `null` drops one of the preset's currencies.
    const fewer = parseNetworksConfig([
      { preset: 'base', rpcUrl: RPC, fx: { CAD: null, AUD: null } },
    ])[0]!
    expect(fewer.fx!.map((f) => f.currency)).toEqual(['EUR', 'GBP', 'CHF'])
    expect(network('base-sepolia').fx).toBeUndefined()
  })

  test('fx keys and par currencies must be ISO 4217 codes this service knows; USD needs no rate', () => {
    const problems = (fx: unknown, price: unknown = { fixedUsd: '1' }) => {
      const r = validateNetworksConfig([
        {
          name: 'x',
          chainId: 5,
          rpcUrl: RPC,
          confirmations: 1,
          pollIntervalMs: 1000,
          testnet: true,
          tokens: [
            {
              symbol: 'T',
              decimals: 6,
              address: '0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238',
              price,
            },
          ],
          fx,
        },
      ])
      return r.ok ? [] : r.problems.map((p) => `${p.path}: ${p.message}`)
    }
    expect(problems({ EUR: { fixedUsd: '1.08' } })).toEqual([])
    expect(problems({ USD: { fixedUsd: '1' } })).toEqual([
      'networks[0].fx.USD: USD needs no rate (it is 1)',
    ])
    expect(problems({ XYZ: { fixedUsd: '1' } })[0]).toStartWith(
      'networks[0].fx.XYZ: must be keyed by an ISO 4217 code',
    )
    expect(
      problems({
        EUR: { chainlinkFeed: '0x1c7d4b196cb0c7b01d743fbc6116a902379c7238'.replace('c7d', 'C7d') },
      })[0],
    ).toContain('checksum')
    expect(problems({}, { par: 'EUR' })).toEqual([])
    expect(problems({}, { par: 'eur' })[0]).toStartWith(
      'networks[0].tokens[0].price.par: must be an ISO 4217 code',
    )
  })

  test('where two contracts circulate as USDT, each has a label of its own and is checked against its own symbol()', () => {
    const token = (preset: string, symbol: string) =>
      parseNetworksConfig([{ preset, rpcUrl: RPC }])[0]!.tokens.find((t) => t.symbol === symbol)
    // Base: only the bridged Tether USD, whose contract says USDT.
    expect(token('base', 'USDT')).toEqual({
      kind: 'erc20',
      symbol: 'USDT',
      decimals: 6,
      address: '0xfde4C96c8593536E31F229EA8f37b2ADa2699bb2',
      price: { kind: 'fixedUsd', usd: '1' },
    })
    // OP Mainnet: the bridged one is USDT (its contract says USDT), Tether's own is USDT0.
    expect(token('optimism', 'USDT')).toEqual({
      kind: 'erc20',
      symbol: 'USDT',
      decimals: 6,
      address: '0x94b008aA00579c1307B0EF2c499aD98a8ce58e58',
      price: { kind: 'fixedUsd', usd: '1' },
    })
    expect(token('optimism', 'USDT0')).toEqual({
      kind: 'erc20',
      symbol: 'USDT0',
      decimals: 6,
      address: '0x01bFF41798a0BcF287b996046Ca68b395DbC1071',
      onchainSymbols: ['USDT0', 'USD₮0'],
      price: { kind: 'fixedUsd', usd: '1' },
    })
    // Avalanche: Tether's own is USDT (its contract says USDt), the bridged one USDT.e.
    expect(token('avalanche', 'USDT')).toEqual({
      kind: 'erc20',
      symbol: 'USDT',
      decimals: 6,
      address: '0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7',
      onchainSymbols: ['USDt'],
      price: { kind: 'fixedUsd', usd: '1' },
    })
    expect(token('avalanche', 'USDT.e')).toEqual({
      kind: 'erc20',
      symbol: 'USDT.e',
      decimals: 6,
      address: '0xc7198437980c041c805A1EDcbA50c1Ce5db95118',
      price: { kind: 'fixedUsd', usd: '1' },
    })
  })

  test("tokens named by symbol (any case) take the preset's; fields beside the preset override it", () => {
    const [n] = parseNetworksConfig([
      {
        preset: 'base',
        rpcUrl: RPC,
        name: 'base-main',
        confirmations: 20,
        finality: 'safe',
        tokens: ['usdc'],
      },
    ])
    expect(n).toMatchObject({
      name: 'base-main',
      chainId: 8453,
      confirmations: 20,
      finality: 'safe',
      pollIntervalMs: 2000,
    })
    expect(n!.tokens).toEqual([
      {
        kind: 'erc20',
        symbol: 'USDC',
        decimals: 6,
        address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        eip3009: true,
        price: { kind: 'fixedUsd', usd: '1' },
      },
    ])
  })

  test("a token object over a preset token overrides it field by field; another contract drops the preset's on-chain symbols", () => {
    const [n] = parseNetworksConfig([
      {
        preset: 'arbitrum',
        rpcUrl: RPC,
        tokens: [
          { symbol: 'USDC', decimals: 18 },
          { symbol: 'USDT', address: USDC.toLowerCase() },
          erc20({ symbol: 'DAI' }),
        ],
      },
    ])
    expect(n!.tokens[0]).toMatchObject({
      symbol: 'USDC',
      decimals: 18,
      address: '0xaf88d065e77c8cC2239327C5EDb3A432268e5831',
    })
    expect(n!.tokens[1]).toEqual({
      kind: 'erc20',
      symbol: 'USDT',
      decimals: 6,
      address: USDC,
      price: { kind: 'fixedUsd', usd: '1' },
    })
    expect(n!.tokens[2]).toMatchObject({ symbol: 'DAI', address: USDC })
  })

  test("presets flag EIP-3009 on Circle's USDC and EURC only: not BNB Chain's pegged USDC, no USDT, no native coin (test/integration/preset-tokens.test.ts checks each against its contract)", () => {
    const tokens = Object.keys(NETWORK_PRESETS).flatMap((preset) =>
      parseNetworksConfig([{ preset, rpcUrl: RPC }])[0]!.tokens.map((t) => ({ preset, ...t })),
    )
    const circle = tokens.filter(
      (t) => (t.symbol === 'USDC' && t.preset !== 'bsc') || t.symbol === 'EURC',
    )
    expect(circle.length).toBeGreaterThan(0)
    // The preset's name rides along, so a failure says which one.
    for (const t of circle) expect(t).toMatchObject({ kind: 'erc20', eip3009: true })
    for (const t of tokens.filter((x) => !circle.includes(x)))
      expect({ preset: t.preset, symbol: t.symbol, keys: Object.keys(t) }).toEqual({
        preset: t.preset,
        symbol: t.symbol,
        keys: expect.not.arrayContaining(['eip3009']),
      })
  })

  test("a preset's eip3009 stays with its contract: kept over other fields, dropped for another address unless declared again, turned off by false", () => {
    const usdc = (token: Record<string, unknown>) =>
      parseNetworksConfig([{ preset: 'base', rpcUrl: RPC, tokens: [token] }])[0]!.tokens[0]!
    expect(usdc({ symbol: 'USDC', decimals: 18 })).toMatchObject({ decimals: 18, eip3009: true })
    expect(Object.keys(usdc({ symbol: 'USDC', address: USDC }))).not.toContain('eip3009')
    expect(usdc({ symbol: 'USDC', address: USDC, eip3009: true })).toMatchObject({
      address: USDC,
      eip3009: true,
    })
    expect(Object.keys(usdc({ symbol: 'USDC', eip3009: false }))).not.toContain('eip3009')
  })

  test('an unknown preset, a symbol the preset lacks and a symbol without a preset are named', () => {
    expect(problemAt([{ preset: 'basee', rpcUrl: RPC }], 'networks[0].preset')).toStartWith(
      'networks[0].preset: unknown preset "basee" (presets: ethereum, base,',
    )
    expect(
      problemAt([{ preset: 'base', rpcUrl: RPC, tokens: ['DAI'] }], 'networks[0].tokens[0]'),
    ).toBe(
      'networks[0].tokens[0]: preset base has no token "DAI" (its tokens: USDC, USDT, ETH, EURC); give the token in full to add one',
    )
    expect(problemAt([network({ tokens: ['USDC'] })], 'networks[0].tokens[0]')).toContain(
      'needs a "preset"',
    )
    expect(problemAt([{ preset: 'base' }], 'networks[0].rpcUrl')).toContain('is required')
    expect(
      problemAt([{ preset: 'base', rpcUrl: RPC, finality: 'final' }], 'networks[0].finality'),
    ).toBe('networks[0].finality: must be "confirmations", "safe", "finalized"')
  })

  test('two entries of one preset clash like any two networks', () => {
    expect(
      problemAt(
        [
          { preset: 'base', rpcUrl: RPC },
          { preset: 'base', rpcUrl: RPC },
        ],
        'networks[1].name',
      ),
    ).toContain('duplicate network name "base"')
  })
})
