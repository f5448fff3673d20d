/**
 * Command lines of the operator CLI and the treasury tool: `words --flag value`, and the human
 * form of a result (with `--json` both print the result as one JSON object instead).
 */

/** Parsed `--flag value` options; a flag without a value is `true`. */
export type Flags = Record<string, string | true>

/** Splits argv into the command words and `--flag value` options. */
export function parseArgs(argv: string[]): { words: string[]; flags: Flags } {
  const words: string[] = []
  const flags: Flags = {}
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a.startsWith('--')) {
      const eq = a.indexOf('=')
      if (eq > 0) flags[a.slice(2, eq)] = a.slice(eq + 1)
      else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) flags[a.slice(2)] = argv[++i]
      else flags[a.slice(2)] = true
    } else words.push(a)
  }
  return { words, flags }
}

/** A cell of the human form: lists joined, nothing shown as a dash, objects as compact JSON. */
function cell(v: unknown): string {
  if (v === null || v === undefined) return '-'
  if (Array.isArray(v))
    return v.every((x) => typeof x !== 'object' || x === null)
      ? v.join(',') || '-'
      : JSON.stringify(v)
  return typeof v === 'object' ? JSON.stringify(v) : String(v)
}

/**
 * The human form: `key: value` lines, and every list of records as an aligned table under its name.
 */
export function humanText(result: Record<string, unknown>): string {
  const out: string[] = []
  for (const [k, v] of Object.entries(result)) {
    const rows =
      Array.isArray(v) &&
      v.length > 0 &&
      v.every((r) => r !== null && typeof r === 'object' && !Array.isArray(r))
        ? (v as Record<string, unknown>[])
        : null
    if (!rows) {
      out.push(`${k}: ${Array.isArray(v) && v.length === 0 ? '(none)' : cell(v)}`)
      continue
    }
    const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))]
    const cells = rows.map((r) => columns.map((c) => cell(r[c])))
    const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)))
    const line = (values: string[]) =>
      values.map((x, i) => (i === values.length - 1 ? x : x.padEnd(widths[i]!))).join('  ')
    out.push(`${k}:`, line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line))
  }
  return out.join('\n')
}
