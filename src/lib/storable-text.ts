import type { FieldProblem } from './outcome.ts'

/**
 * Text PostgreSQL cannot store: U+0000 (neither `text` nor `jsonb` takes it) and UTF-16
 * surrogates without their pair (UTF-8 has no encoding for them). JSON spells both
 * (`"\u0000"`, `"\ud800"`), a query string or form spells U+0000 (`%00`); percent-decoding
 * never yields a lone surrogate. Such text is refused, in names and values alike, never
 * replaced: what is stored is what the caller sent, or nothing.
 */
const UNSTORABLE = /[\u0000\p{Cs}]/u
const UNSTORABLE_ALL = /[\u0000\p{Cs}]/gu

/** At most this many problems are reported for one request. */
const MAX_PROBLEMS = 20

const escaped = (unit: string) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`

/** Why `s` cannot be stored, or null when it can. */
export function unstorable(s: string): string | null {
  const m = UNSTORABLE.exec(s)
  if (!m) return null
  return m[0] === '\u0000'
    ? 'must not contain U+0000 (NUL)'
    : `must not contain an unpaired UTF-16 surrogate (${escaped(m[0])})`
}

/** A name as a field path shows it: what cannot be stored (or shown) written as `\uXXXX`. */
export const shownName = (name: string) => name.replace(UNSTORABLE_ALL, escaped)

const join = (path: string, name: string) => (path ? `${path}.${name}` : name)

/**
 * Every string of a parsed JSON value, keys included, at any depth, that cannot be stored:
 * one problem per field in document order, with its dotted path (`metadata.cart`, `items.0`).
 * A bad key is reported as such and its value is not looked at. Iterative: a 64 KiB body can
 * nest deeper than the call stack.
 */
export function jsonTextProblems(root: unknown): FieldProblem[] {
  type Item = { value: unknown; path: string } | { problem: FieldProblem }
  const out: FieldProblem[] = []
  const todo: Item[] = [{ value: root, path: '' }]
  while (todo.length && out.length < MAX_PROBLEMS) {
    const item = todo.pop()!
    if ('problem' in item) {
      out.push(item.problem)
      continue
    }
    const { value, path } = item
    if (typeof value === 'string') {
      const why = unstorable(value)
      if (why) out.push({ path: path || '(body)', message: why })
    } else if (value !== null && typeof value === 'object') {
      const children: Item[] = []
      for (const [key, v] of Object.entries(value)) {
        const why = Array.isArray(value) ? null : unstorable(key)
        children.push(
          why
            ? { problem: { path: join(path, shownName(key)), message: `key ${why}` } }
            : { value: v, path: join(path, key) },
        )
      }
      for (let i = children.length - 1; i >= 0; i--) todo.push(children[i])
    }
  }
  return out
}

/** The same for name-value pairs: a query string or a posted form. One problem per name. */
export function paramTextProblems(params: Iterable<[string, string]>): FieldProblem[] {
  const out = new Map<string, string>()
  for (const [name, value] of params) {
    if (out.size >= MAX_PROBLEMS) break
    const path = shownName(name)
    if (out.has(path)) continue
    const why = unstorable(name)
    if (why) out.set(path, `name ${why}`)
    else {
      const bad = unstorable(value)
      if (bad) out.set(path, bad)
    }
  }
  return [...out].map(([path, message]) => ({ path, message }))
}
