/**
 * What every treasury command starts from: the service's API (and the network it names), the
 * network's RPC checked to serve that network's chain, and, where a command signs, the merchant's
 * deposit key checked against the project's before anything is signed or sent.
 */
import { readFileSync } from 'node:fs'
import type { Address, LocalAccount } from 'viem'
import { ApiRefusal, createApiClient, type ApiClient, type ApiNetwork } from './api.ts'
import { createTreasuryChain, type TreasuryChain } from './chain.ts'
import { loadDepositKeys, loadGasAccount, type DepositKeys } from './keys.ts'
import { depositKeyFingerprint } from '../chain/deposit-addresses.ts'

/** A command refused (exit 1), or its command line is wrong (exit 2). */
export class Refused extends Error {
  constructor(
    message: string,
    readonly usage = false,
  ) {
    super(message)
  }
}

export interface Options {
  apiUrl?: string
  apiKey?: string
  caFile?: string
  network?: string
  rpcUrl?: string
  mnemonicFile?: string
  passphraseFile?: string
  xprvFile?: string
  path?: string
  gasKeyFile?: string
}

export interface Session {
  api: ApiClient
  network: ApiNetwork
  chain: TreasuryChain
  /** Checked against the project's deposit key. */
  keys: DepositKeys | null
  sponsor: (LocalAccount & { address: Address }) | null
}

/**
 * The API client, from `--api-url` (or CRYPTO_PAY_API_URL), `--api-key` (or CRYPTO_PAY_API_KEY) and
 * `--ca-file`.
 */
export function apiFrom(o: Options): ApiClient {
  const url = o.apiUrl ?? process.env.CRYPTO_PAY_API_URL
  const key = o.apiKey ?? process.env.CRYPTO_PAY_API_KEY
  if (!url)
    throw new Refused(
      "--api-url (or CRYPTO_PAY_API_URL) is required: the service's address, such as https://pay.example",
      true,
    )
  if (!/^https:\/\//i.test(url))
    throw new Refused(
      '--api-url must be an https:// address: the service answers its API over HTTPS only',
      true,
    )
  if (!key)
    throw new Refused(
      '--api-key (or, better, CRYPTO_PAY_API_KEY, which the process list does not show) is required',
      true,
    )
  let ca: string | null = null
  const caFile = o.caFile ?? process.env.CRYPTO_PAY_CA_FILE
  if (caFile) {
    try {
      ca = readFileSync(caFile, 'utf8')
    } catch {
      throw new Refused(`cannot read the certificate file ${caFile}`, true)
    }
  }
  return createApiClient({ url, key, ca })
}

/**
 * Opens a session on one network. `keys`: the deposit key is loaded and must derive the
 * project's xpub for the key's mode; `sponsor`: the gas account is loaded (optional, or required).
 */
export async function openSession(
  o: Options,
  need: { keys: boolean; sponsor: 'no' | 'optional' | 'required' },
): Promise<Session> {
  const api = apiFrom(o)
  if (!o.network) throw new Refused('--network is required', true)
  if (!o.rpcUrl)
    throw new Refused(`--rpc-url is required: the JSON-RPC address of a node of ${o.network}`, true)
  if (!/^https?:\/\//i.test(o.rpcUrl))
    throw new Refused('--rpc-url must be an http(s) address', true)
  if (need.sponsor === 'required' && !o.gasKeyFile)
    throw new Refused(
      '--gas-key-file is required: the account that pays the gas (a file holding its private key)',
      true,
    )

  // The keys first: a wrong mnemonic, passphrase or path is refused before the network is even
  // asked.
  let keys: DepositKeys | null = null
  if (need.keys) {
    const loaded = loadDepositKeys({
      mnemonicFile: o.mnemonicFile,
      passphraseFile: o.passphraseFile,
      xprvFile: o.xprvFile,
      path: o.path,
    })
    if (!loaded.ok)
      throw new Refused(
        loaded.message,
        /give the deposit key|--path|goes with/.test(loaded.message),
      )
    keys = loaded.value
    const project = await api.depositKey().catch((e) => {
      throw e instanceof ApiRefusal && e.status === 404
        ? new Refused("this project has no deposit key for the API key's mode: nothing to sign for")
        : e
    })
    if (project.fingerprint !== depositKeyFingerprint(keys.xpub)) {
      keys.wipe()
      throw new Refused(
        `the key given does not derive this project's ${project.mode} deposit key (the account at ${keys.path} gives another xpub): check the mnemonic, the passphrase and --path. Nothing was signed or sent`,
      )
    }
  }
  let sponsor: Session['sponsor'] = null
  if (o.gasKeyFile && need.sponsor !== 'no') {
    const gas = loadGasAccount(o.gasKeyFile)
    if (!gas.ok) throw new Refused(gas.message)
    sponsor = gas.value
  }

  const networks = await api.networks()
  const network = networks.find((n) => n.name === o.network)
  if (!network)
    throw new Refused(
      `the service has no network ${o.network} for this key's mode (it has: ${networks.map((n) => n.name).join(', ') || 'none'})`,
    )
  const chain = createTreasuryChain({ rpcUrl: o.rpcUrl, chainId: network.chain_id })
  const chainId = await chain.chainId().catch((e) => {
    throw new Refused(
      `the RPC at --rpc-url does not answer: ${(e as Error).message.split('\n')[0]}`,
    )
  })
  if (chainId !== network.chain_id)
    throw new Refused(
      `the RPC serves chain ${chainId}, but ${network.name} is chain ${network.chain_id}: wrong --rpc-url`,
    )
  return { api, network, chain, keys, sponsor }
}
