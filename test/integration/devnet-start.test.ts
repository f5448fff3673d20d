import { afterAll, describe, expect, test } from 'bun:test'
import { existsSync, rmSync } from 'node:fs'
import { freshDataDir } from '../helpers/databases.ts'
import { spawnServer, type ServerProcess } from '../helpers/processes.ts'

/**
 * docs/decisions/0016-networks-config-and-devnet.md's "done when": `npm start` without
 * NETWORKS_CONFIG runs a devnet, and a test transaction created with the printed key is paid by a
 * real devnet transfer and completes.
 */
describe('npm start on the devnet', () => {
  let server: ServerProcess | null = null
  let dataDir = ''
  afterAll(async () => {
    await server?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  test('prints the devnet, and a test transaction paid from the devnet wallet completes', async () => {
    dataDir = await freshDataDir()
    // NETWORKS_CONFIG empty = unset: the real default, a devnet.
    server = await spawnServer({
      DATA_DIR: dataDir,
      PORT: '0',
      HTTP_PORT: '0',
      LOG_LEVEL: 'info',
      NETWORKS_CONFIG: '',
    })
    const [, key] = await server.waitFor('stdout', /(sk_test_[A-Za-z0-9]+)/)
    const [, rpcUrl] = await server.waitFor(
      'stdout',
      /Devnet \(no NETWORKS_CONFIG\): anvil at (http:\/\/127\.0\.0\.1:\d+)/,
    )
    expect(rpcUrl).toBeTruthy()
    await server.waitFor('stdout', /tokens TUSD \(0x[0-9a-fA-F]{40}\), ETH \(native\)/)

    const created = (await (
      await server.fetch('/api/transactions/create', {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ amount: 12.5 }),
      })
    ).json()) as any
    const id = created.transaction.id
    const selected = (await (
      await server.fetch(`/pay/${id}/select`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token_symbol: 'TUSD', blockchain_network: 'devnet' }),
      })
    ).json()) as any
    expect(selected).toMatchObject({
      status: 'prepared',
      test_wallet: true,
      quote: { token_amount: '12500000', token_symbol: 'TUSD' },
    })
    const paid = await server.fetch(`/pay/${id}/test-wallet`, { method: 'POST' })
    expect(paid.status).toBe(200)
    const { transaction_hash } = (await paid.json()) as any
    const end = Date.now() + 30_000
    let tx: any
    for (;;) {
      tx = (
        (await (
          await server.fetch(`/api/transactions/${id}`, {
            headers: { authorization: `Bearer ${key}` },
          })
        ).json()) as any
      ).transaction
      if (tx.status === 'completed' || Date.now() > end) break
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(tx).toMatchObject({
      status: 'completed',
      transaction_hash,
      amount_received: '12500000',
      blockchain_network: 'devnet',
    })
    expect(tx.confirmations).toBeGreaterThanOrEqual(2)

    // A graceful stop takes the devnet with it.
    const pidLine = server.stderr().match(/"msg":"devnet started".*?"rpcUrl":"([^"]+)"/)
    expect(pidLine?.[1]).toBe(rpcUrl)
    const exit = await server.stop()
    server = null
    expect(exit.code).toBe(0)
    expect(
      await fetch(rpcUrl, { method: 'POST', body: '{}' }).then(
        () => 'up',
        () => 'down',
      ),
    ).toBe('down')
    expect(existsSync(dataDir)).toBe(true)
  })
})
