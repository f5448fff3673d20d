import { type Address, bytesToHex, getAddress, type Hex } from 'viem'
import type { PrivateKeyAccount } from 'viem/accounts'
import { transferAuthorizationTypedData } from '../../src/chain/eip3009.ts'

/** A fresh random 32-byte authorization nonce, as wallets make them. */
export const randomNonce = (): Hex => bytesToHex(crypto.getRandomValues(new Uint8Array(32)))

/** The body of POST /pay/{id}/authorization. */
export interface AuthorizationBody {
  from: Address
  value: string
  valid_after: string
  valid_before: string
  nonce: Hex
  signature: Hex
}

/** What a test may make a signer lie about. */
export type Lies = Partial<{
  to: Hex
  value: bigint
  validBefore: bigint
  chainId: number
  verifyingContract: Hex
  nonce: Hex
}>

/**
 * Signs what the pay page offers (`state.authorization`) as a wallet would, with a fresh nonce;
 * `over` replaces any field, for a test that lies.
 */
export async function signOffer(
  account: PrivateKeyAccount,
  state: { authorization: any },
  over: Lies = {},
): Promise<AuthorizationBody> {
  const a = state.authorization
  const message = {
    from: account.address,
    to: over.to ?? getAddress(a.to),
    value: over.value ?? BigInt(a.value),
    validAfter: 0n,
    validBefore: over.validBefore ?? BigInt(a.valid_before),
    nonce: over.nonce ?? randomNonce(),
  }
  const domain = {
    ...a.domain,
    chainId: over.chainId ?? a.domain.chainId,
    verifyingContract: over.verifyingContract ?? a.domain.verifyingContract,
  }
  const signature = await account.signTypedData(
    transferAuthorizationTypedData(domain, message) as never,
  )
  return {
    from: account.address,
    value: String(message.value),
    valid_after: '0',
    valid_before: String(message.validBefore),
    nonce: message.nonce,
    signature,
  }
}

/**
 * The offer "signed" by a contract wallet: `from` is the contract, and the signature is whatever
 * bytes its `isValidSignature` is to judge (65 random ones).
 */
export function contractOffer(from: Address, state: { authorization: any }): AuthorizationBody {
  return {
    from,
    value: state.authorization.value,
    valid_after: '0',
    valid_before: state.authorization.valid_before,
    nonce: randomNonce(),
    signature: bytesToHex(crypto.getRandomValues(new Uint8Array(65))),
  }
}

/**
 * The values of a counter in a Prometheus exposition, by its label set as written
 * (`network="devnet",outcome="reverted"`).
 */
export function counterValues(exposition: string, name: string): Map<string, number> {
  const out = new Map<string, number>()
  const re = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm')
  for (const m of exposition.matchAll(re)) out.set(m[1]!, Number(m[2]))
  return out
}

/**
 * A `PAYMENT-SIGNATURE` payload paying `accept` (one of a 402's `accepts`) as the reference client
 * signs it: validAfter 0, validBefore now + maxTimeoutSeconds, a fresh nonce.
 */
export async function x402Payload(
  account: PrivateKeyAccount,
  required: { resource: unknown; accepts: any[] },
  accept = required.accepts[0],
  nonce = randomNonce(),
) {
  const message = {
    from: account.address,
    to: getAddress(accept.payTo),
    value: BigInt(accept.amount),
    validAfter: 0n,
    validBefore: BigInt(Math.floor(Date.now() / 1000) + accept.maxTimeoutSeconds),
    nonce,
  }
  const domain = {
    name: accept.extra.name,
    version: accept.extra.version,
    chainId: Number(String(accept.network).split(':')[1]),
    verifyingContract: getAddress(accept.asset),
  }
  const signature = await account.signTypedData(
    transferAuthorizationTypedData(domain, message) as never,
  )
  return {
    x402Version: 2,
    resource: required.resource,
    accepted: accept,
    payload: {
      authorization: {
        from: message.from,
        to: message.to,
        value: String(message.value),
        validAfter: '0',
        validBefore: String(message.validBefore),
        nonce,
      },
      signature,
    },
  }
}
