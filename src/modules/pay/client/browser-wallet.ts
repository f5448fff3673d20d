/**
 * "Pay with browser wallet": sends the payment through the browser's EIP-1193 provider with
 * viem: asks for an account, switches the wallet to the payment's chain, then sends the ERC-20
 * transfer or the native value. Loaded only when the browser has a wallet (a separate chunk).
 */
import { createWalletClient, custom, erc20Abi, getAddress, type EIP1193Provider } from 'viem'

export type WalletResult =
  | { ok: true; hash: string }
  | { ok: false; reason: 'rejected' | 'unknown_chain' | 'error'; message: string }

/** EIP-1193 4001: the user rejected the request. EIP-3085/3326 4902: unknown chain. */
const codeOf = (e: unknown): number | undefined => {
  for (let c = e as { code?: unknown; cause?: unknown } | undefined; c; c = c.cause as typeof c)
    if (typeof c.code === 'number') return c.code
  return undefined
}

export async function sendWithBrowserWallet(
  provider: { request(args: { method: string; params?: unknown }): Promise<unknown> },
  payment: { chainId: number; token: string | null; to: string; amount: bigint },
): Promise<WalletResult> {
  const wallet = createWalletClient({ transport: custom(provider as EIP1193Provider) })
  try {
    const [account] = await wallet.requestAddresses()
    if (!account) return { ok: false, reason: 'rejected', message: 'no account' }
    if ((await wallet.getChainId()) !== payment.chainId) {
      try {
        await wallet.switchChain({ id: payment.chainId })
      } catch (e) {
        if (codeOf(e) === 4902) return { ok: false, reason: 'unknown_chain', message: String(e) }
        throw e
      }
      // Some wallets resolve the switch before they really moved; never pay on the wrong chain.
      if ((await wallet.getChainId()) !== payment.chainId)
        return { ok: false, reason: 'unknown_chain', message: 'the wallet stayed on another chain' }
    }
    const to = getAddress(payment.to)
    const hash = payment.token
      ? await wallet.writeContract({
          account,
          chain: null,
          address: getAddress(payment.token),
          abi: erc20Abi,
          functionName: 'transfer',
          args: [to, payment.amount],
        })
      : await wallet.sendTransaction({ account, chain: null, to, value: payment.amount })
    return { ok: true, hash }
  } catch (e) {
    if (codeOf(e) === 4001) return { ok: false, reason: 'rejected', message: 'rejected' }
    const message =
      (e as { shortMessage?: string; message?: string }).shortMessage ??
      (e as Error).message ??
      String(e)
    return { ok: false, reason: 'error', message }
  }
}
