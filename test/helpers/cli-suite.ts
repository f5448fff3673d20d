import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { expectStatus } from './expect.ts'
import { runCli } from './processes.ts'

// docs/decisions/0025-operator-cli.md: the operator's CLI against the embedded database with and
// without a server holding it, and against PostgreSQL; the suite is run by test/api/cli.test.ts
// (the CLI in this process, a server in this process) and test/integration/cli-processes.test.ts
// (a server process, PostgreSQL).

/**
 * A key made without --scopes: every scope but the treasury tool's writes (sweeps:write,
 * refunds:pay).
 */
const DEFAULT_SCOPES = [
  'transactions:read',
  'transactions:write',
  'stats:read',
  'webhooks:write',
  'deposits:read',
  'refunds:read',
  'refunds:write',
  'x402:settle',
]

export interface Setup {
  env: Record<string, string>
  dataDir: string
  /** The server holding the database, to call its API; null when none runs. */
  server: { fetch(path: string, init?: RequestInit): Promise<Response> } | null
  cleanup(): Promise<void>
}

/** One set of CLI tests, run against each way the CLI can reach the database. */
export function cliSuite(
  label: string,
  withServer: boolean,
  setup: () => Promise<Setup>,
  refusals: 'all' | 'some' = 'all',
) {
  describe(label, () => {
    let s: Setup
    let projectId: string
    beforeAll(async () => {
      s = await setup()
      const p = await cli('project', 'create', '--name', 'CLI suite')
      expect(p.code).toBe(0)
      projectId = p.json.id
    })
    afterAll(() => s?.cleanup())

    const cli = (...args: string[]) => runCli([...args, '--json'], { env: s.env })

    /** One line of JSON on stdout, nothing on stderr, exit 0. */
    async function ok(...args: string[]) {
      const r = await cli(...args)
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' })
      expect(r.stdout.trim().split('\n')).toHaveLength(1)
      return r.json
    }

    describe('commands and their --json output', () => {
      test('project create --name prints { id, name, status }', async () => {
        const out = await ok('project', 'create', '--name', 'Coffee shop')
        expect(Object.keys(out).sort()).toEqual(['id', 'name', 'status'])
        expect(out.id).toMatch(/^proj_[A-Za-z0-9]+$/)
        expect(out.name).toBe('Coffee shop')
        expect(out.status).toBe('active')
      })

      test('project set-status --status inactive|active prints the project with its new status', async () => {
        expect(
          await ok('project', 'set-status', '--project', projectId, '--status', 'inactive'),
        ).toEqual({ id: projectId, name: 'CLI suite', status: 'inactive' })
        expect(
          await ok('project', 'set-status', '--project', projectId, '--status', 'active'),
        ).toEqual({ id: projectId, name: 'CLI suite', status: 'active' })
      })

      test('project set-limits prints the project with its limits', async () => {
        const out = await ok(
          'project',
          'set-limits',
          '--project',
          projectId,
          '--minute',
          '7',
          '--hour',
          '70',
          '--day',
          '700',
        )
        expect(out).toEqual({
          id: projectId,
          name: 'CLI suite',
          status: 'active',
          limits: { minute: 7, hour: 70, day: 700 },
        })
      })

      test('project set-ip-allowlist sets a list, and an empty --cidrs (quoted or bare) clears it', async () => {
        const set = await ok(
          'project',
          'set-ip-allowlist',
          '--project',
          projectId,
          '--cidrs',
          '10.0.0.0/8, 192.168.1.7,2001:db8::/32',
        )
        expect(set).toMatchObject({
          id: projectId,
          ip_allowlist: ['10.0.0.0/8', '192.168.1.7', '2001:db8::/32'],
        })
        expect(
          (await ok('project', 'set-ip-allowlist', '--project', projectId, '--cidrs', ''))
            .ip_allowlist,
        ).toEqual([])
        await ok('project', 'set-ip-allowlist', '--project', projectId, '--cidrs', '10.0.0.0/8')
        // `--cidrs --json`: the flag without a value.
        expect(
          (await ok('project', 'set-ip-allowlist', '--project', projectId, '--cidrs')).ip_allowlist,
        ).toEqual([])
      })

      test("key create prints { id, key, mode, scopes }: every scope but the treasury tool's by default, a test key", async () => {
        const out = await ok(
          'key',
          'create',
          '--project',
          projectId,
          '--mode',
          'test',
          '--name',
          'Default scopes',
        )
        expect(Object.keys(out).sort()).toEqual(['id', 'key', 'mode', 'scopes'])
        expect(out.id).toMatch(/^key_/)
        expect(out.key).toMatch(/^sk_test_[A-Za-z0-9]{32,}$/)
        expect(out.mode).toBe('test')
        expect([...out.scopes].sort()).toEqual([...DEFAULT_SCOPES].sort())
      })

      test('key create --mode live --scopes a,b makes a live key with exactly those scopes', async () => {
        const out = await ok(
          'key',
          'create',
          '--project',
          projectId,
          '--mode',
          'live',
          '--name',
          'Reader',
          '--scopes',
          'transactions:read,stats:read',
        )
        expect(out.key).toMatch(/^sk_live_[A-Za-z0-9]{32,}$/)
        expect(out.mode).toBe('live')
        expect([...out.scopes].sort()).toEqual(['stats:read', 'transactions:read'])
      })

      test('key list shows every key of the project without its secret', async () => {
        const made = await ok(
          'key',
          'create',
          '--project',
          projectId,
          '--mode',
          'test',
          '--name',
          'Listed',
        )
        const r = await cli('key', 'list', '--project', projectId)
        expect(r.code).toBe(0)
        expect(r.stdout).not.toContain(made.key)
        const listed = r.json.keys.find((k: { id: string }) => k.id === made.id)
        expect(Object.keys(listed).sort()).toEqual([
          'created_at',
          'id',
          'last_used_at',
          'mode',
          'name',
          'prefix',
          'revoked_at',
          'scopes',
        ])
        expect(listed).toMatchObject({ name: 'Listed', mode: 'test', revoked_at: null })
        expect(made.key.startsWith(listed.prefix.split('…')[0])).toBe(true)
        expect(r.json.keys.length).toBeGreaterThanOrEqual(3)
      })

      test('key revoke prints { id, revoked_at }; revoking again changes nothing', async () => {
        const made = await ok(
          'key',
          'create',
          '--project',
          projectId,
          '--mode',
          'test',
          '--name',
          'Doomed',
        )
        const out = await ok('key', 'revoke', '--key-id', made.id)
        expect(Object.keys(out).sort()).toEqual(['id', 'revoked_at'])
        expect(out.id).toBe(made.id)
        expect(Number.isNaN(Date.parse(out.revoked_at))).toBe(false)
        expect(await ok('key', 'revoke', '--key-id', made.id)).toEqual(out)
        const list = await ok('key', 'list', '--project', projectId)
        expect(list.keys.find((k: { id: string }) => k.id === made.id).revoked_at).toBe(
          out.revoked_at,
        )
      })

      test('key delete prints { id, deleted } and the key leaves the list; deleting again is not found', async () => {
        const made = await ok(
          'key',
          'create',
          '--project',
          projectId,
          '--mode',
          'test',
          '--name',
          'Gone',
        )
        expect(await ok('key', 'delete', '--key-id', made.id)).toEqual({
          id: made.id,
          deleted: true,
        })
        const list = await ok('key', 'list', '--project', projectId)
        expect(list.keys.some((k: { id: string }) => k.id === made.id)).toBe(false)
        const again = await cli('key', 'delete', '--key-id', made.id)
        expect(again.code).toBe(1)
        expect(again.stderr).toContain(`No API key ${made.id}`)
      })

      test('user create prints the user and its project', async () => {
        const out = await ok(
          'user',
          'create',
          '--email',
          'Ops@Example.com',
          '--password',
          'correct horse battery',
          '--project',
          projectId,
        )
        expect(out).toEqual({
          id: expect.stringMatching(/^usr_/),
          email: 'ops@example.com',
          project: projectId,
        })
      })
    })

    describe('bad input: a clear message on stderr as { error }, exit 2 for usage, 1 for refusals', () => {
      // [what, argv, exit code, text the message must contain]
      const cases: [string, () => string[], number, string][] = [
        [
          'an unknown command',
          () => ['project', 'delete', '--project', projectId],
          2,
          'Unknown command "project delete"',
        ],
        ['a lone unknown word', () => ['frobnicate'], 2, 'Unknown command "frobnicate"'],
        ['project create without --name', () => ['project', 'create'], 2, '--name is required'],
        [
          '--name without a value',
          () => ['project', 'create', '--name'],
          2,
          '--name needs a value',
        ],
        [
          'key create without --mode',
          () => ['key', 'create', '--project', projectId, '--name', 'k'],
          2,
          '--mode is required',
        ],
        ['key revoke without --key-id', () => ['key', 'revoke'], 2, '--key-id is required'],
        [
          'a misspelt option',
          () => ['key', 'list', '--project', projectId, '--moed', 'test'],
          2,
          '--moed is not an option of this command',
        ],
        [
          'set-xpub with a private key',
          () => [
            'project',
            'set-xpub',
            '--project',
            projectId,
            '--mode',
            'live',
            '--xpub',
            'xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi',
          ],
          1,
          'private',
        ],
        [
          'set-limits without --day',
          () => ['project', 'set-limits', '--project', projectId, '--minute', '1', '--hour', '2'],
          2,
          '--day is required',
        ],
        [
          'set-status for an unknown project',
          () => ['project', 'set-status', '--project', 'proj_nope', '--status', 'inactive'],
          1,
          'No project proj_nope',
        ],
        [
          'set-limits for an unknown project',
          () => [
            'project',
            'set-limits',
            '--project',
            'proj_nope',
            '--minute',
            '1',
            '--hour',
            '2',
            '--day',
            '3',
          ],
          1,
          'No project proj_nope',
        ],
        [
          'set-ip-allowlist for an unknown project',
          () => ['project', 'set-ip-allowlist', '--project', 'proj_nope', '--cidrs', '10.0.0.0/8'],
          1,
          'No project proj_nope',
        ],
        [
          'key create for an unknown project',
          () => ['key', 'create', '--project', 'proj_nope', '--mode', 'test', '--name', 'k'],
          1,
          'No project proj_nope',
        ],
        [
          'user create for an unknown project',
          () => [
            'user',
            'create',
            '--email',
            'a@example.com',
            '--password',
            'long enough password',
            '--project',
            'proj_nope',
          ],
          1,
          'No project proj_nope',
        ],
        [
          'key revoke of an unknown key',
          () => ['key', 'revoke', '--key-id', 'key_nope'],
          1,
          'No API key key_nope',
        ],
        [
          'an invalid status',
          () => ['project', 'set-status', '--project', projectId, '--status', 'paused'],
          1,
          'active or inactive',
        ],
        [
          'an invalid mode',
          () => ['key', 'create', '--project', projectId, '--mode', 'prod', '--name', 'k'],
          1,
          'mode must be test or live',
        ],
        [
          'an invalid scope',
          () => [
            'key',
            'create',
            '--project',
            projectId,
            '--mode',
            'test',
            '--name',
            'k',
            '--scopes',
            'transactions:read,admin',
          ],
          1,
          'unknown scope admin',
        ],
        [
          'an invalid CIDR prefix',
          () => [
            'project',
            'set-ip-allowlist',
            '--project',
            projectId,
            '--cidrs',
            '10.0.0.0/8,10.0.0.0/33',
          ],
          1,
          '10.0.0.0/33',
        ],
        [
          'a CIDR that is not an address',
          () => ['project', 'set-ip-allowlist', '--project', projectId, '--cidrs', 'intranet'],
          1,
          'intranet',
        ],
        [
          'a zero limit',
          () => [
            'project',
            'set-limits',
            '--project',
            projectId,
            '--minute',
            '0',
            '--hour',
            '10',
            '--day',
            '100',
          ],
          1,
          'whole numbers',
        ],
        [
          'a limit that is not a number',
          () => [
            'project',
            'set-limits',
            '--project',
            projectId,
            '--minute',
            '10',
            '--hour',
            'lots',
            '--day',
            '100',
          ],
          1,
          'whole numbers',
        ],
        [
          'a negative limit',
          () => [
            'project',
            'set-limits',
            '--project',
            projectId,
            '--minute',
            '10',
            '--hour',
            '100',
            '--day',
            '-5',
          ],
          1,
          'whole numbers',
        ],
        [
          'a short password',
          () => [
            'user',
            'create',
            '--email',
            'b@example.com',
            '--password',
            'short',
            '--project',
            projectId,
          ],
          1,
          'password must be 12',
        ],
        [
          'an invalid e-mail',
          () => [
            'user',
            'create',
            '--email',
            'not-an-email',
            '--password',
            'long enough password',
            '--project',
            projectId,
          ],
          1,
          'email must be a valid',
        ],
      ]
      // Refusals come from the same command code whichever way the database is reached; the
      // suites that reach PGlite through the server and PostgreSQL directly run them all, the one
      // opening PGlite per command (~1.5 s each) a sample of each kind.
      const SAMPLE = [
        'set-status for an unknown project',
        'set-xpub with a private key',
        'an invalid scope',
        'a short password',
      ]
      for (const [what, args, code, text] of cases) {
        if (refusals === 'some' && code === 1 && !SAMPLE.includes(what)) continue
        test(`${what}: exit ${code}, "${text}"`, async () => {
          const r = await cli(...args())
          expect(r.code).toBe(code)
          expect(r.stdout).toBe('')
          expect(Object.keys(r.json)).toEqual(['error'])
          expect(r.json.error.message).toContain(text)
          expect(Array.isArray(r.json.error.details)).toBe(true)
        })
      }

      test('project set-x402-pay-to: the address checksummed; a bad address, the zero address or an unknown project refused', async () => {
        const address = '0x52908400098527886e0f7030069857d2e4169ee7'
        expect(
          await ok(
            'project',
            'set-x402-pay-to',
            '--project',
            projectId,
            '--mode',
            'live',
            '--address',
            address,
          ),
        ).toEqual({
          project: projectId,
          mode: 'live',
          pay_to: '0x52908400098527886E0F7030069857D2E4169EE7',
        })
        for (const [args, text] of [
          [['--project', projectId, '--mode', 'live', '--address', '0x1234'], 'address must be'],
          [
            ['--project', projectId, '--mode', 'live', '--address', `0x${'0'.repeat(40)}`],
            'not be the zero address',
          ],
          [
            ['--project', projectId, '--mode', 'both', '--address', address],
            'mode must be test or live',
          ],
          [
            ['--project', 'proj_nope', '--mode', 'test', '--address', address],
            'No project proj_nope',
          ],
        ] as const) {
          const r = await cli('project', 'set-x402-pay-to', ...args)
          expect({ code: r.code, message: r.json.error.message.includes(text) }).toEqual({
            code: 1,
            message: true,
          })
        }
      })

      test('key list for an unknown project: exit 1, "No project proj_nope"', async () => {
        const r = await cli('key', 'list', '--project', 'proj_nope')
        expect(r.code).toBe(1)
        expect(r.json.error.message).toContain('No project proj_nope')
      })
    })

    if (withServer)
      describe('with a server running, changes reach the API at once', () => {
        // A fresh project per test, with limits nothing reaches, so one test cannot starve another.
        async function project() {
          const p = await ok('project', 'create', '--name', 'Enforcement')
          await ok(
            'project',
            'set-limits',
            '--project',
            p.id,
            '--minute',
            '100000',
            '--hour',
            '1000000',
            '--day',
            '10000000',
          )
          const k = await ok(
            'key',
            'create',
            '--project',
            p.id,
            '--mode',
            'test',
            '--name',
            'Enforced',
          )
          return { id: p.id as string, key: k.key as string, keyId: k.id as string }
        }
        const stats = (key: string) =>
          s.server!.fetch('/api/transactions/stats', {
            headers: { authorization: `Bearer ${key}` },
          })
        const create = (key: string) =>
          s.server!.fetch('/api/transactions/create', {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ amount: 1.5 }),
          })
        const errorType = async (res: Response) => (await res.json()).error.type

        test('a key created by the CLI works against the running server at once', async () => {
          const p = await project()
          const res = await create(p.key)
          await expectStatus(res, 200)
          expect((await res.json()).transaction.testing_mode).toBe(true)
        })

        test('key revoke: the next request with the key (cached by a first use) is a 401', async () => {
          const p = await project()
          await expectStatus(await stats(p.key), 200)
          await expectStatus(await stats(p.key), 200)
          await ok('key', 'revoke', '--key-id', p.keyId)
          const res = await stats(p.key)
          await expectStatus(res, 401)
          expect(await errorType(res)).toBe('authentication_error')
        })

        test('project set-status inactive: 403; active again: 200', async () => {
          const p = await project()
          await expectStatus(await stats(p.key), 200)
          await ok('project', 'set-status', '--project', p.id, '--status', 'inactive')
          const res = await stats(p.key)
          await expectStatus(res, 403)
          expect(await errorType(res)).toBe('permission_error')
          await ok('project', 'set-status', '--project', p.id, '--status', 'active')
          await expectStatus(await stats(p.key), 200)
        })

        test('set-ip-allowlist without 127.0.0.1: 403; with it: 200; cleared: 200', async () => {
          const p = await project()
          await expectStatus(await stats(p.key), 200)
          await ok(
            'project',
            'set-ip-allowlist',
            '--project',
            p.id,
            '--cidrs',
            '10.0.0.0/8,192.0.2.1',
          )
          const res = await stats(p.key)
          await expectStatus(res, 403)
          expect(await errorType(res)).toBe('permission_error')
          await ok(
            'project',
            'set-ip-allowlist',
            '--project',
            p.id,
            '--cidrs',
            '10.0.0.0/8,127.0.0.0/8',
          )
          await expectStatus(await stats(p.key), 200)
          await ok('project', 'set-ip-allowlist', '--project', p.id, '--cidrs', '')
          await expectStatus(await stats(p.key), 200)
        })

        test('set-limits shows in the X-RateLimit-Limit-* headers of the next request', async () => {
          const p = await project()
          const first = await stats(p.key)
          expect(first.headers.get('x-ratelimit-limit-minute')).toBe('100000')
          await ok(
            'project',
            'set-limits',
            '--project',
            p.id,
            '--minute',
            '321',
            '--hour',
            '4321',
            '--day',
            '54321',
          )
          const res = await stats(p.key)
          await expectStatus(res, 200)
          expect(res.headers.get('x-ratelimit-limit-minute')).toBe('321')
          expect(res.headers.get('x-ratelimit-limit-hour')).toBe('4321')
          expect(res.headers.get('x-ratelimit-limit-day')).toBe('54321')
          // The window counted the request above and this one, unless the minute ended in between
          // (real clock).
          const sameMinute =
            res.headers.get('x-ratelimit-reset-minute') ===
            first.headers.get('x-ratelimit-reset-minute')
          expect(res.headers.get('x-ratelimit-remaining-minute')).toBe(sameMinute ? '319' : '320')
          expect(res.headers.get('x-ratelimit-remaining-hour')).toBe(
            res.headers.get('x-ratelimit-reset-hour') ===
              first.headers.get('x-ratelimit-reset-hour')
              ? '4319'
              : '4320',
          )
        })
      })
  })
}
