import { describe, expect, test } from 'bun:test'
import { HDKey } from '@scure/bip32'
import { pbkdf2Sync } from 'node:crypto'
import { isAddress } from 'viem'
import { mnemonicToAccount } from 'viem/accounts'
import {
  deriveAddress,
  generateDevnetXpub,
  MAX_CHILD_INDEX,
  parseXpub,
  xpubFromMnemonic,
} from '../../src/chain/deposit-addresses.ts'

// The well-known test mnemonic (anvil's and hardhat's default accounts): public knowledge.
const MNEMONIC = 'test test test test test test test test test test test junk'

const masterOf = (mnemonic: string) =>
  HDKey.fromMasterSeed(new Uint8Array(pbkdf2Sync(mnemonic, 'mnemonic', 2048, 64, 'sha512')))

describe('deriveAddress()', () => {
  test("addresses from the xpub at m/44'/60'/0'/0 equal the mnemonic's accounts 0..4", () => {
    const xpub = xpubFromMnemonic(MNEMONIC)
    expect(xpub.startsWith('xpub')).toBe(true)
    for (let i = 0; i < 5; i++) {
      expect(deriveAddress(xpub, i)).toBe(mnemonicToAccount(MNEMONIC, { addressIndex: i }).address)
    }
    // anvil's first default account, as a fixed point independent of viem.
    expect(deriveAddress(xpub, 0)).toBe('0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266')
  })

  test('accepts a parsed key and gives the same address as the string', () => {
    const xpub = xpubFromMnemonic(MNEMONIC)
    const parsed = parseXpub(xpub)
    if (!parsed.ok) throw new Error(parsed.message)
    expect(deriveAddress(parsed.key, 7)).toBe(deriveAddress(xpub, 7))
  })

  test('derives distinct checksummed addresses up to the largest non-hardened index', () => {
    const xpub = xpubFromMnemonic(MNEMONIC)
    const addresses = [0, 1, 2, 1000, MAX_CHILD_INDEX].map((i) => deriveAddress(xpub, i))
    expect(new Set(addresses).size).toBe(addresses.length)
    for (const a of addresses) expect(isAddress(a, { strict: true })).toBe(true)
  })

  test('refuses hardened, negative and fractional indices', () => {
    const xpub = xpubFromMnemonic(MNEMONIC)
    for (const i of [-1, MAX_CHILD_INDEX + 1, 1.5, NaN])
      expect(() => deriveAddress(xpub, i)).toThrow(RangeError)
  })

  test('throws on a string that is not an xpub', () => {
    expect(() => deriveAddress('xpubnonsense', 0)).toThrow('not a valid extended public key')
  })
})

describe('parseXpub()', () => {
  test('accepts an xpub and reports its depth', () => {
    const result = parseXpub(`  ${xpubFromMnemonic(MNEMONIC)}\n`)
    expect(result.ok && result.key.depth).toBe(4)
  })

  test('refuses an xprv without repeating it', () => {
    const xprv = masterOf(MNEMONIC).derive("m/44'/60'/0'/0").privateExtendedKey
    expect(xprv.startsWith('xprv')).toBe(true)
    const result = parseXpub(xprv)
    expect(result.ok).toBe(false)
    if (result.ok) return
    expect(result.message).toContain('PRIVATE key')
    expect(result.message).not.toContain(xprv.slice(4, 20))
  })

  test('refuses an xprv given with surrounding whitespace', () => {
    const xprv = masterOf(MNEMONIC).privateExtendedKey
    const result = parseXpub(` ${xprv} `)
    expect(!result.ok && result.message).toContain('PRIVATE key')
  })

  test('refuses garbage, a corrupted checksum and other key versions', () => {
    const xpub = xpubFromMnemonic(MNEMONIC)
    const corrupted = xpub.slice(0, -1) + (xpub.endsWith('a') ? 'b' : 'a')
    const tpub = masterOf(MNEMONIC).derive("m/44'/60'/0'/0")
    const testnet = new HDKey({
      versions: { private: 0x04358394, public: 0x043587cf },
      publicKey: tpub.publicKey!,
      chainCode: tpub.chainCode!,
      depth: 4,
    })
    for (const bad of [
      '',
      'hello',
      '0x1234',
      corrupted,
      xpub.slice(0, 60),
      testnet.publicExtendedKey,
    ]) {
      const result = parseXpub(bad)
      expect(!result.ok && result.message).toContain('not a valid extended public key')
    }
  })
})

describe('generateDevnetXpub()', () => {
  test("gives a fresh mnemonic whose accounts the xpub's addresses are", () => {
    const a = generateDevnetXpub()
    const b = generateDevnetXpub()
    expect(a.mnemonic).not.toBe(b.mnemonic)
    expect(a.mnemonic.split(' ')).toHaveLength(12)
    expect(parseXpub(a.xpub).ok).toBe(true)
    expect(deriveAddress(a.xpub, 3)).toBe(
      mnemonicToAccount(a.mnemonic, { addressIndex: 3 }).address,
    )
  })
})
