/**
 * The treasury tool's access to one network, through its RPC (`--rpc-url`): balances of many
 * addresses at once (Multicall3 where the chain has it, else JSON-RPC batches), account codes
 * (delegations) and nonces, and sending what the tool signed. Reads are batched: 10,000 deposit
 * addresses cost tens of requests, not thousands.
 */
import {
  createPublicClient,
  decodeFunctionResult,
  defineChain,
  encodeFunctionData,
  erc20Abi,
  http,
  type Address,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from 'viem'
import { TestMulticall3 } from '../chain/artifacts/index.ts'
import { MULTICALL3, SWEEP_NONCE_SLOT } from '../chain/deposit-account.ts'

/** Calls per Multicall3 request. */
const MULTICALL_CHUNK = 400

/** An asset to read: an ERC-20 (its address) or the native coin (null). */
export interface Asset {
  symbol: string
  token: Address | null
}

export function createTreasuryChain(o: { rpcUrl: string; chainId: number }) {
  const client: PublicClient = createPublicClient({
    chain: defineChain({
      id: o.chainId,
      name: `chain-${o.chainId}`,
      nativeCurrency: { name: 'native', symbol: 'NATIVE', decimals: 18 },
      rpcUrls: { default: { http: [o.rpcUrl] } },
    }),
    transport: http(o.rpcUrl, { batch: { batchSize: 100 }, retryCount: 2, timeout: 30_000 }),
    cacheTime: 0,
    pollingInterval: 500,
  })
  let multicall: Promise<boolean> | null = null
  const hasMulticall = () =>
    (multicall ??= client.getCode({ address: MULTICALL3 }).then(
      (c) => !!c && c !== '0x',
      () => false,
    ))

  /**
   * Balances by Multicall3's aggregate3 (balanceOf and getEthBalance), a few hundred calls a
   * request.
   */
  async function viaMulticall(
    pairs: { address: Address; asset: Asset }[],
  ): Promise<(bigint | null)[]> {
    const out: (bigint | null)[] = []
    for (let i = 0; i < pairs.length; i += MULTICALL_CHUNK) {
      const chunk = pairs.slice(i, i + MULTICALL_CHUNK)
      const calls = chunk.map(({ address, asset }) =>
        asset.token
          ? {
              target: asset.token,
              allowFailure: true,
              callData: encodeFunctionData({
                abi: erc20Abi,
                functionName: 'balanceOf',
                args: [address],
              }),
            }
          : {
              target: MULTICALL3,
              allowFailure: true,
              callData: encodeFunctionData({
                abi: TestMulticall3.abi,
                functionName: 'getEthBalance',
                args: [address],
              }),
            },
      )
      const { data } = await client.call({
        to: MULTICALL3,
        data: encodeFunctionData({
          abi: TestMulticall3.abi,
          functionName: 'aggregate3',
          args: [calls],
        }),
      })
      const results = decodeFunctionResult({
        abi: TestMulticall3.abi,
        functionName: 'aggregate3',
        data: data!,
      })
      for (const r of results)
        out.push(r.success && r.returnData.length === 66 ? BigInt(r.returnData) : null)
    }
    return out
  }

  /** Balances by plain calls, which the transport sends as JSON-RPC batches. */
  async function viaBatches(
    pairs: { address: Address; asset: Asset }[],
  ): Promise<(bigint | null)[]> {
    return Promise.all(
      pairs.map(({ address, asset }) =>
        (asset.token
          ? client.readContract({
              address: asset.token,
              abi: erc20Abi,
              functionName: 'balanceOf',
              args: [address],
            })
          : client.getBalance({ address })
        ).catch(() => null),
      ),
    )
  }

  return {
    client,
    /** Whether reads go through Multicall3 (reported by the commands). */
    hasMulticall,

    /** The chain id the RPC serves. */
    chainId: () => client.getChainId(),

    /** Each address's balance of each asset now (null where the node would not say). */
    async balances(
      addresses: readonly Address[],
      assets: readonly Asset[],
    ): Promise<Map<string, Map<string, bigint | null>>> {
      const pairs = addresses.flatMap((address) => assets.map((asset) => ({ address, asset })))
      const values = (await hasMulticall()) ? await viaMulticall(pairs) : await viaBatches(pairs)
      const out = new Map<string, Map<string, bigint | null>>()
      pairs.forEach(({ address, asset }, i) => {
        const m = out.get(address.toLowerCase()) ?? new Map<string, bigint | null>()
        m.set(asset.symbol, values[i]!)
        out.set(address.toLowerCase(), m)
      })
      return out
    },

    /**
     * Each address's code (an EIP-7702 delegation shows as `0xef0100` and the delegate's address)
     * and nonce.
     */
    async accounts(
      addresses: readonly Address[],
    ): Promise<Map<string, { code: Hex | undefined; nonce: number }>> {
      const found = await Promise.all(
        addresses.map(async (address) => {
          const [code, nonce] = await Promise.all([
            client.getCode({ address }),
            client.getTransactionCount({ address, blockTag: 'latest' }),
          ])
          return [address.toLowerCase(), { code, nonce }] as const
        }),
      )
      return new Map(found)
    },

    /**
     * Each address's DepositAccount sweep nonce, read from its storage (0 where it never swept).
     */
    async sweepNonces(addresses: readonly Address[]): Promise<Map<string, bigint>> {
      const found = await Promise.all(
        addresses.map(async (address) => {
          const word = await client.getStorageAt({ address, slot: SWEEP_NONCE_SLOT })
          return [address.toLowerCase(), !word || word === '0x' ? 0n : BigInt(word)] as const
        }),
      )
      return new Map(found)
    },

    /**
     * Sends a signed transaction. One the node already has (a resumed run sending again what was
     * recorded) is fine; one whose nonce is used (mined already, or replaced) is reported as such.
     */
    async send(raw: Hex): Promise<'sent' | 'known' | 'nonce-used'> {
      try {
        await client.request({ method: 'eth_sendRawTransaction', params: [raw] })
        return 'sent'
      } catch (e) {
        const text = `${(e as Error).message} ${(e as { details?: string }).details ?? ''}`
        if (/already known|already imported|known transaction|already exists/i.test(text))
          return 'known'
        if (/nonce too low|nonce has already been used|invalid nonce/i.test(text))
          return 'nonce-used'
        throw e
      }
    },

    /** The receipt once mined, or null after `timeoutMs`. */
    async receipt(hash: Hex, timeoutMs: number): Promise<TransactionReceipt | null> {
      try {
        return await client.waitForTransactionReceipt({
          hash,
          timeout: timeoutMs,
          pollingInterval: 250,
        })
      } catch (e) {
        if ((e as Error).name === 'WaitForTransactionReceiptTimeoutError') return null
        throw e
      }
    },

    /**
     * Waits until `address` has nothing in flight (its pending nonce equals its mined one); false
     * after `timeoutMs`.
     */
    async settled(address: Address, timeoutMs: number): Promise<boolean> {
      const end = Date.now() + timeoutMs
      for (;;) {
        const [latest, pending] = await Promise.all([
          client.getTransactionCount({ address, blockTag: 'latest' }),
          client.getTransactionCount({ address, blockTag: 'pending' }),
        ])
        if (pending <= latest) return true
        if (Date.now() > end) return false
        await new Promise((r) => setTimeout(r, 500))
      }
    },
  }
}

export type TreasuryChain = ReturnType<typeof createTreasuryChain>
