import { describe, expect, test } from 'bun:test'
import {
  BaseError,
  ExecutionRevertedError,
  HttpRequestError,
  RpcRequestError,
  TimeoutError,
} from 'viem'
import { answeredWithError } from '../../src/chain/read-again.ts'
import { parseArgs } from '../../src/lib/command-line.ts'
import {
  displayPrefix,
  generateApiKey,
  hashApiKey,
  looksLikeApiKey,
} from '../../src/keys/api-key.ts'
import { newTransactionNumber, randomString } from '../../src/lib/ids.ts'
import { errorSummary, redact } from '../../src/lib/logger.ts'
import { parseBound } from '../../src/modules/stats/service.ts'
import { canonicalJson } from '../../src/modules/transactions/service.ts'

describe('api keys', () => {
  test('generateApiKey() gives sk_test_/sk_live_ and 40 base62 characters, never twice the same', () => {
    const keys = new Set(Array.from({ length: 1000 }, () => generateApiKey('test')))
    expect(keys.size).toBe(1000)
    for (const k of keys) expect(k).toMatch(/^sk_test_[A-Za-z0-9]{40}$/)
    expect(generateApiKey('live')).toMatch(/^sk_live_[A-Za-z0-9]{40}$/)
  })
  test('hashApiKey() is a SHA-256 hex digest; displayPrefix() hides the middle', () => {
    const k = generateApiKey('test')
    expect(hashApiKey(k)).toMatch(/^[0-9a-f]{64}$/)
    expect(displayPrefix(k)).toBe(`${k.slice(0, 12)}…${k.slice(-4)}`)
  })
  test('looksLikeApiKey() refuses other shapes before any lookup', () => {
    for (const bad of [
      '',
      'sk_test_',
      `sk_prod_${'a'.repeat(40)}`,
      `sk_test_${'a'.repeat(31)}`,
      `sk_test_${'a'.repeat(40)}!`,
    ])
      expect(looksLikeApiKey(bad)).toBe(false)
  })
  test('redact() removes keys from log lines', () => {
    const k = generateApiKey('live')
    expect(redact(`auth ${k} failed`)).toBe('auth sk_live_[redacted] failed')
  })
})

describe('ids', () => {
  test('transaction numbers read well: TX-XXXX-XXXX without look-alike characters', () => {
    for (let i = 0; i < 200; i++)
      expect(newTransactionNumber()).toMatch(/^TX-[2-9A-HJ-NP-TV-Z]{4}-[2-9A-HJ-NP-TV-Z]{4}$/)
  })
  test('randomString() uses the whole alphabet', () => {
    expect(new Set(randomString(5000, 'ab')).size).toBe(2)
  })
})

describe('canonicalJson()', () => {
  test('key order does not matter, values do', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe(
      canonicalJson({ a: { c: null, d: [1, { x: 1, y: 2 }] }, b: 1 }),
    )
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: '1' }))
  })
})

describe('parseBound()', () => {
  test('a date-only end covers the whole UTC day; timestamps are taken as given', () => {
    expect(parseBound('2030-01-31', 'start')!.toISOString()).toBe('2030-01-31T00:00:00.000Z')
    expect(parseBound('2030-01-31', 'end')!.toISOString()).toBe('2030-02-01T00:00:00.000Z')
    expect(parseBound('2030-01-31T10:00:00+02:00', 'end')!.toISOString()).toBe(
      '2030-01-31T08:00:00.000Z',
    )
  })
  test('refuses what Date would roll over or guess', () => {
    for (const bad of [
      '2030-02-29',
      '2030-04-31',
      '2030-1-1',
      '31/01/2030',
      '2030-01-31T10:00',
      'now',
      '2030-01-31T24:00:00Z',
    ])
      expect(parseBound(bad, 'start')).toBeNull()
    expect(parseBound('2028-02-29', 'start')).not.toBeNull()
  })
})

describe('parseArgs()', () => {
  test('splits words and --flags, with = or a following value, and bare switches', () => {
    expect(parseArgs(['key', 'create', '--project', 'p1', '--mode=test', '--json'])).toEqual({
      words: ['key', 'create'],
      flags: { project: 'p1', mode: 'test', json: true },
    })
  })
})

describe('errorSummary', () => {
  const viemLike = (message: string, details: string) =>
    Object.assign(new Error(message), { details })

  test("an error's first line; what a node said (viem's details) follows it", () => {
    expect(errorSummary(new Error('first\nsecond'))).toBe('first')
    expect(
      errorSummary(
        viemLike(
          'Invalid parameters were provided to the RPC method.\n\nURL: http://x',
          'BlockOutOfRangeError: block height is 15 but requested was 14',
        ),
      ),
    ).toBe(
      'Invalid parameters were provided to the RPC method. (BlockOutOfRangeError: block height is 15 but requested was 14)',
    )
    expect(errorSummary(viemLike('HTTP request failed.', 'HTTP request failed.'))).toBe(
      'HTTP request failed.',
    )
    expect(errorSummary('plain')).toBe('plain')
  })

  test('never repeats a URL from the details: RPC URLs carry API keys', () => {
    const e = viemLike(
      'HTTP request failed.',
      'error sending request for url (https://eth-mainnet.example/v2/SECRETKEY123): connection refused',
    )
    expect(errorSummary(e)).toBe(
      'HTTP request failed. (error sending request for url ([url]): connection refused)',
    )
    expect(errorSummary(viemLike('x', 'wss://node.example/ws/KEY gone'))).toBe('x ([url] gone)')
  })
})

describe('answeredWithError: which failed reads are made again', () => {
  const answer = (code: number, message: string) =>
    new RpcRequestError({ body: {}, error: { code, message }, url: 'http://127.0.0.1:8545' })
  const wrapped = (cause: Error) =>
    new BaseError('Contract function "decimals" reverted or failed.', { cause })

  test('a JSON-RPC error answer of the node, however deep: yes', () => {
    expect(
      answeredWithError(
        wrapped(answer(-32602, 'BlockOutOfRangeError: block height is 15 but requested was 14')),
      ),
    ).toBe(true)
    expect(answeredWithError(answer(-32000, 'header not found'))).toBe(true)
  })

  test("a revert (the contract's own answer), a request that got no answer, or no viem error at all: no", () => {
    expect(
      answeredWithError(
        wrapped(new ExecutionRevertedError({ cause: answer(3, 'execution reverted') as never })),
      ),
    ).toBe(false)
    expect(
      answeredWithError(
        wrapped(
          new HttpRequestError({ url: 'http://127.0.0.1:8545', details: 'Unable to connect' }),
        ),
      ),
    ).toBe(false)
    expect(
      answeredWithError(wrapped(new TimeoutError({ body: {}, url: 'http://127.0.0.1:8545' }))),
    ).toBe(false)
    expect(answeredWithError(new Error('price feed could not be read'))).toBe(false)
  })
})
