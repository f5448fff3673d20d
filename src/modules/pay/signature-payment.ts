/**
 * Paying by one signature (docs/decisions/0062-pay-by-signature.md): for a token that takes
 * EIP-3009 authorizations, the customer's wallet signs a TransferWithAuthorization of exactly what
 * is due to the transaction's deposit address, valid until the transaction expires, and the
 * relayer submits it, paying the gas. The customer needs no native coin.
 *
 * Everything is checked before the relayer spends anything: the amount, the window, the signer
 * (the signature is checked over the message this service expects, so a signature for another
 * chain, token, recipient, amount or window does not match), the nonce (unused on chain and
 * here), the payer's balance; then the relayer simulates the call. The payment is then found by
 * the network's follower like any transfer to the deposit address, confirmations and reorgs
 * included: nothing here moves the transaction's status.
 */
import { type Address, getAddress, type Hex, isAddress, isHex, type PublicClient } from 'viem'
import { checkAuthorization } from '../../chain/signature-pay/authorization-check.ts'
import type { AuthorizationDomain, TransferAuthorization } from '../../chain/eip3009.ts'
import {
  clientKey,
  type Relayed,
  type RelayRequest,
  type Relayer,
} from '../../chain/signature-pay/relayer.ts'
import type { Clock } from '../../lib/clock.ts'
import { deny, type Outcome } from '../../lib/outcome.ts'
import type { PayState, SignedAuthorization } from './model.ts'

/**
 * An authorization must leave the relayer at least this long to get it mined before it expires.
 */
const MIN_VALID_SECONDS = 30n

export interface SignatureDeps {
  relayer: Relayer | null
  authorizationDomain: (network: string, token: string) => AuthorizationDomain | null
  client: (network: string) => Pick<PublicClient, 'readContract' | 'getCode'> | null
  clock: Clock
}

/** What the page asks the wallet to sign; null when paying by signature is not offered. */
export function authorizationOffer(
  deps: Pick<SignatureDeps, 'relayer' | 'authorizationDomain'>,
  s: Pick<PayState, 'status' | 'quote' | 'amount_due' | 'expires_at'>,
): PayState['authorization'] {
  const q = s.quote
  if (!q?.token_address || !deps.relayer?.offers(q.blockchain_network)) return null
  if (s.status !== 'prepared' && s.status !== 'pending') return null
  const domain = deps.authorizationDomain(q.blockchain_network, q.token_address)
  const due = BigInt(s.amount_due ?? q.token_amount)
  if (!domain || due <= 0n) return null
  return {
    domain: {
      name: domain.name,
      version: domain.version,
      chainId: domain.chainId,
      verifyingContract: domain.verifyingContract,
    },
    primary_type: 'TransferWithAuthorization',
    to: q.deposit_address,
    value: due.toString(),
    valid_after: '0',
    valid_before: String(Math.floor(Date.parse(s.expires_at) / 1000)),
    relayer: deps.relayer.address,
  }
}

/**
 * Checks a signed authorization against what the page offered and hands it to the relayer; the
 * relayer's transaction hash on success.
 */
export async function submitAuthorization(
  deps: SignatureDeps,
  s: PayState,
  projectId: string,
  body: SignedAuthorization,
  clientIp: string | null,
): Promise<Outcome<Relayed>> {
  // What the state offers was judged when it was read (authorizationOffer, above).
  const offer = s.authorization
  if (!offer || !s.quote)
    return deny(
      'conflict',
      s.quote
        ? `Paying by signature is not offered for this transaction now (it is ${s.status}, or its token takes no signatures, or this service has no relayer on ${s.quote.blockchain_network})`
        : 'No token is chosen yet',
    )
  const field = (path: string, message: string) =>
    deny('invalid_request', `${path}: ${message}`, [{ path, message }])
  if (!isAddress(body.from)) return field('from', 'must be a 0x-prefixed 20-byte address')
  if (!isHex(body.nonce) || body.nonce.length !== 66)
    return field('nonce', 'must be 32 bytes as 0x-prefixed hex')
  if (!isHex(body.signature)) return field('signature', 'must be 0x-prefixed hex')
  if (body.value !== offer.value)
    return field('value', `must be exactly ${offer.value} (the amount due, in smallest units)`)
  const now = BigInt(Math.floor(deps.clock.now() / 1000))
  const validAfter = BigInt(body.valid_after)
  const validBefore = BigInt(body.valid_before)
  if (validAfter >= now) return field('valid_after', 'must be in the past (0 is usual)')
  if (validBefore > BigInt(offer.valid_before))
    return field(
      'valid_before',
      `must be no later than the transaction's expiry (${offer.valid_before})`,
    )
  if (validBefore < now + MIN_VALID_SECONDS)
    return field(
      'valid_before',
      `must leave at least ${MIN_VALID_SECONDS} s to submit it (the transaction expires too soon to pay by signature)`,
    )
  const token = getAddress(s.quote.token_address!)
  const authorization: TransferAuthorization = {
    from: getAddress(body.from),
    to: getAddress(offer.to),
    value: BigInt(offer.value),
    validAfter,
    validBefore,
    nonce: body.nonce.toLowerCase() as Hex,
  }
  const request: RelayRequest = {
    network: s.quote.blockchain_network,
    token: token as Address,
    authorization,
    signature: body.signature as Hex,
    transactionId: s.id,
    projectId,
    client: clientKey(clientIp),
  }
  const relay = () =>
    deps
      .relayer!.relay(request)
      .catch((e) =>
        deny(
          'unavailable',
          `The relayer could not submit it now (${(e as { shortMessage?: string }).shortMessage ?? (e as Error).message}); nothing was sent, please try again`,
        ),
      )
  // The same authorization sent again for this transaction (a double click, an x402 client
  // retrying after `settlement_pending`): answered from the relayer's first transaction, which
  // `relay` returns while it stands (and sends again only if it left the chain).
  const before = await deps.relayer!.find(request)
  if (before?.transactionId === s.id && before.status !== 'refused' && before.status !== 'dropped')
    return relay()
  const client = deps.client(s.quote.blockchain_network)
  if (!client) return deny('unavailable', `${s.quote.blockchain_network} cannot be reached`)
  const checked = await checkAuthorization(client, {
    network: s.quote.blockchain_network,
    token,
    domain: offer.domain as AuthorizationDomain,
    authorization,
    signature: body.signature as Hex,
  })
  if (!checked.ok) return checked
  return relay()
}
