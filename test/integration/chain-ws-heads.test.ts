/**
 * New heads pushed over a WebSocket (docs/decisions/0044-living-with-provider-limits.md): anvil
 * serves `eth_subscribe("newHeads")` on its port, reached here through a TCP proxy that can drop
 * the socket.
 * - Polling once an hour, every payment that completes within the test was moved by a push. The
 *   socket is dropped while a payment is mined; it reconnects by itself, the follower catches up
 *   from its cursor and the payment completes: none is lost.
 * - Polling every 3 s (every 30 s while pushes are live), with the socket cut for good, only the
 *   fallback to the normal pace can complete a payment within the wait.
 */
import { describe, expect, test } from 'bun:test'
import { backends, type Backend } from '../helpers/databases.ts'
import { waitUntil, type ManualChain } from '../helpers/chain.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts'

/**
 * A manual chain whose WebSocket goes through a proxy, and a server following it polling every
 * `pollIntervalMs`.
 */
function chainWithSocket(backend: Backend, pollIntervalMs: number) {
  const c = {} as { chain: ManualChain; socket: TcpProxy; t: TestServer; key: string }
  useStack(
    backend,
    {
      chain: true,
      networks: async ({ chain, defer }) => {
        c.socket = await startTcpProxy({ host: '127.0.0.1', port: chain!.node.port })
        defer(() => c.socket.close())
        return [
          chain!.network({
            wsUrl: `ws://127.0.0.1:${c.socket.port}`,
            confirmations: 2,
            pollIntervalMs,
          }),
        ]
      },
      env: { READY_CHAIN_MAX_LAG: '1h' },
    },
    async (s) => {
      c.chain = s.chain
      c.t = s.t
      c.key = s.key
      await waitUntil(
        'the subscription live',
        async () => c.t.server.services.chain.pushing(),
        (p) => p.includes('localchain'),
      )
    },
  )
  return {
    get chain() {
      return c.chain
    },
    get socket() {
      return c.socket
    },
    /** The networks whose heads are pushed to the server now. */
    pushing: () => c.t.server.services.chain.pushing(),
    tx: (id: string) => api(c.t, c.key).transaction(id),
    /** A transaction with TUSD chosen, paid in full in the next block mined. */
    async paid(amountUsd: number) {
      const q = await api(c.t, c.key).quoted(amountUsd)
      await c.chain.sendRaw(await c.chain.signTokenTransfer(q.address, q.units))
      return q
    },
  }
}

for (const backend of backends()) {
  describe(`heads pushed over a WebSocket that drops [${backend}]`, () => {
    const s = chainWithSocket(backend, 3_600_000)

    test('each mined block is followed at once by its push; a payment mined while the socket is down completes once it reconnects', async () => {
      // The first tick ran at start; from now on only pushes move the follower.
      const first = await s.paid(3)
      await s.chain.mine()
      await s.chain.mine()
      await waitUntil(
        'completed by pushes',
        () => s.tx(first.id),
        (x) => x.status === 'completed',
      )

      s.socket.cut()
      const second = await s.paid(4)
      const paidIn = await s.chain.mine()
      await s.chain.mine(2)
      s.socket.restore()
      // On reconnecting the follower looks at once (a head may have come meanwhile) and catches up.
      const done = await waitUntil(
        'completed after the reconnect',
        () => s.tx(second.id),
        (x) => x.status === 'completed',
        30_000,
      )
      expect(done).toMatchObject({
        block_number: Number(paidIn),
        amount_received: second.units.toString(),
      })
    })
  })

  describe(`a WebSocket that stays down: polling takes over [${backend}]`, () => {
    const s = chainWithSocket(backend, 3_000)

    test('with the socket cut for good, the follower polls at its own pace again and the payment completes', async () => {
      s.socket.cut()
      await waitUntil(
        'the drop noticed',
        async () => s.pushing(),
        (p) => p.length === 0,
      )
      const q = await s.paid(6)
      await s.chain.mine(3)
      const done = await waitUntil(
        'completed by polling',
        () => s.tx(q.id),
        (x) => x.status === 'completed',
        20_000,
      )
      expect(done.amount_received).toBe(q.quote.token_amount)
    })
  })
}
