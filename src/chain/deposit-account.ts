/**
 * The DepositAccount contract (contracts/DepositAccount.sol): the code a deposit address runs once
 * its own key delegates to it (EIP-7702), so the merchant's gas account can sweep many deposit
 * addresses, or pay a refund from one, in one transaction it pays for. Nothing moves without a
 * signature by the deposit address's own key (EIP-712, the deposit address as verifying
 * contract). Used by the treasury tool (which signs and sends) and by the service (which reads
 * the Swept and Paid events of what was sent).
 *
 * One copy per chain, at an address that follows from its bytecode alone: it is deployed through
 * the deterministic deployment proxy with a zero salt, so it has the same address on every chain
 * and anyone may deploy it where it is missing.
 */
import {
  concat,
  decodeEventLog,
  encodeAbiParameters,
  encodeFunctionData,
  getContractAddress,
  keccak256,
  parseSignature,
  toBytes,
  zeroAddress,
  zeroHash,
  type Address,
  type Hex,
  type TypedDataDefinition,
} from 'viem'
import { DepositAccount } from './artifacts/index.ts'

/**
 * Arachnid's deterministic deployment proxy (github.com/Arachnid/deterministic-deployment-proxy):
 * deployed at this address by a keyless transaction on most EVM chains, and predeployed by anvil.
 * Called with `salt ++ initcode`, it CREATE2s the contract.
 */
export const CREATE2_DEPLOYER: Address = '0x4e59b44847b379578588920cA78FbF26c0B4956C'

/**
 * Multicall3 (github.com/mds1/multicall3, README "Deployments"): at this address on every chain
 * where it is deployed (250+); the treasury reads balances through it where it has code.
 */
export const MULTICALL3: Address = '0xcA11bde05977b3631167028862bE2a173976CA11'

const SALT = zeroHash

/** Where DepositAccount is on every chain (CREATE2 of its bytecode with a zero salt). */
export const DEPOSIT_ACCOUNT: Address = getContractAddress({
  opcode: 'CREATE2',
  from: CREATE2_DEPLOYER,
  salt: SALT,
  bytecode: DepositAccount.bytecode,
})

/**
 * DepositAccount's first version (its address, the CREATE2 of its bytecode as shipped before sweep
 * signatures named a nonce). An address delegating to it is re-delegated to the current version at
 * its next sweep or refund; it kept paid refund ids at the slots the current version reads, so an
 * id it paid stays paid.
 */
export const DEPOSIT_ACCOUNT_V1: Address = '0x9EA1C639031F045003A434AE202968327512b013'

/** The transaction data that deploys DepositAccount through the proxy. */
export const DEPLOY_DATA: Hex = concat([SALT, DepositAccount.bytecode])

/**
 * EIP-7702's delegation designator: an account whose code is `0xef0100 || address` runs `address`'s
 * code.
 */
const DESIGNATOR = '0xef0100'

/**
 * The address an account's code delegates to, or null when it is not a delegation (no code, or a
 * contract).
 */
export function delegationOf(code: Hex | undefined): Address | null {
  if (code?.length !== 48 || !code.toLowerCase().startsWith(DESIGNATOR)) return null
  return `0x${code.slice(8)}` as Address
}

/** Whether an account's code delegates to DepositAccount. */
export const delegatesToDepositAccount = (code: Hex | undefined) =>
  delegationOf(code)?.toLowerCase() === DEPOSIT_ACCOUNT.toLowerCase()

/**
 * Whether an account's code delegates to an earlier version of DepositAccount (to be re-delegated,
 * never left alone as another wallet's).
 */
export const delegatesToEarlierDepositAccount = (code: Hex | undefined) =>
  delegationOf(code)?.toLowerCase() === DEPOSIT_ACCOUNT_V1.toLowerCase()

/** The 32-byte id a refund is paid under (`pay` refuses an id already paid by the address). */
export const paymentId = (refundId: string): Hex => keccak256(toBytes(refundId))

const domain = (chainId: number, account: Address) => ({
  name: 'CryptoPay DepositAccount',
  version: '1',
  chainId,
  verifyingContract: account,
})

/**
 * What a deposit address's key signs to sweep it: every balance of `tokens` (and the native coin
 * when `native`) to `to`, once (`nonce`: the address's sweep nonce, which the sweep moves on),
 * until `deadline`.
 */
