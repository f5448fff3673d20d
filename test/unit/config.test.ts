import { describe, expect, test } from 'bun:test'
import { ConfigError, loadConfig } from '../../src/config.ts'

describe('loadConfig()', () => {
  test('defaults follow R24: PGlite under ./.data, TLS on 3000, plain HTTP on 3080', () => {
    const c = loadConfig({})
    expect(c).toMatchObject({ port: 3000, httpPort: 3080, databaseUrl: null, trustProxy: false, baseUrl: null, logLevel: 'info', actorLeaseMs: 10_000 })
    expect(c.dataDir.endsWith('/.data')).toBe(true)
  })
  test('every bad variable is named in the error', () => {
    const cases: [Record<string, string>, string][] = [
      [{ PORT: 'abc' }, 'PORT'],
      [{ PORT: '70000' }, 'PORT'],
      [{ HTTP_PORT: '-1' }, 'HTTP_PORT'],
      [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
      [{ TRUST_PROXY: 'maybe' }, 'TRUST_PROXY'],
      [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
      [{ BASE_URL: 'not a url' }, 'BASE_URL'],
      [{ TLS_CERT_FILE: '/x.pem' }, 'TLS_KEY_FILE'],
      [{ TLS_KEY_FILE: '/x.pem' }, 'TLS_CERT_FILE'],
      [{ ACTOR_LEASE_MS: '10' }, 'ACTOR_LEASE_MS'],
    ]
    for (const [env, name] of cases) {
      try {
        loadConfig(env)
        throw new Error(`accepted ${JSON.stringify(env)}`)
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError)
        expect((e as ConfigError).variable).toBe(name)
      }
    }
  })
  test('BASE_URL loses a trailing slash', () => {
    expect(loadConfig({ BASE_URL: 'https://pay.example.com/' }).baseUrl).toBe('https://pay.example.com')
  })
})
