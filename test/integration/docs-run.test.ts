/**
 * The docs, run as written (test/helpers/doc-snippets.ts): every shell block of README.md and
 * docs/ that a newcomer, an integrator or an operator types, document by document in reading
 * order, against a real `npm start` on its devnet (port 3000, as the docs say), in a copy of the
 * repository's layout whose `.data` is the test's own, with a PATH that holds no node_modules/.bin
 * (what a fresh shell has after `npm ci`). Each command must exit 0 and print no API error; a
 * block's marker may ask more of it (its output to match, its last command to be run until it
 * does, to run in the background as another terminal). The placeholders the docs use for what the
 * reader copies from an earlier output (`sk_test_...`, `proj_...`, `ID=...`, `ep_...`, `xpub6...`,
 * the devnet's RPC URL) are filled in from what the commands printed before, as a reader would:
 * within a document the last one printed, at its start the demo project's. Blocks that are not
 * for this machine say so in their marker, with why; other blocks (json, ts) are shown, not run,
 * except excerpts, whose lines must appear in the file they quote.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { allSnippets, commandsOf, type Snippet } from '../helpers/doc-snippets.ts'
import { ROOT } from '../helpers/processes.ts'

const snippets = allSnippets(ROOT)
const byDocument = new Map<string, Snippet[]>()
for (const s of snippets.filter((x) => x.lang === 'sh'))
  byDocument.set(s.file, [...(byDocument.get(s.file) ?? []), s])

describe('the docs, as written', () => {
  test('every excerpt is in the file it quotes, line by line in order', () => {
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
  })

  describe('against npm start on its devnet', () => {
    let work: string
    let server: ChildProcess
    let shell: Shell
    /** What npm start printed: the demo project's key and id, the devnet's RPC URL. */
    const demo: Record<string, string> = {}
    /** What the reader has seen so far in the document being read. */
    let seen: Record<string, string> = {}
    const jobs: Job[] = []

    beforeAll(async () => {
      for (const port of [3000, 3080])
        if (!(await portFree(port)))
          throw new Error(
            `port ${port} is in use: the docs say https://localhost:3000, so this test runs npm start there; stop what listens on it`,
          )
      // The repository's layout with a `.data` of its own: every top-level entry linked.
      work = mkdtempSync(join(tmpdir(), 'crypto-pay-docs-'))
      for (const entry of readdirSync(ROOT))
        if (entry !== '.data' && entry !== '.git' && entry !== 'test-artifacts')
          symlinkSync(join(ROOT, entry), join(work, entry))
      server = spawn('npm', ['start'], {
        cwd: work,
        env: { ...cleanEnv(), LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      })
      let err = ''
      server.stderr!.on('data', (d) => (err += String(d)))
      const out = await new Promise<string>((resolve, reject) => {
        let text = ''
        const timer = setTimeout(
          () => reject(new Error(`npm start printed no key:\n${text}\n${err}`)),
          90_000,
        )
        server.stdout!.on('data', (d) => {
          text += String(d)
          if (/sk_test_\w+/.test(text) && /anvil at http/.test(text)) {
            clearTimeout(timer)
            resolve(text)
          }
        })
        server.on('exit', (code) => reject(new Error(`npm start exited ${code}:\n${text}\n${err}`)))
      })
      demo.key = /sk_test_\w+/.exec(out)![0]
      demo.project = /proj_\w+/.exec(out)![0]
      demo.rpc = /anvil at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!
      shell = startShell(work)
    }, 120_000)

    afterAll(async () => {
      shell?.close()
      for (const j of jobs) kill(-j.pid)
      if (server?.pid) kill(-server.pid, 'SIGTERM')
      await new Promise((r) =>
        server && server.exitCode === null ? server.once('exit', r) : r(null),
      )
      if (work) rmSync(work, { recursive: true, force: true })
    })

    for (const [file, blocks] of byDocument) {
      describe(file, () => {
        beforeAll(() => {
          // A new document: the reader starts from the demo project and its key again.
          seen = { key: demo.key!, project: demo.project!, rpc: demo.rpc!, id: seen.id ?? '' }
        })
        for (const s of blocks) {
          const where = `${s.file}:${s.line}`
          if (s.marker?.kind === 'skip' || s.marker?.kind === 'fragment') {
            test.skip(`${where} (${s.marker.why})`, () => {})
            continue
          }
          test(`${where} runs as written`, async () => {
            if (s.marker?.kind === 'background') {
              const job = await shell.background(fill(s.code, seen), work)
              jobs.push({ ...job, where, until: s.marker.until })
              const ready = s.marker.ready
              const text = await waitFor(
                () => job.output(),
                (o) => ready.test(o),
                `${where}: ${ready}`,
              )
              learn(seen, text)
              return
            }
            const fresh = s.marker?.kind === 'fresh-dir'
            const dir = fresh ? mkdtempSync(join(tmpdir(), 'docs-fresh-')) : work
            try {
              const commands = commandsOf(s.code)
              let output = ''
              for (let i = 0; i < commands.length; i++) {
                const last = i === commands.length - 1
                const until = last && s.marker?.kind === 'until' ? s.marker.pattern : null
                const deadline = Date.now() + 90_000
                for (;;) {
                  const command = fill(commands[i]!, seen)
                  const r = await shell.run(command, dir)
                  output += r.stdout
                  learn(seen, r.stdout)
                  if (r.pid) jobs.push({ pid: r.pid, where, until: null, output: () => '' })
                  expect({ where, command, code: r.code, stderr: r.code ? r.stderr : '' }).toEqual({
                    where,
                    command,
                    code: 0,
                    stderr: '',
                  })
                  expect({ where, command, apiError: /"success":\s*false/.test(r.stdout) }).toEqual(
                    { where, command, apiError: false },
                  )
                  if (!until || until.test(r.stdout)) break
                  if (Date.now() > deadline)
                    throw new Error(`${where}: ${command} never printed ${until}:\n${r.stdout}`)
                  await new Promise((w) => setTimeout(w, 500))
                }
              }
              if (s.marker?.kind === 'expect') expect(output).toMatch(s.marker.pattern)
            } finally {
              if (fresh) rmSync(dir, { recursive: true, force: true })
            }
          }, 240_000)
        }
        if (blocks.some((b) => b.marker?.kind === 'background'))
          test(`${file}: what ran in the background finished as described`, async () => {
            for (const j of jobs.filter((x) => x.where.startsWith(`${file}:`) && x.until)) {
              const until = j.until!
              await waitFor(
                () => j.output(),
                (o) => until.test(o),
                `${j.where}: ${until}`,
              )
              expect({ where: j.where, code: await j.exitCode!() }).toEqual({
                where: j.where,
                code: 0,
              })
            }
          }, 120_000)
      })
    }
  })
})