export function sweepTypedData(o: {
  chainId: number
  account: Address
  to: Address
  tokens: readonly Address[]
  native: boolean
  nonce: bigint
  deadline: bigint
}): TypedDataDefinition {
  return {
    domain: domain(o.chainId, o.account),
    types: {
      Sweep: [
        { name: 'to', type: 'address' },
        { name: 'tokens', type: 'address[]' },
        { name: 'native', type: 'bool' },
        { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint256' },
      ],
    },
    primaryType: 'Sweep',
    message: { to: o.to, tokens: o.tokens, native: o.native, nonce: o.nonce, deadline: o.deadline },
  }
}

/**
 * What a deposit address's key signs to pay `amount` of `token` (zero address: the native coin) to
 * `to`, once for `id`, until `deadline`.
 */
export function payTypedData(o: {
  chainId: number
  account: Address
  id: Hex
  token: Address | null
  to: Address
  amount: bigint
  deadline: bigint
}): TypedDataDefinition {
  return {
    domain: domain(o.chainId, o.account),
    types: {
      Pay: [
        { name: 'id', type: 'bytes32' },
        { name: 'token', type: 'address' },
        { name: 'to', type: 'address' },
        { name: 'amount', type: 'uint256' },
        { name: 'deadline', type: 'uint256' },
      ],
    },
    primaryType: 'Pay',
    message: {
      id: o.id,
      token: o.token ?? zeroAddress,
      to: o.to,
      amount: o.amount,
      deadline: o.deadline,
    },
  }
}

/** A signature as `sweep` and `pay` take it: r, s, v (27 or 28), 65 bytes. */
function packed(signature: Hex): Hex {
  const { r, s, v, yParity } = parseSignature(signature)
  const recovery = v ?? BigInt(yParity! + 27)
  return concat([r, s, `0x${recovery.toString(16).padStart(2, '0')}`])
}

export const sweepData = (o: {
  to: Address
  tokens: readonly Address[]
  native: boolean
  nonce: bigint
  deadline: bigint
  signature: Hex
}): Hex =>
  encodeFunctionData({
    abi: DepositAccount.abi,
    functionName: 'sweep',
    args: [o.to, o.tokens, o.native, o.nonce, o.deadline, packed(o.signature)],
  })

/**
 * The storage slot of a deposit address's sweep nonce: the base of DepositAccount's ERC-7201
 * namespace "cryptopay.deposit-account" (read with eth_getStorageAt, whatever the address delegates
 * to).
 */
export const SWEEP_NONCE_SLOT: Hex = `0x${(BigInt(keccak256(encodeAbiParameters([{ type: 'uint256' }], [BigInt(keccak256(toBytes('cryptopay.deposit-account'))) - 1n]))) & ~0xffn).toString(16).padStart(64, '0')}`

/**
 * `sweepNonce()`: the nonce the next sweep signature of the deposit address it is called at must
 * name.
 */
export const sweepNonceData: Hex = encodeFunctionData({
  abi: DepositAccount.abi,
  functionName: 'sweepNonce',
})

/**
 * `topUp`: native coin to many addresses in one transaction to DepositAccount's own address
 * (`value` the sum).
 */
export const topUpData = (o: { to: readonly Address[]; amounts: readonly bigint[] }): Hex =>
  encodeFunctionData({ abi: DepositAccount.abi, functionName: 'topUp', args: [o.to, o.amounts] })

export const payData = (o: {
  id: Hex
  token: Address | null
  to: Address
  amount: bigint
  deadline: bigint
  signature: Hex
}): Hex =>
  encodeFunctionData({
    abi: DepositAccount.abi,
    functionName: 'pay',
    args: [o.id, o.token ?? zeroAddress, o.to, o.amount, o.deadline, packed(o.signature)],
  })

/** `paid(id)`: whether the deposit address it is called at has paid `id`. */
export const paidData = (id: Hex): Hex =>
  encodeFunctionData({ abi: DepositAccount.abi, functionName: 'paid', args: [id] })

/**
 * What an `eth_call` of `paidData` answered: true when the id is paid (anything but a 32-byte word
 * says not).
 */
export const paidAnswer = (answer: unknown): boolean =>
  typeof answer === 'string' && answer.length >= 66 && BigInt(answer.slice(0, 66)) !== 0n

/** The topic of DepositAccount's Paid event (its id is the first indexed argument). */
export const PAID_TOPIC: Hex = keccak256(toBytes('Paid(bytes32,address,address,uint256)'))

/** `batch`: each signed call to its deposit address, in one transaction to DepositAccount. */
export const batchData = (calls: readonly { account: Address; data: Hex }[]): Hex =>
  encodeFunctionData({ abi: DepositAccount.abi, functionName: 'batch', args: [calls] })

/** A DepositAccount event in a receipt: emitted at a deposit address (the log's address). */
export type DepositAccountEvent =
  | {
      kind: 'swept'
      account: string
      token: string | null
      to: string
      amount: bigint
      logIndex: number
    }
  | {
      kind: 'paid'
      account: string
      id: Hex
      token: string | null
      to: string
      amount: bigint
      logIndex: number
    }

/**
 * The Swept and Paid events among a receipt's logs, addresses lowercase; other logs are skipped.
 */
export function depositAccountEvents(
  logs: readonly {
    address: string
    topics: readonly Hex[]
    data: Hex
    logIndex: number | bigint | null
  }[],
): DepositAccountEvent[] {
  const found: DepositAccountEvent[] = []
  for (const log of logs) {
    let decoded: ReturnType<typeof decodeEventLog<typeof DepositAccount.abi>>
    try {
      decoded = decodeEventLog({
        abi: DepositAccount.abi,
        topics: log.topics as [Hex, ...Hex[]],
        data: log.data,
      })
    } catch {
      continue
    }
    const account = log.address.toLowerCase()
    const logIndex = Number(log.logIndex ?? -1)
    const token = (t: string) => (t.toLowerCase() === zeroAddress ? null : t.toLowerCase())
    if (decoded.eventName === 'Swept')
      found.push({
        kind: 'swept',
        account,
        token: token(decoded.args.token),
        to: decoded.args.to.toLowerCase(),
        amount: decoded.args.amount,
        logIndex,
      })
    else if (decoded.eventName === 'Paid')
      found.push({
        kind: 'paid',
        account,
        id: decoded.args.id,
        token: token(decoded.args.token),
        to: decoded.args.to.toLowerCase(),
        amount: decoded.args.amount,
        logIndex,
      })
  }
  return found
}

/**
 * DepositAccount's code as it stands at DEPOSIT_ACCOUNT once deployed (its own address filled into
 * the immutable the compiler leaves as zeros): for a state override where it is not deployed yet,
 * so a dry run estimates the gas of the sweep it plans.
 */
export function depositAccountCode(): Hex {
  let hex = DepositAccount.deployedBytecode.slice(2)
  const self = DEPOSIT_ACCOUNT.slice(2).toLowerCase().padStart(64, '0')
  for (const { start, length } of DepositAccount.immutables)
    hex = hex.slice(0, start * 2) + self.slice(64 - length * 2) + hex.slice((start + length) * 2)
  return `0x${hex}`
}
