/**
 * New heads pushed over a WebSocket (issue 14): anvil serves `eth_subscribe("newHeads")` on its
 * port, reached here through a TCP proxy that can drop the socket. The network polls only once
 * an hour, so every payment that completes within the test was moved by a push. The socket is
 * dropped while a payment is mined; it reconnects by itself, the follower catches up from its
 * cursor and the payment completes: none is lost.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { backends } from '../helpers/databases.ts'
import { startManualChain, waitUntil, writeNetworksFile, type ManualChain } from '../helpers/chain.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts'

for (const backend of backends()) {
  describe(`heads pushed over a WebSocket that drops [${backend}]`, () => {
    let chain: ManualChain
    let socket: TcpProxy
    let t: TestServer
    let key: string
    let dir: string

    beforeAll(async () => {
      chain = await startManualChain()
      socket = await startTcpProxy({ host: '127.0.0.1', port: chain.node.port })
      dir = mkdtempSync(join(tmpdir(), 'ws-heads-'))
      const file = writeNetworksFile(dir, [chain.network({ wsUrl: `ws://127.0.0.1:${socket.port}`, confirmations: 2, pollIntervalMs: 3_600_000 })])
      t = await startTestServer(backend, { NETWORKS_CONFIG: file, READY_CHAIN_MAX_LAG: '1h' })
      key = (await t.project()).key
    })
    afterAll(async () => {
      await t?.stop()
      await socket?.close()
      await chain?.stop()
      if (dir) rmSync(dir, { recursive: true, force: true })
    })

    const tx = async (id: string) => ((await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any).transaction
    async function selected(amountUsd: number) {
      const id = ((await (await api(t, key).create({ amount: amountUsd })).json()) as any).transaction.id as string
      const r = await t.fetch(`/pay/${id}/select`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_symbol: 'TUSD', blockchain_network: 'localchain' }) })
      const quote = ((await r.json()) as any).quote
      return { id, address: quote.deposit_address as string, units: BigInt(quote.token_amount) }
    }

    test('each mined block is followed at once by its push; a payment mined while the socket is down completes once it reconnects', async () => {
      // The first tick ran at start; from now on only pushes move the follower.
      const first = await selected(3)
      await chain.sendRaw(await chain.signTokenTransfer(first.address, first.units))
      await chain.mine()
      await chain.mine()
      await waitUntil('completed by pushes', () => tx(first.id), (x) => x.status === 'completed')

      socket.cut()
      const second = await selected(4)
      await chain.sendRaw(await chain.signTokenTransfer(second.address, second.units))
      const paidIn = await chain.mine()
      await chain.mine(2)
      socket.restore()
      // On reconnecting the follower looks at once (a head may have come meanwhile) and catches up.
      const done = await waitUntil('completed after the reconnect', () => tx(second.id), (x) => x.status === 'completed', 30_000)
      expect(done).toMatchObject({ block_number: Number(paidIn), amount_received: second.units.toString() })
    })
  })

  describe(`a WebSocket that stays down: polling takes over [${backend}]`, () => {
    let chain: ManualChain
    let socket: TcpProxy
    let t: TestServer
    let key: string
    let dir: string

    beforeAll(async () => {
      chain = await startManualChain()
      socket = await startTcpProxy({ host: '127.0.0.1', port: chain.node.port })
      dir = mkdtempSync(join(tmpdir(), 'ws-down-'))
      // Polling every 3 s, every 30 s while pushes are live: only the fallback can finish within the wait below.
      const file = writeNetworksFile(dir, [chain.network({ wsUrl: `ws://127.0.0.1:${socket.port}`, confirmations: 2, pollIntervalMs: 3_000 })])
      t = await startTestServer(backend, { NETWORKS_CONFIG: file, READY_CHAIN_MAX_LAG: '1h' })
      key = (await t.project()).key
      await waitUntil('the subscription live', async () => t.server.services.chain.pushing(), (p) => p.includes('localchain'))
    })
    afterAll(async () => {
      await t?.stop()
      await socket?.close()
      await chain?.stop()
      if (dir) rmSync(dir, { recursive: true, force: true })
    })

    test('with the socket cut for good, the follower polls at its own pace again and the payment completes', async () => {
      socket.cut()
      await waitUntil('the drop noticed', async () => t.server.services.chain.pushing(), (p) => p.length === 0)
      const id = ((await (await api(t, key).create({ amount: 6 })).json()) as any).transaction.id as string
      const r = await t.fetch(`/pay/${id}/select`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_symbol: 'TUSD', blockchain_network: 'localchain' }) })
      const quote = ((await r.json()) as any).quote
      await chain.sendRaw(await chain.signTokenTransfer(quote.deposit_address, BigInt(quote.token_amount)))
      await chain.mine(3)
      const done = await waitUntil('completed by polling', async () => ((await (await api(t, key).get(`/api/transactions/${id}`)).json()) as any).transaction, (x) => x.status === 'completed', 20_000)
      expect(done.amount_received).toBe(quote.token_amount)
    })
  })
}
