/**
 * The checks an EIP-3009 authorization passes before the relayer spends anything on it
 * (docs/decisions/0062-pay-by-signature.md), shared by the pay page, a transaction's x402_url and
 * the x402 facilitator. Server-side only: the browser bundle imports ../eip3009.ts alone.
 */
import { type Address, type Hex, type PublicClient, recoverTypedDataAddress } from 'viem'
import { deny, ok, type Outcome } from '../../lib/outcome.ts'
import type { NetworkConfig, TokenConfig } from '../networks-config.ts'
import type { Relayer } from './relayer.ts'
import {
  type AuthorizationDomain,
  eip3009Abi,
  type TransferAuthorization,
  transferAuthorizationTypedData,
} from '../eip3009.ts'

/**
 * The tokens of `network` that can be paid by one signature here, with the EIP-712 domain each
 * signs in: a relayer serves the network, and the token's domain was read from its contract and
 * verified at start (only a token declared `eip3009` has one).
 */
export function signatureTokens(
  network: NetworkConfig,
  relayer: Pick<Relayer, 'offers'> | null,
  authorizationDomain: (network: string, token: string) => AuthorizationDomain | null,
): { token: Extract<TokenConfig, { kind: 'erc20' }>; domain: AuthorizationDomain }[] {
  if (!relayer?.offers(network.name)) return []
  return network.tokens.flatMap((token) => {
    const domain =
      token.kind === 'erc20' && token.eip3009
        ? authorizationDomain(network.name, token.address)
        : null
    return token.kind === 'erc20' && domain ? [{ token, domain }] : []
  })
}

/**
 * Whether the token would take this authorization now, checked before any gas: the signature is
 * by `from` over exactly this message in the token's domain (a contract wallet is left to the
 * token's EIP-1271 check, in the relayer's simulation), the nonce is unused, and `from` holds the
 * value. The denial names the field at fault.
 */
export async function checkAuthorization(
  client: Pick<PublicClient, 'readContract' | 'getCode'>,
  a: {
    network: string
    token: Address
    domain: AuthorizationDomain
    authorization: TransferAuthorization
    signature: Hex
  },
): Promise<Outcome<void>> {
  const field = (path: string, message: string) =>
    deny('invalid_request', `${path}: ${message}`, [{ path, message }])
  const { authorization, token } = a
  // One made for another chain, token, recipient, amount or window recovers another address.
  const typed = transferAuthorizationTypedData(a.domain, authorization)
  const signer = await recoverTypedDataAddress({ ...typed, signature: a.signature }).catch(
    () => null,
  )
  if (signer !== authorization.from) {
    const code = await client.getCode({ address: authorization.from }).catch(() => undefined)
    if (!code || code === '0x')
      return field(
        'signature',
        `is not by ${authorization.from} over this payment (chain ${a.domain.chainId}, token ${token}, to ${authorization.to}, value ${authorization.value}, the window given)`,
      )
  }
  try {
    const [used, balance] = await Promise.all([
      client.readContract({
        address: token,
        abi: eip3009Abi,
        functionName: 'authorizationState',
        args: [authorization.from, authorization.nonce],
      }),
      client.readContract({
        address: token,
        abi: eip3009Abi,
        functionName: 'balanceOf',
        args: [authorization.from],
      }),
    ])
    if (used) return deny('conflict', 'This authorization nonce was used or canceled already')
    if (balance < authorization.value)
      return field(
        'from',
        `holds ${balance} of the token, less than the ${authorization.value} due (smallest units)`,
      )
  } catch {
    return deny('unavailable', `${a.network} cannot be reached right now`)
  }
  return ok(undefined)
}
