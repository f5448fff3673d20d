/**
 * `npm run treasury -- <command>` (also `npm run treasury:deno -- ...`): the merchant's treasury
 * tool (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md). It runs on the
 * merchant's own machine, holds the keys the service never sees, talks to the service only through
 * its HTTPS API and to the chain through the network's RPC. With `--json` every command prints one
 * JSON object. Exit status 0 done, 1 refused (or done in part: the result says what is left), 2 bad
 * usage.
 */
import { getAddress, isAddress, type Address } from 'viem'
import { ETHEREUM_ACCOUNT_PATH } from '../chain/deposit-addresses.ts'
import { humanText, parseArgs, type Flags } from '../lib/command-line.ts'
import { usdTextToCents } from '../lib/money.ts'
import { ApiRefusal } from './api.ts'
import { showBalances } from './balances.ts'
import { approvalFrom } from './approval.ts'
import { payRefunds } from './refunds.ts'
import { moneyOutRoute } from './route.ts'
import { apiFrom, openSession, Refused, type Options } from './session.ts'
import { runSweep } from './sweep.ts'

const CONNECTION = ['api-url', 'api-key', 'ca-file']
/**
 * Addresses per sweep transaction. Past about 20 the gas an address hardly falls (40,749 at 20,
 * 40,043 at 50: bench/RESULTS.md), and a batch of 40 is the most whose record (the signed
 * transaction, about 1.3 KB of JSON an address) stays within the API's 64 KiB request body.
 */
const DEFAULT_BATCH = 20
const MAX_BATCH = 40
const KEYS = ['mnemonic-file', 'passphrase-file', 'xprv-file', 'path']

/**
 * How the tool was started: whether a person at a terminal can be asked (stdin and stderr are
 * terminals, and not --json).
 */
export interface RunContext {
  interactive: boolean
}

interface Command {
  usage: string
  flags: string[]
  booleans?: string[]
  run(
    o: Options,
    f: Record<string, string | true>,
    ctx: RunContext,
  ): Promise<{ result: Record<string, unknown>; complete: boolean }>
}

const seconds = (v: string | true | undefined, fallback: number) => {
  if (v === undefined) return fallback * 1000
  const n = typeof v === 'string' && /^\d{1,5}$/.test(v) ? Number(v) : NaN
  if (!(n >= 1)) throw new Refused('--timeout must be a whole number of seconds, at least 1', true)
  return n * 1000
}

