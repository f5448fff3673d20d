/**
 * "Pay with browser wallet": sends the payment through the browser's EIP-1193 provider with
 * viem: asks for an account, switches the wallet to the payment's chain, then sends the ERC-20
 * transfer or the native value. Loaded only when the browser has a wallet (a separate chunk).
 */
import {
  bytesToHex,
  createWalletClient,
  custom,
  erc20Abi,
  getAddress,
  type EIP1193Provider,
} from 'viem'
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../../chain/eip3009.ts'
import type { PayState } from '../model.ts'

export type WalletResult =
  | { ok: true; hash: string }
  | { ok: false; reason: 'rejected' | 'unknown_chain' | 'error'; message: string }

/** EIP-1193 4001: the user rejected the request. EIP-3085/3326 4902: unknown chain. */
const codeOf = (e: unknown): number | undefined => {
  for (let c = e as { code?: unknown; cause?: unknown } | undefined; c; c = c.cause as typeof c)
    if (typeof c.code === 'number') return c.code
  return undefined
}

/**
 * Signs the offered EIP-3009 TransferWithAuthorization (`eth_signTypedData_v4`) with a fresh
 * random nonce, on the token's chain: the body `POST /pay/{id}/authorization` takes.
 */
export async function signAuthorization(
  provider: { request(args: { method: string; params?: unknown }): Promise<unknown> },
  offer: NonNullable<PayState['authorization']>,
): Promise<
  | {
      ok: true
      signed: {
        from: string
        value: string
        valid_after: string
        valid_before: string
        nonce: string
        signature: string
      }
    }
  | Exclude<WalletResult, { ok: true }>
> {
  const wallet = createWalletClient({ transport: custom(provider as EIP1193Provider) })
  try {
    const [account] = await wallet.requestAddresses()
    if (!account) return { ok: false, reason: 'rejected', message: 'no account' }
    const moved = await onChain(wallet, offer.domain.chainId)
    if (moved) return moved
    const nonce = bytesToHex(crypto.getRandomValues(new Uint8Array(32)))
    const message = {
      from: account,
      to: getAddress(offer.to),
      value: BigInt(offer.value),
      validAfter: BigInt(offer.valid_after),
      validBefore: BigInt(offer.valid_before),
      nonce,
    }
    const signature = await wallet.signTypedData({
      account,
      domain: { ...offer.domain, verifyingContract: getAddress(offer.domain.verifyingContract) },
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: 'TransferWithAuthorization',
      message,
    })
    return {
      ok: true,
      signed: {
        from: account,
        value: offer.value,
        valid_after: offer.valid_after,
        valid_before: offer.valid_before,
        nonce,
        signature,
      },
    }
  } catch (e) {
    return failure(e)
  }
}

/** Moves the wallet to `chainId`; a refusal to return, or null once it is there. */
async function onChain(
  wallet: ReturnType<typeof createWalletClient>,
  chainId: number,
): Promise<Exclude<WalletResult, { ok: true }> | null> {
  if ((await wallet.getChainId()) === chainId) return null
  try {
    await wallet.switchChain({ id: chainId })
  } catch (e) {
    if (codeOf(e) === 4902) return { ok: false, reason: 'unknown_chain', message: String(e) }
    throw e
  }
  // Some wallets resolve the switch before they really moved; never pay on the wrong chain.
  if ((await wallet.getChainId()) !== chainId)
    return { ok: false, reason: 'unknown_chain', message: 'the wallet stayed on another chain' }
  return null
}

function failure(e: unknown): Exclude<WalletResult, { ok: true }> {
  if (codeOf(e) === 4001) return { ok: false, reason: 'rejected', message: 'rejected' }
  const message =
    (e as { shortMessage?: string; message?: string }).shortMessage ??
    (e as Error).message ??
    String(e)
  return { ok: false, reason: 'error', message }
}

export async function sendWithBrowserWallet(
  provider: { request(args: { method: string; params?: unknown }): Promise<unknown> },
  payment: { chainId: number; token: string | null; to: string; amount: bigint },
): Promise<WalletResult> {
  const wallet = createWalletClient({ transport: custom(provider as EIP1193Provider) })
  try {
    const [account] = await wallet.requestAddresses()
    if (!account) return { ok: false, reason: 'rejected', message: 'no account' }
    const moved = await onChain(wallet, payment.chainId)
    if (moved) return moved
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
    return failure(e)
  }
}
