import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { HDKey } from '@scure/bip32'
import { mnemonicToSeed } from '../../src/lib/bip39.ts'
import { DEPOSIT_ACCOUNT } from '../../src/chain/deposit-account.ts'
import { runTreasury } from '../../src/treasury/main.ts'
import { ROOT } from '../helpers/processes.ts'
import { loadDepositKeys, loadGasAccount } from '../../src/treasury/keys.ts'

const dir = mkdtempSync(join(tmpdir(), 'treasury-cli-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const file = (name: string, text: string) => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}
// Nothing listens here: a command line refused as bad usage never gets as far as the network.
const CONNECT = [
  '--api-url',
  'https://127.0.0.1:9',
  '--api-key',
  'sk_test_x',
  '--network',
  'devnet',
  '--rpc-url',
  'http://127.0.0.1:9',
]

describe("the treasury tool's command line", () => {
  test("docs/operating/money-out.md names DepositAccount's address as its code makes it (a change of the contract changes it)", () => {
    expect(readFileSync(join(ROOT, 'docs/operating/money-out.md'), 'utf8')).toContain(
      `\`${DEPOSIT_ACCOUNT}\``,
    )
  })

  test('bad usage exits 2 with the usage line, before any key file is read or anything is asked', async () => {
    for (const [argv, message] of [
      [['frobnicate'], /Unknown command "frobnicate"/],
      [['sweep', ...CONNECT, '--to', '0x1234'], /--to must be the treasury's address/],
      [
        [
          'sweep',
          ...CONNECT,
          '--to',
          '0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf',
          '--batch-size',
          '41',
        ],
        /--batch-size must be a whole number from 1 to 40/,
      ],
      [
        [
          'sweep',
          ...CONNECT,
          '--to',
          '0x7E5F4552091A69125d5DfCb7b8C2659029395Bdf',
          '--min-usd',
          'ten',
        ],
        /--min-usd must be a USD amount/,
      ],
      [
        ['sweep', ...CONNECT, '--to', '0x7e5f4552091A69125d5DfCb7b8C2659029395Bdf'],
        /valid EIP-55 checksum/,
      ],
      [['sweep', ...CONNECT, '--dry-run', 'yes'], /--dry-run takes no value/],
      [['sweep', ...CONNECT, '--mnemonic'], /--mnemonic is not an option/],
      [
        ['balances', '--network', 'devnet', '--rpc-url', 'http://127.0.0.1:9'],
        /--api-url \(or CRYPTO_PAY_API_URL\) is required/,
      ],
      [
        [
          'balances',
          ...CONNECT.map((a) => (a === 'https://127.0.0.1:9' ? 'http://127.0.0.1:9' : a)),
        ],
        /must be an https:\/\/ address/,
      ],
    ] as const) {
      const r = await runTreasury([...argv])
      expect({ code: r.code, error: r.error }).toEqual({
        code: 2,
        error: expect.stringMatching(message),
      })
    }
  })

  test('key files: read only from files; what is wrong is said without repeating any of it', () => {
    const mnemonic = 'legal winner thank year wave sausage worth useful legal winner thank yellow'
    expect(loadDepositKeys({ mnemonicFile: file('m.txt', `${mnemonic}\n`) }).ok).toBe(true)
    const both = loadDepositKeys({
      mnemonicFile: file('m2.txt', mnemonic),
      xprvFile: file('x.txt', 'xprv'),
    })
    expect(both).toEqual({ ok: false, message: expect.stringContaining('one of the two') })
    const missing = loadDepositKeys({ mnemonicFile: join(dir, 'none.txt') })
    expect(missing).toEqual({ ok: false, message: expect.stringContaining('ENOENT') })
    const typo = loadDepositKeys({
      mnemonicFile: file('typo.txt', mnemonic.replace('sausage', 'sausag')),
    })
    expect(typo).toEqual({
      ok: false,
      message:
        'the mnemonic file does not hold a valid BIP-39 mnemonic: word 6 is not in the BIP-39 English word list',
    })
    const xpub = loadDepositKeys({
      xprvFile: file(
        'pub.txt',
        'xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8',
      ),
    })
    expect(xpub.ok).toBe(false)
    expect(JSON.stringify(xpub)).not.toContain('xpub661')
    expect(
      loadDepositKeys({ mnemonicFile: file('m3.txt', mnemonic), path: "m/44'/60'/x" }),
    ).toEqual({ ok: false, message: expect.stringContaining('--path must be a BIP-32 path') })
    const gas = loadGasAccount(file('g.txt', `0x${'ab'.repeat(31)}`))
    expect(gas).toEqual({
      ok: false,
      message: 'the gas key file must hold one private key: 64 hex digits (0x optional)',
    })
  })

  test("an xprv file: the root key derives --path, the account key is taken as it is; both give the mnemonic's xpub", () => {
    const root = HDKey.fromMasterSeed(
      mnemonicToSeed('legal winner thank year wave sausage worth useful legal winner thank yellow'),
    )
    const account = root.derive("m/44'/60'/0'/0")
    const fromRoot = loadDepositKeys({ xprvFile: file('root.txt', root.privateExtendedKey) })
    const fromAccount = loadDepositKeys({
      xprvFile: file('account.txt', `${account.privateExtendedKey}\n`),
    })
    expect(fromRoot.ok && fromRoot.value.xpub).toBe(account.publicExtendedKey)
    expect(fromAccount.ok && fromAccount.value.xpub).toBe(account.publicExtendedKey)
    if (!fromRoot.ok || !fromAccount.ok) throw new Error('both load')
    expect(fromRoot.value.account(3).address).toBe(fromAccount.value.account(3).address)
    const deeper = loadDepositKeys({
      xprvFile: file('deep.txt', account.deriveChild(1).privateExtendedKey),
    })
    expect(deeper).toEqual({ ok: false, message: expect.stringContaining('depth 5') })
  })
})