const COMMANDS: Record<string, Command> = {
  check: {
    usage: `check --network N --rpc-url URL (--mnemonic-file F [--passphrase-file F] | --xprv-file F) [--path ${ETHEREUM_ACCOUNT_PATH}] [--gas-key-file F]`,
    flags: ['network', 'rpc-url', ...KEYS, 'gas-key-file'],
    async run(o) {
      const s = await openSession(o, { keys: true, sponsor: 'optional' })
      try {
        const key = await s.api.depositKey()
        const gas = s.sponsor
          ? await s.chain.client.getBalance({ address: s.sponsor.address })
          : null
        const route = await moneyOutRoute(s)
        return {
          result: {
            mode: key.mode,
            network: s.network.name,
            chain_id: s.network.chain_id,
            deposit_key: "matches the project's",
            path: s.keys!.path,
            addresses_handed_out: key.addresses_handed_out,
            first_addresses: [0, 1, 2].map((i) => s.keys!.account(i).address),
            gas_account: s.sponsor?.address ?? null,
            gas_account_balance: gas === null ? null : gas.toString(),
            money_out_route: route.route,
            route_detail: route.detail,
            service_says_eip7702: s.network.eip7702,
          },
          complete: true,
        }
      } finally {
        s.keys?.wipe()
      }
    },
  },
  balances: {
    usage: 'balances --network N --rpc-url URL',
    flags: ['network', 'rpc-url'],
    run: async (o) => showBalances(await openSession(o, { keys: false, sponsor: 'no' })),
  },
  sweep: {
    usage: `sweep --network N --rpc-url URL --to ADDRESS (--mnemonic-file F [--passphrase-file F] | --xprv-file F) [--path ${ETHEREUM_ACCOUNT_PATH}] --gas-key-file F [--token SYMBOL[,SYMBOL]] [--min-usd X] [--batch-size 20] [--dry-run] [--timeout 180]`,
    flags: [
      'network',
      'rpc-url',
      'to',
      ...KEYS,
      'gas-key-file',
      'token',
      'min-usd',
      'batch-size',
      'timeout',
    ],
    booleans: ['dry-run'],
    async run(o, f) {
      const to = typeof f.to === 'string' ? f.to : ''
      if (
        !isAddress(to, { strict: false }) ||
        (to !== to.toLowerCase() && !isAddress(to, { strict: true })) ||
        /^0x0{40}$/.test(to)
      ) {
        throw new Refused(
          "--to must be the treasury's address: 0x and 40 hex digits (mixed case must be a valid EIP-55 checksum)",
          true,
        )
      }
      const minUsdCents = f['min-usd'] === undefined ? 0n : usdTextToCents(String(f['min-usd']))
      if (minUsdCents === null)
        throw new Refused('--min-usd must be a USD amount such as 1 or 0.50', true)
      const batchSize = f['batch-size'] === undefined ? DEFAULT_BATCH : Number(f['batch-size'])
      if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH)
        throw new Refused(`--batch-size must be a whole number from 1 to ${MAX_BATCH}`, true)
      const tokens =
        typeof f.token === 'string'
          ? f.token
              .split(',')
              .map((t) => t.trim())
              .filter(Boolean)
          : null
      const s = await openSession(o, {
        keys: true,
        sponsor: f['dry-run'] ? 'optional' : 'required',
      })
      const unknown = (tokens ?? []).filter((t) => !s.network.tokens.some((x) => x.symbol === t))
      if (unknown.length)
        throw new Refused(
          `--token: ${s.network.name} has no token ${unknown.join(', ')} (it has ${s.network.tokens.map((t) => t.symbol).join(', ')})`,
          true,
        )
      try {
        return await runSweep(s, {
          to: getAddress(to) as Address,
          tokens,
          minUsdCents,
          dryRun: f['dry-run'] === true,
          batchSize,
          receiptTimeoutMs: seconds(f.timeout, 180),
        })
      } finally {
        s.keys?.wipe()
      }
    },
  },
  'refunds pay': {
    usage: `refunds pay --network N --rpc-url URL (--mnemonic-file F [--passphrase-file F] | --xprv-file F) [--path ${ETHEREUM_ACCOUNT_PATH}] --gas-key-file F [--refund ID[,ID]] [--approve ID[:ADDRESS][,...]] [--max-usd X] [--dry-run] [--timeout 180]`,
    flags: [
      'network',
      'rpc-url',
      ...KEYS,
      'gas-key-file',
      'refund',
      'approve',
      'max-usd',
      'timeout',
    ],
    booleans: ['dry-run'],
    async run(o, f, ctx) {
      const ids = (v: string | true | undefined) =>
        typeof v === 'string'
          ? v
              .split(',')
              .map((t) => t.trim())
              .filter(Boolean)
          : null
      const only = ids(f.refund)
      // A refund id, or a refund id and the one destination approved for it (`rf_...:0x...`).
      const approve = (ids(f.approve) ?? []).map((a) => {
        const [id, destination] = a.split(':')
        return destination === undefined ? id! : `${id}:${destination.toLowerCase()}`
      })
      const bad = approve.filter((id) => !/^rf_[A-Za-z0-9]{20}(:0x[0-9a-f]{40})?$/.test(id))
      if (bad.length)
        throw new Refused(
          `--approve takes refund ids (rf_ and 20 letters or digits), each optionally with the destination approved for it (rf_...:0x and 40 hex digits): ${bad.join(', ')}`,
          true,
        )
      const maxUsdCents = f['max-usd'] === undefined ? null : usdTextToCents(String(f['max-usd']))
      if (f['max-usd'] !== undefined && maxUsdCents === null)
        throw new Refused('--max-usd must be a USD amount such as 250 or 99.50', true)
      const dryRun = f['dry-run'] === true
      const approval = approvalFrom({ approve, interactive: ctx.interactive && !dryRun })
      const s = await openSession(o, { keys: true, sponsor: 'required' })
      try {
        return await payRefunds(s, {
          only,
          dryRun,
          receiptTimeoutMs: seconds(f.timeout, 180),
          approval,
          maxUsdCents,
        })
      } finally {
        s.keys?.wipe()
      }
    },
  },
}

