/**
 * `treasury sweep` (docs/decisions/0039-sweeps-by-eip-7702-or-top-up.md): moves what sits at the
 * deposit addresses of finished transactions to the merchant's treasury, gas paid by the merchant's
 * gas account, no key ever leaving this machine.
 *
 * How (EIP-7702): each deposit address's own key signs, here, an authorization to run
 * DepositAccount's code (once per address) and an EIP-712 "sweep to this treasury" message; the
 * gas account sends one transaction per batch of addresses to DepositAccount's `batch`, which
 * calls each address's `sweep`. Nobody tops up gas at the deposit addresses: no second
 * transaction per address, no native dust left behind for gas, and native coin is swept to the
 * last wei.
 *
 * Idempotent and resumable: every batch is recorded through the API (signed, as it will be sent)
 * before it is sent. A run starts by settling what an earlier run recorded: mined, it is done;
 * not known to the node and its nonce still free, the very same transaction is sent again (its
 * nonce means it can be mined once at most); its nonce used by another, it can never be mined.
 * It then waits until the gas account has nothing in flight, and plans from what the chain holds
 * now, so an address already swept is skipped and nothing is paid twice.
 */
import {
  decodeFunctionResult,
  formatUnits,
  getAddress,
  type Address,
  type Hex,
  type SignedAuthorization,
} from 'viem'
import { DepositAccount } from '../chain/artifacts/index.ts'
import {
  batchData,
  CREATE2_DEPLOYER,
  DEPLOY_DATA,
  DEPOSIT_ACCOUNT,
  delegatesToDepositAccount,
  delegatesToEarlierDepositAccount,
  delegationOf,
  depositAccountCode,
  depositAccountEvents,
  sweepData,
  sweepTypedData,
} from '../chain/deposit-account.ts'
import {
  deployDepositAccount,
  depositAccountDeployed,
  feesNow,
  sendAndWait,
  seeThrough,
  withGasMargin,
} from './sending.ts'
import { tokenUsdCents } from '../lib/money.ts'
import type { ApiDepositAddress, ApiNetwork } from './api.ts'
import { moneyOutRoute } from './route.ts'
import { Refused, type Session } from './session.ts'
import { sweepByTopUp } from './sweep-top-up.ts'

/**
 * Final statuses: a deposit address of an open transaction is never touched (its payments are still
 * being counted).
 */
const FINISHED = new Set(['completed', 'failed', 'expired', 'cancelled'])
/**
 * How long the sweep signatures hold: a recorded batch sent again later than this moves nothing and
 * is planned afresh.
 */
const SIGNATURE_LIFETIME_S = 3600n
/** A batch whose signatures would hold less than this when it is sent is signed again first. */
const RESIGN_MARGIN_S = 600n

export interface SweepOptions {
  to: Address
  /** Only these token symbols (null: every token of the network). */
  tokens: readonly string[] | null
  /**
   * What an asset at one address must be worth to be swept, in USD cents (0: anything above zero).
   */
  minUsdCents: bigint
  dryRun: boolean
  batchSize: number
  /** How long to wait for each transaction to be mined. */
  receiptTimeoutMs: number
}

interface PlannedAsset {
  symbol: string
  token: Address | null
  amount: bigint
  decimals: number
  usdCents: bigint | null
}

interface Candidate {
  deposit: ApiDepositAddress
  address: Address
  assets: PlannedAsset[]
  /** Its code delegates to DepositAccount already: no authorization needed. */
  delegated: boolean
  nonce: number
  /**
   * The nonce its sweep signature names (DepositAccount's, in its own storage): a signature is good
   * for one sweep.
   */
  sweepNonce: bigint
}

const usd = (cents: bigint | null) =>
  cents === null ? null : `${cents / 100n}.${(cents % 100n).toString().padStart(2, '0')}`

