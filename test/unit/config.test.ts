import { describe, expect, test } from 'bun:test'
import { ConfigError, loadConfig } from '../../src/config.ts'

describe('loadConfig()', () => {
  test('defaults follow docs/decisions/0024-start-and-configuration.md: PGlite under ./.data, TLS on 3000, plain HTTP on 3080', () => {
    const c = loadConfig({})
    expect(c).toMatchObject({
      port: 3000,
      httpPort: 3080,
      databaseUrl: null,
      trustProxy: false,
      baseUrl: null,
      logLevel: 'info',
      actorLeaseMs: 10_000,
    })
    expect(c.dataDir.endsWith('/.data')).toBe(true)
    expect(c.payRateLimits).toBeNull()
  })
  test("PAY_RATE_LIMITS sets the pay routes' per-IP minute/hour/day limits", () => {
    expect(loadConfig({ PAY_RATE_LIMITS: '600/10000/100000' }).payRateLimits).toEqual({
      minute: 600,
      hour: 10_000,
      day: 100_000,
    })
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
      [{ SECRET_KEY: 'too-short' }, 'SECRET_KEY'],
      [{ DATABASE_URL: 'postgres://x/y' }, 'SECRET_KEY'],
      [{ WEBHOOK_RETRY_SCHEDULE: '1m,5x' }, 'WEBHOOK_RETRY_SCHEDULE'],
      [{ WEBHOOK_RETRY_SCHEDULE: '0s' }, 'WEBHOOK_RETRY_SCHEDULE'],
      [{ WEBHOOK_RETRY_SCHEDULE: '1m,,5m' }, 'WEBHOOK_RETRY_SCHEDULE'],
      [{ PAY_RATE_LIMITS: '300' }, 'PAY_RATE_LIMITS'],
      [{ PAY_RATE_LIMITS: '0/10/100' }, 'PAY_RATE_LIMITS'],
      [{ PAY_RATE_LIMITS: '500/100/1000' }, 'PAY_RATE_LIMITS'],
      [{ PAY_RATE_LIMITS: '1.5/10/100' }, 'PAY_RATE_LIMITS'],
      [{ WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: 'maybe' }, 'WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS'],
      [{ WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: '2' }, 'WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS'],
      [{ METRICS: 'sometimes' }, 'METRICS'],
      [{ METRICS_TOKEN: 'short' }, 'METRICS_TOKEN'],
      [{ METRICS_TOKEN: 'has spaces in it, which a header would not carry' }, 'METRICS_TOKEN'],
      [{ WEBHOOK_DISABLE_AFTER: '5' }, 'WEBHOOK_DISABLE_AFTER'],
      [{ WEBHOOK_DISABLE_AFTER: '0d' }, 'WEBHOOK_DISABLE_AFTER'],
      [{ READY_CHAIN_MAX_LAG: '2 minutes' }, 'READY_CHAIN_MAX_LAG'],
      [{ SHUTDOWN_DRAIN: '1m' }, 'SHUTDOWN_DRAIN'],
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
  test('docs/decisions/0047-metrics-and-probes.md: metrics on by default and open to loopback only; endpoints disabled after 5 days of failures; readiness allows 120 s of chain lag; no drain', () => {
    expect(loadConfig({})).toMatchObject({
      metricsEnabled: true,
      metricsToken: null,
      webhookDisableAfterMs: 5 * 86_400_000,
      readyChainMaxLagMs: 120_000,
      shutdownDrainMs: 0,
    })
    expect(
      loadConfig({
        METRICS: '0',
        METRICS_TOKEN: 'abcdefghijklmnop0123',
        WEBHOOK_DISABLE_AFTER: '36h',
        READY_CHAIN_MAX_LAG: '5m',
        SHUTDOWN_DRAIN: '15s',
      }),
    ).toMatchObject({
      metricsEnabled: false,
      metricsToken: 'abcdefghijklmnop0123',
      webhookDisableAfterMs: 36 * 3_600_000,
      readyChainMaxLagMs: 300_000,
      shutdownDrainMs: 15_000,
    })
  })
  test('docs/decisions/0019-retry-schedule.md: the webhook retry schedule defaults to variant B and takes s, m, h', () => {
    expect(loadConfig({}).webhookRetryScheduleMs).toEqual([
      60_000, 300_000, 1_800_000, 7_200_000, 28_800_000,
    ])
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '1s, 2s,3m,1h' }).webhookRetryScheduleMs).toEqual([
      1000, 2000, 180_000, 3_600_000,
    ])
  })
  test('SECRET_KEY is 32 bytes in hex; with DATABASE_URL it is required', () => {
    expect(loadConfig({ SECRET_KEY: 'ab'.repeat(32) }).secretKey?.length).toBe(32)
    expect(loadConfig({}).secretKey).toBeNull()
    expect(
      loadConfig({ DATABASE_URL: 'postgres://x/y', SECRET_KEY: 'ab'.repeat(32) }).databaseUrl,
    ).toBe('postgres://x/y')
  })
  test('docs/decisions/0021-webhook-endpoints-and-private-addresses.md: WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS defaults to on with the embedded database and off with DATABASE_URL', () => {
    const postgres = { DATABASE_URL: 'postgres://x/y', SECRET_KEY: 'ab'.repeat(32) }
    expect(loadConfig({}).allowPrivateTestEndpoints).toBe(true)
    expect(loadConfig(postgres).allowPrivateTestEndpoints).toBe(false)
    // Empty counts as unset, so the default applies.
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: '' }).allowPrivateTestEndpoints).toBe(
      true,
    )
    expect(
      loadConfig({ ...postgres, WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: '' })
        .allowPrivateTestEndpoints,
    ).toBe(false)
  })
  test('docs/decisions/0021-webhook-endpoints-and-private-addresses.md: WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS=1 or 0 overrides the default either way, and says what was wrong otherwise', () => {
    const postgres = { DATABASE_URL: 'postgres://x/y', SECRET_KEY: 'ab'.repeat(32) }
    for (const [raw, allowed] of [
      ['1', true],
      ['true', true],
      ['yes', true],
      ['0', false],
      ['false', false],
      ['no', false],
    ] as const) {
      expect({
        raw,
        embedded: loadConfig({ WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: raw })
          .allowPrivateTestEndpoints,
      }).toEqual({ raw, embedded: allowed })
      expect({
        raw,
        postgres: loadConfig({ ...postgres, WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: raw })
          .allowPrivateTestEndpoints,
      }).toEqual({ raw, postgres: allowed })
    }
    expect(() => loadConfig({ WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: 'on' })).toThrow(
      'WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: must be 1 or 0, got "on"',
    )
  })
  test('BASE_URL loses a trailing slash', () => {
    expect(loadConfig({ BASE_URL: 'https://pay.example.com/' }).baseUrl).toBe(
      'https://pay.example.com',
    )
  })
})
