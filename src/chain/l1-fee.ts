/**
 * The L1 data fee an OP Stack chain (OP Mainnet, Base and their testnets) charges a transaction's
 * sender on top of its gas: what posting its bytes to Ethereum costs. A sender must hold it as
 * well, or the transaction is refused; so a refund paid in the native coin from an account that
 * holds exactly the amount plus the gas still fails there.
 *
 * Read from the chain's GasPriceOracle predeploy, `getL1Fee(bytes)` given the serialized
 * transaction (Optimism specs, "Predeploys": GasPriceOracle at
 * 0x420000000000000000000000000000000000000F; it adds 68 bytes for a signature the bytes do not
 * carry, so a signed transaction's fee is a slight overestimate). A chain without code at that
 * address charges none.
 */
import {
  decodeFunctionResult,
  encodeFunctionData,
  type Address,
  type Hex,
  type PublicClient,
} from 'viem'

export const GAS_PRICE_ORACLE: Address = '0x420000000000000000000000000000000000000F'

const abi = [
  {
    type: 'function',
    name: 'getL1Fee',
    stateMutability: 'view',
    inputs: [{ name: '_data', type: 'bytes' }],
    outputs: [{ name: '', type: 'uint256' }],
  },
] as const

type Client = Pick<PublicClient, 'getCode' | 'call'>

/** A reader of L1 fees for one chain (whether it has the oracle is asked once). */
export function createL1FeeReader(client: Client) {
  let hasOracle: Promise<boolean> | null = null
  return async (serialized: Hex): Promise<bigint> => {
    // Asked once; a node that did not answer is asked again next time.
    hasOracle ??= client.getCode({ address: GAS_PRICE_ORACLE }).then(
      (c) => !!c && c !== '0x',
      (e) => {
        hasOracle = null
        throw e
      },
    )
    if (!(await hasOracle)) return 0n
    const { data } = await client.call({
      to: GAS_PRICE_ORACLE,
      data: encodeFunctionData({ abi, functionName: 'getL1Fee', args: [serialized] }),
    })
    return decodeFunctionResult({ abi, functionName: 'getL1Fee', data: data ?? '0x' })
  }
}

export type L1FeeReader = ReturnType<typeof createL1FeeReader>
