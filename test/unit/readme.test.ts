import { describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative, sep } from 'node:path'
import { ROOT } from '../helpers/processes.ts'

/**
 * The README and docs/ stand alone (docs/decisions/0059-the-docs-stand-alone.md): every
 * link and every repository path they name exists in the repository, nothing points outside it,
 * and no rule is cited by a number a reader cannot look up; the web addresses in them are
 * examples on reserved or local names only.
 */
function markdownUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(join(ROOT, path)).isDirectory()) return markdownUnder(path)
    return name.endsWith('.md') ? [path] : []
  })
}

const FILES = ['README.md', ...markdownUnder('docs')]
const text = new Map(FILES.map((f) => [f, readFileSync(join(ROOT, f), 'utf8')]))
/** Markdown without its fenced code blocks, where links and headings are not links or headings. */
const prose = (f: string) => text.get(f)!.replace(/^```[\s\S]*?^```/gm, '')
const inside = (path: string) => {
  const r = relative(ROOT, path)
  return r !== '' && !r.startsWith(`..${sep}`) && r !== '..'
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-')
const anchorsOf = (f: string) =>
  new Set([...prose(f).matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1]!)))

describe('README and docs link check', () => {
  test('the README links to docs/, and docs/ holds the integrating, operating, architecture and decisions pages', () => {
    expect(FILES).toContain('docs/architecture.md')
    expect(FILES).toContain('docs/decisions/README.md')
    expect(FILES.some((f) => f.startsWith('docs/integrating/'))).toBe(true)
    expect(FILES.some((f) => f.startsWith('docs/operating/'))).toBe(true)
    expect(text.get('README.md')!.split('\n').length).toBeLessThanOrEqual(260)
  })

  test('every relative link resolves to a file or folder inside the repository, and every #anchor to a heading', () => {
    const broken: string[] = []
    for (const f of FILES) {
      const links = [...prose(f).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!)
      if (f === 'README.md') expect(links.length).toBeGreaterThan(0)
      for (const link of links.filter((l) => !/^(https?:|mailto:)/.test(l))) {
        const [path, hash] = link.split('#') as [string, string | undefined]
        const target = path === '' ? join(ROOT, f) : normalize(join(ROOT, dirname(f), path))
        if (!inside(target) || !existsSync(target)) broken.push(`${f}: ${link}`)
        else if (hash !== undefined && target.endsWith('.md')) {
          const file = relative(ROOT, target).split(sep).join('/')
          if (text.has(file) && !anchorsOf(file).has(hash)) broken.push(`${f}: ${link}`)
        }
      }
    }
    expect(broken).toEqual([])
  })

  test('every repository path they name in code spans exists', () => {
    const missing: string[] = []
    let named = 0
    for (const f of FILES) {
      const paths = [
        ...text
          .get(f)!
          .matchAll(
            /`((?:src|test|bench|drizzle|openapi|machines|scripts|docs|contracts|\.ci)\/[^`\s<>*{}]*)`/g,
          ),
      ].map((m) => m[1]!)
      named += paths.length
      for (const p of new Set(paths)) if (!existsSync(join(ROOT, p))) missing.push(`${f}: ${p}`)
    }
    expect(named).toBeGreaterThan(10)
    expect(missing).toEqual([])
  })

  test('nothing points outside the repository: no shared folder, no ruling or issue numbers, no guides kept elsewhere', () => {
    for (const f of FILES) {
      const t = text.get(f)!
      expect({ f, found: t.match(/\bshared\//g) ?? [] }).toEqual({ f, found: [] })
      expect({ f, found: t.match(/\bR\d{1,2}\b/g) ?? [] }).toEqual({ f, found: [] })
      expect({ f, found: t.match(/\b(issues?|rulings?) #?\d+/gi) ?? [] }).toEqual({ f, found: [] })
      expect({ f, found: t.match(/\b(TOOLING|STYLE|DEVELOPERS)\.md\b/g) ?? [] }).toEqual({
        f,
        found: [],
      })
    }
    expect(text.get('README.md')!.match(/\.\.\/[\w.-]/g) ?? []).toEqual([])
  })

  test('web addresses are local or reserved example names (RFC 2606), never a real third-party page the reader must open', () => {
    const allowed = (h: string) =>
      h === 'localhost' || h === '127.0.0.1' || /(^|\.)example(\.|$)/.test(h) || h === 'host'
    const hosts = FILES.flatMap((f) =>
      [...text.get(f)!.matchAll(/https?:\/\/([^/\s)`'"<>:]+)/g)].map((m) => `${f}: ${m[1]!}`),
    )
    expect([...new Set(hosts)].filter((h) => !allowed(h.split(': ')[1]!))).toEqual([])
  })

  test('every decision record is listed in the index, and every record has its context, decision and consequences', () => {
    const index = text.get('docs/decisions/README.md')!
    const records = FILES.filter((f) => /^docs\/decisions\/\d{4}-[a-z0-9-]+\.md$/.test(f))
    expect(records.length).toBeGreaterThan(26)
    for (const r of records) {
      expect({ r, listed: index.includes(`](${r.slice('docs/decisions/'.length)})`) }).toEqual({
        r,
        listed: true,
      })
      const t = text.get(r)!
      for (const section of ['## Context', '## Decision', '## Consequences'])
        expect({ r, section, has: t.includes(section) }).toEqual({ r, section, has: true })
    }
  })
})
