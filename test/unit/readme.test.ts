import { describe, expect, test } from 'bun:test'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from '../helpers/processes.ts'

/**
 * The README stands alone (issue 21): every link and every repository path it names exists in
 * the repository, nothing points outside it, and no rule is cited by a number a reader cannot
 * look up; the web addresses in it are examples on reserved or local names only.
 */
const README = readFileSync(join(ROOT, 'README.md'), 'utf8')

describe('README link check', () => {
  test('every relative link resolves to a file or folder of the repository', () => {
    const links = [...README.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!)
    expect(links.length).toBeGreaterThan(0)
    const relative = links.filter((l) => !/^(https?:|mailto:|#)/.test(l))
    expect(
      relative.filter((l) => l.includes('..') || !existsSync(join(ROOT, l.split('#')[0]!))),
    ).toEqual([])
  })

  test('every repository path it names in code spans exists', () => {
    const paths = [
      ...README.matchAll(
        /`((?:src|test|bench|drizzle|openapi|machines|scripts|docs|\.ci)\/[^`\s<>*{}]*)`/g,
      ),
    ].map((m) => m[1]!)
    expect(paths.length).toBeGreaterThan(10)
    expect([...new Set(paths)].filter((p) => !existsSync(join(ROOT, p)))).toEqual([])
  })

  test('nothing points outside the repository: no ../ paths, no shared folder, no ruling numbers', () => {
    expect(README.match(/\.\.\/[\w.-]/g) ?? []).toEqual([])
    expect(README.match(/\bshared\//g) ?? []).toEqual([])
    expect(README.match(/\bR\d{1,2}\b/g) ?? []).toEqual([])
  })

  test('web addresses are local or reserved example names (RFC 2606), never a real third-party page the reader must open', () => {
    const hosts = [...README.matchAll(/https?:\/\/([^/\s)`'"<>:]+)/g)].map((m) => m[1]!)
    const allowed = (h: string) =>
      h === 'localhost' || h === '127.0.0.1' || /(^|\.)example(\.|$)/.test(h) || h === 'host'
    expect([...new Set(hosts)].filter((h) => !allowed(h))).toEqual([])
  })
})
