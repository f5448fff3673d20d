/**
 * HTML built by a tagged template that escapes every interpolated value unless it is already
 * `Html` (made by this module). The one way server-rendered pages put text into markup, so
 * merchant-supplied strings can never become markup.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

const NEEDS_ESCAPE = /[&<>"']/

/** Text safe inside element content and quoted attribute values. */
export function escapeHtml(s: string): string {
  // Most text has nothing to escape: testing first is several times cheaper than a replace that finds nothing.
  return NEEDS_ESCAPE.test(s) ? s.replace(/[&<>"']/g, (c) => ESCAPES[c]!) : s
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[]

function render(v: Value): string {
  if (v === null || v === undefined || v === false) return ''
  if (v instanceof Html) return v.value
  if (Array.isArray(v)) return v.map(render).join('')
  return escapeHtml(String(v))
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!
  return new Html(out)
}

/**
 * JSON inside `<script type="application/json">`: `<`, `>`, `&` and the two JavaScript line
 * separators are written as \u escapes, so no value can close the script element.
 */
export function jsonForScript(value: unknown): Html {
  return new Html(JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`))
}

/**
 * The `<meta>` lines every server-rendered page of ours starts its head with: phone-width
 * layout, no referrer, not indexed.
 */
export const PAGE_META = new Html(`<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex, nofollow">
<meta name="color-scheme" content="light">`)
