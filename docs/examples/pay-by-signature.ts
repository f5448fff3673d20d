/**
 * A customer paying a transaction by one signature, with no gas: what the pay page's "Pay by
 * signature" button does with a browser wallet, here with a fresh key holding the amount in the
 * devnet's TUSD and no ETH at all (the devnet's funded wallet, anvil's well-known account 0, mints
 * it). The service checks the signed EIP-3009 authorization and its relayer submits it, paying the
 * gas; the payment then confirms like any other.
 *
 *   NODE_EXTRA_CA_CERTS=.data/tls/cert.pem npx bun docs/examples/pay-by-signature.ts <transaction id> <devnet RPC URL>
 *
 * SERVICE_URL defaults to https://localhost:3000. Prints each step, then the completed state.
 */
import { createWalletClient, http, parseAbi, publicActions } from 'viem'
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from 'viem/accounts'
import { foundry } from 'viem/chains'

const [id, rpcUrl] = process.argv.slice(2)
if (!id || !rpcUrl) throw new Error('usage: pay-by-signature.ts <transaction id> <devnet RPC URL>')
const service = process.env.SERVICE_URL ?? 'https://localhost:3000'
const call = async (path: string, body?: unknown) => {
  const r = await fetch(`${service}/pay/${id}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const json = await r.json()
  if (!r.ok) throw new Error(`${path}: ${r.status} ${JSON.stringify(json)}`)
  return json
}

// The customer chooses TUSD; the state then offers what to sign.
const state = await call('/select', { token_symbol: 'TUSD', blockchain_network: 'devnet' })
const offer = state.authorization
if (!offer) throw new Error('paying by signature is not offered (no relayer?)')

const customer = privateKeyToAccount(generatePrivateKey())
const faucet = createWalletClient({
  account: mnemonicToAccount('test test test test test test test test test test test junk'),
  chain: { ...foundry, id: offer.domain.chainId },
  transport: http(rpcUrl),
}).extend(publicActions)
await faucet.waitForTransactionReceipt({
  hash: await faucet.writeContract({
    address: offer.domain.verifyingContract,
    abi: parseAbi(['function mint(address to, uint256 value)']),
    functionName: 'mint',
    args: [customer.address, BigInt(offer.value)],
  }),
})
console.log(`customer ${customer.address}: ${offer.value} TUSD units, 0 ETH`)

// One signature: exactly what is due, to the deposit address, until the quote expires.
const nonce =
  `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex')}` as const
const signature = await customer.signTypedData({
  domain: offer.domain,
  types: {
    TransferWithAuthorization: [
      { name: 'from', type: 'address' },
      { name: 'to', type: 'address' },
      { name: 'value', type: 'uint256' },
      { name: 'validAfter', type: 'uint256' },
      { name: 'validBefore', type: 'uint256' },
      { name: 'nonce', type: 'bytes32' },
    ],
  },
  primaryType: 'TransferWithAuthorization',
  message: {
    from: customer.address,
    to: offer.to,
    value: BigInt(offer.value),
    validAfter: 0n,
    validBefore: BigInt(offer.valid_before),
    nonce,
  },
})
const sent = await call('/authorization', {
  from: customer.address,
  value: offer.value,
  valid_after: '0',
  valid_before: offer.valid_before,
  nonce,
  signature,
})
console.log(`relayed: ${sent.transaction_hash}`)

// The follower finds it and counts confirmations, as for any transfer.
for (let i = 0; i < 120; i++) {
  const s = await call('/state')
  if (s.status === 'completed') {
    const eth = await faucet.getBalance({ address: customer.address })
    console.log(
      JSON.stringify({ status: s.status, amount_received: s.amount_received, eth: eth.toString() }),
    )
    process.exit(0)
  }
  await new Promise((r) => setTimeout(r, 500))
}
throw new Error('not completed within a minute')