export async function runSweep(s: Session, o: SweepOptions) {
  const { api, chain, network } = s
  const keys = s.keys!
  const sponsor = s.sponsor
  if (!o.dryRun && !sponsor)
    throw new Refused('--gas-key-file is required to sweep (a dry run can do without it)', true)
  const result: Record<string, unknown> = {
    network: network.name,
    to: o.to,
    dry_run: o.dryRun,
    deposit_account: DEPOSIT_ACCOUNT,
  }

  // 1. What an earlier run recorded and may not have seen through (a dry run says what it would do).
  const resumed = await resume(s, o)
  result.resumed = resumed
  const resumeFailed = resumed.some((r) => r.outcome.startsWith('failed'))
  if (!o.dryRun) {
    if (!(await chain.settled(sponsor!.address, o.receiptTimeoutMs))) {
      throw new Refused(
        `the gas account ${sponsor!.address} has transactions in flight that are not mined after ${o.receiptTimeoutMs / 1000} s: run again once they are`,
      )
    }
  }

  // 2. Which deposit addresses may hold something on this network, and what they hold now.
  const listed = await api.depositAddresses({ network: network.name })
  const skipped: { address: string; reason: string }[] = []
  const held = await heldForRefunds(s)
  const selected = new Set(
    network.tokens
      .filter((t) => o.tokens === null || o.tokens.includes(t.symbol))
      .map((t) => t.symbol),
  )
  // Every asset is read, so what is not swept (another token, or below --min-usd) is reported as
  // left behind.
  const readAssets = network.tokens.map((t) => ({
    symbol: t.symbol,
    token: t.address as Address | null,
    decimals: t.decimals,
    usdPrice: t.usd_price,
  }))
  const finished: { deposit: ApiDepositAddress; address: Address }[] = []
  for (const d of listed) {
    if (!FINISHED.has(d.transaction_status)) {
      skipped.push({
        address: d.address,
        reason: `its transaction is still ${d.transaction_status}`,
      })
      continue
    }
    const derived = keys.account(d.derivation_index).address
    if (derived.toLowerCase() !== d.address.toLowerCase()) {
      skipped.push({
        address: d.address,
        reason: `the key does not derive it at index ${d.derivation_index}`,
      })
      continue
    }
    finished.push({ deposit: d, address: getAddress(d.address) })
  }
  const balances = await chain.balances(
    finished.map((f) => f.address),
    readAssets,
  )
  const dust: {
    address: string
    token_symbol: string
    amount: string
    amount_decimal: string
    usd: string | null
  }[] = []
  const heldOut: { address: string; token_symbol: string; amount: string; refunds: string[] }[] = []
  const planned: Omit<Candidate, 'delegated' | 'nonce' | 'sweepNonce'>[] = []
  for (const f of finished) {
    const bal = balances.get(f.address.toLowerCase())
    const take: PlannedAsset[] = []
    for (const a of readAssets) {
      const amount = bal?.get(a.symbol) ?? null
      if (amount === null || amount === 0n) continue
      const cents = a.usdPrice === null ? null : tokenUsdCents(amount, a.decimals, a.usdPrice)
      const refunds = held.get(`${f.address.toLowerCase()}:${a.symbol}`)
      if (refunds) {
        heldOut.push({
          address: f.address,
          token_symbol: a.symbol,
          amount: amount.toString(),
          refunds,
        })
        continue
      }
      const wanted =
        selected.has(a.symbol) &&
        (o.minUsdCents === 0n || (cents !== null && cents >= o.minUsdCents))
      if (!wanted) {
        dust.push({
          address: f.address,
          token_symbol: a.symbol,
          amount: amount.toString(),
          amount_decimal: formatUnits(amount, a.decimals),
          usd: usd(cents),
        })
        continue
      }
      take.push({ symbol: a.symbol, token: a.token, amount, decimals: a.decimals, usdCents: cents })
    }
    if (take.length) planned.push({ ...f, assets: take })
  }

  const route = await moneyOutRoute(s)
  result.route = route.route
  result.route_detail = route.detail
  if (route.route === 'top-up') {
    const nativeAsset = readAssets.find((a) => a.token === null)
    const failed: { address: string; reason: string }[] = []
    const topped = await sweepByTopUp(
      s,
      o,
      planned.map((p) => ({
        address: p.address,
        derivationIndex: p.deposit.derivation_index,
        transactionId: p.deposit.transaction_id,
        assets: p.assets,
        native: nativeAsset
          ? (balances.get(p.address.toLowerCase())?.get(nativeAsset.symbol) ?? 0n)
          : 0n,
        nativeHeld: !!nativeAsset && held.has(`${p.address.toLowerCase()}:${nativeAsset.symbol}`),
      })),
      { failed, skipped },
    )
    Object.assign(result, {
      addresses_checked: listed.length,
      ...topped,
      dust,
      held_for_refunds: heldOut,
      skipped,
      failed,
    })
    return { result, complete: failed.length === 0 && !resumeFailed }
  }

  // 3. Delegations: an address delegating elsewhere (another wallet's code) is left alone; one
  // delegating to DepositAccount's earlier version is delegated to the current one.
  const accounts = await chain.accounts(planned.map((p) => p.address))
  const sweepNonces = await chain.sweepNonces(planned.map((p) => p.address))
  const candidates: Candidate[] = []
  for (const p of planned) {
    const a = accounts.get(p.address.toLowerCase())!
    const other = delegationOf(a.code)
    if (
      a.code &&
      a.code !== '0x' &&
      !delegatesToDepositAccount(a.code) &&
      !delegatesToEarlierDepositAccount(a.code)
    ) {
      skipped.push({
        address: p.address,
        reason: other
          ? `it delegates to another contract (${other}); not touched`
          : 'it has contract code; not touched',
      })
      continue
    }
    candidates.push({
      ...p,
      delegated: delegatesToDepositAccount(a.code),
      nonce: a.nonce,
      sweepNonce: sweepNonces.get(p.address.toLowerCase()) ?? 0n,
    })
  }

  const deployed = await depositAccountDeployed(chain)
  result.deposit_account_deployed = deployed
  const head = await chain.client.getBlock({ blockTag: 'latest' })
  const deadline = head.timestamp + SIGNATURE_LIFETIME_S
  const sender = sponsor?.address ?? ('0x0000000000000000000000000000000000000001' as Address)
  const override = deployed ? undefined : [{ address: DEPOSIT_ACCOUNT, code: depositAccountCode() }]

  // 4. Batches: signed here, simulated (a call that would fail is left out and reported), estimated.
  const failed: { address: string; reason: string }[] = []
  const batches: {
    members: Candidate[]
    data: Hex
    authorizationList: SignedAuthorization[]
    gas: bigint
  }[] = []
  const queue: Candidate[][] = []
  for (let i = 0; i < candidates.length; i += o.batchSize)
    queue.push(candidates.slice(i, i + o.batchSize))
  while (queue.length) {
    let members = queue.shift()!
    for (let attempt = 0; attempt < 2 && members.length; attempt++) {
      const built = await buildBatch(s, members, o.to, deadline)
      // Its record must fit the API's request body: a batch of addresses with many tokens is
      // halved.
      if (members.length > 1 && recordBytes(built, members) > RECORD_BYTES) {
        queue.unshift(
          members.slice(0, Math.ceil(members.length / 2)),
          members.slice(Math.ceil(members.length / 2)),
        )
        break
      }
      // A type-4 transaction must authorize something: addresses delegating already need none.
      const request = {
        account: sender,
        to: DEPOSIT_ACCOUNT,
        data: built.data,
        stateOverride: override,
        ...(built.authorizationList.length ? { authorizationList: built.authorizationList } : {}),
      }
      const { data } = await chain.client.call(request)
      const ok = decodeFunctionResult({
        abi: DepositAccount.abi,
        functionName: 'batch',
        data: data!,
      }) as readonly boolean[]
      const bad = members.filter((_, k) => !ok[k])
      if (bad.length === 0) {
        const gas = await chain.client.estimateGas(request)
        batches.push({ members, ...built, gas: withGasMargin(gas) })
        break
      }
      for (const b of bad)
        failed.push({
          address: b.address,
          reason:
            'its sweep call would revert (a token refusing the transfer, or the treasury refusing the native coin)',
        })
      members = members.filter((_, k) => ok[k])
    }
  }

  const fees = await feesNow(chain)
  const deployGas = deployed
    ? 0n
    : withGasMargin(
        await chain.client.estimateGas({
          account: sender,
          to: CREATE2_DEPLOYER,
          data: DEPLOY_DATA,
        }),
      )
  const totalGas = batches.reduce((a, b) => a + b.gas, deployGas)
  const native = network.tokens.find((t) => t.native)
  const maxFee = totalGas * fees.maxFeePerGas
  result.addresses_checked = listed.length
  result.plan = batches
    .flatMap((b) => b.members)
    .map((c) => ({
      address: c.address,
      derivation_index: c.deposit.derivation_index,
      transaction_id: c.deposit.transaction_id,
      assets: c.assets.map((a) => ({
        token_symbol: a.symbol,
        amount: a.amount.toString(),
        amount_decimal: formatUnits(a.amount, a.decimals),
        usd: usd(a.usdCents),
      })),
    }))
  result.totals = totals(
    batches.flatMap((b) => b.members),
    network,
  )
  result.estimated = {
    batches: batches.length,
    deploy_deposit_account: !deployed,
    gas: totalGas.toString(),
    max_fee_per_gas: fees.maxFeePerGas.toString(),
    max_fee: maxFee.toString(),
    max_fee_decimal: formatUnits(maxFee, native?.decimals ?? 18),
    max_fee_usd: native?.usd_price
      ? usd(tokenUsdCents(maxFee, native.decimals, native.usd_price))
      : null,
  }
  result.dust = dust
  result.held_for_refunds = heldOut
  result.skipped = skipped
  result.failed = failed
  if (o.dryRun || batches.length === 0) {
    result.sweeps = []
    return { result, complete: failed.length === 0 && !resumeFailed }
  }

  // 5. Send: the gas account must cover the worst case before anything goes.
  const balance = await chain.client.getBalance({ address: sponsor!.address })
  if (balance < maxFee) {
    throw new Refused(
      `the gas account ${sponsor!.address} holds ${formatUnits(balance, native?.decimals ?? 18)} ${native?.symbol ?? ''}; this sweep may cost up to ${formatUnits(maxFee, native?.decimals ?? 18)}. Nothing was sent`,
    )
  }
  let nonce = await chain.client.getTransactionCount({
    address: sponsor!.address,
    blockTag: 'latest',
  })
  const base = { chainId: network.chain_id, ...fees }
  if (!deployed)
    await deployDepositAccount(chain, sponsor!, {
      ...base,
      nonce: nonce++,
      gas: deployGas,
      timeoutMs: o.receiptTimeoutMs,
    })
  const sent: Record<string, unknown>[] = []
  let holdsUntil = deadline
  for (const b of batches) {
    // Many batches take long to send (one per block): one whose signatures would hold less than ten
    // more minutes is signed again, so none is sent to move nothing.
    const now = (await chain.client.getBlock({ blockTag: 'latest' })).timestamp
    if (now + RESIGN_MARGIN_S > holdsUntil) {
      holdsUntil = now + SIGNATURE_LIFETIME_S
      Object.assign(b, await buildBatch(s, b.members, o.to, holdsUntil))
    }
    const raw = await sponsor!.signTransaction({
      ...base,
      nonce: nonce++,
      to: DEPOSIT_ACCOUNT,
      data: b.data,
      gas: b.gas,
      ...(b.authorizationList.length
        ? { type: 'eip7702' as const, authorizationList: b.authorizationList }
        : { type: 'eip1559' as const }),
    })
    // Recorded before it is sent: a run killed in between finds it, and sends the very same
    // transaction.
    const record = await api.recordSweep({
      blockchain_network: network.name,
      raw_transaction: raw,
      items: b.members.flatMap((m) =>
        m.assets.map((a) => ({
          address: m.address,
          token_symbol: a.symbol,
          amount: a.amount.toString(),
        })),
      ),
    })
    const receipt = await sendAndWait(chain, raw, o.receiptTimeoutMs, `sweep ${record.id}`)
    const events = depositAccountEvents(receipt.logs)
    const moved = new Set(events.map((e) => e.account))
    for (const m of b.members)
      if (!moved.has(m.address.toLowerCase()))
        failed.push({ address: m.address, reason: `nothing moved in ${record.id}` })
    const fee = receipt.gasUsed * receipt.effectiveGasPrice
    sent.push({
      sweep_id: record.id,
      transaction_hash: receipt.transactionHash,
      status: receipt.status,
      addresses: b.members.length,
      gas_used: receipt.gasUsed.toString(),
      fee: fee.toString(),
      fee_decimal: formatUnits(fee, native?.decimals ?? 18),
    })
  }
  result.sweeps = sent
  return { result, complete: failed.length === 0 && !resumeFailed }
}

