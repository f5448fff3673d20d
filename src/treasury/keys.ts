/**
 * The merchant's keys, on the merchant's machine
 * (docs/decisions/0037-money-out-signed-on-the-merchants-machine.md). The deposit key comes from a
 * BIP-39 mnemonic file (with an optional passphrase file) or an extended private key file, and is
 * the account at `--path` whose xpub the project holds; the gas account's key comes from a file of
 * its own. They are read from those files only (never from an argument, which the process list and
 * shell history would show), kept in this process's memory, and never printed, logged, written or
 * sent: what leaves this process is signatures and signed transactions. No message here repeats any
 * part of a key.
 */
import { readFileSync } from 'node:fs'
import { HDKey } from '@scure/bip32'
import { bytesToHex, type Address, type Hex, type LocalAccount } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { ETHEREUM_ACCOUNT_PATH } from '../chain/deposit-addresses.ts'
import { mnemonicProblem, mnemonicToSeed } from '../lib/bip39.ts'

export interface DepositKeys {
  /** The xpub of the account at `path`: compared with the project's before anything is signed. */
  xpub: string
  path: string
  /** The account of deposit address `index` (child `index` of the account). */
  account(index: number): LocalAccount
  /** Forgets the private key material (at exit). */
  wipe(): void
}

export type KeysResult<T> = { ok: true; value: T } | { ok: false; message: string }

const PATH = /^m(\/\d{1,10}['h]?)*$/

function readSecretFile(file: string, what: string): KeysResult<string> {
  try {
    return { ok: true, value: readFileSync(file, 'utf8') }
  } catch (e) {
    // The path is the operator's; the content is never shown.
    return {
      ok: false,
      message: `cannot read the ${what} file ${file}: ${(e as NodeJS.ErrnoException).code ?? 'unreadable'}`,
    }
  }
}

/**
 * The deposit key from `--mnemonic-file` (and `--passphrase-file`) or `--xprv-file`, at `--path`.
 */
export function loadDepositKeys(o: {
  mnemonicFile?: string
  passphraseFile?: string
  xprvFile?: string
  path?: string
}): KeysResult<DepositKeys> {
  const path = (o.path ?? ETHEREUM_ACCOUNT_PATH).replace(/h/g, "'")
  if (!PATH.test(path))
    return { ok: false, message: `--path must be a BIP-32 path such as ${ETHEREUM_ACCOUNT_PATH}` }
  if (!!o.mnemonicFile === !!o.xprvFile)
    return {
      ok: false,
      message:
        'give the deposit key as --mnemonic-file FILE (BIP-39) or --xprv-file FILE, one of the two',
    }
  if (o.passphraseFile && !o.mnemonicFile)
    return { ok: false, message: '--passphrase-file goes with --mnemonic-file' }
  let node: HDKey
  if (o.mnemonicFile) {
    const text = readSecretFile(o.mnemonicFile, 'mnemonic')
    if (!text.ok) return text
    const mnemonic = text.value.trim().toLowerCase()
    const problem = mnemonicProblem(mnemonic)
    if (problem)
      return {
        ok: false,
        message: `the mnemonic file does not hold a valid BIP-39 mnemonic: ${problem}`,
      }
    let passphrase = ''
    if (o.passphraseFile) {
      const p = readSecretFile(o.passphraseFile, 'passphrase')
      if (!p.ok) return p
      // Only the line end an editor adds is not part of it: a passphrase may have spaces.
      passphrase = p.value.replace(/\r?\n$/, '')
    }
    const root = HDKey.fromMasterSeed(mnemonicToSeed(mnemonic, passphrase))
    node = root.derive(path)
    root.wipePrivateData()
  } else {
    const text = readSecretFile(o.xprvFile!, 'extended private key')
    if (!text.ok) return text
    let key: HDKey
    try {
      key = HDKey.fromExtendedKey(text.value.trim())
    } catch {
      return {
        ok: false,
        message: 'the xprv file does not hold a valid extended private key (xprv...)',
      }
    }
    if (!key.privateKey)
      return {
        ok: false,
        message: 'the xprv file holds a public key: the treasury needs the private one to sign',
      }
    // A root key is derived to the path; a key at the path's depth is taken as that account's.
    const depth = path === 'm' ? 0 : path.split('/').length - 1
    if (key.depth === 0) {
      node = key.derive(path)
      key.wipePrivateData()
    } else if (key.depth === depth) node = key
    else
      return {
        ok: false,
        message: `the xprv is at depth ${key.depth}: give the root key (depth 0) or the account key at ${path} (depth ${depth})`,
      }
  }
  return {
    ok: true,
    value: {
      xpub: node.publicExtendedKey,
      path,
      account(index: number) {
        const child = node.deriveChild(index)
        const account = privateKeyToAccount(bytesToHex(child.privateKey!) as Hex)
        child.wipePrivateData()
        return account
      },
      wipe: () => node.wipePrivateData(),
    },
  }
}

/**
 * The gas account, from `--gas-key-file`: a file holding one private key (64 hex digits, 0x
 * optional).
 */
export function loadGasAccount(file: string): KeysResult<LocalAccount & { address: Address }> {
  const text = readSecretFile(file, 'gas key')
  if (!text.ok) return text
  const hex = text.value.trim().replace(/^0x/i, '')
  if (!/^[0-9a-fA-F]{64}$/.test(hex))
    return {
      ok: false,
      message: 'the gas key file must hold one private key: 64 hex digits (0x optional)',
    }
  try {
    return { ok: true, value: privateKeyToAccount(`0x${hex.toLowerCase()}`) }
  } catch {
    return { ok: false, message: 'the gas key file does not hold a valid secp256k1 private key' }
  }
}
