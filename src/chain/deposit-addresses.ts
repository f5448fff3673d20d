import { createHash } from 'node:crypto'
/**
 * Deposit addresses from an extended public key
 * (docs/decisions/0017-deposit-addresses-from-an-xpub.md): each project and mode holds an xpub, and
 * transaction i pays to its non-hardened child i. The service never holds a private key, so it
 * refuses one outright (an xprv pasted by mistake must not be stored) and never repeats the input
 * in an error message.
 *
 * Standard Ethereum wallets derive account addresses at m/44'/60'/0'/0/i: give the service the
 * xpub of m/44'/60'/0'/0 and its address i is the wallet's account i.
 *
 * `@scure/bip32` yields compressed public keys and viem's `publicKeyToAddress` wants the
 * uncompressed form, hence the decompression through `@noble/curves` (docs/development.md#viem).
 */
import { secp256k1 } from '@noble/curves/secp256k1.js'
import { HDKey } from '@scure/bip32'
import { bytesToHex, type Address } from 'viem'
import { english, generateMnemonic, publicKeyToAddress } from 'viem/accounts'
import { mnemonicToSeed } from '../lib/bip39.ts'

/** A validated extended public key. */
export interface ExtendedPublicKey {
  /** The xpub as given (base58check). */
  readonly xpub: string
  /** Depth in its tree: 4 for the usual m/44'/60'/0'/0. */
  readonly depth: number
  readonly node: HDKey
}

export type ParseXpubResult = { ok: true; key: ExtendedPublicKey } | { ok: false; message: string }

/** Largest non-hardened child index (BIP-32: indices from 2^31 are hardened). */
export const MAX_CHILD_INDEX = 0x7fffffff

/** The path whose xpub makes derived addresses match standard wallets' accounts. */
export const ETHEREUM_ACCOUNT_PATH = "m/44'/60'/0'/0"

/** Validates an xpub (BIP-32, secp256k1, mainnet `xpub` version). Refusals are values. */
export function parseXpub(input: string): ParseXpubResult {
  const s = typeof input === 'string' ? input.trim() : ''
  if (/^[xtyzuv]prv/.test(s)) return privateKeyRefused()
  let node: HDKey
  try {
    node = HDKey.fromExtendedKey(s)
  } catch {
    // fromExtendedKey also throws "Version mismatch" for a tpub/ypub/zpub: same answer.
    return {
      ok: false,
      message:
        'not a valid extended public key: expected a BIP-32 "xpub..." string (base58check, 111 characters)',
    }
  }
  if (node.privateKey) {
    node.wipePrivateData()
    return privateKeyRefused()
  }
  if (!node.publicKey)
    return { ok: false, message: 'not a valid extended public key: no public key' }
  return { ok: true, key: { xpub: s, depth: node.depth, node } }
}

function privateKeyRefused(): ParseXpubResult {
  return {
    ok: false,
    message:
      'this is an extended PRIVATE key (xprv): the service never takes private keys. Give the extended public key (xpub) of the same account instead, and treat the xprv as exposed',
  }
}

/**
 * Address of non-hardened child `index` of the key. A string is parsed first and must be a
 * valid xpub: callers store only xpubs that `parseXpub` accepted, so anything else is a bug.
 */
export function deriveAddress(xpub: ExtendedPublicKey | string, index: number): Address {
  if (!Number.isInteger(index) || index < 0 || index > MAX_CHILD_INDEX) {
    throw new RangeError(
      `deposit address index must be an integer from 0 to ${MAX_CHILD_INDEX}, got ${index}`,
    )
  }
  let key: ExtendedPublicKey
  if (typeof xpub === 'string') {
    const parsed = parseXpub(xpub)
    if (!parsed.ok) throw new Error(`deriveAddress: ${parsed.message}`)
    key = parsed.key
  } else key = xpub
  const child = key.node.deriveChild(index)
  const uncompressed = secp256k1.Point.fromBytes(child.publicKey!).toBytes(false)
  return publicKeyToAddress(bytesToHex(uncompressed))
}

/**
 * A fresh random mnemonic and the xpub of its m/44'/60'/0'/0, for the devnet demo project.
 * The mnemonic is returned so a developer can import it into a wallet and see the payments.
 */
export function generateDevnetXpub(): { mnemonic: string; xpub: string } {
  const mnemonic = generateMnemonic(english)
  return { mnemonic, xpub: xpubFromMnemonic(mnemonic) }
}

/** The xpub at `path` (default m/44'/60'/0'/0) of a BIP-39 mnemonic. */
export function xpubFromMnemonic(mnemonic: string, path = ETHEREUM_ACCOUNT_PATH): string {
  const node = HDKey.fromMasterSeed(mnemonicToSeed(mnemonic)).derive(path)
  const xpub = node.publicExtendedKey
  node.wipePrivateData()
  return xpub
}

/**
 * What identifies a deposit key without giving it away: SHA-256 of its xpub, hex. The API hands
 * this, never the xpub, to API keys: derivation is not hardened, so the xpub and any one deposit
 * address's private key would give every deposit key. The treasury tool derives the xpub from the
 * merchant's own key and compares fingerprints.
 */
export function depositKeyFingerprint(xpub: string): string {
  return createHash('sha256').update(`crypto-pay deposit key\n${xpub}`).digest('hex')
}