/** The API takes request bodies up to 64 KiB; a sweep's record is kept under this. */
const RECORD_BYTES = 60_000

/**
 * About how large a batch's record will be: its signed transaction in hex (its data, each
 * authorization, the envelope) and its items.
 */
const recordBytes = (
  built: { data: Hex; authorizationList: readonly unknown[] },
  members: readonly Candidate[],
) =>
  built.data.length +
  built.authorizationList.length * 240 +
  400 +
  members.reduce((a, m) => a + m.assets.length * 130, 0)

/**
 * Signs each member's authorization (if not delegated yet) and sweep message with its own key, and
 * packs them into one `batch` call.
 */
async function buildBatch(s: Session, members: Candidate[], to: Address, deadline: bigint) {
  const chainId = s.network.chain_id
  const authorizationList: SignedAuthorization[] = []
  const calls: { account: Address; data: Hex }[] = []
  for (const m of members) {
    const account = s.keys!.account(m.deposit.derivation_index)
    if (!m.delegated)
      authorizationList.push(
        await account.signAuthorization!({
          contractAddress: DEPOSIT_ACCOUNT,
          chainId,
          nonce: m.nonce,
        }),
      )
    const tokens = m.assets.flatMap((a) => (a.token ? [a.token] : []))
    const native = m.assets.some((a) => a.token === null)
    const nonce = m.sweepNonce
    const signature = await account.signTypedData(
      sweepTypedData({
        chainId,
        account: m.address,
        to,
        tokens,
        native,
        nonce,
        deadline,
      }) as Parameters<typeof account.signTypedData>[0],
    )
    calls.push({
      account: m.address,
      data: sweepData({ to, tokens, native, nonce, deadline, signature }),
    })
  }
  return { data: batchData(calls), authorizationList }
}

