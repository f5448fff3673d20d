import { afterAll, describe, expect, test } from 'bun:test'
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { cliSuite } from '../helpers/cli-suite.ts'
import { freshDataDir, freshPostgres } from '../helpers/databases.ts'
import { killAllProcesses, runCli, spawnServer } from '../helpers/processes.ts'

// docs/decisions/0025-operator-cli.md: the operator's CLI beside a server process (the admin
// socket, its lock after a SIGKILL), on PostgreSQL, and as a process itself (`npm run cli`).
// test/api/cli.test.ts runs the same suite with everything in one process.

afterAll(killAllProcesses)

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
  'CLI on the embedded database, a server process running (through the admin socket)',
  true,
  async () => {
    const d = await dataDir()
    const server = await spawnServer({ DATA_DIR: d, PORT: '0', HTTP_PORT: '0' })
    return {
      env: { DATA_DIR: d },
      dataDir: d,
      server,
      cleanup: async () => void (await server.stop()),
    }
  },
)

if (process.env.DATABASE_URL) {
  cliSuite(
    'CLI on PostgreSQL, server running (the CLI talks to the database directly)',
    true,
    async () => {
      const pg = await freshPostgres()
      const d = await dataDir()
      const server = await spawnServer({ ...pg.env, DATA_DIR: d, PORT: '0', HTTP_PORT: '0' })
      return {
        env: { ...pg.env, DATA_DIR: d },
        dataDir: d,
        server,
        cleanup: async () => {
          await server.stop()
          await pg.drop()
        },
      }
    },
  )
} else {
  test.skip('CLI on PostgreSQL: set DATABASE_URL to run it', () => {})
}

describe('CLI and the embedded database lock', () => {
  test('without a server the CLI leaves neither lock nor socket behind', async () => {
    const d = await dataDir()
    const r = await runCli(['project', 'create', '--name', 'x', '--json'], { env: { DATA_DIR: d } })
    expect(r.code).toBe(0)
    expect(existsSync(join(d, 'pglite.lock'))).toBe(false)
    expect(existsSync(join(d, 'run', 'admin.sock'))).toBe(false)
  })

  test('with a server running the CLI does not fail on its lock, and the socket is private to the owner', async () => {
    const d = await dataDir()
    const server = await spawnServer({ DATA_DIR: d, PORT: '0', HTTP_PORT: '0' })
    try {
      expect(JSON.parse(readFileSync(join(d, 'pglite.lock'), 'utf8')).pid).toBe(server.pid)
      expect(statSync(join(d, 'run', 'admin.sock')).mode & 0o777).toBe(0o600)
      expect(statSync(join(d, 'run')).mode & 0o777).toBe(0o700)
      const r = await runCli(['project', 'create', '--name', 'while serving', '--json'], {
        env: { DATA_DIR: d },
      })
      expect(r.code).toBe(0)
      expect(r.json.name).toBe('while serving')
      // The server still holds the database: the CLI went through the socket.
      expect(JSON.parse(readFileSync(join(d, 'pglite.lock'), 'utf8')).pid).toBe(server.pid)
    } finally {
      await server.stop()
    }
  })

  test('after a server is killed (SIGKILL) the CLI takes over its stale lock and socket', async () => {
    const d = await dataDir()
    const server = await spawnServer({ DATA_DIR: d, PORT: '0', HTTP_PORT: '0' })
    server.kill('SIGKILL')
    await server.exited
    expect(existsSync(join(d, 'pglite.lock'))).toBe(true)
    const r = await runCli(['project', 'create', '--name', 'after a crash', '--json'], {
      env: { DATA_DIR: d },
    })
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(existsSync(join(d, 'pglite.lock'))).toBe(false)
  })
})

describe('the CLI as a process (npm run cli): what the tests above run in theirs', () => {
  test('exit 0 with the result on stdout, 1 for a refusal and 2 for bad usage with the error on stderr, and --help', async () => {
    const d = await dataDir()
    const env = { DATA_DIR: d }
    const made = await runCli(['project', 'create', '--name', 'a process', '--json'], {
      env,
      process: true,
    })
    expect({ code: made.code, stderr: made.stderr, name: made.json?.name }).toEqual({
      code: 0,
      stderr: '',
      name: 'a process',
    })
    const refused = await runCli(
      ['project', 'set-status', '--project', 'proj_nope', '--status', 'inactive', '--json'],
      { env, process: true },
    )
    expect({ code: refused.code, stdout: refused.stdout }).toEqual({ code: 1, stdout: '' })
    expect(refused.json.error.message).toMatch(/proj_nope/)
    const usage = await runCli(['project', 'create', '--json'], { env, process: true })
    expect({ code: usage.code, stdout: usage.stdout }).toEqual({ code: 2, stdout: '' })
    const help = await runCli(['--help'], { env, process: true })
    expect({ code: help.code, usage: help.stdout.includes('Usage') }).toEqual({
      code: 0,
      usage: true,
    })
  })
})
