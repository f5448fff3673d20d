/**
 * Attacks on the relayer of payments by signature, on a real chain mined by hand (anvil, Prague,
 * so accounts can take EIP-7702 delegations): what a stranger with no key, from any number of
 * fresh addresses, contracts and clients, can make it spend
 * (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md).
 *
 * The server runs behind a trusted proxy (TRUST_PROXY), so each attempt can come from a client
 * address of its own, as from a botnet. Limits for the test: RELAYER_FAILURES_PER_HOUR=2 and
 * RELAYER_IN_FLIGHT=2, so at most 2 - 1 + 2 = 3 relays of one project may revert in an hour.
 *
 * - Payers with code (EIP-1271 wallets that lie, expensive or cheap; EIP-7702 delegated accounts)
 *   are refused before any gas where the network does not allow them (the default), and bounded
 *   where it does: a hundred of them at once make at most three relays revert, each burning no
 *   more than the token's measured ceiling, while another project's customer is served.
 * - A plain payer racing the relayer (moving its tokens away, or taking a delegation, between the
 *   check and the mined transaction) and a token that starts reverting cost one revert each,
 *   after which that payer, transaction and client are cooled down, and the project pauses.
 * - The same authorization twice is relayed once.
 */
import { describe, expect, test } from 'bun:test'
import { getAddress, parseEther, parseGwei } from 'viem'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import {
  attackKit,
  attackNetwork,
  clientAt,
  delegationCall,
  EXPENSIVE,
  freshIp,
  NETWORK,
} from '../helpers/attack-kit.ts'
import { type ManualChain, waitUntil } from '../helpers/chain.ts'
import { backends } from '../helpers/databases.ts'
import { RELAYER, relayerKeyDir } from '../helpers/relayer.ts'
import type { TestServer } from '../helpers/server.ts'
import { contractOffer, signOffer } from '../helpers/signature-payments.ts'
import { useStack } from '../helpers/stack.ts'

const { keyFile } = relayerKeyDir('relayer-attack-')
/** RELAYER_FAILURES_PER_HOUR - 1 + RELAYER_IN_FLIGHT with the limits below. */
const WORST_REVERTS = 3

const limitsEnv = {
  RELAYER_KEY_FILE: keyFile,
  TRUST_PROXY: '1',
  PAY_RATE_LIMITS: '100000/1000000/10000000',
  RELAYER_FAILURES_PER_HOUR: '2',
  RELAYER_IN_FLIGHT: '2',
}

