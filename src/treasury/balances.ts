/**
 * `treasury balances` (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md): what sits
 * at the deposit addresses on one network right now, read on-chain (Multicall3 where the chain has
 * it, else JSON-RPC batches), per token: what a sweep may take (finished transactions, late
 * payments included), what waits for open refunds, and what belongs to transactions still open.
 */
import { formatUnits, getAddress, type Address } from 'viem'
import { tokenUsdCents } from '../lib/money.ts'
import type { Session } from './session.ts'

const FINISHED = new Set(['completed', 'failed', 'expired', 'cancelled'])

export async function showBalances(s: Session) {
  const { api, chain, network } = s
  const listed = await api.depositAddresses({ network: network.name })
  const refunds = (
    await Promise.all(
      ['pending', 'submitted', 'confirming'].map((status) =>
        api.refunds({ network: network.name, status }),
      ),
    )
  ).flat()
  const held = new Set(refunds.map((r) => `${r.deposit_address.toLowerCase()}:${r.token_symbol}`))
  const assets = network.tokens.map((t) => ({
    symbol: t.symbol,
    token: t.address as Address | null,
  }))
  const balances = await chain.balances(
    listed.map((d) => getAddress(d.address)),
    assets,
  )
  const holdings: {
    address: string
    derivation_index: number
    transaction_id: string
    transaction_status: string
    token_symbol: string
    amount: string
    amount_decimal: string
    state: string
  }[] = []
  const tokens = network.tokens.map((t) => {
    const sum = { sweepable: 0n, held_for_refunds: 0n, open_transactions: 0n, addresses: 0 }
    for (const d of listed) {
      const amount = balances.get(d.address.toLowerCase())?.get(t.symbol) ?? null
      if (!amount) continue
      const state = !FINISHED.has(d.transaction_status)
        ? 'open_transaction'
        : held.has(`${d.address.toLowerCase()}:${t.symbol}`)
          ? 'held_for_refund'
          : 'sweepable'
      if (state === 'sweepable') sum.sweepable += amount
      else if (state === 'held_for_refund') sum.held_for_refunds += amount
      else sum.open_transactions += amount
      sum.addresses++
      holdings.push({
        address: d.address,
        derivation_index: d.derivation_index,
        transaction_id: d.transaction_id,
        transaction_status: d.transaction_status,
        token_symbol: t.symbol,
        amount: amount.toString(),
        amount_decimal: formatUnits(amount, t.decimals),
        state,
      })
    }
    const total = sum.sweepable + sum.held_for_refunds + sum.open_transactions
    const cents = t.usd_price ? tokenUsdCents(total, t.decimals, t.usd_price) : null
    return {
      token_symbol: t.symbol,
      total: total.toString(),
      total_decimal: formatUnits(total, t.decimals),
      total_usd:
        cents === null ? null : `${cents / 100n}.${(cents % 100n).toString().padStart(2, '0')}`,
      sweepable: sum.sweepable.toString(),
      held_for_refunds: sum.held_for_refunds.toString(),
      open_transactions: sum.open_transactions.toString(),
      addresses: sum.addresses,
    }
  })
  return {
    result: {
      network: network.name,
      addresses_checked: listed.length,
      read_through: (await chain.hasMulticall()) ? 'Multicall3' : 'JSON-RPC batches',
      tokens,
      holdings,
    },
    complete: true,
  }
}
