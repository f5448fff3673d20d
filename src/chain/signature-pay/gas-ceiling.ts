/**
 * The most gas one relay of a token may use (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md),
 * measured on the token's own chain rather than typed in: the gas of a `transferWithAuthorization`
 * of value 0 between two fresh addresses, signed by a throwaway key, as the node estimates it for
 * the relayer (nothing is sent; the key is dropped). That call runs every step of a real payment
 * (the signature check, the nonce's fresh storage slot, both balances read) except two balance
 * writes that a value of 0 leaves unchanged: the recipient's slot from zero (20,000 gas, EIP-2200)
 * and the payer's (2,900), so `FRESH_TRANSFER_WRITES_GAS` adds them, with room to spare. A quarter
 * more covers an estimate that runs low and, on rollups whose gas includes the data posted to L1,
 * the few bytes of calldata the value adds.
 *
 * A relay whose own estimate is above its ceiling is refused before anything is signed; one below
 * is sent with `min(estimate x 1.2, ceiling)` as its gas limit, so a payer whose code behaves one
 * way in the estimate and another on chain burns at most the ceiling. A payer with code (a
 * contract wallet, on a network whose rules allow them) gets `contractPayerGas` more for its
 * `isValidSignature`.
 *
 * Measured again every `CEILING_MAX_AGE_MS`: a rollup's L1 share of the gas moves with L1's fees.
 */
import { type Address, bytesToHex, encodeFunctionData, type Hex, type PublicClient } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import type { Clock } from '../../lib/clock.ts'
import {
  type AuthorizationDomain,
  eip3009Abi,
  type TransferAuthorization,
  transferAuthorizationTypedData,
} from '../eip3009.ts'

/** The two balance writes a value of 0 skips: a fresh recipient's 20,000 and the payer's 2,900. */
export const FRESH_TRANSFER_WRITES_GAS = 25_000n
export const CEILING_MAX_AGE_MS = 10 * 60_000

/** The token call that carries out an authorization (the `bytes signature` form of FiatToken v2.2). */
export function transferWithAuthorizationData(a: TransferAuthorization, signature: Hex): Hex {
  return encodeFunctionData({
    abi: eip3009Abi,
    functionName: 'transferWithAuthorization',
    args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signature],
  })
}

/** A relay's gas limit: its estimate with a fifth more, never above the ceiling. */
export const gasLimitFor = (estimate: bigint, ceiling: bigint) => {
  const padded = (estimate * 6n) / 5n
  return padded < ceiling ? padded : ceiling
}

export function createGasCeilings(deps: {
  /** The relayer's account, which the estimate is made for. */
  sender: Address
  clock: Clock
  domain: (network: string, token: string) => AuthorizationDomain | null
}) {
  const measured = new Map<string, { at: number; gas: Promise<bigint> }>()

  async function measure(
    network: string,
    client: Pick<PublicClient, 'estimateGas'>,
    token: Address,
  ): Promise<bigint> {
    const domain = deps.domain(network, token)
    if (!domain) throw new Error(`${token} on ${network} has no verified EIP-712 domain`)
    const probe = privateKeyToAccount(generatePrivateKey())
    const a: TransferAuthorization = {
      from: probe.address,
      to: privateKeyToAccount(generatePrivateKey()).address,
      value: 0n,
      validAfter: 0n,
      validBefore: BigInt(Math.floor(deps.clock.now() / 1000) + 3600),
      nonce: bytesToHex(crypto.getRandomValues(new Uint8Array(32))),
    }
    const signature = await probe.signTypedData(transferAuthorizationTypedData(domain, a) as never)
    const gas = await client.estimateGas({
      account: deps.sender,
      to: token,
      data: transferWithAuthorizationData(a, signature),
    })
    return ((gas + FRESH_TRANSFER_WRITES_GAS) * 5n) / 4n
  }

  return {
    /**
     * The ceiling of one relay of `token` on `network` for a plain payer (add the network's
     * `contractPayerGas` for a payer with code); measured at most every CEILING_MAX_AGE_MS.
     */
    async ceiling(
      network: string,
      client: Pick<PublicClient, 'estimateGas'>,
      token: Address,
    ): Promise<bigint> {
      const key = `${network}:${token.toLowerCase()}`
      const now = deps.clock.now()
      const held = measured.get(key)
      if (held && now - held.at < CEILING_MAX_AGE_MS) return held.gas
      const gas = measure(network, client, token)
      measured.set(key, { at: now, gas })
      // A failed measurement is not kept: the next relay measures again.
      gas.catch(() => {
        if (measured.get(key)?.gas === gas) measured.delete(key)
      })
      return gas
    },
  }
}

export type GasCeilings = ReturnType<typeof createGasCeilings>
