import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { migrationState, ping, type Database } from '../db/client.ts'
import type { ChainWatcher } from '../chain/chain-watcher.ts'
import { describeHalt } from '../chain/follower/cursor.ts'
import type { Verdict } from '../chain/network-verification.ts'
import { formatEther } from 'viem'
import { errorSummary } from '../lib/logger.ts'

/**
 * One readiness check: its name, whether it passed, and what an operator should read. A warning
 * passes (taking the instance out of a balancer would not help) but wants an operator soon.
 */
export interface Check {
  name: string
  ok: boolean
  detail: string
  warning?: true
}

export interface ReadinessReport {
  ready: boolean
  checks: Check[]
}

/** The report as GET /readyz and `cli status` show it: which checks failed and which warn. */
export function readinessBody(report: ReadinessReport) {
  return {
    status: report.ready ? 'ready' : 'not_ready',
    failed: report.checks.filter((c) => !c.ok).map((c) => c.name),
    warnings: report.checks.filter((c) => c.warning).map((c) => c.name),
    checks: report.checks,
  }
}

/**
 * READY_CHAIN_MAX_LAG's default: a follower not in step with the head for this long makes the
 * instance unready.
 */
export const DEFAULT_CHAIN_MAX_LAG_MS = 120_000
/** A database that takes longer than this to answer `SELECT 1` is as good as away. */
const DATABASE_TIMEOUT_MS = 2_000

/** `p`, or a rejection naming `what` once `ms` have passed; the timer goes with the answer. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    return await Promise.race([
      p,
      new Promise<T>(
        (_, reject) =>
          (timer = setTimeout(
            () => reject(new Error(`${what} did not answer within ${ms} ms`)),
            ms,
          )),
      ),
    ])
  } finally {
    clearTimeout(timer)
  }
}
const seconds = (ms: number) => `${Math.round(ms / 1000)} s`
/** How money leaves the network's deposit addresses, as its node answered when it was verified. */
const moneyOut = (v: Verdict | undefined) =>
  v?.status !== 'verified'
    ? ''
    : v.eip7702.supported
      ? '; money out through EIP-7702'
      : '; money out by top-up (no EIP-7702 on this chain)'

/**
 * Readiness (docs/decisions/0047-metrics-and-probes.md): the checks a balancer and an operator
 * read. The database answers, its migrations are those of this code, DATA_DIR takes writes, and
 * every network is followed by an instance whose follower was in step with the head within
 * `maxChainLagMs` (checked where it runs; elsewhere, that a live instance follows it). A graceful
 * stop makes it fail first, so a balancer drains the instance before it closes. Nothing secret is
 * in a check's detail.
 */
