/**
 * docs/decisions/0047-metrics-and-probes.md: every counter's series is there at zero before its
 * first event, so the documented alerts on `increase(...) > 0` fire on the first event too (a
 * series that is born at 1 shows no increase).
 */
import { describe, expect, test } from 'bun:test'
import { createMetrics } from '../../src/metrics/metrics.ts'

describe('counters from zero', () => {
  test('the networks followed, the relayer, deliveries, limits and statuses each have their series at 0 before any event', async () => {
    const m = createMetrics()
    m.networksKnown(['devnet', 'base'])
    m.relayerNetworks(['devnet'])
    const { body } = await m.scrape()
    for (const line of [
      'cryptopay_reorgs_after_final_total{network="devnet"} 0',
      'cryptopay_reorgs_after_final_total{network="base"} 0',
      'cryptopay_chain_deep_reorgs_total{network="base"} 0',
      'cryptopay_rpc_errors_total{network="devnet",kind="rate_limited"} 0',
      'cryptopay_webhook_deliveries_total{result="failure"} 0',
      'cryptopay_webhook_endpoints_disabled_total{reason="failing"} 0',
      'cryptopay_rate_limited_total{surface="pay"} 0',
      'cryptopay_transactions_total{status="completed"} 0',
      'cryptopay_relayer_relays_total{network="devnet",outcome="reverted"} 0',
      'cryptopay_relayer_refusals_total{network="devnet",reason="contract_payer"} 0',
    ])
      expect(body.split('\n')).toContain(line)
    // And they count from there.
    m.reorgAfterFinal('devnet')
    expect((await m.scrape()).body).toContain(
      'cryptopay_reorgs_after_final_total{network="devnet"} 1',
    )
  })
})
