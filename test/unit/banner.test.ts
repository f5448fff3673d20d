import { describe, expect, test } from 'bun:test'
import { banner } from '../../src/server/banner.ts'
import type { RunningServer } from '../../src/server/start.ts'

/** The banner names the next step on every kind of start (docs/decisions/0058-first-contact.md). */
const server = (
  o: Partial<RunningServer> & { networks?: { name: string; chainId: number; testnet: boolean }[] },
) =>
  ({
    baseUrl: 'https://localhost:3000',
    httpPort: 3080,
    demo: null,
    devnet: null,
    services: { chain: { networks: o.networks ?? [] } },
    ...o,
  }) as unknown as RunningServer

describe('banner()', () => {
  test('on PostgreSQL (no demo project) it says how to make the first project, key and user', () => {
    const text = banner(server({ networks: [{ name: 'base', chainId: 8453, testnet: false }] }))
    expect(text).toContain('Next: make a project, a key and a dashboard user')
    expect(text).toContain('npm run -s cli -- project create --name "My shop" --json')
    expect(text).toContain('npm run cli -- key create --project proj_... --mode test')
  })

  test('with NETWORKS_CONFIG it names the networks and the going-live step: an xpub made offline', () => {
    const text = banner(
      server({
        networks: [
          { name: 'base', chainId: 8453, testnet: false },
          { name: 'sepolia', chainId: 11155111, testnet: true },
        ],
      }),
    )
    expect(text).toContain(
      'Networks (NETWORKS_CONFIG): base (chain 8453), sepolia (chain 11155111, testnet)',
    )
    expect(text).toContain('npm run -s xpub')
    expect(text).toContain('project set-xpub --project proj_... --mode live')
    expect(text).toContain('a mnemonic kept for this service only')
    expect(text).toContain('npm run treasury -- --help')
  })

  test('with NETWORKS_CONFIG listing nothing it says no payment can be taken', () => {
    expect(banner(server({}))).toContain('NETWORKS_CONFIG lists no network')
  })
})