for (const backend of backends()) {
  describe(`the relayer under attack on a network refusing payers with code (the default) [${backend}]`, () => {
    let t: TestServer
    let chain: ManualChain
    /** The attacked project, an untouched one, and one for the reverting token. */
    let victim: string
    let other: string
    let third: string
    useStack(
      backend,
      { chain: { hardfork: 'prague' }, networks: attackNetwork(), env: limitsEnv, project: false },
      async (s) => {
        t = s.t
        chain = s.chain
        victim = (await t.project({ name: 'Victim' })).key
        other = (await t.project({ name: 'Other' })).key
        third = (await t.project({ name: 'Third' })).key
      },
    )
    const kit = attackKit(() => ({ t, chain }))
    /** gasUsed of an honest relayed payment, measured in the first test. */
    let honestGas = 0n

    test('an honest customer with no ETH pays by signature (the measure of an ordinary relay)', async () => {
      const s = await kit.prepared(other)
      const payer = await kit.customer(2_000_000n)
      const r = await kit.pay(s, await signOffer(payer, s))
      expect(r.status).toBe(200)
      const { transaction_hash } = (await r.json()) as any
      await chain.mine()
      const receipt = await chain.client.getTransactionReceipt({ hash: transaction_hash })
      expect(receipt.status).toBe('success')
      honestGas = receipt.gasUsed
      expect(honestGas).toBeGreaterThan(50_000n)
      await waitUntil(
        'the relay recorded as succeeded',
        () => kit.metrics('cryptopay_relayer_relays_total'),
        (m) => m.get(`network="${NETWORK}",outcome="succeeded"`) === 1,
      )
    })

    test('lying EIP-1271 wallets, expensive and cheap, from fresh addresses and clients, are refused before any gas, naming from', async () => {
      const before = { nonce: await kit.relayerNonce(), balance: await kit.relayerBalance() }
      const wallets = [
        ...(await kit.liars(5, EXPENSIVE, 2_000_000n)),
        ...(await kit.liars(5, 0n, 2_000_000n)),
      ]
      for (const wallet of wallets) {
        const s = await kit.prepared(victim)
        const r = await kit.pay(s, contractOffer(wallet, s))
        expect({ status: r.status, body: await r.text() }).toEqual({
          status: 400,
          body: expect.stringMatching(/from: 0x[0-9a-fA-F]{40} is a smart-contract account/),
        })
      }
      expect(await kit.relayerNonce()).toBe(before.nonce)
      expect(await kit.relayerBalance()).toBe(before.balance)
      expect(
        (await kit.metrics('cryptopay_relayer_refusals_total')).get(
          `network="${NETWORK}",reason="contract_payer"`,
        ),
      ).toBe(10)
    })

    test('an account delegated by EIP-7702 to a lying wallet is refused before any gas, though its own signature is good', async () => {
      const [liar] = await kit.liars(1, 0n, 0n)
      const payer = await kit.customer(2_000_000n)
      const authorization = await chain.client.signAuthorization({
        account: payer,
        contractAddress: liar!,
      })
      await chain.client.sendTransaction({
        authorizationList: [authorization],
        to: payer.address,
        data: delegationCall,
        gas: 200_000n,
      })
      await chain.mine()
      expect(await chain.client.getCode({ address: payer.address })).toStartWith('0xef0100')
      const before = await kit.relayerNonce()
      const s = await kit.prepared(victim)
      const r = await kit.pay(s, await signOffer(payer, s))
      expect(r.status).toBe(400)
      expect(await r.text()).toMatch(/is a smart-contract account \(or an EIP-7702 delegated one\)/)
      expect(await kit.relayerNonce()).toBe(before)
    })

    test('a payer moving its tokens away between the check and the mined transaction costs one revert; then that payer, transaction and client get no more relays', async () => {
      const payer = await kit.customer(2_000_000n, parseEther('0.01'))
      const ip = freshIp()
      const s = await kit.prepared(victim, ip)
      const r = await kit.pay(s, await signOffer(payer, s), ip)
      expect(r.status).toBe(200)
      const { transaction_hash } = (await r.json()) as any
      await kit.inPool(transaction_hash)
      // The payer's own transfer, with a higher tip, is mined first in the same block.
      await chain.client.writeContract({
        account: payer,
        address: chain.token,
        abi: TestStablecoin.abi,
        functionName: 'transfer',
        args: [chain.client.account.address, 2_000_000n],
        // Not estimated: the node would estimate it after the relayer's pending transaction.
        gas: 100_000n,
        maxPriorityFeePerGas: parseGwei('50'),
        maxFeePerGas: parseGwei('100'),
      })
      await chain.mine()
      const receipt = await chain.client.getTransactionReceipt({ hash: transaction_hash })
      expect(receipt.status).toBe('reverted')
      // It failed early: no more gas than an honest payment.
      expect(receipt.gasUsed).toBeLessThanOrEqual(honestGas)
      await kit.revertsRecorded(1)

      const before = await kit.relayerNonce()
      const refusals: [string, Promise<Response>][] = []
      // The same transaction, by someone else from elsewhere.
      const stranger = await kit.customer(2_000_000n)
      refusals.push(['transaction', kit.pay(s, await signOffer(stranger, s))])
      // The same payer (funded again) for another transaction, from elsewhere.
      await kit.fund([payer.address], 2_000_000n)
      const s2 = await kit.prepared(victim)
      refusals.push(['payer', kit.pay(s2, await signOffer(payer, s2))])
      // The same client, with a fresh payer and transaction.
      const s3 = await kit.prepared(victim, ip)
      const fresh = await kit.customer(2_000_000n)
      refusals.push(['client', kit.pay(s3, await signOffer(fresh, s3), ip)])
      for (const [who, answer] of refusals) {
        const res = await answer
        expect({ who, status: res.status, body: await res.text() }).toEqual({
          who,
          status: 503,
          body: expect.stringMatching(/failed on chain within the last hour/),
        })
      }
      expect(await kit.relayerNonce()).toBe(before)
    })

    test('an account taking a delegation to an expensive liar between the check and the mined transaction burns at most the ceiling, about an ordinary payment', async () => {
      const [liar] = await kit.liars(1, EXPENSIVE, 0n)
      const payer = await kit.customer(2_000_000n)
      const s = await kit.prepared(victim)
      const r = await kit.pay(s, await signOffer(payer, s))
      expect(r.status).toBe(200)
      const { transaction_hash } = (await r.json()) as any
      await kit.inPool(transaction_hash)
      const authorization = await chain.client.signAuthorization({
        account: payer,
        contractAddress: liar!,
      })
      await chain.client.sendTransaction({
        authorizationList: [authorization],
        to: payer.address,
        data: delegationCall,
        gas: 200_000n,
        maxPriorityFeePerGas: parseGwei('50'),
        maxFeePerGas: parseGwei('100'),
      })
      await chain.mine()
      const receipt = await chain.client.getTransactionReceipt({ hash: transaction_hash })
      const sent = await chain.client.getTransaction({ hash: transaction_hash })
      expect(receipt.status).toBe('reverted')
      // The liar burned all it was given (a call passes on 63/64 of what is left), and it was
      // given no more than the ceiling.
      expect(receipt.gasUsed).toBeGreaterThan((sent.gas * 95n) / 100n)
      expect(sent.gas).toBeLessThan(2n * honestGas)
      await kit.revertsRecorded(2)
    })

    test("two reverts pause the victim's relaying: its honest customer is refused before any gas and can still pay by transfer; another project's customer is served", async () => {
      const before = await kit.relayerNonce()
      const s = await kit.prepared(victim)
      const honest = await kit.customer(2_000_000n)
      const refused = await kit.pay(s, await signOffer(honest, s))
      expect(refused.status).toBe(503)
      expect(await refused.text()).toMatch(/failed on chain 2 times within the last hour/)
      expect(await kit.relayerNonce()).toBe(before)
      // By transfer it is an ordinary payment.
      await chain.client.writeContract({
        address: chain.token,
        abi: TestStablecoin.abi,
        functionName: 'transfer',
        args: [s.quote.deposit_address, BigInt(s.authorization.value)],
      })
      await chain.mine(4)
      await waitUntil(
        'paid by transfer',
        async () => (await (await clientAt(t, freshIp()).get(`/pay/${s.id}/state`)).json()) as any,
        (x) => x.status === 'completed',
      )
      const o = await kit.prepared(other)
      const customer = await kit.customer(2_000_000n)
      const served = await kit.pay(o, await signOffer(customer, o))
      expect(served.status).toBe(200)
      const { transaction_hash } = (await served.json()) as any
      await chain.mine()
      expect((await chain.client.getTransactionReceipt({ hash: transaction_hash })).status).toBe(
        'success',
      )
    })

    test('a token that starts reverting between the check and the send (an issuer pausing it) costs one revert, counted against its project', async () => {
      const s = await kit.prepared(third)
      const payer = await kit.customer(2_000_000n)
      const r = await kit.pay(s, await signOffer(payer, s))
      expect(r.status).toBe(200)
      const { transaction_hash } = (await r.json()) as any
      await kit.inPool(transaction_hash)
      const code = (await chain.client.getCode({ address: chain.token }))!
      // PUSH1 0 PUSH1 0 REVERT: every call reverts, as a paused token's transfers do.
      await chain.client.request({
        method: 'anvil_setCode',
        params: [chain.token, '0x60006000fd'],
      } as never)
      await chain.mine()
      await chain.client.request({ method: 'anvil_setCode', params: [chain.token, code] } as never)
      const receipt = await chain.client.getTransactionReceipt({ hash: transaction_hash })
      expect(receipt.status).toBe('reverted')
      expect(receipt.gasUsed).toBeLessThan(honestGas)
      await kit.revertsRecorded(3)
    })

    test('the same authorization sent twice at once is relayed once, both answered with its hash', async () => {
      const s = await kit.prepared(other)
      const payer = await kit.customer(2_000_000n)
      const body = await signOffer(payer, s)
      const before = await kit.relayerNonce()
      const [a, b] = await Promise.all([kit.pay(s, body), kit.pay(s, body)])
      const hashes = [
        ((await a.json()) as any).transaction_hash,
        ((await b.json()) as any).transaction_hash,
      ]
      expect([a.status, b.status]).toEqual([200, 200])
      expect(hashes[0]).toBe(hashes[1])
      expect(await kit.relayerNonce()).toBe(before + 1)
      await chain.mine()
    })

    test('/metrics counted every outcome and refusal, each series there from zero', async () => {
      // The last relay's receipt is read by the relayer's own watcher, a moment after mining.
      const relays = await waitUntil(
        'three relays succeeded',
        () => kit.metrics('cryptopay_relayer_relays_total'),
        (m) => m.get(`network="${NETWORK}",outcome="succeeded"`) === 3,
      )
      expect(Object.fromEntries(relays)).toEqual({
        [`network="${NETWORK}",outcome="succeeded"`]: 3,
        [`network="${NETWORK}",outcome="reverted"`]: 3,
        [`network="${NETWORK}",outcome="dropped"`]: 0,
      })
      const refusals = await kit.metrics('cryptopay_relayer_refusals_total')
      expect(refusals.get(`network="${NETWORK}",reason="contract_payer"`)).toBe(11)
      expect(refusals.get(`network="${NETWORK}",reason="cooldown"`)).toBe(3)
      expect(refusals.get(`network="${NETWORK}",reason="failures"`)).toBe(1)
      expect(refusals.get(`network="${NETWORK}",reason="gas_ceiling"`)).toBe(0)
    })
  })

  describe(`the relayer under attack on a network allowing payers with code [${backend}]`, () => {
    let t: TestServer
    let chain: ManualChain
    let victim: string
    let other: string
    useStack(
      backend,
      {
        chain: { hardfork: 'prague' },
        networks: attackNetwork({
          contractPayers: true,
          contractPayerGas: 50_000,
          minSettleUsd: null,
        }),
        env: limitsEnv,
        project: false,
      },
      async (s) => {
        t = s.t
        chain = s.chain
        victim = (await t.project({ name: 'Victim' })).key
        other = (await t.project({ name: 'Other' })).key
      },
    )
    const kit = attackKit(() => ({ t, chain }))

    test('a hundred lying wallets at once, from fresh addresses and clients, make at most three relays revert, each within the ceiling; another project is served', async () => {
      // The measure of an ordinary relay here.
      const o = await kit.prepared(other)
      const honest = await kit.customer(2_000_000n)
      const paid = await kit.pay(o, await signOffer(honest, o))
      expect(paid.status).toBe(200)
      await chain.mine()
      const honestGas = (
        await chain.client.getTransactionReceipt({
          hash: ((await paid.json()) as any).transaction_hash,
        })
      ).gasUsed

      const wallets = [
        ...(await kit.liars(50, EXPENSIVE, 2_000_000n)),
        ...(await kit.liars(50, 0n, 2_000_000n)),
      ]
      const states = await Promise.all(wallets.map(() => kit.prepared(victim)))
      const balance = await kit.relayerBalance()
      const nonce = await kit.relayerNonce()
      const attempt = async (from: number, to: number) =>
        Promise.all(
          states
            .slice(from, to)
            .map(async (s, i) => (await kit.pay(s, contractOffer(wallets[from + i]!, s))).status),
        )
      // The first half at once: no more are sent than may be in flight.
      const first = await attempt(0, 50)
      expect(first.filter((x) => x === 200).length).toBe(2)
      expect(first.filter((x) => x === 503).length).toBe(48)
      await chain.mine()
      await kit.revertsRecorded(2)
      // The second half after the reverts: the project is paused.
      const second = await attempt(50, 100)
      expect(second.every((x) => x === 503)).toBe(true)
      expect(await kit.relayerNonce()).toBe(nonce + 2)
      const spent = balance - (await kit.relayerBalance())
      const block = await chain.client.getBlock({ includeTransactions: true })
      const relayed = block.transactions.filter((x) => getAddress(x.from) === RELAYER.address)
      expect(relayed.length).toBeLessThanOrEqual(WORST_REVERTS)
      let gasUsed = 0n
      for (const tx of relayed) {
        const receipt = await chain.client.getTransactionReceipt({ hash: tx.hash })
        expect(receipt.status).toBe('reverted')
        gasUsed += receipt.gasUsed
      }
      // A hundred attempts cost the relayer less than a handful of ordinary payments' gas.
      expect(gasUsed).toBeLessThan(BigInt(WORST_REVERTS) * 2n * honestGas)
      expect(spent).toBeGreaterThan(0n)

      // Another project's customer is still served.
      const o2 = await kit.prepared(other)
      const customer = await kit.customer(2_000_000n)
      const served = await kit.pay(o2, await signOffer(customer, o2))
      expect(served.status).toBe(200)
      await chain.mine()
      expect(
        (
          await chain.client.getTransactionReceipt({
            hash: ((await served.json()) as any).transaction_hash,
          })
        ).status,
      ).toBe('success')
    })
  })
}
