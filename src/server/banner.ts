import type { RunningServer } from './start.ts'

/**
 * What `npm start` prints: where everything is and what to do next
 * (docs/decisions/0024-start-and-configuration.md).
 */
export function banner(s: RunningServer): string {
  const lines = [
    '',
    `Crypto Pay is running at ${s.baseUrl}`,
    `  API           ${s.baseUrl}/api`,
    `  Swagger UI    ${s.baseUrl}/swagger   (OpenAPI JSON at /swagger/json)`,
    `  Pay pages     ${s.baseUrl}/pay/{transaction id}`,
    `  Dashboard     ${s.baseUrl}/dashboard`,
    `  Commerce API  ${s.baseUrl}/commerce/   (Coinbase Commerce's charge API; key in X-CC-Api-Key)`,
    ...(s.httpPort
      ? [`  Plain HTTP    port ${s.httpPort} redirects to HTTPS and refuses /api`]
      : []),
    '  The certificate is self-signed: curl needs -k, browsers a click-through.',
  ]
  if (s.demo?.testKey) {
    lines.push(
      '',
      `Dashboard sign-in (shown once; keep it): ${s.demo.user.email} / ${s.demo.user.password}`,
      `  ${s.baseUrl}/dashboard`,
      '',
      `Demo project ${s.demo.projectId} was created with this test API key (shown once; keep it):`,
      `  ${s.demo.testKey}`,
      '',
      'Create a test transaction:',
      `  curl -k ${s.baseUrl}/api/transactions/create \\`,
      `    -H "Authorization: Bearer ${s.demo.testKey}" \\`,
      `    -H "Content-Type: application/json" \\`,
      `    -d '{"amount": 25.00, "order_id": "order-1001", "order_description": "Two coffees"}'`,
      s.devnet
        ? 'Then open the payment_url it returns in a browser, choose TUSD and press "Pay with test wallet".'
        : 'Then open the payment_url it returns in a browser.',
      `Priced in another currency: add "currency": "EUR" (offered in test mode: ${s.services.chain.rates.offered('test').join(', ')})${s.devnet ? '; TEUR pays euros at par' : ''}.`,
    )
  } else if (!s.demo) {
    // PostgreSQL: no demo project is made; the operator makes the first one.
    lines.push(
      '',
      'Next: make a project, a key and a dashboard user (the CLI needs the same DATABASE_URL and SECRET_KEY):',
      '  npm run -s cli -- project create --name "My shop" --json',
      '  npm run cli -- key create --project proj_... --mode test --name "My key"',
      `  npm run cli -- user create --email you@example.com --password '<12+ characters>' --project proj_...`,
    )
  } else if (s.demo) {
    lines.push(
      '',
      `Demo project: ${s.demo.projectId}. Its first test key was printed on the first start.`,
      `Make another: npm run cli -- key create --project ${s.demo.projectId} --mode test --name "My key"`,
      `Dashboard: sign in as ${s.demo.user.email} with the password printed on the first start, or add yourself:`,
      `  npm run cli -- user create --email you@example.com --password '<12+ characters>' --project ${s.demo.projectId}`,
    )
  }
  if (!s.devnet) {
    const networks = s.services.chain.networks
    lines.push(
      '',
      networks.length
        ? `Networks (NETWORKS_CONFIG): ${networks.map((n) => `${n.name} (chain ${n.chainId}${n.testnet ? ', testnet' : ''})`).join(', ')}`
        : 'NETWORKS_CONFIG lists no network: transactions can be created, but no payment can be taken.',
      'Going live: give each project the xpub its live deposit addresses come from, made offline from a mnemonic kept for this service only:',
      '  npm run -s xpub          (reads the mnemonic on this machine, prints the xpub and the first addresses; nothing is sent)',
      '  npm run cli -- project set-xpub --project proj_... --mode live --xpub xpub6...',
      'Money out (sweeps to your treasury, refunds) runs on your own machine, keys never sent: npm run treasury -- --help',
    )
  }
  if (s.devnet) {
    const n = s.devnet.networks[0]
    lines.push(
      '',
      `Devnet (no NETWORKS_CONFIG): anvil at ${s.devnet.rpcUrl}, network "${n.name}", chain id ${n.chainId}, ${n.confirmations} confirmations`,
      `  tokens ${n.tokens.map((t) => `${t.symbol}${t.kind === 'erc20' ? ` (${t.address})` : ' (native)'}`).join(', ')}`,
      `  funded test wallet ${s.devnet.wallet.address} (anvil's well-known account 0; test mode only)`,
      `  sweeps and refunds: npm run treasury -- ... --network ${n.name} --rpc-url ${s.devnet.rpcUrl} (docs/operating/money-out.md)`,
    )
  }
  return `${lines.join('\n')}\n`
}
