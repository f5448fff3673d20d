/**
 * The docs, run as written (test/helpers/doc-snippets.ts): every shell block of README.md and
 * docs/ that a newcomer or an integrator types, in reading order, against a real `npm start` on
 * its devnet, in a copy of the repository's layout whose `.data` is the test's own, with a PATH
 * that holds no node_modules/.bin (what a fresh shell has after `npm ci`). Each command must exit
 * 0 and print no API error; a block's marker may ask more of it (its output to match, its last
 * command to be run until it does). The placeholders the docs use for what the reader copies from
 * an earlier output (`sk_test_...`, `proj_...`, `ID=...`, `ep_...`, the devnet's RPC URL, the port
 * 3000) are filled in from what the commands printed before, as a reader would. Blocks that are
 * not for this machine say so in their marker, with why; other blocks (json, ts) are shown, not
 * run, except excerpts, whose lines must appear in the file they quote.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { allSnippets, commandsOf, type Snippet } from '../helpers/doc-snippets.ts'
import { ROOT } from '../helpers/processes.ts'

const snippets = allSnippets(ROOT)
const shell = snippets.filter((s) => s.lang === 'sh')

describe('the docs, as written', () => {
  test('every marker is one the docs test knows, and every excerpt is in the file it quotes', () => {
    for (const s of snippets.filter((x) => x.marker?.kind === 'excerpt')) {
      const of = (s.marker as { of: string }).of
      const text = readFileSync(join(ROOT, of), 'utf8')
      let at = 0
      for (const line of s.code.split('\n').filter((l) => l.trim())) {
        const found = text.indexOf(line.trim(), at)
        expect({ where: `${s.file}:${s.line}`, line, in: of, found: found >= 0 }).toEqual({
          where: `${s.file}:${s.line}`,
          line,
          in: of,
          found: true,
        })
        at = found
      }
    }
    // A runnable-looking block with no marker is run below: nothing silently escapes.
    expect(shell.length).toBeGreaterThan(20)
  })

  describe('against npm start on its devnet', () => {
    let work: string
    let server: ChildProcess
    let shellProc: ReturnType<typeof startShell>
    const found: Record<string, string> = {}
    const background: number[] = []

    beforeAll(async () => {
      // The repository's layout with a `.data` of its own: every top-level entry linked.
      work = mkdtempSync(join(tmpdir(), 'crypto-pay-docs-'))
      for (const entry of readdirSync(ROOT))
        if (entry !== '.data' && entry !== '.git') symlinkSync(join(ROOT, entry), join(work, entry))
      server = spawn('npm', ['start'], {
        cwd: work,
        env: { ...cleanEnv(), PORT: '0', HTTP_PORT: '0', LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      })
      const out = await new Promise<string>((resolve, reject) => {
        let text = ''
        const timer = setTimeout(
          () => reject(new Error(`npm start printed no key:\n${text}`)),
          90_000,
        )
        server.stdout!.on('data', (d) => {
          text += String(d)
          if (/sk_test_\w+/.test(text) && /anvil at http/.test(text)) {
            clearTimeout(timer)
            resolve(text)
          }
        })
        server.on('exit', (code) => reject(new Error(`npm start exited ${code}:\n${text}`)))
      })
      found.key = /sk_test_\w+/.exec(out)![0]
      found.project = /proj_\w+/.exec(out)![0]
      found.base = /running at (https:\/\/localhost:\d+)/.exec(out)![1]!
      found.rpc = /anvil at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!
      shellProc = startShell(work)
    }, 120_000)

    afterAll(async () => {
      shellProc?.close()
      for (const pid of background) kill(-pid)
      if (server?.pid) kill(-server.pid, 'SIGTERM')
      await new Promise((r) => (server?.exitCode === null ? server.once('exit', r) : r(null)))
      if (work) rmSync(work, { recursive: true, force: true })
    })

    for (const s of shell) {
      const where = `${s.file}:${s.line}`
      if (s.marker?.kind === 'skip' || s.marker?.kind === 'fragment') {
        test.skip(`${where} (${s.marker.why})`, () => {})
        continue
      }
      test(`${where} runs as written`, async () => {
        const dir =
          s.marker?.kind === 'fresh-dir' ? mkdtempSync(join(tmpdir(), 'docs-fresh-')) : work
        try {
          const commands = commandsOf(s.code)
          let output = ''
          for (let i = 0; i < commands.length; i++) {
            const last = i === commands.length - 1
            const until = last && s.marker?.kind === 'until' ? s.marker.pattern : null
            const deadline = Date.now() + 90_000
            for (;;) {
              const command = fill(commands[i]!, found)
              const r = await shellProc.run(command, dir)
              output += r.stdout
              learn(found, r.stdout)
              if (/&\s*(#.*)?$/.test(command) && r.pid) background.push(r.pid)
              expect({ where, command, code: r.code, stderr: r.code ? r.stderr : '' }).toEqual({
                where,
                command,
                code: 0,
                stderr: '',
              })
              expect({ where, command, apiError: /"success":\s*false/.test(r.stdout) }).toEqual({
                where,
                command,
                apiError: false,
              })
              if (!until || until.test(r.stdout)) break
              if (Date.now() > deadline)
                throw new Error(`${where}: ${command} never printed ${until}:\n${r.stdout}`)
              await new Promise((r) => setTimeout(r, 500))
            }
          }
          if (s.marker?.kind === 'expect') expect(output).toMatch(s.marker.pattern)
        } finally {
          if (dir !== work) rmSync(dir, { recursive: true, force: true })
        }
      }, 180_000)
    }
  })
})

/** The environment of a fresh shell: no node_modules/.bin on PATH, nothing of the test's own. */
function cleanEnv(): Record<string, string> {
  const path = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((p) => !p.includes('node_modules'))
    .join(delimiter)
  return { PATH: path, HOME: process.env.HOME ?? tmpdir(), LANG: 'C.UTF-8' }
}

