import type { Address, Hex } from 'viem'
import { TestStablecoin } from './artifacts/index.ts'
import { createDevnetClient } from './devnet.ts'
import type { NetworkConfig } from './networks-config.ts'

/**
 * The devnet's funded wallet paying a test transaction's quote
 * (docs/decisions/0034-hosted-pay-page.md, "Pay with test wallet"), so a newcomer can watch the
 * whole flow after `npm start`. Only on the devnet the service itself runs: its wallet is anvil's
 * well-known account and its coins are worthless.
 */
export function createTestWallet(deps: { network: NetworkConfig; privateKey: Hex }) {
  const client = createDevnetClient(deps.network.rpcUrl, deps.privateKey)
  return {
    network: deps.network.name,
    address: client.account.address,
    /** Sends `amount` of `symbol` to `to`; resolves with the transaction hash once it is mined. */
    async pay(symbol: string, to: string, amount: bigint): Promise<Hex> {
      const token = deps.network.tokens.find((t) => t.symbol === symbol)
      if (!token) throw new Error(`the devnet has no token ${symbol}`)
      const hash =
        token.kind === 'erc20'
          ? await client.writeContract({
              address: token.address,
              abi: TestStablecoin.abi,
              functionName: 'transfer',
              args: [to as Address, amount],
            })
          : await client.sendTransaction({ to: to as Address, value: amount })
      await client.waitForTransactionReceipt({ hash })
      return hash
    },
  }
}

export type TestWallet = ReturnType<typeof createTestWallet>
