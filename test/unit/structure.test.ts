import { describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { ROOT } from '../helpers/processes.ts'

/**
 * The shape the project keeps (README, "How it runs"): data flows one way, so no module imports
 * one that imports it back; machines are pure; only controllers and the HTTP assembly know
 * Elysia; statements are written, prepared and run in repositories only.
 */
function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(join(ROOT, path)).isDirectory())
      return name === 'assets' || name === 'client' ? [] : sources(path)
    return /\.(ts|mjs)$/.test(name) ? [path] : []
  })
}

const FILES = [...sources('src'), ...sources('machines')]
const text = new Map(FILES.map((f) => [f, readFileSync(join(ROOT, f), 'utf8')]))
/** Every `import ... from '...'` and `export ... from '...'` of a file, type-only ones included. */
const specifiers = (file: string) =>
  [...text.get(file)!.matchAll(/^(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]/gm)].map(
    (m) => m[1],
  )
const localImports = (file: string) =>
  specifiers(file)
    .filter((s) => s.startsWith('.'))
    .map((s) => normalize(join(dirname(file), s)))
    .filter((p) => existsSync(join(ROOT, p)))

/**
 * What makes a text a statement's home: a value import from drizzle-orm, a query builder called
 * on a connection (`db`, `tx`), raw SQL, or the database's own runners; the first one found, or
 * null.
 */
