/**
 * Two instances sharing one relayer key (PostgreSQL): payments by signature sent to both at once
 * all go through, each relayer transaction with a nonce of its own. Each instance asks the node
 * for the account's next nonce; without the database's lock around a submission (src/db/client.ts,
 * `exclusive`), two taking the same nonce at once would have one refused.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { bytesToHex, getAddress, type Hex } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { TestStablecoin } from '../../src/chain/artifacts/index.ts'
import { createDevnetClient, type Devnet, type DevnetClient } from '../../src/chain/devnet.ts'
import { transferAuthorizationTypedData } from '../../src/chain/eip3009.ts'
import { waitUntil } from '../helpers/chain.ts'
import { api, startTestServer, type TestServer } from '../helpers/server.ts'
import { RELAYER, relayerKeyDir } from '../helpers/relayer.ts'
import { useStack } from '../helpers/stack.ts'

const { keyFile: KEY_FILE } = relayerKeyDir('relayer-instances-')
const SECRET_KEY = randomBytes(32).toString('hex')
const PAYMENTS = 8

describe.if(!!process.env.DATABASE_URL)('one relayer key, two instances [postgres]', () => {
  let devnet: Devnet
  let wallet: DevnetClient
  let first: TestServer
  let second: TestServer
  let key: string
  useStack(
    'postgres',
    {
      devnet: { confirmations: 2, pollIntervalMs: 200 },
      env: { RELAYER_KEY_FILE: KEY_FILE, SECRET_KEY },
    },
    async (s) => {
      devnet = s.devnet
      wallet = createDevnetClient(devnet.rpcUrl, devnet.wallet.privateKey)
      first = s.t
      key = s.key
      second = await startTestServer('postgres', {
        RELAYER_KEY_FILE: KEY_FILE,
        SECRET_KEY,
        NETWORKS_CONFIG: s.networksFile!,
        DATABASE_URL: first.databaseUrl!,
      })
    },
  )
  afterAll(() => second?.stop())

  test('payments sent to both at once all go through, each relayer transaction with its own nonce', async () => {
    const post = (t: TestServer, path: string, body: unknown) =>
      t.fetch(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    const signed = await Promise.all(
      Array.from({ length: PAYMENTS }, async (_, i) => {
        const r = await api(first, key).create({ amount: 1 + i })
        const id = ((await r.json()) as any).transaction.id as string
        const s = (await (
          await post(first, `/pay/${id}/select`, {
            token_symbol: 'TUSD',
            blockchain_network: 'devnet',
          })
        ).json()) as any
        const payer = privateKeyToAccount(generatePrivateKey())
        return { id, payer, offer: s.authorization }
      }),
    )
    // Funded one after another: the devnet wallet's own nonces.
    for (const { payer, offer } of signed)
      await wallet.waitForTransactionReceipt({
        hash: await wallet.writeContract({
          address: devnet.stablecoin,
          abi: TestStablecoin.abi,
          functionName: 'mint',
          args: [payer.address, BigInt(offer.value)],
        }),
      })
    const bodies = await Promise.all(
      signed.map(async ({ payer, offer }) => {
        const message = {
          from: payer.address,
          to: getAddress(offer.to),
          value: BigInt(offer.value),
          validAfter: 0n,
          validBefore: BigInt(offer.valid_before),
          nonce: bytesToHex(crypto.getRandomValues(new Uint8Array(32))),
        }
        return {
          from: payer.address,
          value: offer.value,
          valid_after: '0',
          valid_before: offer.valid_before,
          nonce: message.nonce,
          signature: await payer.signTypedData(
            transferAuthorizationTypedData(offer.domain, message) as never,
          ),
        }
      }),
    )
    const before = await wallet.getTransactionCount({ address: RELAYER.address })
    const answers = await Promise.all(
      signed.map(({ id }, i) =>
        post(i % 2 === 0 ? first : second, `/pay/${id}/authorization`, bodies[i]),
      ),
    )
    expect(answers.map((r) => r.status)).toEqual(Array(PAYMENTS).fill(200))
    const hashes = await Promise.all(
      answers.map(async (r) => ((await r.json()) as any).transaction_hash as Hex),
    )
    const nonces = await Promise.all(
      hashes.map(async (hash) => (await wallet.getTransaction({ hash })).nonce),
    )
    expect(new Set(nonces).size).toBe(PAYMENTS)
    expect(Math.min(...nonces)).toBe(before)
    for (const { id } of signed)
      await waitUntil(
        `${id} completed`,
        () => api(first, key).transaction(id),
        (x) => x.status === 'completed',
      )
  })
})
