/**
 * Checks a configured network against the chain behind its RPC before anything is quoted on it:
 * one wrong address in a config (a preset gone stale, a typo that still checksums) would tell
 * customers to pay the wrong contract. For every network:
 * - `eth_chainId` equals the config's `chainId`;
 * - every ERC-20 answers `decimals()` equal to the config's and a `symbol()` among the expected
 *   answers (`onchainSymbols`, else the label), compared case-insensitively;
 * - every Chainlink feed answers `decimals()`, a `description()` among the expected ones
 *   (`descriptions`, else `"<symbol> / USD"`) and a `latestRoundData()` the price reader accepts
 *   (positive, complete, no older than `maxAgeSeconds`); so does each fiat currency's rate feed
 *   (`fx`, described `"<CODE> / USD"`, e.g. "EUR / USD").
 *
 * The verdict tells a disagreement from silence. A node that answers differently (another chain
 * id, another symbol, no contract at the address: an empty answer or a revert) is a `mismatch`,
 * with one line per problem naming network, token, expected and found. A node that cannot be
 * asked (refused, timed out, HTTP errors, rate limited) is `unreachable`: nothing is known yet,
 * and the check is made again before the network is followed.
 *
 * - every token declared `eip3009` has an EIP-712 domain its contract states and its
 *   `DOMAIN_SEPARATOR()` agrees with (eip3009.ts): the domain customers' signatures are made in.
 *
 * A verified network also says whether its chain runs EIP-7702 (eip7702-probe.ts): the route
 * money takes out of deposit addresses there; and whether Multicall3 has code at its canonical
 * address (deposit-account.ts `MULTICALL3`, from github.com/mds1/multicall3, README
 * "Deployments"): the follower then reads the native balances of deposit addresses through it
 * (follower/native-balances.ts), else by one eth_getBalance each.
 *
 * A node that answers a call with an error of its own, rather than data, is asked again
 * (read-again.ts): one such answer would otherwise start a server on a config the chain
 * contradicts.
 */
import {
  BaseError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  type Address,
  type PublicClient,
} from 'viem'
import type { Clock } from '../lib/clock.ts'
import { errorSummary } from '../lib/logger.ts'
import type { NetworkConfig, PriceSource, TokenConfig } from './networks-config.ts'
import { aggregatorV3Abi, createPriceReader } from './prices.ts'
import { probeEip7702, type Eip7702Verdict } from './eip7702-probe.ts'
import { readAgainOnErrorAnswer } from './read-again.ts'
import { type AuthorizationDomain, readAuthorizationDomain } from './eip3009.ts'
import { MULTICALL3 } from './deposit-account.ts'

export type Verdict =
  /**
   * `eip7702`: whether the chain runs EIP-7702 (eip7702-probe.ts), which decides how money leaves
   * deposit addresses.
   */
  | {
      network: string
      status: 'verified'
      eip7702: Eip7702Verdict
      /** The EIP-712 domain of each token declared `eip3009`, as its contract states it. */
      authorizationDomains: AuthorizationDomain[]
      /** Whether Multicall3 has code at its canonical address (`eth_getCode`, non-empty). */
      multicall3: boolean
    }
  | { network: string; status: 'mismatch'; problems: string[] }
  | { network: string; status: 'unreachable'; error: string }

const erc20Abi = [
  {
    type: 'function',
    name: 'decimals',
    stateMutability: 'view',
    inputs: [],
    outputs: [{ name: '', type: 'uint8' }],
  },
  {
    type: 'function',
    name: 'symbol',
    stateMutability: 'view',
    inputs: [],
    outputs: [{ name: '', type: 'string' }],
  },
] as const
const descriptionAbi = [
  {
    type: 'function',
    name: 'description',
    stateMutability: 'view',
    inputs: [],
    outputs: [{ name: '', type: 'string' }],
  },
] as const

/** The node answered, and the answer is not the expected one. */
class Disagreement extends Error {}