export const USAGE = [
  'Usage: npm run treasury -- <command> [--json]',
  '',
  'Commands:',
  ...Object.values(COMMANDS).map((c) => `  ${c.usage}`),
  '',
  'Every command: --api-url URL (or CRYPTO_PAY_API_URL), --api-key KEY (or CRYPTO_PAY_API_KEY), --ca-file PEM (or CRYPTO_PAY_CA_FILE) to trust',
  "the service's own certificate. Keys are read from files only and never leave this machine.",
].join('\n')

function options(f: Flags): Options {
  const v = (k: string) => (typeof f[k] === 'string' ? (f[k] as string) : undefined)
  return {
    apiUrl: v('api-url'),
    apiKey: v('api-key'),
    caFile: v('ca-file'),
    network: v('network'),
    rpcUrl: v('rpc-url'),
    mnemonicFile: v('mnemonic-file'),
    passphraseFile: v('passphrase-file'),
    xprvFile: v('xprv-file'),
    path: v('path'),
    gasKeyFile: v('gas-key-file'),
  }
}

/** Checks the command line; runs the command. */
export async function runTreasury(
  argv: string[],
  ctx: RunContext = { interactive: false },
): Promise<{ code: 0 | 1 | 2; out: Record<string, unknown> | null; error: string | null }> {
  const { words, flags } = parseArgs(argv)
  const name = words.join(' ')
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
  if (!command)
    return {
      code: 2,
      out: null,
      error: words.length ? `Unknown command "${name}".\n\n${USAGE}` : USAGE,
    }
  const known = new Set([...command.flags, ...CONNECTION, 'json', ...(command.booleans ?? [])])
  const problems: string[] = []
  for (const [k, v] of Object.entries(flags)) {
    if (!known.has(k)) problems.push(`--${k} is not an option of this command`)
    else if (k !== 'json' && !(command.booleans ?? []).includes(k) && v === true)
      problems.push(`--${k} needs a value`)
    else if ((command.booleans ?? []).includes(k) && v !== true)
      problems.push(`--${k} takes no value`)
  }
  if (problems.length)
    return {
      code: 2,
      out: null,
      error: `${problems.join('; ')}\nUsage: npm run treasury -- ${command.usage}`,
    }
  try {
    apiFrom(options(flags)) // the connection flags are checked before any key file is read
    const { result, complete } = await command.run(options(flags), flags, ctx)
    return { code: complete ? 0 : 1, out: result, error: null }
  } catch (e) {
    if (e instanceof Refused)
      return {
        code: e.usage ? 2 : 1,
        out: null,
        error: e.usage ? `${e.message}\nUsage: npm run treasury -- ${command.usage}` : e.message,
      }
    if (e instanceof ApiRefusal)
      return { code: 1, out: null, error: `The service refused: ${e.message}` }
    return {
      code: 1,
      out: null,
      error: `Failed: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`,
    }
  }
}

if (import.meta.main) {
  const argv = process.argv.slice(2)
  const json = argv.includes('--json')
  if (argv.includes('--help') || argv.length === 0) {
    console.log(USAGE)
    process.exit(argv.length === 0 ? 2 : 0)
  }
  const r = await runTreasury(argv, {
    interactive: !json && !!process.stdin.isTTY && !!process.stderr.isTTY,
  })
  if (r.out) console.log(json ? JSON.stringify(r.out) : humanText(r.out))
  if (r.error) console.error(json ? JSON.stringify({ error: { message: r.error } }) : r.error)
  process.exit(r.code)
}
