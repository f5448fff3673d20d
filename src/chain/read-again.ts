/**
 * A read the node answered with an error of its own, rather than data, is made again a moment
 * later: such answers pass. A load-balanced provider answers "header not found" for a block one
 * replica has not seen yet, and anvil 1.7 answers some `eth_call`s with "BlockOutOfRangeError:
 * block height is 15 but requested was 14" while it mines a block (measured: 4 of 104,872 calls
 * from 8 callers, 1 s blocks). viem's transport retries only rate limits and its own "internal
 * error" answers among them.
 *
 * Not made again: a node that was not reached (refused, reset, timed out, an HTTP error status:
 * the transport has retried those already), and a contract that answered for itself (a revert,
 * no code at the address, an answer that does not decode): asking again gets the same.
 */
import {
  BaseError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  ExecutionRevertedError,
  HttpRequestError,
  RpcRequestError,
  TimeoutError,
} from 'viem'

/** Times a read is made again, and the pause before the first (doubling). */
const AGAIN = 2
const PAUSE_MS = 250

export async function readAgainOnErrorAnswer<T>(read: () => Promise<T>): Promise<T> {
  for (let again = 0; ; again++) {
    try {
      return await read()
    } catch (error) {
      if (again === AGAIN || !answeredWithError(error)) throw error
      await new Promise((resolve) => setTimeout(resolve, PAUSE_MS * 2 ** again))
    }
  }
}

/** The node answered the request with a JSON-RPC error that is not the contract's own. */
export function answeredWithError(error: unknown): boolean {
  if (!(error instanceof BaseError)) return false
  const contractOrTransport = error.walk(
    (e) =>
      e instanceof ContractFunctionRevertedError ||
      e instanceof ContractFunctionZeroDataError ||
      e instanceof ExecutionRevertedError ||
      e instanceof HttpRequestError ||
      e instanceof TimeoutError,
  )
  return contractOrTransport === null && error.walk((e) => e instanceof RpcRequestError) !== null
}