type Client = Pick<PublicClient, 'readContract' | 'getChainId' | 'call' | 'getCode'>

export async function verifyNetwork(
  network: NetworkConfig,
  client: Client,
  clock: Clock,
): Promise<Verdict> {
  try {
    return await readAgainOnErrorAnswer(() => checkNetwork(network, client, clock))
  } catch (error) {
    return { network: network.name, status: 'unreachable', error: errorSummary(error) }
  }
}

/** A verdict, or a throw when the node could not be asked. */
async function checkNetwork(
  network: NetworkConfig,
  client: Client,
  clock: Clock,
): Promise<Verdict> {
  const name = network.name
  const chainId = await client.getChainId()
  if (chainId !== network.chainId)
    return {
      network: name,
      status: 'mismatch',
      problems: [`network ${name}: chain id expected ${network.chainId}, found ${chainId}`],
    }
  const [found, rates] = await Promise.all([
    Promise.all(network.tokens.map((t) => verifyToken(network, t, client, clock))),
    Promise.all(
      (network.fx ?? []).map(({ currency, rate }) =>
        rate.kind === 'chainlink'
          ? verifyFeed(
              { symbol: currency, price: rate },
              rate.feed,
              rate.descriptions,
              client,
              clock,
              (what, address) => `network ${name}, ${currency} rate: ${what} ${address}`,
            )
          : [],
      ),
    ),
  ])
  const problems = [...found.flatMap((f) => f.problems), ...rates.flat()]
  if (problems.length) return { network: name, status: 'mismatch', problems }
  const [eip7702, multicall3] = await Promise.all([
    probeEip7702(client, network.chainId),
    client.getCode({ address: MULTICALL3 }),
  ])
  return {
    network: name,
    status: 'verified',
    eip7702,
    authorizationDomains: found.flatMap((f) => (f.domain ? [f.domain] : [])),
    multicall3: !!multicall3 && multicall3 !== '0x',
  }
}

/**
 * Multicall3's address (deposit-account.ts `MULTICALL3`, from github.com/mds1/multicall3, README
 * "Deployments") where the network was verified with code there; undefined otherwise.
 */
export const multicall3Of = (verdict: Verdict | undefined): Address | undefined =>
  verdict?.status === 'verified' && verdict.multicall3 ? MULTICALL3 : undefined

/**
 * One line per problem with the token, and its EIP-712 domain when it takes authorizations;
 * throws when the node cannot be asked.
 */
async function verifyToken(
  network: NetworkConfig,
  token: TokenConfig,
  client: Client,
  clock: Clock,
): Promise<{ problems: string[]; domain?: AuthorizationDomain }> {
  const about = (what: string, address: Address) =>
    `network ${network.name}, token ${token.symbol}: ${what} ${address}`
  const [contract, feed, signatures] = await Promise.all([
    token.kind === 'erc20' ? verifyErc20(token, token.address, client, about) : [],
    token.price.kind === 'chainlink'
      ? verifyFeed(token, token.price.feed, token.price.descriptions, client, clock, about)
      : [],
    token.kind === 'erc20' && token.eip3009
      ? readAuthorizationDomain(client, token.address, network.chainId, ask)
      : null,
  ])
  const problems = [...contract, ...feed]
  if (signatures && !signatures.ok && token.kind === 'erc20')
    problems.push(
      `${about('EIP-3009 (eip3009: true) of', token.address)}: ${signatures.problem} (remove eip3009 if this token does not take authorizations)`,
    )
  return signatures?.ok ? { problems, domain: signatures.domain } : { problems }
}

type About = (what: string, address: Address) => string

