import { afterAll } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Address, bytesToHex } from 'viem'
import {
  generatePrivateKey,
  mnemonicToAccount,
  type PrivateKeyAccount,
  privateKeyToAccount,
} from 'viem/accounts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { ANVIL_DEFAULT_MNEMONIC, type DevnetClient } from '../../src/chain/devnet.ts'

/** The relayer of payments by signature in tests: anvil's account 8, as on the devnet. */
export const RELAYER = mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 8 })

/**
 * A directory of this test file's own holding the relayer's key as RELAYER_KEY_FILE reads it
 * (`keyFile`), removed after the file's tests.
 */
export function relayerKeyDir(prefix: string): { dir: string; keyFile: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  const keyFile = join(dir, 'relayer.key')
  writeFileSync(keyFile, `${bytesToHex(RELAYER.getHdKey().privateKey!)}\n`, { mode: 0o600 })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  return { dir, keyFile }
}

/** A fresh account holding `units` of the devnet's TUSD (minted by `wallet`) and no ETH. */
export async function tusdHolder(
  wallet: DevnetClient,
  stablecoin: Address,
  units: bigint,
): Promise<PrivateKeyAccount> {
  const account = privateKeyToAccount(generatePrivateKey())
  if (units > 0n)
    await wallet.waitForTransactionReceipt({
      hash: await wallet.writeContract({
        address: stablecoin,
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [account.address, units],
      }),
    })
  return account
}
