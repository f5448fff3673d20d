/**
 * EIP-681 payment URIs for the pay page (link and QR code), so a wallet opens with the
 * recipient, chain and exact amount filled in:
 *   native: ethereum:<to>@<chainId>?value=<wei>
 *   ERC-20: ethereum:<token>@<chainId>/transfer?address=<to>&uint256=<units>
 * Amounts are plain integers in the smallest unit (EIP-681 also allows "1.5e18"; some wallets
 * misread it, and an integer is exact). The chain id is always given, so a wallet on another
 * chain asks to switch instead of paying on the wrong one. Addresses are checksummed.
 */
import { getAddress, type Address } from 'viem'

export type PaymentRequest =
  | { kind: 'native'; chainId: number; to: Address; amount: bigint }
  | { kind: 'erc20'; chainId: number; token: Address; to: Address; amount: bigint }

/**
 * The URI of a payment of `amount` smallest units of `token` (a TokenConfig fits) to `to`; with
 * `amount` null (any amount pays), the same URI without the amount, for the wallet to ask.
 */
export function paymentUri(args: {
  chainId: number
  to: Address
  amount: bigint | null
  token: { kind: 'native' } | { kind: 'erc20'; address: Address }
}): string {
  const { chainId, amount } = args
  if (!Number.isSafeInteger(chainId) || chainId <= 0)
    throw new RangeError(`chainId must be a positive integer, got ${chainId}`)
  if (amount !== null && (typeof amount !== 'bigint' || amount < 0n))
    throw new RangeError(`amount must be a non-negative bigint, got ${amount}`)
  const to = getAddress(args.to)
  if (args.token.kind === 'native')
    return amount === null
      ? `ethereum:${to}@${chainId}`
      : `ethereum:${to}@${chainId}?value=${amount}`
  const transfer = `ethereum:${getAddress(args.token.address)}@${chainId}/transfer?address=${to}`
  return amount === null ? transfer : `${transfer}&uint256=${amount}`
}

/**
 * Reads back a URI this module writes (tests and the simulated customer wallet use it). Not a
 * general EIP-681 parser: it accepts exactly the two shapes above and returns null otherwise.
 */
export function parsePaymentUri(uri: string): PaymentRequest | null {
  const native = /^ethereum:(0x[0-9a-fA-F]{40})@(\d+)\?value=(\d+)$/.exec(uri)
  if (native)
    return {
      kind: 'native',
      to: getAddress(native[1]!),
      chainId: Number(native[2]),
      amount: BigInt(native[3]!),
    }
  const erc20 =
    /^ethereum:(0x[0-9a-fA-F]{40})@(\d+)\/transfer\?address=(0x[0-9a-fA-F]{40})&uint256=(\d+)$/.exec(
      uri,
    )
  if (erc20) {
    return {
      kind: 'erc20',
      token: getAddress(erc20[1]!),
      chainId: Number(erc20[2]),
      to: getAddress(erc20[3]!),
      amount: BigInt(erc20[4]!),
    }
  }
  return null
}
