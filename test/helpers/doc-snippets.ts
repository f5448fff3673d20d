/**
 * The code blocks of README.md and docs/, and what the docs test (test/integration/docs-run.test.ts)
 * is told about each by a marker: an HTML comment on the line before the block's fence, which
 * readers of the rendered page do not see.
 *
 *   <!-- docs-test: skip: <why> -->        not run (a production command, another machine's step)
 *   <!-- docs-test: expect /<regex>/ -->   run; the block's output must match
 *   <!-- docs-test: until /<regex>/ -->    run; its last command again until its output matches
 *   <!-- docs-test: fresh-dir -->          run in a new empty directory (a merchant's own project)
 *   <!-- docs-test: background ready /<re>/ until /<re>/ -->
 *                                          run in the background (another terminal): the next block
 *                                          starts once its output matches `ready`; by the end of
 *                                          the document it has exited 0 having printed `until`
 *   <!-- docs-test: excerpt <path> -->     not run: its lines appear, in order, in that file
 *   <!-- docs-test: fragment: <why> -->    not run: a piece of code the reader completes
 *
 * Shell blocks (```sh) without a marker run, each command checked to succeed. Other blocks (json,
 * ts, yaml, ...) are shown, not run: only a `sh` block is a command to type.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'

export type Marker =
  | { kind: 'skip'; why: string }
  | { kind: 'fragment'; why: string }
  | { kind: 'expect'; pattern: RegExp }
  | { kind: 'until'; pattern: RegExp }
  | { kind: 'fresh-dir' }
  | { kind: 'background'; ready: RegExp; until: RegExp }
  | { kind: 'excerpt'; of: string }

export interface Snippet {
  /** The document, relative to the repository. */
  file: string
  /** The fence's line (1-based). */
  line: number
  lang: string
  code: string
  marker: Marker | null
}

const MARKER = /^<!--\s*docs-test:\s*(.*?)\s*-->$/

function parseMarker(text: string, where: string): Marker {
  const m = /^(skip|fragment):\s*(.+)$/.exec(text)
  if (m) return { kind: m[1] as 'skip' | 'fragment', why: m[2]! }
  const re = /^(expect|until)\s+\/(.+)\/([a-z]*)$/.exec(text)
  if (re) return { kind: re[1] as 'expect' | 'until', pattern: new RegExp(re[2]!, re[3]) }
  if (text === 'fresh-dir') return { kind: 'fresh-dir' }
  const bg = /^background\s+ready\s+\/(.+)\/\s+until\s+\/(.+)\/$/.exec(text)
  if (bg) return { kind: 'background', ready: new RegExp(bg[1]!), until: new RegExp(bg[2]!) }
  const ex = /^excerpt\s+(\S+)$/.exec(text)
  if (ex) return { kind: 'excerpt', of: ex[1]! }
  throw new Error(`${where}: an unknown docs-test marker: ${text}`)
}

/** The fenced blocks of one markdown text, with their markers. */
export function snippetsOf(markdown: string, file: string): Snippet[] {
  const lines = markdown.split('\n')
  const out: Snippet[] = []
  for (let i = 0; i < lines.length; i++) {
    // A fence may be indented (inside a list item): its block is, by as much.
    const open = /^( *)```(\w*)\s*$/.exec(lines[i]!)
    if (!open) continue
    const indent = open[1]!.length
    const start = i
    const body: string[] = []
    for (i++; i < lines.length && !/^ *```\s*$/.test(lines[i]!); i++)
      body.push(lines[i]!.slice(Math.min(indent, lines[i]!.search(/\S|$/))))
    const before = start > 0 ? MARKER.exec(lines[start - 1]!.trim()) : null
    out.push({
      file,
      line: start + 1,
      lang: open[2] ?? '',
      code: body.join('\n'),
      marker: before ? parseMarker(before[1]!, `${file}:${start}`) : null,
    })
  }
  return out
}

/** README.md and every markdown file under docs/, relative to `root`, in reading order. */
export function documents(root: string): string[] {
  const found: string[] = ['README.md']
  const walk = (dir: string) => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      const path = join(dir, e.name)
      if (e.isDirectory()) walk(path)
      else if (e.name.endsWith('.md')) found.push(relative(root, join(root, path)))
    }
  }
  walk('docs')
  return found
}

/** Every snippet of the repository's documents. */
export function allSnippets(root: string): Snippet[] {
  return documents(root).flatMap((f) => snippetsOf(readFileSync(join(root, f), 'utf8'), f))
}

/**
 * The commands of a shell block, each a logical line (joined over trailing backslashes and open
 * quotes), comment-only lines dropped.
 */
export function commandsOf(code: string): string[] {
  const commands: string[] = []
  let current = ''
  for (const raw of code.split('\n')) {
    if (current === '' && /^\s*(#.*)?$/.test(raw)) continue
    current = current ? `${current}\n${raw}` : raw
    if (raw.endsWith('\\') || openQuote(current)) continue
    commands.push(current)
    current = ''
  }
  if (current) commands.push(current)
  return commands
}

/** Whether `text` ends inside a quoted string, as a shell reads it (comments after `#` aside). */
function openQuote(text: string): boolean {
  let quote: "'" | '"' | null = null
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quote) {
      if (c === quote) quote = null
      else if (c === '\\' && quote === '"') i++
    } else if (c === "'" || c === '"') quote = c
    else if (c === '\\') i++
    else if (c === '#' && (i === 0 || /\s/.test(text[i - 1]!))) {
      const eol = text.indexOf('\n', i)
      if (eol < 0) return false
      i = eol
    }
  }
  return quote !== null
}
