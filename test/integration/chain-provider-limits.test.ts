/**
 * A provider's limits (docs/decisions/0044-living-with-provider-limits.md), imitated by a JSON-RPC
 * proxy in front of anvil: eth_getLogs over more than 3 blocks is refused as public providers
 * refuse wide ranges, and a burst of requests is answered 429 with Retry-After, then with JSON-RPC
 * rate-limit errors. The follower, catching up over a dozen blocks, must split the refused range
 * down to what passes, keep that span, back off on the 429s, and lose no payment; each refusal and
 * each 429 is counted in the metrics by network and kind.
 */
import { describe, expect, test } from 'bun:test'
import { backends } from '../helpers/databases.ts'
import { waitUntil, type ManualChain } from '../helpers/chain.ts'
import type { RpcProxy } from '../helpers/rpc-proxy.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

const CAP = 3

for (const backend of backends()) {
  describe(`a provider that caps log ranges and rate-limits [${backend}]`, () => {
    let chain: ManualChain
    let proxy: RpcProxy
    let t: TestServer
    let key: string
    useStack(
      backend,
      {
        chain: true,
        proxy: true,
        network: { confirmations: 2, pollIntervalMs: 100, maxRequestsPerSecond: 500 },
        env: { READY_CHAIN_MAX_LAG: '1h' },
      },
      (s) => {
        chain = s.chain
        proxy = s.proxy
        t = s.t
        key = s.key
      },
    )

    const tx = (id: string) => api(t, key).transaction(id)
    const selected = (amountUsd: number) => api(t, key).quoted(amountUsd)
    const synced = () => t.server.services.chain.syncedHeights().localchain ?? -1n

    test('catching up over 12 blocks through a 3-block cap and a burst of 429s, both payments complete exactly once', async () => {
      const a = await selected(5)
      const b = await selected(7)
      const from = await chain.head()
      await waitUntil(
        'the follower at the head',
        async () => synced(),
        (h) => h >= from,
      )

      // The follower cannot reach the node while the blocks are mined: it must catch up after.
      proxy.mode = 'refuse'
      await chain.sendRaw(await chain.signTokenTransfer(a.address, a.units))
      await chain.mine(6)
      await chain.sendRaw(await chain.signTokenTransfer(b.address, b.units))
      await chain.mine(6)
      proxy.maxLogRange = CAP
      proxy.rateLimitNext = 4
      proxy.rateLimitJsonNext = 2
      proxy.mode = 'pass'

      const [doneA, doneB] = await Promise.all([
        waitUntil(
          'a completed',
          () => tx(a.id),
          (x) => x.status === 'completed',
          60_000,
        ),
        waitUntil(
          'b completed',
          () => tx(b.id),
          (x) => x.status === 'completed',
          60_000,
        ),
      ])
      expect(doneA).toMatchObject({
        amount_received: a.units.toString(),
        block_number: Number(from) + 1,
      })
      expect(doneB).toMatchObject({
        amount_received: b.units.toString(),
        block_number: Number(from) + 7,
      })
      const timeline = (
        (await (await api(t, key).get(`/api/transactions/${a.id}/timeline`)).json()) as any
      ).timeline as any[]
      expect(timeline.filter((e) => e.cause === 'payment.detected')).toHaveLength(1)

      // The provider answered four 429s and two JSON-RPC rate-limit errors, and refused the wide
      // range: 12 blocks, then two halves of 6, then ranges of 3 passed.
      expect(proxy.rateLimited).toBe(6)
      expect(proxy.rangeRefusals).toHaveLength(3)

      // The span that worked is kept: the next catch-up asks ranges of 3 at once, and nothing is
      // refused.
      const rangedBefore = proxy.calls.filter(
        (c) => c.method === 'eth_getLogs' && (c.params as any)[0].fromBlock,
      ).length
      proxy.mode = 'refuse'
      const head = await chain.mine(9)
      proxy.mode = 'pass'
      await waitUntil(
        'caught up again',
        async () => synced(),
        (h) => h >= head,
      )
      expect(proxy.rangeRefusals).toHaveLength(3)
      expect(
        proxy.calls.filter((c) => c.method === 'eth_getLogs' && (c.params as any)[0].fromBlock)
          .length - rangedBefore,
      ).toBe(3)

      const metrics = await (await t.fetch('/metrics')).text()
      const count = (kind: string) =>
        Number(
          metrics.match(
            new RegExp(
              `cryptopay_rpc_errors_total\\{network="localchain",kind="${kind}"\\} (\\d+)`,
            ),
          )?.[1] ?? 0,
        )
      expect(count('log_range')).toBe(proxy.rangeRefusals.length)
      expect(count('rate_limited')).toBe(6)
    })
  })
}