/** Something started in the background: its process group, and what it printed. */
interface Job {
  pid: number
  where: string
  until: RegExp | null
  output(): string
  exitCode?: () => Promise<number>
}

async function waitFor(
  read: () => string,
  pred: (s: string) => boolean,
  what: string,
): Promise<string> {
  const end = Date.now() + 90_000
  for (;;) {
    const v = read()
    if (pred(v)) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; output:\n${v}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer()
    s.once('error', () => resolve(false))
    s.listen(port, () => s.close(() => resolve(true)))
  })
}

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
    .replaceAll('sk_test_...', f.key!)
    .replaceAll('proj_...', f.project!)
    .replace(/\bPROJECT=\.\.\./g, `PROJECT=${f.project}`)
    .replace(/\bID=\.\.\./g, `ID=${f.id || 'no-transaction-yet'}`)
    .replaceAll('http://127.0.0.1:...', f.rpc!)
    .replaceAll('http://127.0.0.1:PORT', f.rpc!)
    .replaceAll('ep_...', f.endpoint ?? 'ep_none')
    .replaceAll('dlv_...', f.delivery ?? 'dlv_none')
    .replaceAll('key_...', f.keyId ?? 'key_none')
    .replaceAll('xpub6...', f.xpub ?? 'xpub_none')
    .replaceAll('/path/to/crypto-pay', ROOT)
}

