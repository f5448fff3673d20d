/**
 * Run by `npm install` / `npm ci` (package.json `postinstall`), under plain Node: fixes the queue
 * postgres.js 3.4.9 keeps its connections in (src/queue.js, and its CommonJS and Cloudflare
 * copies). Its `shift` leaves a hole for every item it hands out and drops the holes only when it
 * hands out the last item; `remove` scans the holes too. The pool's list of busy connections
 * is shifted on every statement that finds them all busy, and a connection that can take more
 * goes straight back on it, so under steady load that list never empties: the holes pile up and
 * every move of a connection between lists scans all of them. 32 callers on 10 connections fell
 * from ~50,000 to ~15,000 statements/s within 10 s (`npm run bench:db-pool`).
 *
 * The fix: `remove` looks only past the holes, and `shift` drops them once they are the larger
 * part of the list. Nothing else changes. Idempotent; a copy that is neither the text it was
 * written for nor already fixed is left alone with a warning (a later postgres.js may have
 * changed or fixed it), and test/unit/postgres-queue.test.ts then fails until this is revisited.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const MARKER = '/* crypto-pay: queue holes fixed (scripts/patch-postgres-queue.mjs) */'

const REPLACEMENTS = [
  [
    `    remove: (x) => {
      const index = xs.indexOf(x)
      return index === -1
        ? null
        : (xs.splice(index, 1), x)
    },`,
    `    remove: (x) => {
      const at = xs.indexOf(x, index)
      return at === -1
        ? null
        : (xs.splice(at, 1), x)
    },`,
  ],
  [
    `      if (index === xs.length) {
        index = 0
        xs = []
      } else {
        xs[index - 1] = undefined
      }`,
    `      if (index === xs.length) {
        index = 0
        xs = []
      } else if (index >= 64 && index * 2 >= xs.length) {
        xs = xs.slice(index)
        index = 0
      } else {
        xs[index - 1] = undefined
      }`,
  ],
]

for (const copy of ['src/queue.js', 'cjs/src/queue.js', 'cf/src/queue.js']) {
  const file = join(ROOT, 'node_modules', 'postgres', copy)
  if (!existsSync(file)) continue
  let text = readFileSync(file, 'utf8')
  if (text.includes(MARKER)) continue
  if (!REPLACEMENTS.every(([from]) => text.includes(from))) {
    console.warn(
      `postgres.js ${copy} is not the text scripts/patch-postgres-queue.mjs was written for (3.4.9); left as it is`,
    )
    continue
  }
  for (const [from, to] of REPLACEMENTS) text = text.replace(from, to)
  writeFileSync(file, `${MARKER}\n${text}`)
}
