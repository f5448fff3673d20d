/**
 * While the server starts (its port is bound before its networks are checked and its actors are
 * back), every path answers 503 in the API's error shape with Retry-After and X-Request-Id, so a
 * client handles it as it handles any unavailable service; once started, the same request is
 * answered by the API.
 */
import { afterAll, expect, test } from 'bun:test'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { startServer } from '../../src/server/start.ts'
import { writeNetworksFile } from '../helpers/chain.ts'
import { freshDataDir } from '../helpers/databases.ts'
import { freePort } from '../helpers/processes.ts'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

test('a request during start-up gets 503 in the error shape with Retry-After; after start-up the API answers it', async () => {
  const dataDir = await freshDataDir()
  dirs.push(dataDir)
  // An RPC that holds the network check until released: the server is bound and still starting
  // meanwhile.
  let release!: () => void
  const released = new Promise<void>((r) => (release = r))
  let asked!: () => void
  const checking = new Promise<void>((r) => (asked = r))
  const rpc = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async () => {
      asked()
      await released
      return new Response('unavailable', { status: 503 })
    },
  })
  const port = await freePort()
  const networks = writeNetworksFile(dataDir, [
    {
      name: 'held',
      chainId: 31337,
      rpcUrl: `http://127.0.0.1:${rpc.port}`,
      fallbackRpcUrls: [],
      wsUrl: null,
      confirmations: 1,
      finality: 'confirmations',
      pollIntervalMs: 1000,
      maxLogRange: 1000,
      maxRequestsPerSecond: null,
      testnet: true,
      tokens: [
        { kind: 'native', symbol: 'ETH', decimals: 18, price: { kind: 'fixedUsd', usd: '3000' } },
      ],
    },
  ])
  const starting = startServer(
    loadConfig({
      PORT: String(port),
      HTTP_PORT: '0',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'silent',
      NETWORKS_CONFIG: networks,
    }),
    { logger: createLogger('silent') },
  )
  try {
    await checking
    const ca = readFileSync(join(dataDir, 'tls', 'cert.pem'), 'utf8')
    const ask = () =>
      fetch(`https://localhost:${port}/api/transactions/00000000-0000-4000-8000-000000000000`, {
        tls: { ca },
      } as RequestInit)
    const early = await ask()
    expect(early.status).toBe(503)
    expect(early.headers.get('retry-after')).toBe('1')
    expect(early.headers.get('content-type')).toStartWith('application/json')
    const requestId = early.headers.get('x-request-id')
    expect(requestId).toBeTruthy()
    expect(await early.json()).toEqual({
      success: false,
      message: 'The service is starting; try again in a moment.',
      error: {
        type: 'service_unavailable_error',
        message: 'The service is starting; try again in a moment.',
        request_id: requestId,
      },
    })
    release()
    await starting
    const later = await ask()
    expect(later.status).toBe(401)
    expect(((await later.json()) as { error: { type: string } }).error.type).toBe(
      'authentication_error',
    )
  } finally {
    release()
    await starting.then(
      (s) => s.stop(),
      () => {},
    )
    rpc.stop(true)
  }
})
