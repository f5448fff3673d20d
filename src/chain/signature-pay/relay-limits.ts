/**
 * The relayer's limits (docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md), as one
 * pure judgement over what the relayer's records say of the last hour: a relay goes out only
 * while none of them is reached. Each limit bounds a different attacker:
 *
 * - the network's hourly gas: everyone together, the operator's ceiling;
 * - each project's hourly gas: one merchant's customers (or one tenant's keys) cannot spend what
 *   other projects' customers need;
 * - each payer's hourly gas: one payer cannot take its project's whole allowance;
 * - each project's failures and relays in flight: a relay counts as a possible failure from the
 *   moment it is sent until its receipt shows success, so however many fresh addresses and
 *   contracts an attacker uses at once, at most `failuresPerHour - 1 + inFlight` relays of a
 *   project revert in an hour, each costing at most the token's gas ceiling (gas-ceiling.ts);
 * - the cool-down: after a revert, the same payer, transaction and client wait an hour.
 */
import { formatEther } from 'viem'
import type { Exposure } from './relayer.repo.ts'

export interface RelayLimits {
  /** No transaction with a higher max fee per gas (RELAYER_MAX_FEE_GWEI). */
  maxFeePerGasWei: bigint
  /** Gas per network per rolling hour (RELAYER_MAX_SPEND_PER_HOUR). */
  maxSpendPerHourWei: bigint
  /** Gas per project per network per rolling hour (RELAYER_PROJECT_SPEND_PER_HOUR). */
  projectSpendPerHourWei: bigint
  /** Gas per payer per network per rolling hour (RELAYER_PAYER_SPEND_PER_HOUR). */
  payerSpendPerHourWei: bigint
  /** Reverted relays per project per network per rolling hour (RELAYER_FAILURES_PER_HOUR). */
  failuresPerHour: number
  /** Relays per project per network sent and not yet mined (RELAYER_IN_FLIGHT). */
  inFlight: number
}

/** After a reverted relay, how long its payer, transaction and client get no more. */
export const COOLDOWN_MS = 3_600_000
/** The window every spend and failure limit counts over. */
export const LIMIT_WINDOW_MS = 3_600_000

/** Why a relay may not go out now, as a metric label and a sentence for the customer. */
export interface LimitRefusal {
  reason:
    | 'cooldown'
    | 'failures'
    | 'in_flight'
    | 'network_budget'
    | 'project_budget'
    | 'payer_budget'
  message: string
}

const PAY_BY_TRANSFER = 'pay by transfer, or try again later'

/**
 * Whether a relay costing at most `maxCostWei` may go out on `network` given `e`; null when it
 * may.
 */
export function judgeRelay(
  e: Exposure,
  maxCostWei: bigint,
  limits: RelayLimits,
  network: string,
): LimitRefusal | null {
  if (e.cooling)
    return {
      reason: 'cooldown',
      message: `a payment by signature of this ${e.cooling === 'client' ? 'device' : e.cooling} failed on chain within the last hour, so the relayer sends no more for it for now; pay by transfer`,
    }
  if (e.projectFailures >= limits.failuresPerHour)
    return {
      reason: 'failures',
      message: `payments by signature of this merchant failed on chain ${e.projectFailures} times within the last hour on ${network}, so the relayer is paused for it there; ${PAY_BY_TRANSFER}`,
    }
  if (e.projectInFlight >= limits.inFlight)
    return {
      reason: 'in_flight',
      message: `this merchant has ${e.projectInFlight} payments by signature waiting to be mined on ${network}; try again in a moment, or pay by transfer`,
    }
  const over = (spent: bigint, cap: bigint) => spent + maxCostWei > cap
  if (over(e.networkSpent, limits.maxSpendPerHourWei))
    return {
      reason: 'network_budget',
      message: `the relayer has spent its gas allowance for this hour on ${network}; ${PAY_BY_TRANSFER}`,
    }
  if (over(e.projectSpent, limits.projectSpendPerHourWei))
    return {
      reason: 'project_budget',
      message: `the relayer has spent this merchant's gas allowance for this hour on ${network} (${formatEther(limits.projectSpendPerHourWei)}); ${PAY_BY_TRANSFER}`,
    }
  if (over(e.payerSpent, limits.payerSpendPerHourWei))
    return {
      reason: 'payer_budget',
      message: `the relayer has spent this payer's gas allowance for this hour on ${network}; ${PAY_BY_TRANSFER}`,
    }
  return null
}

/** The most relays of one project on one network that can revert in one hour under `limits`. */
export const worstFailuresPerHour = (limits: Pick<RelayLimits, 'failuresPerHour' | 'inFlight'>) =>
  limits.failuresPerHour - 1 + limits.inFlight
