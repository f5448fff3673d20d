/**
 * A signed transaction as the treasury tool records it before sending it
 * (docs/decisions/0040-the-service-records-only-what-it-verifies.md): the service reads what it
 * does from the transaction itself (who signed it, its nonce, its target and data), so what is
 * recorded can never disagree with what is sent.
 */
import {
  decodeFunctionData,
  erc20Abi,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  zeroAddress,
  type Address,
  type Hex,
  type SignedAuthorization,
  type TransactionSerialized,
} from 'viem'
import { DepositAccount } from './artifacts/index.ts'

export interface SignedTransaction {
  /** Lowercase, as the chain's receipts name it. */
  hash: string
  /** Who signed it (lowercase). */
  from: string
  nonce: number
  chainId: number
  /** Lowercase; null for a contract creation. */
  to: string | null
  value: bigint
  data: Hex
  /** The contracts its EIP-7702 authorizations delegate to (lowercase); empty for another type. */
  delegatesTo: string[]
  /** Its EIP-7702 authorizations as signed (empty for another type). */
  authorizations: SignedAuthorization[]
  /** 0 legacy, 1 EIP-2930, 2 EIP-1559, 4 EIP-7702 (others are refused). */
  type: 0 | 1 | 2 | 4
  gas: bigint
  /** The most it may pay per gas: `gasPrice` for a legacy transaction, `maxFeePerGas` otherwise. */
  maxFeePerGas: bigint
}

/** The signed transaction `raw` is, or why it is not one. */
export async function readSignedTransaction(
  raw: string,
): Promise<{ ok: true; tx: SignedTransaction } | { ok: false; message: string }> {
  if (!/^0x[0-9a-fA-F]+$/.test(raw) || raw.length % 2 !== 0)
    return { ok: false, message: 'must be the 0x-prefixed hex of a signed transaction' }
  const serialized = raw.toLowerCase() as TransactionSerialized
  try {
    const parsed = parseTransaction(serialized)
    if (parsed.chainId === undefined || parsed.nonce === undefined)
      return {
        ok: false,
        message: 'must name its chain and nonce (EIP-155 or a typed transaction)',
      }
    if (!('r' in parsed) || parsed.r === undefined) return { ok: false, message: 'is not signed' }
    const type = TYPES[parsed.type ?? '']
    if (type === undefined)
      return {
        ok: false,
        message: `is a ${parsed.type} transaction; the treasury sends legacy, EIP-1559 and EIP-7702 ones only`,
      }
    const from = await recoverTransactionAddress({ serializedTransaction: serialized as never })
    const authorizations =
      'authorizationList' in parsed && parsed.authorizationList
        ? (parsed.authorizationList as SignedAuthorization[])
        : []
    return {
      ok: true,
      tx: {
        hash: keccak256(serialized),
        from: from.toLowerCase(),
        nonce: parsed.nonce,
        chainId: parsed.chainId,
        to: parsed.to ? parsed.to.toLowerCase() : null,
        value: parsed.value ?? 0n,
        data: parsed.data ?? '0x',
        delegatesTo: authorizations.map((a) => a.address.toLowerCase()),
        authorizations,
        type,
        gas: parsed.gas ?? 0n,
        maxFeePerGas:
          ('maxFeePerGas' in parsed ? parsed.maxFeePerGas : undefined) ??
          ('gasPrice' in parsed ? parsed.gasPrice : undefined) ??
          0n,
      },
    }
  } catch (e) {
    return {
      ok: false,
      message: `is not a valid signed transaction (${e instanceof Error ? e.message.split('\n')[0] : String(e)})`,
    }
  }
}

const TYPES: Record<string, SignedTransaction['type']> = {
  legacy: 0,
  eip2930: 1,
  eip1559: 2,
  eip7702: 4,
}

/**
 * What a transaction's call pays out, as far as its data says: a DepositAccount `pay`, an ERC-20
 * transfer, or plain native coin.
 */
export type Payout =
  | {
      kind: 'deposit-account'
      account: string
      id: Hex
      token: string | null
      to: string
      amount: bigint
      deadline: bigint
      signature: Hex
    }
  | { kind: 'erc20'; token: string; to: string; amount: bigint }
  | { kind: 'native'; to: string; amount: bigint }

export function payoutOf(tx: Pick<SignedTransaction, 'to' | 'value' | 'data'>): Payout | null {
  if (!tx.to) return null
  if (tx.data === '0x')
    return tx.value > 0n ? { kind: 'native', to: tx.to, amount: tx.value } : null
  try {
    const call = decodeFunctionData({ abi: DepositAccount.abi, data: tx.data })
    if (call.functionName === 'pay' && tx.value === 0n) {
      const [id, token, to, amount, deadline, signature] = call.args
      return {
        kind: 'deposit-account',
        account: tx.to,
        id,
        token: token.toLowerCase() === zeroAddress ? null : token.toLowerCase(),
        to: to.toLowerCase(),
        amount,
        deadline,
        signature,
      }
    }
    return null
  } catch {}
  try {
    const call = decodeFunctionData({ abi: erc20Abi, data: tx.data })
    if (call.functionName === 'transfer' && tx.value === 0n)
      return {
        kind: 'erc20',
        token: tx.to,
        to: (call.args[0] as Address).toLowerCase(),
        amount: call.args[1] as bigint,
      }
  } catch {}
  return null
}

/**
 * One signed sweep in a DepositAccount `batch`: the deposit address, where it sweeps to, what, and
 * its signature.
 */
export interface SignedSweep {
  account: string
  to: string
  tokens: string[]
  native: boolean
  nonce: bigint
  deadline: bigint
  signature: Hex
}

/**
 * The sweeps a DepositAccount `batch` transaction makes: each deposit address and where it sweeps
 * to. Null for anything else.
 */
export function sweepsOf(tx: Pick<SignedTransaction, 'data' | 'value'>): SignedSweep[] | null {
  if (tx.value !== 0n) return null
  try {
    const call = decodeFunctionData({ abi: DepositAccount.abi, data: tx.data })
    if (call.functionName !== 'batch') return null
    const out: SignedSweep[] = []
    for (const c of call.args[0]) {
      const inner = decodeFunctionData({ abi: DepositAccount.abi, data: c.data })
      if (inner.functionName !== 'sweep') return null
      const [to, tokens, native, nonce, deadline, signature] = inner.args
      out.push({
        account: c.account.toLowerCase(),
        to: to.toLowerCase(),
        tokens: tokens.map((t) => t.toLowerCase()),
        native,
        nonce,
        deadline,
        signature,
      })
    }
    return out
  } catch {
    return null
  }
}

/**
 * Until when the signatures a transaction carries hold (the earliest, for a batch): DepositAccount
 * refuses a `sweep` or `pay` in a block past it. Null when nothing in it expires (a plain
 * transfer).
 */
export function signaturesHoldUntil(
  tx: Pick<SignedTransaction, 'to' | 'value' | 'data'>,
): bigint | null {
  const payout = payoutOf(tx)
  if (payout?.kind === 'deposit-account') return payout.deadline
  const sweeps = sweepsOf(tx)
  if (!sweeps?.length) return null
  return sweeps.reduce((min, w) => (w.deadline < min ? w.deadline : min), sweeps[0]!.deadline)
}
