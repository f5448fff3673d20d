/**
 * An agent paying for an x402 resource on the devnet with the reference client (`@x402/fetch` and
 * `@x402/evm`), unmodified. It starts with a fresh key holding the price in the devnet's TUSD and
 * no ETH at all (the devnet's funded wallet, anvil's well-known account 0, mints it), and pays by
 * one signature: the facilitator's relayer pays the gas.
 *
 *   npx bun docs/examples/x402-agent.ts http://127.0.0.1:4021/weather <devnet RPC URL>
 *
 * The devnet's RPC URL is printed by `npm start`. Prints the resource and the settlement.
 */
import { ExactEvmScheme } from '@x402/evm'
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch'
import { createWalletClient, http, parseAbi, publicActions } from 'viem'
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount } from 'viem/accounts'
import { foundry } from 'viem/chains'

const [resource, rpcUrl] = process.argv.slice(2)
if (!resource || !rpcUrl) throw new Error('usage: x402-agent.ts <resource URL> <devnet RPC URL>')

// What the resource costs: its 402 says.
const unpaid = await fetch(resource)
const required = JSON.parse(atob(unpaid.headers.get('payment-required') ?? ''))
const offer = required.accepts[0] as { network: string; asset: `0x${string}`; amount: string }

const agent = privateKeyToAccount(generatePrivateKey())
const faucet = createWalletClient({
  account: mnemonicToAccount('test test test test test test test test test test test junk'),
  chain: { ...foundry, id: Number(offer.network.split(':')[1]) },
  transport: http(rpcUrl),
}).extend(publicActions)
await faucet.waitForTransactionReceipt({
  hash: await faucet.writeContract({
    address: offer.asset,
    abi: parseAbi(['function mint(address to, uint256 value)']),
    functionName: 'mint',
    args: [agent.address, BigInt(offer.amount)],
  }),
})

const pay = wrapFetchWithPayment(
  fetch,
  new x402Client()
    .register(offer.network as `${string}:${string}`, new ExactEvmScheme(agent))
    // The devnet's token is not one the client knows; allow it by name.
    .setSpendControls({
      allowedAssets: [{ network: offer.network as `${string}:${string}`, asset: offer.asset }],
    }),
)
const res = await pay(resource)
const settlement = res.headers.get('payment-response')
console.log(
  JSON.stringify({
    status: res.status,
    body: await res.json(),
    settlement: settlement ? decodePaymentResponseHeader(settlement) : null,
    agent: agent.address,
    eth: (await faucet.getBalance({ address: agent.address })).toString(),
  }),
)