/**
 * Sees through what earlier runs recorded and the service has not seen in a block (sending.ts
 * `seeThrough`).
 */
async function resume(s: Session, o: SweepOptions) {
  const out: { sweep_id: string; transaction_hash: string; outcome: string }[] = []
  for (const w of await s.api.sweeps({ network: s.network.name, status: 'submitted' })) {
    try {
      const outcome = await seeThrough(s.chain, s.sponsor, w.raw_transaction as Hex, {
        chainId: s.network.chain_id,
        dryRun: o.dryRun,
        timeoutMs: o.receiptTimeoutMs,
        what: `sweep ${w.id}`,
      })
      out.push({ sweep_id: w.id, transaction_hash: w.transaction_hash, outcome })
    } catch (e) {
      // One that cannot be seen through now is said; the run goes on (its addresses are planned
      // from the chain as it is).
      out.push({
        sweep_id: w.id,
        transaction_hash: w.transaction_hash,
        outcome: `failed: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`,
      })
    }
  }
  return out
}

/**
 * `address:SYMBOL` -> the open refunds that will pay from it: a sweep leaves those funds where they
 * are.
 */
async function heldForRefunds(s: Session): Promise<Map<string, string[]>> {
  const held = new Map<string, string[]>()
  for (const status of ['pending', 'submitted', 'confirming']) {
    for (const r of await s.api.refunds({ network: s.network.name, status })) {
      const key = `${r.deposit_address.toLowerCase()}:${r.token_symbol}`
      held.set(key, [...(held.get(key) ?? []), r.id])
    }
  }
  return held
}

function totals(members: Candidate[], network: ApiNetwork) {
  return network.tokens.flatMap((t) => {
    let amount = 0n
    let cents: bigint | null = 0n
    for (const m of members)
      for (const a of m.assets)
        if (a.symbol === t.symbol) {
          amount += a.amount
          cents = cents === null || a.usdCents === null ? null : cents + a.usdCents
        }
    return amount === 0n
      ? []
      : [
          {
            token_symbol: t.symbol,
            amount: amount.toString(),
            amount_decimal: formatUnits(amount, t.decimals),
            usd: usd(cents),
          },
        ]
  })
}