/** Remembers the ids an output shows, the last of each kind winning. */
function learn(f: Record<string, string>, out: string) {
  const last = (re: RegExp) => [...out.matchAll(re)].at(-1)?.[1]
  const remember = (name: string, value: string | undefined) => {
    if (value) f[name] = value
  }
  // A transaction: a create's answer, or a pay page's address.
  const transaction = [
    ...out.matchAll(
      /"transaction"\s*:\s*\{\s*"id"\s*:\s*"([0-9a-f-]{36})"|\/pay\/([0-9a-f-]{36})/g,
    ),
  ].at(-1)
  remember('id', transaction?.[1] ?? transaction?.[2])
  remember('project', last(/"id"\s*:\s*"(proj_\w+)"/g))
  remember('endpoint', last(/\b(ep_\w+)/g))
  remember('delivery', last(/\b(dlv_\w+)/g))
  remember('keyId', last(/"id"\s*:\s*"(key_\w+)"/g))
  remember('key', last(/\b(sk_test_\w+)/g))
  remember('xpub', last(/\b(xpub6\w+)/g))
}

interface Shell {
  run(
    command: string,
    dir: string,
  ): Promise<{ code: number; stdout: string; stderr: string; pid: number | null }>
  background(script: string, dir: string): Promise<Job>
  close(): void
}

/**
 * One bash for all the documents, as a reader's terminal: variables set by one block (KEY, ID, an
 * export) are there for the next. Each command runs in `dir`, its output read up to a marker line.
 */
function startShell(cwd: string): Shell {
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
  const logs = mkdtempSync(join(tmpdir(), 'docs-jobs-'))
  const shell: Shell = {
    async run(command, dir) {
      const mark = `__docs_test_${++n}__`
      out = ''
      err = ''
      const background = /&\s*(#[^\n]*)?$/.test(command)
      bash.stdin!.write(
        `cd ${JSON.stringify(dir)}\n${command}\n__code=$?; echo; echo "${mark} $__code ${background ? '$!' : ''}"; echo "${mark}" >&2\n`,
      )
      const end = Date.now() + 230_000
      while (!(out.includes(mark) && err.includes(mark))) {
        if (Date.now() > end) throw new Error(`no end of: ${command}\n${out}\n${err}`)
        await new Promise((r) => setTimeout(r, 20))
      }
      const m = new RegExp(`${mark} (\\d+) ?(\\d*)`).exec(out)!
      return {
        code: Number(m[1]),
        stdout: out.slice(0, out.indexOf(mark)),
        stderr: err.slice(0, err.indexOf(mark)),
        pid: m[2] ? Number(m[2]) : null,
      }
    },
    async background(script, dir) {
      const id = ++n
      const log = join(logs, `job-${id}.log`)
      const code = join(logs, `job-${id}.code`)
      const r = await shell.run(
        `(cd ${JSON.stringify(dir)} && { ${script.replace(/\n/g, ' ')} ; } > ${log} 2>&1; echo $? > ${code}) &`,
        dir,
      )
      const read = (path: string) => {
        try {
          return readFileSync(path, 'utf8')
        } catch {
          return ''
        }
      }
      return {
        pid: r.pid!,
        where: '',
        until: null,
        output: () => read(log),
        exitCode: async () =>
          Number(
            (
              await waitFor(
                () => read(code),
                (c) => c.trim() !== '',
                `${log} to end`,
              )
            ).trim(),
          ),
      }
    },
    close() {
      if (bash.pid) kill(-bash.pid)
      rmSync(logs, { recursive: true, force: true })
    },
  }
  return shell
}
