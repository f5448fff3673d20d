/**
 * docs/decisions/0058-first-contact.md: what a newcomer meets on a machine that is not this team's.
 *  - Browser tests skip, saying why and how to enable them, when no Chromium is found; under
 *    CI=true they never skip (a missing browser fails them).
 *  - The PostgreSQL variant runs against a DATABASE_URL naming a database that does not exist.
 *  - `npm run -s cli -- ... --json` prints one JSON document and nothing else; the human form
 *    prints lists as aligned tables.
 */
import { describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { backends, freshDataDir } from '../helpers/databases.ts'
import { dashboardClient, memberOf } from '../helpers/dashboard.ts'
import { PATH_TO } from '../helpers/lifecycle.ts'
import { startTestServer } from '../helpers/server.ts'
import { createTransaction } from '../helpers/webhook-cli.ts'
import { BUN, ROOT } from '../helpers/processes.ts'
import { run } from '../helpers/run.ts'

/**
 * `env` over the runner's environment, with CI and DATABASE_URL unset (empty is unset for both).
 */
const cleanEnv = (env: Record<string, string>): Record<string, string> => ({
  CI: '',
  DATABASE_URL: '',
  ...env,
})

describe('browser tests without a browser', () => {
  const SUITE = 'test/e2e/swagger-ui.test.ts'
  test('outside CI every browser test file is skipped (its hooks too), with a message naming what to install or set', async () => {
    const r = await run([BUN, 'test', '--timeout', '120000', 'test/e2e'], {
      cwd: ROOT,
      env: cleanEnv({ CHROMIUM_PATH: '/nonexistent/chromium' }),
      timeoutMs: 60_000,
    })
    const out = r.stdout + r.stderr
    expect({ code: r.code, out }).toMatchObject({ code: 0 })
    expect(out).toContain(
      'Browser tests skipped: No Chromium found (CHROMIUM_PATH=/nonexistent/chromium does not exist)',
    )
    expect(out).toContain('sudo apt-get install -y chromium')
    expect(out).toMatch(/\b0 pass\b/)
    expect(out).toMatch(/\b[1-9]\d* skip\b/)
    expect(out).toMatch(/\b0 fail\b/)
  })

  test('under CI=true they run, and a missing browser fails them with the same message', async () => {
    const r = await run([BUN, 'test', '--timeout', '120000', SUITE], {
      cwd: ROOT,
      env: cleanEnv({ CHROMIUM_PATH: '/nonexistent/chromium', CI: 'true' }),
      timeoutMs: 60_000,
    })
    const out = r.stdout + r.stderr
    expect(r.code).not.toBe(0)
    expect(out).toContain('No Chromium found (CHROMIUM_PATH=/nonexistent/chromium does not exist)')
    expect(out).not.toContain('Browser tests skipped')
  })
})

describe('the CLI pipes', () => {
  test('`npm run -s cli -- ... --json` prints exactly one JSON document; without --json lists are aligned tables', async () => {
    const dataDir = await freshDataDir()
    try {
      const env = cleanEnv({ DATA_DIR: dataDir })
      const created = await run(
        ['npm', 'run', '-s', 'cli', '--', 'project', 'create', '--name', 'Piped shop', '--json'],
        { cwd: ROOT, env },
      )
      expect(created.code).toBe(0)
      const project = JSON.parse(created.stdout) as { id: string; name: string; status: string }
      expect([project.id.startsWith('proj_'), project.name, project.status]).toEqual([
        true,
        'Piped shop',
        'active',
      ])
      for (const name of ['first key', 'second']) {
        const k = await run(
          [
            'npm',
            'run',
            '-s',
            'cli',
            '--',
            'key',
            'create',
            '--project',
            project.id,
            '--mode',
            'test',
            '--name',
            name,
            '--json',
          ],
          { cwd: ROOT, env },
        )
        expect({ code: k.code, stderr: k.stderr }).toEqual({ code: 0, stderr: '' })
        expect((JSON.parse(k.stdout) as { key: string }).key).toStartWith('sk_test_')
      }
      const listed = await run(
        ['npm', 'run', '-s', 'cli', '--', 'key', 'list', '--project', project.id],
        { cwd: ROOT, env },
      )
      expect(listed.code).toBe(0)
      const lines = listed.stdout.trimEnd().split('\n')
      expect(lines[0]).toBe('keys:')
      expect(lines[1]).toMatch(
        /^id +name +mode +prefix +scopes +created_at +last_used_at +revoked_at$/,
      )
      expect(lines[2]).toMatch(/^-+( +-+)+$/)
      expect(lines.slice(3).map((l) => l.split(/ {2,}/)[1])).toEqual(['first key', 'second'])
      // Columns line up: each header starts where its values start.
      const at = lines[1]!.indexOf('mode')
      for (const l of lines.slice(3)) expect(l.slice(at, at + 4)).toBe('test')
      expect(listed.stdout).not.toContain('{')
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})

for (const backend of backends()) {
  describe(`the dashboard offers only actions that can do something [${backend}]`, () => {
    test('"Send transaction.completed again" appears only while an enabled endpoint of the mode selects that event', async () => {
      const t = await startTestServer(backend)
      try {
        const m = await memberOf(t)
        const id = await createTransaction(t.fetch, m.project.key)
        for (const e of PATH_TO.completed) {
          const r = await t.server.services.driveTestTransaction(id, e)
          if (!r.ok) throw new Error(r.message)
        }
        const c = dashboardClient(t)
        await c.signIn(m.email, m.password)
        const page = async () =>
          (await c.page(`/dashboard/${m.project.id}/test/transactions/${id}`)).text
        const BUTTON = '>Send transaction.completed again</button>'
        expect(await page()).not.toContain(BUTTON)
        expect(await page()).toContain(
          'No enabled test endpoint receives <code>transaction.completed</code>',
        )
        // An endpoint for other events changes nothing; one for transaction.completed brings the
        // button.
        const other = await t.server.services.endpoints.create({
          projectId: m.project.id,
          mode: 'test',
          url: 'https://receiver.example/other',
          eventTypes: ['transaction.created'],
        })
        if (!other.ok) throw new Error(other.message)
        expect(await page()).not.toContain(BUTTON)
        const ep = await t.server.services.endpoints.create({
          projectId: m.project.id,
          mode: 'test',
          url: 'https://receiver.example/hooks',
          eventTypes: ['transaction.completed'],
        })
        if (!ep.ok) throw new Error(ep.message)
        expect(await page()).toContain(BUTTON)
        await t.server.services.endpoints.setEnabled(ep.value.endpoint.id, false)
        expect(await page()).not.toContain(BUTTON)
      } finally {
        await t.stop()
      }
    })
  })
}

if (process.env.DATABASE_URL) {
  describe('the PostgreSQL variant on a fresh server', () => {
    test("passes with a DATABASE_URL naming a database that does not exist (tests create theirs from the server's default database)", async () => {
      const url = new URL(process.env.DATABASE_URL!)
      url.pathname = `/no_such_database_${Date.now()}`
      const r = await run([BUN, 'test', '--timeout', '120000', 'test/api/stats.test.ts'], {
        cwd: ROOT,
        env: { ...cleanEnv({}), DATABASE_URL: url.toString() },
        timeoutMs: 300_000,
      })
      const out = r.stdout + r.stderr
      expect({ code: r.code, tail: out.slice(-600) }).toMatchObject({ code: 0 })
      expect(out).toMatch(/\[postgres\]/)
      expect(out).toMatch(/\b0 fail\b/)
    }, 300_000)
  })
}
