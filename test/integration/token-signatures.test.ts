/**
 * EIP-3009 tokens against a real anvil chain. The start-up check (network-verification.ts) reads
 * the EIP-712 domain of every token declared `eip3009` from its contract (eip3009.ts):
 * TestStablecoin (Circle's FiatToken v2.2 rules) gives name, version "2", chain and address; a
 * token without a domain declared `eip3009` is a mismatch telling the operator to remove the flag,
 * and so is a contract whose DOMAIN_SEPARATOR() disagrees with the domain it states. The domain
 * read is the one the contract takes signatures in: an authorization signed over it with viem's
 * `signTypedData` and `transferAuthorizationTypedData` moves the tokens when someone else submits
 * it, once; one signed with version "1" is refused.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import solc from 'solc'
import {
  type Address,
  bytesToHex,
  createPublicClient,
  getAddress,
  type Hex,
  http,
  parseEventLogs,
  type PublicClient,
} from 'viem'
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from 'viem/accounts'
import { startAnvil, type AnvilNode } from '../../src/chain/anvil.ts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import {
  ANVIL_DEFAULT_MNEMONIC,
  createDevnetClient,
  DEVNET_CHAIN_ID,
  deployTestStablecoin,
  type DevnetClient,
} from '../../src/chain/devnet.ts'
import {
  type AuthorizationDomain,
  eip3009Abi,
  transferAuthorizationTypedData,
} from '../../src/chain/eip3009.ts'
import { verifyNetwork } from '../../src/chain/network-verification.ts'
import { parseNetworksConfig } from '../../src/chain/networks-config.ts'
import { systemClock } from '../../src/lib/clock.ts'

/**
 * Tokens TestStablecoin cannot stand in for, compiled here (contracts/ holds what the devnet and
 * the service deploy): an ERC-20 with no EIP-712 domain at all (as Tether's USDT on Ethereum), one
 * whose version() disagrees with its DOMAIN_SEPARATOR(), and one stating its domain only through
 * EIP-5267's eip712Domain().
 */
const SOURCE = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

bytes32 constant EIP712_DOMAIN_TYPEHASH =
    keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");

contract PlainToken {
    uint8 public constant decimals = 6;
    string public constant symbol = "PLAIN";
}

contract WrongVersionToken {
    uint8 public constant decimals = 6;
    string public constant symbol = "WRONG";
    string public constant name = "Wrong USD";
    string public constant version = "1";

    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return keccak256(abi.encode(EIP712_DOMAIN_TYPEHASH, keccak256(bytes(name)), keccak256("2"), block.chainid, address(this)));
    }
}

