/**
 * Whether a chain runs EIP-7702 (an account delegating to a contract's code), asked of its node
 * rather than assumed from its name. The treasury moves money out of deposit addresses through
 * DepositAccount under EIP-7702 where the chain has it, and by topping up each address's own fee
 * where it does not; a transaction type the chain lacks is never recorded or sent.
 *
 * The probe: a throwaway key (made here, holding nothing, forgotten at once) signs an
 * authorization delegating to a probe address, and the node is asked to `eth_call` the throwaway
 * account with that authorization, the probe address given code by a state override that returns
 * a fixed word. A node that applies the authorization runs that code and answers the word; one
 * without EIP-7702 answers an empty call to a plain account (`0x`), or refuses the authorization
 * (anvil before Prague: "Eip7702 is not supported"). Some nodes drop a field they do not know
 * without a word (Avalanche's coreth takes no authorization list), which is why the answer, not
 * the absence of an error, decides.
 *
 * A node that refuses state overrides is asked again with Multicall3 (where it has code) as the
 * delegate: a delegated account then answers `getBlockNumber()`.
 */
import { BaseError, RpcError, type Address, type Hex, type PublicClient } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { errorSummary } from '../lib/logger.ts'
import { MULTICALL3 } from './deposit-account.ts'
import { readAgainOnErrorAnswer } from './read-again.ts'

export interface Eip7702Verdict {
  supported: boolean
  /** What the node answered, in words (for readiness, the log and `treasury check`). */
  detail: string
}

/**
 * Where the probe's code is put by the state override: an address no chain uses (it spells 7702).
 */
const PROBE_TARGET: Address = '0x0000000000000000000000000000000000007702'
const WORD: Hex = `0x${'c7'.repeat(32)}`
/** PUSH32 WORD, PUSH1 0, MSTORE, PUSH1 32, PUSH1 0, RETURN. */
const PROBE_CODE: Hex = `0x7f${'c7'.repeat(32)}60005260206000f3`
/** Multicall3's `getBlockNumber()`. */
const GET_BLOCK_NUMBER: Hex = '0x42cbb15c'

type Client = Pick<PublicClient, 'call' | 'getCode'>

/** The node refused the authorization itself (it knows EIP-7702 and does not run it). */
class AuthorizationRefused extends Error {}
const REFUSES_AUTHORIZATION = /7702|authori[sz]ation/i

/**
 * The node answered with an error of its own (a JSON-RPC error object), as opposed to not
 * answering.
 */
const answered = (e: unknown) =>
  e instanceof AuthorizationRefused ||
  (e instanceof BaseError && !!e.walk((c) => c instanceof RpcError))

/**
 * Asks the node; throws when it does not answer at all (then nothing is known yet). An error
 * answer that is not about the authorization (a replica behind, a block being mined) is asked
 * again, as every start-up read is (read-again.ts).
 */
export async function probeEip7702(client: Client, chainId: number): Promise<Eip7702Verdict> {
  const throwaway = privateKeyToAccount(generatePrivateKey())
  const delegated = (target: Address, o: { data?: Hex; code?: Hex }) =>
    readAgainOnErrorAnswer(async () => {
      const authorization = await throwaway.signAuthorization({
        contractAddress: target,
        chainId,
        nonce: 0,
      })
      try {
        const { data } = await client.call({
          to: throwaway.address,
          data: o.data,
          authorizationList: [authorization],
          ...(o.code ? { stateOverride: [{ address: target, code: o.code }] } : {}),
        })
        return data ?? '0x'
      } catch (e) {
        if (answered(e) && REFUSES_AUTHORIZATION.test(errorSummary(e)))
          throw new AuthorizationRefused(errorSummary(e))
        throw e
      }
    })
  const supported: Eip7702Verdict = {
    supported: true,
    detail: "EIP-7702: the node ran a delegated account's code",
  }
  const ignored: Eip7702Verdict = {
    supported: false,
    detail: 'no EIP-7702: the node ran the call without its authorization',
  }
  let refusal: unknown
  try {
    return (await delegated(PROBE_TARGET, { code: PROBE_CODE })).toLowerCase() === WORD
      ? supported
      : ignored
  } catch (e) {
    if (!answered(e)) throw e
    refusal = e
  }
  // Refused, perhaps only the state override: Multicall3 needs none.
  const multicall =
    refusal instanceof AuthorizationRefused
      ? undefined
      : await client.getCode({ address: MULTICALL3 }).catch(() => undefined)
  if (multicall && multicall !== '0x') {
    try {
      return (await delegated(MULTICALL3, { data: GET_BLOCK_NUMBER })).length === 66
        ? supported
        : ignored
    } catch (e) {
      if (!answered(e)) throw e
      refusal = e
    }
  }
  return {
    supported: false,
    detail: `no EIP-7702: the node refused the probe's authorization (${refusal instanceof AuthorizationRefused ? refusal.message : errorSummary(refusal)})`,
  }
}