const STATEMENT_SIGNS: RegExp[] = [
  /^import\s+(?!type\b)[^;]*?from\s+['"]drizzle-orm/m,
  /\b(?:db|tx|leaseDb)\s*\.\s*(?:select|selectDistinct|insert|update|delete|execute|\$count)\s*\(/,
  /\bdatabase\s*\.\s*(?:rows|query|transaction)\s*[<(]/,
  /\bsql\s*`/,
  /\.prepare\s*\(/,
]
function statementIn(source: string): string | null {
  for (const sign of STATEMENT_SIGNS) {
    const m = sign.exec(source)
    if (m) return m[0].replace(/\s+/g, ' ')
  }
  return null
}

/** The strongly connected components of more than one module (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  let next = 0
  const visit = (v: string) => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = []
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        onStack.delete(w)
        component.push(w)
        if (w === v) break
      }
      if (component.length > 1) found.push(component.sort())
    }
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return found
}

describe('structure', () => {
  test('no import circles among the modules of src/ and machines/', () => {
    expect(cycles(new Map(FILES.map((f) => [f, localImports(f)])))).toEqual([])
  })

  test('the cycle finder finds a circle when there is one', () => {
    expect(
      cycles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
    ).toEqual([['a', 'b', 'c']])
  })

  test('machines are pure: they import xstate and each other, nothing else', () => {
    for (const f of FILES.filter((f) => f.startsWith('machines/'))) {
      for (const s of specifiers(f))
        expect({
          f,
          s,
          ok: s === 'xstate' || (s.startsWith('./') && !s.includes('/src/')),
        }).toEqual({ f, s, ok: true })
    }
  })

  test('the block follower (src/chain/follower/) knows nothing of what it feeds: it reads the chain and reports events, never the trackers, the watcher, modules or the database', () => {
    const allowed = (p: string) =>
      p.startsWith('src/chain/follower/') ||
      p.startsWith('src/lib/') ||
      p.startsWith('src/metrics/') ||
      ['src/chain/rpc.ts', 'src/chain/transfer-scan.ts', 'src/chain/read-again.ts'].includes(p)
    const follower = FILES.filter((f) => f.startsWith('src/chain/follower/'))
    expect(follower.length).toBeGreaterThan(0)
    expect(
      follower.flatMap((f) =>
        localImports(f)
          .filter((p) => !allowed(p))
          .map((p) => `${f} -> ${p}`),
      ),
    ).toEqual([])
  })

  test('only the HTTP assembly and the controllers (modules/*/index.ts, and modules/*/*/index.ts for the sections of a module) import Elysia', () => {
    const users = FILES.filter((f) =>
      specifiers(f).some((s) => s === 'elysia' || s.startsWith('@elysiajs/')),
    )
    expect(
      users.filter(
        (f) => !f.startsWith('src/http/') && !/^src\/modules\/[^/]+\/([^/]+\/)?index\.ts$/.test(f),
      ),
    ).toEqual([])
  })

  test('statements are written, prepared and run in repositories only (*.repo.ts and src/db/): no other file imports drizzle-orm but for types, builds a select, insert, update or delete, writes raw SQL or runs it', () => {
    expect(
      FILES.filter((f) => !f.endsWith('.repo.ts') && !f.startsWith('src/db/'))
        .filter((f) => statementIn(text.get(f)!) !== null)
        .map((f) => `${relative('.', f)}: ${statementIn(text.get(f)!)}`),
    ).toEqual([])
  })

  test('the statement finder finds each kind of statement, and not a method of that name elsewhere', () => {
    for (const written of [
      "import { eq } from 'drizzle-orm'",
      "import { and, type SQL } from 'drizzle-orm'",
      'const rows = await db.select().from(projects)',
      'await tx\n  .insert(users).values(u)',
      'await db.update(apiKeys).set({})',
      'await deps.database.db.delete(apiKeys)',
      'await db.$count(webhookEndpoints)',
      'const [r] = await database.rows<{ n: number }>(q)',
      "await database.query('SELECT 1', [])",
      'await database.transaction(async (q) => q)',
      'const q = sql`SELECT 1`',
      "db.select().from(t).prepare('name')",
    ])
      expect({ written, found: statementIn(written) !== null }).toEqual({ written, found: true })
    for (const plain of [
      "import type { SQL } from 'drizzle-orm'",
      'running.delete(id)',
      'cache.delete(hash)',
      'await deps.dashboard.transaction(viewer, id)',
      'createInstanceRepo(database.leaseDb)',
      'const update = (id: string) => id',
    ])
      expect({ plain, found: statementIn(plain) }).toEqual({ plain, found: null })
  })

  test('a production install (npm ci --omit=dev) has what npm start runs: the runtime and every package src/ and machines/ import', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>
      dependencies: Record<string, string>
    }
    expect(pkg.scripts.start.split(' ')[0]).toBe('bun')
    const needed = new Set(['bun'])
    for (const f of FILES) {
      for (const s of specifiers(f)) {
        if (s.startsWith('.') || s.startsWith('node:')) continue
        needed.add(s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!)
      }
    }
    expect([...needed].filter((name) => !(name in pkg.dependencies)).sort()).toEqual([])
  })
})

/**
 * Nothing points outside the repository: a rule the code relies on is cited by the path of its
 * record under docs/ (docs/decisions/0059-the-docs-stand-alone.md), which must exist.
 */
describe('references in the code', () => {
  /** Source, test, bench and script files, and the SQL of migrations: where comments cite rules. */
  function codeUnder(dir: string): string[] {
    if (!existsSync(join(ROOT, dir))) return []
    return readdirSync(join(ROOT, dir)).flatMap((name) => {
      const path = join(dir, name)
      if (statSync(join(ROOT, path)).isDirectory())
        return name === 'assets' || name === 'node_modules' ? [] : codeUnder(path)
      return /\.(ts|mts|mjs|js|sql|sol)$/.test(name) || name === 'RESULTS.md' ? [path] : []
    })
  }
  const CODE = ['src', 'machines', 'test', 'bench', 'scripts', 'drizzle', 'contracts'].flatMap(
    codeUnder,
  )

  test('every docs/ path the code cites exists', () => {
    const missing: string[] = []
    for (const f of CODE) {
      const t = readFileSync(join(ROOT, f), 'utf8')
      for (const m of t.matchAll(/\bdocs\/[\w./-]*[\w/]/g))
        if (!existsSync(join(ROOT, m[0]))) missing.push(`${f}: ${m[0]}`)
    }
    expect(missing).toEqual([])
  })

  test('the code cites no ruling or issue number and no guide kept outside the repository', () => {
    const found: string[] = []
    for (const f of CODE.filter((f) => f !== 'test/unit/readme.test.ts')) {
      const t = readFileSync(join(ROOT, f), 'utf8')
      for (const m of t.matchAll(
        /\bR\d{1,2}\b|\b[Ii]ssues? \d+|\b(TOOLING|STYLE|DEVELOPERS)\.md\b/g,
      ))
        found.push(`${f}: ${m[0]}`)
    }
    expect(found).toEqual([])
  })
})
