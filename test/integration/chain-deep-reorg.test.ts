/**
 * Deep reorgs on a real chain, with 200 confirmations: anvil mining only when told and keeping
 * 400 past states, so `anvil_reorg` can replace 300 blocks.
 *  - A 142-block reorg is within the 264 hashes the follower remembers (200 + 64): the payment
 *    142 blocks deep is taken back at once and never completes.
 *  - A 300-block reorg is deeper than that: the network halts instead of taking the blocks
 *    below the window for canonical. Nothing completes on it, readiness names it and the
 *    command that resumes it, the metrics say it; `network resume` (the CLI, with the server
 *    running) takes the payment back and the network is followed again. The halt outlives a
 *    restart, and the command works with the server stopped too.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import type { Hex } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { ANVIL_DEFAULT_MNEMONIC } from '../../src/chain/devnet.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { backends } from '../helpers/databases.ts'
import { waitUntil, type ManualChain } from '../helpers/chain.ts'
import { killAllProcesses, runCli } from '../helpers/processes.ts'
import { api, type TestServer } from '../helpers/server.ts'
import { useStack } from '../helpers/stack.ts'

afterAll(killAllProcesses)

/** anvil's second default account: funded, and never used by the payer's transfers. */
const FILLER = mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 1 })
const CONFIRMATIONS = 200
/** What the follower remembers with 200 confirmations: 200 + 64. */
const WINDOW = 264