async function verifyErc20(
  token: TokenConfig,
  address: Address,
  client: Client,
  about: About,
): Promise<string[]> {
  const [decimals, symbol] = await Promise.all([
    ask(client.readContract({ address, abi: erc20Abi, functionName: 'decimals' })),
    ask(client.readContract({ address, abi: erc20Abi, functionName: 'symbol' })),
  ])
  // A contract that does not answer decimals() is said to be no ERC-20, once.
  if (decimals instanceof Disagreement)
    return [`${about('no ERC-20 answers decimals() at', address)} (${decimals.message})`]
  const problems: string[] = []
  if (decimals !== token.decimals)
    problems.push(
      `${about('decimals() of', address)}: expected ${token.decimals}, found ${decimals}`,
    )
  const expected = (token.kind === 'erc20' ? token.onchainSymbols : undefined) ?? [token.symbol]
  if (symbol instanceof Disagreement)
    problems.push(`${about('no ERC-20 answers symbol() at', address)} (${symbol.message})`)
  else if (!expected.some((s) => s.toLowerCase() === symbol.toLowerCase()))
    problems.push(
      `${about('symbol() of', address)}: expected ${quoted(expected)}, found ${JSON.stringify(symbol)}`,
    )
  return problems
}

async function verifyFeed(
  token: { symbol: string; price: PriceSource },
  feed: Address,
  descriptions: string[] | undefined,
  client: Client,
  clock: Clock,
  about: About,
): Promise<string[]> {
  const [decimals, description] = await Promise.all([
    ask(client.readContract({ address: feed, abi: aggregatorV3Abi, functionName: 'decimals' })),
    ask(client.readContract({ address: feed, abi: descriptionAbi, functionName: 'description' })),
  ])
  const silent =
    decimals instanceof Disagreement
      ? decimals
      : description instanceof Disagreement
        ? description
        : null
  if (silent) return [`${about('no Chainlink feed answers at', feed)} (${silent.message})`]
  const expected = descriptions ?? [`${token.symbol} / USD`]
  if (!expected.some((d) => d.toLowerCase() === (description as string).trim().toLowerCase())) {
    return [
      `${about('description() of the price feed', feed)}: expected ${quoted(expected)}, found ${JSON.stringify(description)}`,
    ]
  }
  const price = await createPriceReader({ client, clock }).read(token)
  if (price.ok) return []
  if (price.reason === 'unavailable') throw new Error(price.message)
  const hint =
    price.reason === 'stale'
      ? ' (if Chainlink lists a longer heartbeat for this feed, set price.maxAgeSeconds)'
      : ''
  return [
    `${about('latestRoundData() of the price feed', feed)}: ${price.reason}: ${price.message}${hint}`,
  ]
}

/**
 * The answer, a Disagreement when the contract is not what was asked for, or a throw when the node
 * could not be asked.
 */
async function ask<T>(call: Promise<T>): Promise<T | Disagreement> {
  try {
    return await call
  } catch (error) {
    const known =
      error instanceof BaseError
        ? error.walk(
            (e) =>
              e instanceof ContractFunctionZeroDataError ||
              e instanceof ContractFunctionRevertedError,
          )
        : null
    if (known instanceof ContractFunctionZeroDataError)
      return new Disagreement('no contract code, or not this function')
    if (known instanceof ContractFunctionRevertedError)
      return new Disagreement(`the call reverted${known.reason ? `: ${known.reason}` : ''}`)
    // An answer that does not decode (a bytes32 symbol, garbage) is an answer too.
    if (
      error instanceof BaseError &&
      /decod|AbiDecoding|data size|out of bounds/i.test(error.name + error.shortMessage)
    )
      return new Disagreement(error.shortMessage)
    throw error
  }
}

const quoted = (list: string[]) => list.map((s) => JSON.stringify(s)).join(' or ')

/** Thrown at start-up: networks whose node answered differently than their config says. */
export class NetworkMismatchError extends Error {
  constructor(readonly problems: string[]) {
    super(
      `the chain disagrees with the networks config (fix the config, or the RPC URL if it points at another chain):\n${problems.map((p) => `  ${p}`).join('\n')}`,
    )
    this.name = 'NetworkMismatchError'
  }
}