function kill(pid: number, signal: NodeJS.Signals = 'SIGKILL') {
  try {
    process.kill(pid, signal)
  } catch {}
}

/** What the reader copies from earlier outputs, by the placeholder the docs write for it. */
function fill(command: string, f: Record<string, string>): string {
  return command
    .replaceAll('https://localhost:3000', f.base!)
    .replaceAll('sk_test_...', f.key!)
    .replaceAll('proj_...', f.project!)
    .replace(/\bPROJECT=\.\.\./g, `PROJECT=${f.project}`)
    .replace(/\bID=\.\.\./g, `ID=${f.id ?? 'no-transaction-yet'}`)
    .replaceAll('http://127.0.0.1:...', f.rpc!)
    .replaceAll('http://127.0.0.1:PORT', f.rpc!)
    .replaceAll('ep_...', f.endpoint ?? 'ep_none')
    .replaceAll('dlv_...', f.delivery ?? 'dlv_none')
    .replaceAll('key_...', f.keyId ?? 'key_none')
    .replaceAll('rf_...', f.refund ?? 'rf_none')
    .replaceAll('/path/to/crypto-pay', ROOT)
}

/** Remembers the ids an output shows, the last of each kind winning. */
function learn(f: Record<string, string>, out: string) {
  const last = (re: RegExp) => [...out.matchAll(re)].at(-1)?.[1]
  f.id = last(/"id"\s*:\s*"([0-9a-f-]{36})"/g) ?? f.id!
  f.project = last(/"id"\s*:\s*"(proj_\w+)"/g) ?? f.project!
  f.endpoint = last(/\b(ep_\w+)/g) ?? f.endpoint!
  f.delivery = last(/\b(dlv_\w+)/g) ?? f.delivery!
  f.keyId = last(/\b(key_\w+)/g) ?? f.keyId!
  f.refund = last(/\b(rf_\w+)/g) ?? f.refund!
  const key = last(/\b(sk_test_\w+)/g)
  if (key) f.key = key
}

/**
 * One bash for the whole document flow, as a reader's terminal: variables set by one block
 * (KEY, ID, an export) are there for the next. Each command runs in `cwd`, its output read up to
 * a marker line.
 */
function startShell(cwd: string) {
  const bash = spawn('bash', ['--noprofile', '--norc'], {
    cwd,
    env: cleanEnv(),
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  })
  let out = ''
  let err = ''
  bash.stdout!.on('data', (d) => (out += String(d)))
  bash.stderr!.on('data', (d) => (err += String(d)))
  let n = 0
  return {
    async run(
      command: string,
      dir: string,
    ): Promise<{ code: number; stdout: string; stderr: string; pid: number | null }> {
      const mark = `__docs_test_${++n}__`
      out = ''
      err = ''
      bash.stdin!.write(
        `cd ${JSON.stringify(dir)}\n${command}\n__code=$?; echo; echo "${mark} $__code $!"; echo "${mark}" >&2\n`,
      )
      const end = Date.now() + 170_000
      while (!(out.includes(mark) && err.includes(mark))) {
        if (Date.now() > end) throw new Error(`no end of: ${command}\n${out}\n${err}`)
        await new Promise((r) => setTimeout(r, 20))
      }
      const m = new RegExp(`${mark} (\\d+) (\\d*)`).exec(out)!
      return {
        code: Number(m[1]),
        stdout: out.slice(0, out.indexOf(mark)),
        stderr: err.slice(0, err.indexOf(mark)),
        pid: m[2] ? Number(m[2]) : null,
      }
    },
    close() {
      if (bash.pid) kill(-bash.pid)
    },
  }
}
