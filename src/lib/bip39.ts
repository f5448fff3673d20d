/**
 * BIP-39 mnemonics, offline (the xpub tool and the treasury tool run on the merchant's machine):
 * whether a phrase is one, and the seed it (with an optional passphrase) makes. Written out with
 * node:crypto (Bun, Deno, Node) because viem does not export its seed function and @scure/bip39
 * is not a direct dependency; the unit tests check both against viem's accounts.
 */
import { createHash, pbkdf2Sync } from 'node:crypto'
import { english } from 'viem/accounts'

const WORDS = new Map(english.map((w, i) => [w, i]))

/**
 * Why a BIP-39 English mnemonic is not one (null when it is): word count, unknown words by
 * position, checksum. Never repeats a word.
 */
export function mnemonicProblem(mnemonic: string): string | null {
  const words = mnemonic.trim().split(/\s+/).filter(Boolean)
  if (![12, 15, 18, 21, 24].includes(words.length))
    return `a mnemonic has 12, 15, 18, 21 or 24 words; this has ${words.length}`
  const unknown = words.flatMap((w, i) => (WORDS.has(w) ? [] : [i + 1]))
  if (unknown.length)
    return `word${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} ${unknown.length > 1 ? 'are' : 'is'} not in the BIP-39 English word list`
  const bits = words.map((w) => WORDS.get(w)!.toString(2).padStart(11, '0')).join('')
  const entropyBits = (bits.length * 32) / 33
  const entropy = Buffer.from(
    bits
      .slice(0, entropyBits)
      .match(/.{8}/g)!
      .map((b) => parseInt(b, 2)),
  )
  const checksum = createHash('sha256')
    .update(entropy)
    .digest()[0]!
    .toString(2)
    .padStart(8, '0')
    .slice(0, bits.length - entropyBits)
  return checksum === bits.slice(entropyBits)
    ? null
    : 'the checksum does not match: a word is wrong or out of order'
}

/** The words of a mnemonic as BIP-39 hashes them: NFKD, single spaces. */
export const normalizedMnemonic = (mnemonic: string) =>
  mnemonic.normalize('NFKD').trim().split(/\s+/).join(' ')

/** BIP-39 seed: PBKDF2-HMAC-SHA512, 2048 rounds, salt "mnemonic" + the passphrase (NFKD). */
export function mnemonicToSeed(mnemonic: string, passphrase = ''): Uint8Array {
  return new Uint8Array(
    pbkdf2Sync(
      normalizedMnemonic(mnemonic),
      `mnemonic${passphrase.normalize('NFKD')}`,
      2048,
      64,
      'sha512',
    ),
  )
}
