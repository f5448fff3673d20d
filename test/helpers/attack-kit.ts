/**
 * What the attack files (test/attacks/) share: a chain mined by hand whose TUSD takes EIP-3009
 * authorizations, a server behind a trusted proxy so every attempt can come from a client
 * address of its own, and the moves attackers and customers make against it.
 */
import { expect } from 'bun:test'
import { type Address, encodeFunctionData, getAddress, type Hex } from 'viem'
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts'
import { TestLyingWallet, TestStablecoin } from '../../src/chain/artifacts/index.ts'
import type { NetworkConfig } from '../../src/chain/networks-config.ts'
import { type ManualChain, waitUntil } from './chain.ts'
import { RELAYER } from './relayer.ts'
import type { TestServer } from './server.ts'
import { type AuthorizationBody, counterValues } from './signature-payments.ts'

export const NETWORK = 'localchain'
/** Rounds of hashing an expensive liar burns: far more gas than any relay may use. */
export const EXPENSIVE = 1_000_000n

/** The chain's network entry: TUSD taking EIP-3009 authorizations, ETH priced for the floor. */
export const attackNetwork =
  (relayer?: NetworkConfig['relayer']) =>
  ({ chain, rpcUrl }: { chain?: ManualChain; rpcUrl?: string }): NetworkConfig[] => [
    chain!.network({
      rpcUrl,
      tokens: [
        {
          kind: 'erc20',
          symbol: 'TUSD',
          decimals: 6,
          address: chain!.token,
          eip3009: true,
          price: { kind: 'fixedUsd', usd: '1' },
        },
        { kind: 'native', symbol: 'ETH', decimals: 18, price: { kind: 'fixedUsd', usd: '3000' } },
      ],
      ...(relayer ? { relayer } : {}),
    }),
  ]

/**
 * What a sponsor's EIP-7702 transaction calls on the account it delegates (any call works; this
 * one answers without reverting).
 */
export const delegationCall = encodeFunctionData({
  abi: TestLyingWallet.abi,
  functionName: 'isValidSignature',
  args: [`0x${'00'.repeat(32)}`, '0x'],
})

/** A client of the server seen from `ip` through the trusted proxy. */
export function clientAt(t: TestServer, ip: string, key?: string) {
  const headers = (json: boolean, extra: Record<string, string> = {}) => ({
    'x-forwarded-proto': 'https',
    'x-forwarded-for': ip,
    ...(key ? { authorization: `Bearer ${key}` } : {}),
    ...(json ? { 'content-type': 'application/json' } : {}),
    ...extra,
  })
  return {
    post: (path: string, body: unknown) =>
      t.fetch(path, { method: 'POST', headers: headers(true), body: JSON.stringify(body) }),
    get: (path: string, extra?: Record<string, string>) =>
      t.fetch(path, { headers: headers(false, extra) }),
  }
}

let ipCounter = 0
/** A client address not used before in this test process. */
export const freshIp = () => {
  ipCounter++
  return `198.51.${Math.floor(ipCounter / 250)}.${(ipCounter % 250) + 1}`
}

/** What every attack needs of the stack. */
export function attackKit(get: () => { t: TestServer; chain: ManualChain }) {
  const kit = {
    /** A transaction of `key`'s project with TUSD chosen on the pay page: its pay state. */
    async prepared(key: string, ip = freshIp(), amount = 2): Promise<any> {
      const { t } = get()
      const created = await clientAt(t, ip, key).post('/api/transactions/create', { amount })
      expect(created.status).toBe(200)
      const id = ((await created.json()) as any).transaction.id as string
      const s = (await (
        await clientAt(t, ip).post(`/pay/${id}/select`, {
          token_symbol: 'TUSD',
          blockchain_network: NETWORK,
        })
      ).json()) as any
      expect(s.authorization).not.toBeNull()
      return s
    },
    /** POSTs a signed authorization for `s` from `ip`. */
    pay: (s: { id: string }, body: AuthorizationBody, ip = freshIp()) =>
      clientAt(get().t, ip).post(`/pay/${s.id}/authorization`, body),
    /** Mints `units` TUSD to each address and mines them in. */
    async fund(addresses: Address[], units: bigint, eth = 0n) {
      const { chain } = get()
      for (const a of addresses) {
        await chain.client.writeContract({
          address: chain.token,
          abi: TestStablecoin.abi,
          functionName: 'mint',
          args: [a, units],
        })
        if (eth > 0n) await chain.client.sendTransaction({ to: a, value: eth })
      }
      await chain.mine()
    },
    /** `n` freshly deployed lying wallets burning `burn` rounds each, holding `units` TUSD. */
    async liars(n: number, burn: bigint, units: bigint): Promise<Address[]> {
      const { chain } = get()
      const hashes: Hex[] = []
      for (let i = 0; i < n; i++)
        hashes.push(
          await chain.client.deployContract({
            abi: TestLyingWallet.abi,
            bytecode: TestLyingWallet.bytecode,
            args: [burn],
          }),
        )
      await chain.mine()
      const wallets = await Promise.all(
        hashes.map(async (hash) =>
          getAddress((await chain.client.getTransactionReceipt({ hash })).contractAddress!),
        ),
      )
      await kit.fund(wallets, units)
      return wallets
    },
    /** A fresh plain account holding `units` TUSD (and `eth`). */
    async customer(units: bigint, eth = 0n): Promise<PrivateKeyAccount> {
      const account = privateKeyToAccount(generatePrivateKey())
      await kit.fund([account.address], units, eth)
      return account
    },
    /** The relayer's next nonce, pending transactions included. */
    relayerNonce: () =>
      get().chain.client.getTransactionCount({ address: RELAYER.address, blockTag: 'pending' }),
    relayerBalance: () => get().chain.client.getBalance({ address: RELAYER.address }),
    /** The relayer's counters in /metrics, by label set. */
    async metrics(name: string) {
      const text = await (await clientAt(get().t, '127.0.0.1').get('/metrics')).text()
      return counterValues(text, name)
    },
    /** Waits until the relay `hash` is in the node's pool (the relayer sent it). */
    async inPool(hash: Hex) {
      await waitUntil(
        `${hash} in the pool`,
        () =>
          get()
            .chain.client.getTransaction({ hash })
            .then(
              () => true,
              () => false,
            ),
        (x) => x,
      )
    },
    /** Mines a block and waits until the relayer recorded `n` reverts in all. */
    async revertsRecorded(n: number) {
      await waitUntil(
        `${n} reverted relays in /metrics`,
        () => kit.metrics('cryptopay_relayer_relays_total'),
        (m) => (m.get(`network="${NETWORK}",outcome="reverted"`) ?? 0) >= n,
      )
    },
  }
  return kit
}
