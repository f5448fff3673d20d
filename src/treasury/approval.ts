/**
 * The merchant's approval of a refund, given on their own machine. `refunds pay` pays without it
 * only what returns a customer's money the way it came: from the transaction's own deposit address,
 * to an address that paid it (read on-chain, payers.ts), no more than that address sent. Anything
 * else (another destination, more than arrived, or money from the gas account) is paid only when
 * the merchant approves that refund: by naming it (`--approve rf_...`), or by answering yes at the
 * terminal, where the tool shows the amount, the token, the transaction and the destination. A run
 * with nobody at the terminal (a cron job, `--json`) never pays an unapproved refund: it lists it
 * as awaiting approval. An API key, whatever its scopes, cannot give this approval.
 */
import { createInterface } from 'node:readline/promises'

export interface Approval {
  /** Refunds approved by name on the command line. */
  approved: ReadonlySet<string>
  /** Asks the person at the terminal; null when nobody is there to ask. */
  ask: ((question: string) => Promise<boolean>) | null
}

/**
 * `--approve` ids, and whether a person at a terminal can be asked (stdin and stderr are terminals,
 * not --json, not a dry run).
 */
export function approvalFrom(o: { approve: readonly string[]; interactive: boolean }): Approval {
  return { approved: new Set(o.approve), ask: o.interactive ? askAtTerminal : null }
}

async function askAtTerminal(question: string): Promise<boolean> {
  // The question goes to stderr: stdout carries the command's result.
  const rl = createInterface({ input: process.stdin, output: process.stderr })
  try {
    return /^\s*y(es)?\s*$/i.test(
      await rl.question(
        `${question}\nPay it? Type yes to pay, anything else to leave it pending: `,
      ),
    )
  } finally {
    rl.close()
  }
}

/**
 * Whether the merchant approves `refundId`, asked `question` at the terminal when it was not named.
 */
export async function approves(
  a: Approval,
  refundId: string,
  question: string,
): Promise<'named' | 'answered' | false> {
  if (a.approved.has(refundId)) return 'named'
  if (a.ask && (await a.ask(question))) return 'answered'
  return false
}
