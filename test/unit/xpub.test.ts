import { describe, expect, test } from 'bun:test'
import { mnemonicToAccount } from 'viem/accounts'
import { accountXpub } from '../../src/cli/xpub.ts'
import { mnemonicProblem } from '../../src/lib/bip39.ts'
import { ANVIL_DEFAULT_MNEMONIC } from '../../src/chain/devnet.ts'
import { BUN, ROOT } from '../helpers/processes.ts'

describe('the offline xpub tool (npm run -s xpub)', () => {
  test("the xpub of m/44'/60'/0'/0 derives the wallet's own accounts 0, 1, 2", () => {
    const r = accountXpub(ANVIL_DEFAULT_MNEMONIC)
    expect(r.path).toBe("m/44'/60'/0'/0")
    expect(r.xpub).toStartWith('xpub')
    expect(r.addresses).toEqual(
      [0, 1, 2].map((i) => mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: i }).address),
    )
  })

  test('refuses what is not a BIP-39 mnemonic, saying why without repeating it', () => {
    expect(mnemonicProblem(ANVIL_DEFAULT_MNEMONIC)).toBeNull()
    expect(mnemonicProblem('test test test')).toContain('has 3')
    expect(mnemonicProblem('test test test test test test test test test test test junko')).toBe(
      'word 12 is not in the BIP-39 English word list',
    )
    expect(
      mnemonicProblem('test test test test test test test test test test test test'),
    ).toContain('checksum')
  })

  test('reads the mnemonic from standard input and prints only the public side', async () => {
    const proc = Bun.spawn([BUN, 'src/cli/xpub.ts', '--json'], {
      cwd: ROOT,
      stdin: new TextEncoder().encode(`${ANVIL_DEFAULT_MNEMONIC}\n`),
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited])
    expect(code).toBe(0)
    const r = JSON.parse(out) as { xpub: string; first_addresses: string[] }
    expect(r.xpub).toBe(accountXpub(ANVIL_DEFAULT_MNEMONIC).xpub)
    expect(out).not.toContain('junk')
    const bad = Bun.spawn([BUN, 'src/cli/xpub.ts'], {
      cwd: ROOT,
      stdin: new TextEncoder().encode('correct horse battery staple\n'),
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const [err, badCode] = await Promise.all([new Response(bad.stderr).text(), bad.exited])
    expect(badCode).toBe(2)
    expect(err).toContain('Not a valid mnemonic')
    expect(err).not.toContain('horse')
  })
})
