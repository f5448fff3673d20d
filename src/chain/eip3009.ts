/**
 * EIP-3009 (`transferWithAuthorization`) as Circle's FiatToken v2.2 implements it (USDC, EURC):
 * the payer signs an EIP-712 message naming recipient, amount, a validity window and a random
 * 32-byte nonce; anyone may submit it and pay the gas, and the token moves straight from the payer
 * to the recipient. The contract refuses a nonce used or canceled before, a window not yet open
 * or closed (`validAfter < block.timestamp < validBefore`), and a signature not by `from`.
 *
 * A token's EIP-712 domain is never typed in: it is read from the contract (`eip712Domain()` of
 * EIP-5267 where the contract has it, else `name()` and `version()`) and the domain separator it
 * yields must equal the contract's own `DOMAIN_SEPARATOR()`. A signature made over any other
 * domain would be refused on chain after the relayer paid for trying.
 */
import {
  type Address,
  getAddress,
  type Hex,
  hashDomain,
  type PublicClient,
  type TypedDataDomain,
} from 'viem'

/** The EIP-712 domain a token's authorizations are signed in. */
export interface AuthorizationDomain {
  name: string
  version: string
  chainId: number
  verifyingContract: Address
}

/** What a customer signs: every field of FiatToken's TransferWithAuthorization. */
export interface TransferAuthorization {
  from: Address
  to: Address
  value: bigint
  validAfter: bigint
  validBefore: bigint
  nonce: Hex
}

export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const

/** The typed data a wallet signs with `eth_signTypedData_v4` (viem's `signTypedData` shape). */
export function transferAuthorizationTypedData(
  domain: AuthorizationDomain,
  message: TransferAuthorization,
) {
  return {
    domain: domain satisfies TypedDataDomain,
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization' as const,
    message,
  }
}

export const eip3009Abi = [
  {
    type: 'function',
    name: 'transferWithAuthorization',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 'from', type: 'address' },
      { name: 'to', type: 'address' },
      { name: 'value', type: 'uint256' },
      { name: 'validAfter', type: 'uint256' },
      { name: 'validBefore', type: 'uint256' },
      { name: 'nonce', type: 'bytes32' },
      { name: 'signature', type: 'bytes' },
    ],
    outputs: [],
  },
  {
    type: 'function',
    name: 'authorizationState',
    stateMutability: 'view',
    inputs: [
      { name: 'authorizer', type: 'address' },
      { name: 'nonce', type: 'bytes32' },
    ],
    outputs: [{ name: '', type: 'bool' }],
  },
  {
    type: 'function',
    name: 'balanceOf',
    stateMutability: 'view',
    inputs: [{ name: 'account', type: 'address' }],
    outputs: [{ name: '', type: 'uint256' }],
  },
  {
    type: 'event',
    name: 'AuthorizationUsed',
    inputs: [
      { name: 'authorizer', type: 'address', indexed: true },
      { name: 'nonce', type: 'bytes32', indexed: true },
    ],
  },
] as const

const domainAbi = [
  {
    type: 'function',
    name: 'eip712Domain',
    stateMutability: 'view',
    inputs: [],
    outputs: [
      { name: 'fields', type: 'bytes1' },
      { name: 'name', type: 'string' },
      { name: 'version', type: 'string' },
      { name: 'chainId', type: 'uint256' },
      { name: 'verifyingContract', type: 'address' },
      { name: 'salt', type: 'bytes32' },
      { name: 'extensions', type: 'uint256[]' },
    ],
  },
  ...(['name', 'version'] as const).map(
    (name) =>
      ({
        type: 'function',
        name,
        stateMutability: 'view',
        inputs: [],
        outputs: [{ name: '', type: 'string' }],
      }) as const,
  ),
  {
    type: 'function',
    name: 'DOMAIN_SEPARATOR',
    stateMutability: 'view',
    inputs: [],
    outputs: [{ name: '', type: 'bytes32' }],
  },
] as const

/** EIP-5267's `fields` bits for exactly name, version, chainId and verifyingContract. */
const NAME_VERSION_CHAIN_CONTRACT = 0x0f

type Reader = Pick<PublicClient, 'readContract'>

/**
 * The token's domain as its contract states it, or why it cannot be trusted (a disagreement:
 * the config is wrong about this contract). Throws when the node cannot be asked, so the caller
 * tells silence from a wrong answer.
 */
export async function readAuthorizationDomain(
  client: Reader,
  token: Address,
  chainId: number,
  /** Tells a contract's answer (it reverted, or has no such function) from a node's failure. */
  ask: <T>(call: Promise<T>) => Promise<T | Error>,
): Promise<{ ok: true; domain: AuthorizationDomain } | { ok: false; problem: string }> {
  const read = <N extends 'eip712Domain' | 'name' | 'version' | 'DOMAIN_SEPARATOR'>(
    functionName: N,
  ) => ask(client.readContract({ address: token, abi: domainAbi, functionName } as never))
  const [eip5267, separator] = await Promise.all([read('eip712Domain'), read('DOMAIN_SEPARATOR')])
  let domain: AuthorizationDomain
  if (!(eip5267 instanceof Error)) {
    const [fields, name, version, id, contract] = eip5267 as readonly [
      Hex,
      string,
      string,
      bigint,
      Address,
    ]
    if (Number(fields) !== NAME_VERSION_CHAIN_CONTRACT)
      return {
        ok: false,
        problem: `eip712Domain() uses fields ${fields}, not name, version, chainId and verifyingContract`,
      }
    if (id !== BigInt(chainId) || getAddress(contract) !== getAddress(token))
      return {
        ok: false,
        problem: `eip712Domain() names chain ${id} and contract ${contract}, not this one`,
      }
    domain = { name, version, chainId, verifyingContract: getAddress(token) }
  } else {
    const [name, version] = await Promise.all([read('name'), read('version')])
    if (name instanceof Error || version instanceof Error)
      return {
        ok: false,
        problem: `no EIP-712 domain: the contract answers neither eip712Domain() nor name() and version() (${(name instanceof Error ? name : (version as Error)).message})`,
      }
    domain = {
      name: name as string,
      version: version as string,
      chainId,
      verifyingContract: getAddress(token),
    }
  }
  if (separator instanceof Error)
    return { ok: false, problem: `no DOMAIN_SEPARATOR() to check the domain against` }
  const computed = hashDomain({
    domain: { ...domain, chainId: BigInt(chainId) },
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
    },
  })
  if (computed !== separator)
    return {
      ok: false,
      problem: `DOMAIN_SEPARATOR() is ${separator}, not that of name ${JSON.stringify(domain.name)}, version ${JSON.stringify(domain.version)}, chain ${chainId} and this contract (${computed})`,
    }
  return { ok: true, domain }
}
