/**
 * `npm run -s xpub` (docs/decisions/0057-xpub-offline-and-a-dedicated-mnemonic.md): the extended
 * public key a project's deposit addresses are derived from, made offline from a mnemonic on the
 * merchant's own machine. Wallets such as MetaMask show no xpub; this prints the one of
 * `m/44'/60'/0'/0` with the first addresses to compare against the wallet. The mnemonic is read
 * from standard input (not echoed at a terminal, never an argument, so it stays out of shell
 * history and the process list), used in memory, and never written, logged or sent anywhere: this
 * command opens no database and talks to no server.
 */
import {
  deriveAddress,
  ETHEREUM_ACCOUNT_PATH,
  xpubFromMnemonic,
} from '../chain/deposit-addresses.ts'
import { mnemonicProblem } from '../lib/bip39.ts'

/** The xpub of `m/44'/60'/0'/0` and the first `count` deposit addresses (children 0, 1, ...). */
export function accountXpub(
  mnemonic: string,
  count = 3,
): { path: string; xpub: string; addresses: string[] } {
  const xpub = xpubFromMnemonic(mnemonic.trim().split(/\s+/).join(' '))
  return {
    path: ETHEREUM_ACCOUNT_PATH,
    xpub,
    addresses: Array.from({ length: count }, (_, i) => deriveAddress(xpub, i)),
  }
}

const ADVICE = [
  'Use a mnemonic made for this service only. Every deposit address is an account of it, and',
  "child 0 is the wallet's own first account: in a wallet you also use yourself, customers' payments",
  'would mix with your own funds, and moving money out of the deposit addresses would move yours too.',
]

/** Reads the mnemonic: a hidden prompt at a terminal, else everything on standard input. */
async function readMnemonic(): Promise<string> {
  const stdin = process.stdin
  if (!stdin.isTTY) {
    let text = ''
    for await (const chunk of stdin) text += chunk
    return text
  }
  process.stderr.write('Mnemonic (not shown as you type; Enter to finish): ')
  stdin.setRawMode(true)
  stdin.setEncoding('utf8')
  return new Promise((resolve) => {
    let text = ''
    const done = () => {
      stdin.setRawMode(false)
      stdin.pause()
      stdin.off('data', onData)
      process.stderr.write('\n')
      resolve(text)
    }
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return done()
        if (ch === '\u0003') process.exit(130) // Ctrl-C
        text = ch === '\u007f' ? text.slice(0, -1) : text + ch
      }
    }
    stdin.on('data', onData)
  })
}

if (import.meta.main) {
  const json = process.argv.includes('--json')
  const unknown = process.argv.slice(2).filter((a) => a !== '--json')
  if (unknown.length) {
    console.error(
      `Usage: npm run -s xpub [-- --json]   (reads the mnemonic from standard input; it takes no other argument, so it never lands in shell history)`,
    )
    process.exit(2)
  }
  const mnemonic = (await readMnemonic()).toLowerCase()
  const problem = mnemonicProblem(mnemonic)
  if (problem) {
    console.error(
      json
        ? JSON.stringify({ error: { message: `Not a valid mnemonic: ${problem}` } })
        : `Not a valid mnemonic: ${problem}`,
    )
    process.exit(2)
  }
  const r = accountXpub(mnemonic)
  if (json)
    console.log(JSON.stringify({ path: r.path, xpub: r.xpub, first_addresses: r.addresses }))
  else {
    console.log(
      [
        `Account ${r.path}`,
        `  xpub  ${r.xpub}`,
        ...r.addresses.map((a, i) => `  deposit address ${i}  ${a}`),
        '',
        'Compare these addresses with the first accounts your wallet shows for this mnemonic, then:',
        `  npm run cli -- project set-xpub --project proj_... --mode live --xpub ${r.xpub}`,
        '',
        ...ADVICE,
      ].join('\n'),
    )
  }
}
