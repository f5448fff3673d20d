import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { cliSuite } from '../helpers/cli-suite.ts'
import { freshDataDir } from '../helpers/databases.ts'
import { runCli } from '../helpers/processes.ts'
import { startStack } from '../helpers/stack.ts'

// docs/decisions/0025-operator-cli.md: the operator's CLI run in this process (the way `npm run
// cli` runs it, without the process), on the embedded database with and without a server (in
// this process too) holding it. test/integration/cli-processes.test.ts runs the same suite with a
// server process and on PostgreSQL, and the CLI as a process.

const tempDirs: string[] = []
afterAll(() => {
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true })
})
async function dataDir() {
  const d = await freshDataDir()
  tempDirs.push(d)
  return d
}

cliSuite(
  'CLI on the embedded database, no server running (the CLI opens PGlite itself)',
  false,
  async () => {
    const d = await dataDir()
    return { env: { DATA_DIR: d }, dataDir: d, server: null, cleanup: async () => {} }
  },
  'some',
)

cliSuite(
  'CLI on the embedded database, server running (through the admin socket)',
  true,
  async () => {
    const stack = await startStack('pglite', { project: false })
    return {
      env: { DATA_DIR: stack.t.dataDir },
      dataDir: stack.t.dataDir,
      server: stack.t,
      cleanup: () => stack.stop(),
    }
  },
)

describe('CLI usage errors', () => {
  test('a missing flag is exit 2 even when the database cannot be reached', async () => {
    const r = await runCli(['project', 'create', '--json'], {
      env: { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' },
    })
    expect(r.code).toBe(2)
    expect(r.json.error.message).toContain('--name is required')
  })

  test('--json without a command prints a JSON error and exits 2', async () => {
    const d = await dataDir()
    const r = await runCli(['--json'], { env: { DATA_DIR: d } })
    expect(r.code).toBe(2)
    expect(r.json?.error?.message).toContain('Usage')
  })
})