export function createReadiness(deps: {
  database: Pick<Database, 'rows'>
  chain: Pick<ChainWatcher, 'networks' | 'followerStatus' | 'followers' | 'verdicts' | 'rates'>
  dataDir: string | null
  maxChainLagMs: number
  instanceId: string
  /** The relayer's balances and the level below which they warn (null: no relayer). */
  relayer?: {
    balances(): Promise<{ network: string; wei: bigint | null }[]>
    minBalanceWei: bigint
  } | null
}) {
  let stopping = false

  async function check(name: string, run: () => Promise<string>): Promise<Check> {
    try {
      return { name, ok: true, detail: await run() }
    } catch (e) {
      return { name, ok: false, detail: errorSummary(e) }
    }
  }

  async function chainChecks(): Promise<Check[]> {
    if (deps.chain.networks.length === 0) return []
    const here = deps.chain.followerStatus()
    const recorded = here.some((h) => h.status === null)
      ? await within(deps.chain.followers(), DATABASE_TIMEOUT_MS, 'the database').catch(() => null)
      : []
    const now = Date.now()
    const verdicts = new Map(deps.chain.verdicts().map((v) => [v.network, v]))
    return here.map(({ network, status }): Check => {
      const name = `chain:${network}`
      const verdict = verdicts.get(network)
      if (verdict?.status === 'mismatch')
        return {
          name,
          ok: false,
          detail: `not followed: the chain disagrees with the config: ${verdict.problems.join('; ')}`,
        }
      if (verdict?.status === 'unreachable')
        return {
          name,
          ok: false,
          detail: `not followed yet: not verified against its chain, the RPC does not answer (${verdict.error})`,
        }
      if (status?.replaced) {
        return {
          name,
          ok: false,
          detail: `the RPC serves another chain (genesis ${status.replaced.found}, the one followed has ${status.replaced.expected}): not followed until it serves that chain again, or its position is forgotten (npm run cli -- network forget --network ${network})`,
        }
      }
      // A halt fails the check on every instance: the network's payments are stuck until an
      // operator acts.
      if (status?.halted)
        return { name, ok: false, detail: `followed here, ${describeHalt(network, status.halted)}` }
      if (status) {
        const behind = now - status.inStepAt
        const blocks =
          status.head !== null && status.synced !== null ? status.head - status.synced : null
        const position = `head ${status.head ?? 'unknown'}, processed ${status.synced ?? 'none'}${moneyOut(verdict)}`
        if (behind <= deps.maxChainLagMs)
          return { name, ok: true, detail: `followed here; ${position}` }
        const why = status.lastError
          ? `the RPC fails (${status.failures} in a row: ${status.lastError})`
          : `${blocks ?? '?'} blocks behind`
        return {
          name,
          ok: false,
          detail: `followed here, not in step with the head for ${seconds(behind)} (limit ${seconds(deps.maxChainLagMs)}): ${why}; ${position}`,
        }
      }
      if (recorded === null)
        return {
          name,
          ok: false,
          detail: 'cannot tell who follows it: the database does not answer',
        }
      const follower = recorded.find((r) => r.network === network)
      if (follower?.halted)
        return {
          name,
          ok: false,
          detail: `${follower.live ? `followed by instance ${follower.owner}, ` : 'no live instance follows it; '}${describeHalt(network, follower.halted)}`,
        }
      return follower?.live
        ? { name, ok: true, detail: `followed by instance ${follower.owner}${moneyOut(verdict)}` }
        : { name, ok: false, detail: 'no live instance follows it' }
    })
  }

  /**
   * The relayer's balance per network (docs/decisions/0062-pay-by-signature.md): a warning below
   * RELAYER_MIN_BALANCE, since payments by signature stop once it cannot pay their gas; paying by
   * transfer goes on, so the instance stays ready.
   */
  async function relayerChecks(): Promise<Check[]> {
    const relayer = deps.relayer
    if (!relayer) return []
    const balances = await within(relayer.balances(), DATABASE_TIMEOUT_MS, 'the nodes').catch(
      () => null,
    )
    if (!balances)
      return [
        {
          name: 'relayer',
          ok: true,
          warning: true,
          detail: 'balances unknown: the nodes do not answer',
        },
      ]
    return balances.map(({ network, wei }): Check => {
      const name = `relayer:${network}`
      if (wei === null)
        return {
          name,
          ok: true,
          warning: true,
          detail: 'balance unknown: the node does not answer',
        }
      const held = `holds ${formatEther(wei)} of the native coin`
      return wei < relayer.minBalanceWei
        ? {
            name,
            ok: true,
            warning: true,
            detail: `${held}, below RELAYER_MIN_BALANCE (${formatEther(relayer.minBalanceWei)}): fund it, or payments by signature stop when it cannot pay their gas`,
          }
        : { name, ok: true, detail: held }
    })
  }

  /**
   * Each fiat currency's USD rate (docs/decisions/0064-priced-in-the-merchants-currency.md): a
   * warning when its last answer is not current, since creating and quoting transactions in that
   * currency is then refused with 503; USD and every other currency go on, so the instance stays
   * ready.
   */
  function rateChecks(): Check[] {
    return deps.chain.rates.status().map((r): Check => {
      const name = `rate:${r.mode}:${r.currency}`
      if (r.current)
        return { name, ok: true, detail: `round ${Math.round(r.roundAgeSeconds!)} s old` }
      return {
        name,
        ok: true,
        warning: true,
        detail: `${
          r.problem ??
          (r.readAgoSeconds === null
            ? 'not read yet'
            : `last read ${Math.round(r.readAgoSeconds)} s ago, its round ${Math.round(r.roundAgeSeconds!)} s old`)
        }: ${r.currency} transactions of ${r.mode} mode are refused with 503 until its feed answers fresh`,
      }
    })
  }

  return {
    /** The graceful stop began: readiness fails from now on. */
    beginStop() {
      stopping = true
    },
    get stopping() {
      return stopping
    },

    async report(): Promise<ReadinessReport> {
      const checks: Check[] = []
      if (stopping)
        checks.push({
          name: 'stopping',
          ok: false,
          detail: 'this instance is stopping; send new requests elsewhere',
        })
      const database = await check('database', async () => {
        const started = performance.now()
        await within(ping(deps.database), DATABASE_TIMEOUT_MS, 'the database')
        return `answers in ${Math.round(performance.now() - started)} ms`
      })
      checks.push(database)
      checks.push(
        database.ok
          ? await check('migrations', async () => {
              const m = await within(
                migrationState(deps.database),
                DATABASE_TIMEOUT_MS,
                'the database',
              )
              if (m.applied < m.expected)
                throw new Error(
                  `${m.applied} of this version's ${m.expected} migrations applied; restart an instance to apply them`,
                )
              return `${m.applied} applied`
            })
          : { name: 'migrations', ok: false, detail: 'unknown: the database does not answer' },
      )
      if (deps.dataDir !== null) {
        const dir = deps.dataDir
        checks.push(
          await check('data_dir', async () => {
            const probe = join(dir, 'run', `ready-${deps.instanceId}`)
            mkdirSync(join(dir, 'run'), { recursive: true, mode: 0o700 })
            writeFileSync(probe, String(Date.now()))
            rmSync(probe)
            return 'writable'
          }),
        )
      }
      checks.push(...(await chainChecks()), ...(await relayerChecks()), ...rateChecks())
      return { ready: checks.every((c) => c.ok), checks }
    },
  }
}

export type Readiness = ReturnType<typeof createReadiness>