contract Eip5267Token {
    uint8 public constant decimals = 6;
    string public constant symbol = "DOM";

    function eip712Domain()
        external
        view
        returns (bytes1, string memory, string memory, uint256, address, bytes32, uint256[] memory)
    {
        return (0x0f, "Domain USD", "3", block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return keccak256(abi.encode(EIP712_DOMAIN_TYPEHASH, keccak256("Domain USD"), keccak256("3"), block.chainid, address(this)));
    }
}
`
const COMPILED = ['PlainToken', 'WrongVersionToken', 'Eip5267Token'] as const

function compile(): Record<(typeof COMPILED)[number], Hex> {
  const output = JSON.parse(
    solc.compile(
      JSON.stringify({
        language: 'Solidity',
        sources: { 'Tokens.sol': { content: SOURCE } },
        settings: {
          evmVersion: 'cancun',
          outputSelection: { '*': { '*': ['evm.bytecode.object'] } },
        },
      }),
    ),
  )
  const errors = (output.errors ?? []).filter((e: any) => e.severity === 'error')
  if (errors.length) throw new Error(errors.map((e: any) => e.formattedMessage).join('\n'))
  return Object.fromEntries(
    COMPILED.map((name) => [name, `0x${output.contracts['Tokens.sol'][name].evm.bytecode.object}`]),
  ) as Record<(typeof COMPILED)[number], Hex>
}

const randomNonce = () => bytesToHex(crypto.getRandomValues(new Uint8Array(32)))

let anvil: AnvilNode
/** Anvil's first account: deploys, mints, and submits authorizations others signed. */
let wallet: DevnetClient
/** What the service reads the chain with. */
let reader: PublicClient
/** TestStablecoin named "Test USD". */
let tusd: Address
let deployed: Record<(typeof COMPILED)[number], Address>

beforeAll(async () => {
  anvil = await startAnvil()
  const key = bytesToHex(
    mnemonicToAccount(ANVIL_DEFAULT_MNEMONIC, { addressIndex: 0 }).getHdKey().privateKey!,
  )
  wallet = createDevnetClient(anvil.rpcUrl, key)
  reader = createPublicClient({ transport: http(anvil.rpcUrl, { retryCount: 0 }) })
  tusd = await deployTestStablecoin(wallet, 'Test USD', 'TUSD')
  const bytecodes = compile()
  deployed = {} as typeof deployed
  for (const name of COMPILED) {
    const receipt = await wallet.waitForTransactionReceipt({
      hash: await wallet.deployContract({ abi: [], bytecode: bytecodes[name] }),
    })
    deployed[name] = getAddress(receipt.contractAddress!)
  }
})

afterAll(async () => {
  await anvil?.stop()
})

/** The devnet network as an operator writes it, with these tokens. */
const network = (tokens: Record<string, unknown>[]) =>
  parseNetworksConfig([
    {
      name: 'devnet',
      chainId: DEVNET_CHAIN_ID,
      rpcUrl: anvil.rpcUrl,
      confirmations: 1,
      pollIntervalMs: 1000,
      testnet: true,
      tokens,
    },
  ])[0]!
const token = (symbol: string, address: Address, eip3009?: boolean) => ({
  symbol,
  decimals: 6,
  address,
  ...(eip3009 === undefined ? {} : { eip3009 }),
  price: { fixedUsd: '1' },
})
const ETH = { symbol: 'ETH', decimals: 18, native: true, price: { fixedUsd: '3000' } }

/** The domain of TUSD as the start-up check reads it. */
async function verifiedDomain(): Promise<AuthorizationDomain> {
  const verdict = await verifyNetwork(network([token('TUSD', tusd, true)]), reader, systemClock)
  if (verdict.status !== 'verified') throw new Error(`not verified: ${JSON.stringify(verdict)}`)
  expect(verdict.authorizationDomains).toHaveLength(1)
  return verdict.authorizationDomains[0]!
}

describe('the start-up check reads the EIP-712 domain of tokens declared eip3009', () => {
  test('TestStablecoin declared eip3009: verified, with the domain its contract signs in', async () => {
    const verdict = await verifyNetwork(
      network([token('TUSD', tusd, true), ETH]),
      reader,
      systemClock,
    )
    expect(await reader.getChainId()).toBe(DEVNET_CHAIN_ID)
    expect(verdict).toMatchObject({ network: 'devnet', status: 'verified' })
    expect(verdict.status === 'verified' && verdict.authorizationDomains).toEqual([
      { name: 'Test USD', version: '2', chainId: DEVNET_CHAIN_ID, verifyingContract: tusd },
    ])
  })

  test('the same token without eip3009 (absent or false): verified, no domain read', async () => {
    for (const eip3009 of [undefined, false]) {
      const verdict = await verifyNetwork(
        network([token('TUSD', tusd, eip3009), ETH]),
        reader,
        systemClock,
      )
      expect(verdict).toMatchObject({ status: 'verified', authorizationDomains: [] })
    }
  })

  test('an ERC-20 with no EIP-712 domain declared eip3009: a mismatch naming the token and saying to remove eip3009', async () => {
    const plain = deployed.PlainToken
    // Without the flag the same contract passes: the mismatch below is eip3009's alone.
    expect(
      await verifyNetwork(network([token('PLAIN', plain)]), reader, systemClock),
    ).toMatchObject({ status: 'verified', authorizationDomains: [] })

    const verdict = await verifyNetwork(
      network([token('TUSD', tusd, true), token('PLAIN', plain, true)]),
      reader,
      systemClock,
    )
    expect(verdict.status).toBe('mismatch')
    const problems = verdict.status === 'mismatch' ? verdict.problems : []
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith(
      `network devnet, token PLAIN: EIP-3009 (eip3009: true) of ${plain}: no EIP-712 domain: the contract answers neither eip712Domain() nor name() and version() (`,
    )
    expect(problems[0]).toEndWith('(remove eip3009 if this token does not take authorizations)')
  })

  test('a contract whose DOMAIN_SEPARATOR() is not that of the name and version it states: a mismatch', async () => {
    const wrong = deployed.WrongVersionToken
    const verdict = await verifyNetwork(network([token('WRONG', wrong, true)]), reader, systemClock)
    expect(verdict.status).toBe('mismatch')
    const problems = verdict.status === 'mismatch' ? verdict.problems : []
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith(
      `network devnet, token WRONG: EIP-3009 (eip3009: true) of ${wrong}: DOMAIN_SEPARATOR() is 0x`,
    )
    expect(problems[0]).toContain(
      `not that of name "Wrong USD", version "1", chain ${DEVNET_CHAIN_ID} and this contract`,
    )
    expect(problems[0]).toEndWith('(remove eip3009 if this token does not take authorizations)')
  })

  test("a contract stating its domain by EIP-5267's eip712Domain() (no name() or version()): verified with that domain", async () => {
    const dom = deployed.Eip5267Token
    const verdict = await verifyNetwork(network([token('DOM', dom, true)]), reader, systemClock)
    expect(verdict).toMatchObject({
      status: 'verified',
      authorizationDomains: [
        { name: 'Domain USD', version: '3', chainId: DEVNET_CHAIN_ID, verifyingContract: dom },
      ],
    })
  })
})

describe('transferWithAuthorization on TestStablecoin, signed over the verified domain', () => {
  const balance = (account: Address) =>
    reader.readContract({
      address: tusd,
      abi: eip3009Abi,
      functionName: 'balanceOf',
      args: [account],
    })
  const used = (authorizer: Address, nonce: Hex) =>
    reader.readContract({
      address: tusd,
      abi: eip3009Abi,
      functionName: 'authorizationState',
      args: [authorizer, nonce],
    })

  /** A payer holding `tokens` TUSD and no ETH, and a recipient holding nothing. */
  async function parties(tokens: bigint) {
    const payer = privateKeyToAccount(generatePrivateKey())
    await wallet.waitForTransactionReceipt({
      hash: await wallet.writeContract({
        address: tusd,
        abi: TestStablecoin.abi,
        functionName: 'mint',
        args: [payer.address, tokens],
      }),
    })
    const recipient = privateKeyToAccount(generatePrivateKey()).address
    return { payer, recipient }
  }

  async function authorization(from: Address, to: Address, value: bigint) {
    const { timestamp } = await reader.getBlock()
    return { from, to, value, validAfter: 0n, validBefore: timestamp + 3600n, nonce: randomNonce() }
  }

  /** Submitted by the wallet (not the payer), the signature in v2.2's bytes form. */
  const submit = (a: Awaited<ReturnType<typeof authorization>>, signature: Hex) =>
    wallet.writeContract({
      address: tusd,
      abi: eip3009Abi,
      functionName: 'transferWithAuthorization',
      args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signature],
    })

  test('accepted once when someone else submits it: the tokens move, the nonce is used, the same call again reverts', async () => {
    const domain = await verifiedDomain()
    const { payer, recipient } = await parties(100_000_000n)
    const a = await authorization(payer.address, recipient, 12_345_678n)
    const signature = await payer.signTypedData(transferAuthorizationTypedData(domain, a))
    expect(await used(payer.address, a.nonce)).toBe(false)

    const receipt = await wallet.waitForTransactionReceipt({ hash: await submit(a, signature) })
    expect(receipt.status).toBe('success')
    expect(getAddress(receipt.from)).toBe(wallet.account.address)
    expect(await balance(payer.address)).toBe(100_000_000n - 12_345_678n)
    expect(await balance(recipient)).toBe(12_345_678n)
    // The payer held no ETH and still holds none: the submitter paid the gas.
    expect(await reader.getBalance({ address: payer.address })).toBe(0n)
    expect(await used(payer.address, a.nonce)).toBe(true)
    expect(
      parseEventLogs({ abi: eip3009Abi, eventName: 'AuthorizationUsed', logs: receipt.logs }).map(
        (l) => l.args,
      ),
    ).toEqual([{ authorizer: payer.address, nonce: a.nonce }])

    await expect(submit(a, signature)).rejects.toThrow(
      'FiatTokenV2: authorization is used or canceled',
    )
    expect(await balance(payer.address)).toBe(100_000_000n - 12_345_678n)
    expect(await balance(recipient)).toBe(12_345_678n)
  })

  test('signed with version "1" instead of the contract\'s "2": refused as an invalid signature, nothing moves', async () => {
    const domain = await verifiedDomain()
    const { payer, recipient } = await parties(100_000_000n)
    const a = await authorization(payer.address, recipient, 5_000_000n)
    const signature = await payer.signTypedData(
      transferAuthorizationTypedData({ ...domain, version: '1' }, a),
    )
    await expect(submit(a, signature)).rejects.toThrow('FiatTokenV2: invalid signature')
    expect(await balance(payer.address)).toBe(100_000_000n)
    expect(await balance(recipient)).toBe(0n)
    expect(await used(payer.address, a.nonce)).toBe(false)
    // The same authorization signed over the verified domain goes through: only the version was
    // wrong.
    await wallet.waitForTransactionReceipt({
      hash: await submit(a, await payer.signTypedData(transferAuthorizationTypedData(domain, a))),
    })
    expect(await balance(recipient)).toBe(5_000_000n)
  })
})