for (const backend of backends()) {
  describe(`reorgs deeper than 128 blocks, 200 confirmations [${backend}]`, () => {
    let chain: ManualChain
    /**
     * A second chain followed by the same server: blocks it has processed prove the follower loops
     * have run meanwhile.
     */
    let witness: AnvilNode
    let t: TestServer
    let key: string
    let cliEnv: Record<string, string>
    const logs: ({ level: string; msg: string } & Record<string, unknown>)[] = []

    useStack(
      backend,
      {
        chain: { historyStates: 400 },
        networks: async ({ chain, defer }) => {
          witness = await startAnvil({ noMining: true, chainId: 31338 })
          defer(() => witness.stop())
          return [
            chain!.network({ confirmations: CONFIRMATIONS, pollIntervalMs: 100 }),
            chain!.network({
              name: 'witness',
              chainId: 31338,
              rpcUrl: witness.rpcUrl,
              confirmations: 1,
              pollIntervalMs: 100,
              tokens: [
                {
                  kind: 'native',
                  symbol: 'ETH',
                  decimals: 18,
                  price: { kind: 'fixedUsd', usd: '3000' },
                },
              ],
            }),
          ]
        },
        server: { logger: createLogger('info', (line) => logs.push(JSON.parse(line))) },
      },
      (s) => {
        chain = s.chain
        t = s.t
        cliEnv = { ...t.cliEnv, NETWORKS_CONFIG: s.networksFile! }
        key = s.key
      },
    )

    const tx = (id: string) => api(t, key).transaction(id)
    const timeline = async (id: string) =>
      ((await (await api(t, key).get(`/api/transactions/${id}/timeline`)).json()) as any)
        .timeline as { cause: string; from_status: string; to_status: string }[]
    const synced = (network = 'localchain') =>
      t.server.services.chain.syncedHeights()[network] ?? -1n
    const caughtUp = async () => {
      const head = await chain.head()
      await waitUntil(
        `the follower to reach block ${head}`,
        async () => synced(),
        (h) => h >= head,
      )
    }
    /**
     * Three blocks of the witness chain seen one after another: every follower loop of the server
     * has ticked meanwhile.
     */
    const threeTicks = async () => {
      for (let i = 0; i < 3; i++) {
        await fetch(witness.rpcUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'evm_mine', params: [] }),
        })
        const height = synced('witness') + 1n
        await waitUntil(
          'the witness follower to see a new block',
          async () => synced('witness'),
          (h) => h >= height,
        )
      }
    }
    const readiness = async () =>
      (await (await t.fetch('/readyz')).json()) as {
        status: string
        failed: string[]
        checks: { name: string; ok: boolean; detail: string }[]
      }
    const metric = async (name: string) => {
      const families = parsePrometheusTextFormat(await (await t.fetch('/metrics')).text()) as {
        name: string
        metrics: { value: string; labels?: Record<string, string> }[]
      }[]
      const m = families
        .find((f) => f.name === name)
        ?.metrics.find((x) => x.labels?.network === 'localchain')
      return m ? Number(m.value) : null
    }

    /**
     * A transaction valid on top of block `n`, from another account than the payer's (so the
     * payer's signed transfers stay valid on the replacement chain).
     */
    async function fillerAt(n: bigint): Promise<Hex> {
      const nonce = await chain.client.getTransactionCount({
        address: FILLER.address,
        blockNumber: n,
      })
      return FILLER.signTransaction({
        chainId: 31337,
        type: 'eip1559',
        to: FILLER.address,
        value: 1n,
        nonce,
        gas: 21_000n,
        maxFeePerGas: 100_000_000_000n,
        maxPriorityFeePerGas: 1_000_000_000n,
      })
    }

    /**
     * Pays the quote in full and mines until the payment is `depth` blocks deep; returns the signed
     * transfer.
     */
    async function paidAndDeep(id: string, address: string, units: bigint, depth: number) {
      const raw = await chain.signTokenTransfer(address, units)
      await chain.sendRaw(raw)
      const block = await chain.mine()
      await chain.mine(depth - 1)
      await waitUntil(
        `${depth} confirmations`,
        () => tx(id),
        (x) => x.status === 'confirming' && x.confirmations === depth,
      )
      return { raw, block }
    }

    test('a 142-block reorg removing a payment 142 blocks deep: taken back at once (the window reaches it), never completed', async () => {
      const { id, address, units } = await api(t, key).quoted(25)
      const { block } = await paidAndDeep(id, address, units, 142)
      const oldHash = await chain.blockHash(block)

      await chain.reorg(142)
      expect(await chain.blockHash(block)).not.toBe(oldHash)
      const back = await waitUntil(
        'pending after the reorg',
        () => tx(id),
        (x) => x.status !== 'confirming',
      )
      expect(back).toMatchObject({ status: 'pending', amount_received: '0', block_number: null })

      // Past the 200 confirmations the payment would have had: nothing completes.
      await chain.mine(CONFIRMATIONS)
      await caughtUp()
      expect((await tx(id)).status).toBe('pending')
      expect((await timeline(id)).map((e) => e.to_status)).not.toContain('completed')
      expect((await readiness()).status).toBe('ready')
      expect(
        logs.filter((l) => l.msg.startsWith('reorg deeper than the remembered window')),
      ).toEqual([])
    })

    test('a 300-block reorg, deeper than the 264 hashes remembered, halts the network: no completion, readiness and metrics say it; network resume takes the payment back and follows again', async () => {
      // The window is full: more than 264 blocks followed.
      await chain.mine(WINDOW + 10)
      await caughtUp()
      const { id, address, units } = await api(t, key).quoted(30)
      const { raw, block } = await paidAndDeep(id, address, units, 142)
      const headBefore = await chain.head()
      const bottomHash = await chain.blockHash(headBefore - 299n)

      // The first replacement block carries a transfer nobody waits for: anvil's empty replacement
      // blocks can come out identical to the blocks they replace, which would make the reorg
      // shallower.
      await chain.reorg(300, [[await fillerAt(headBefore - 300n), 0]])
      expect(await chain.blockHash(headBefore - 299n)).not.toBe(bottomHash)
      const down = await waitUntil(
        'not ready',
        readiness,
        (r) => r.status === 'not_ready',
        20_000,
        100,
      )
      expect(down.failed).toEqual(['chain:localchain'])
      const detail = down.checks.find((c) => c.name === 'chain:localchain')!.detail
      const windowFrom = headBefore - BigInt(WINDOW) + 1n
      const resumeFrom = windowFrom - BigInt(WINDOW)
      expect(detail).toContain(
        `a reorg went deeper than the ${WINDOW} blocks remembered (${windowFrom}-${headBefore}`,
      )
      expect(detail).toContain(
        `npm run cli -- network resume --network localchain (re-checks what was recorded from block ${resumeFrom} on`,
      )
      expect(await metric('cryptopay_chain_halted')).toBe(1)
      expect(await metric('cryptopay_chain_deep_reorgs_total')).toBe(1)
      const said = logs.filter((l) => l.msg.startsWith('reorg deeper than the remembered window'))
      expect(said).toEqual([
        expect.objectContaining({
          level: 'error',
          network: 'localchain',
          windowFrom: String(windowFrom),
          windowTo: String(headBefore),
          fix: expect.stringContaining('network resume --network localchain'),
        }),
      ])

      // The chain goes on past the 200 confirmations the payment would have had: the halted network
      // completes nothing.
      await chain.mine(100)
      await threeTicks()
      expect(await tx(id)).toMatchObject({
        status: 'confirming',
        confirmations: 142,
        block_number: Number(block),
      })
      expect(
        logs.filter((l) => l.msg.startsWith('reorg deeper than the remembered window')),
      ).toHaveLength(1)
      // An instance that does not follow the network reads the halt from the database (on
      // PostgreSQL the CLI is one).
      const status = await runCli(['status', '--json'], { env: cliEnv })
      expect(status.json.failed).toEqual(['chain:localchain'])
      expect(
        status.json.checks.find((c: { name: string }) => c.name === 'chain:localchain').detail,
      ).toContain(`network resume --network localchain`)

      const resumed = await runCli(['network', 'resume', '--network', 'localchain', '--json'], {
        env: cliEnv,
      })
      expect(resumed.json).toEqual({
        network: 'localchain',
        from_block: Number(resumeFrom),
        halted_window: `${windowFrom}-${headBefore}`,
        halted_at: expect.any(String),
      })
      expect(resumed.code).toBe(0)
      const back = await waitUntil(
        'pending after the resume',
        () => tx(id),
        (x) => x.status !== 'confirming',
        20_000,
      )
      expect(back).toMatchObject({ status: 'pending', amount_received: '0', block_number: null })
      expect((await timeline(id)).filter((e) => e.cause === 'payment.reorged')).toEqual([
        expect.objectContaining({ from_status: 'confirming', to_status: 'pending' }),
      ])
      await caughtUp()
      await waitUntil('ready again', readiness, (r) => r.status === 'ready', 20_000, 100)
      expect(await metric('cryptopay_chain_halted')).toBe(0)
      // A second resume has nothing to do.
      const again = await runCli(['network', 'resume', '--network', 'localchain', '--json'], {
        env: cliEnv,
      })
      expect(again).toMatchObject({
        code: 1,
        json: { error: { message: 'Network localchain is not halted: nothing to resume' } },
      })

      // Followed again: the same signed transfer mined anew is found and completes after 200
      // confirmations, and only then.
      await chain.sendRaw(raw)
      const again2 = await chain.mine()
      await chain.mine(CONFIRMATIONS - 2)
      await waitUntil(
        '199 confirmations',
        () => tx(id),
        (x) => x.confirmations === CONFIRMATIONS - 1,
      )
      expect((await tx(id)).status).toBe('confirming')
      await chain.mine()
      const done = await waitUntil(
        'completed',
        () => tx(id),
        (x) => x.status === 'completed',
      )
      expect(done).toMatchObject({ block_number: Number(again2), confirmations: CONFIRMATIONS })
      const moves = (await timeline(id))
        .filter((e) => e.from_status !== e.to_status)
        .map((e) => `${e.cause}:${e.to_status}`)
      expect(moves).toEqual([
        'transaction.created:created',
        'token.selected:prepared',
        'payment.detected:processing',
        'payment.included:confirming',
        'payment.reorged:pending',
        'payment.detected:processing',
        'payment.included:confirming',
        'confirmations.updated:completed',
      ])
    })

    test('the halt outlives a restart, and network resume works with the server stopped', async () => {
      const { id, address, units } = await api(t, key).quoted(15)
      await paidAndDeep(id, address, units, 50)
      const headBefore = await chain.head()
      await chain.reorg(300, [[await fillerAt(headBefore - 300n), 0]])
      await waitUntil('not ready', readiness, (r) => r.status === 'not_ready', 20_000, 100)

      const loadedAt = logs.length
      await t.restart()
      const down = await waitUntil(
        'halted after the restart',
        readiness,
        (r) =>
          r.checks.some((c) => c.name === 'chain:localchain' && c.detail.includes('halted since')),
        20_000,
        100,
      )
      expect(down.failed).toEqual(['chain:localchain'])
      await chain.mine(CONFIRMATIONS)
      await threeTicks()
      expect(await tx(id)).toMatchObject({ status: 'confirming', confirmations: 50 })
      expect(
        logs.slice(loadedAt).filter((l) => l.msg.startsWith('this network is halted')),
      ).toEqual([expect.objectContaining({ level: 'warn', network: 'localchain' })])

      let resumed: Awaited<ReturnType<typeof runCli>> | null = null
      await t.restart(async () => {
        resumed = await runCli(['network', 'resume', '--network', 'localchain', '--json'], {
          env: cliEnv,
        })
      })
      expect(resumed!).toMatchObject({ code: 0, json: { network: 'localchain' } })
      const back = await waitUntil(
        'pending after the resume',
        () => tx(id),
        (x) => x.status !== 'confirming',
        20_000,
      )
      expect(back).toMatchObject({ status: 'pending', amount_received: '0' })
      await caughtUp()
      await waitUntil('ready again', readiness, (r) => r.status === 'ready', 20_000, 100)
      expect((await timeline(id)).map((e) => e.to_status)).not.toContain('completed')
    })
  })
}
