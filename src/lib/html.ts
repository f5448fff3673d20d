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

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

const NEEDS_ESCAPE = /[&<>"']/

/** Text safe inside element content and quoted attribute values. */
export function escapeHtml(s: string): string {
  // Most text has nothing to escape: looking first is several times cheaper than a replace that
  // finds nothing (and `search` is cheaper than `test`, which keeps the match for RegExp's legacy
  // statics).
  return s.search(NEEDS_ESCAPE) === -1 ? s : s.replace(/[&<>"']/g, (c) => ESCAPES[c]!)
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
 * A place in a compiled template: what goes there for the render's context, escaped like any `html`
 * value.
 */
export type Slot<C> = (c: C) => Value

/**
 * Markup compiled once by `template`: the constant parts joined ahead of time, so a render only
 * runs its slots, escapes what they give and joins the pieces. For a page served on every request
 * (the pay page), where building the same markup again each time was a large part of its cost.
 */
export class Template<C> {
  constructor(
    readonly parts: readonly string[],
    readonly slots: readonly Slot<C>[],
  ) {}

  render(c: C): Html {
    const { parts, slots } = this
    let out = parts[0]!
    for (let i = 0; i < slots.length; i++) out += render(slots[i]!(c)) + parts[i + 1]!
    return new Html(out)
  }
}

/**
 * `html` compiled: a function among the values is a slot, run at each render; a template is
 * inlined, slots and all; every other value is rendered (escaped) once, here, into the constant
 * markup around it.
 */
export function template<C>(
  strings: TemplateStringsArray,
  ...values: (Value | Slot<C> | Template<C>)[]
): Template<C> {
  const parts = [strings[0]!]
  const slots: Slot<C>[] = []
  const append = (text: string) => (parts[parts.length - 1] += text)
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (v instanceof Template) {
      append(v.parts[0]!)
      for (let j = 0; j < v.slots.length; j++) {
        slots.push(v.slots[j]!)
        parts.push(v.parts[j + 1]!)
      }
    } else if (typeof v === 'function') {
      slots.push(v)
      parts.push('')
    } else append(render(v as Value))
    append(strings[i + 1]!)
  }
  return new Template(parts, slots)
}

/**
 * JSON inside `<script type="application/json">`: `<`, `>`, `&` and the two JavaScript line
 * separators are written as \u escapes, so no value can close the script element.
 */
export function jsonForScript(value: unknown): Html {
  return new Html(
    JSON.stringify(value).replace(
      /[<>&\u2028\u2029]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    ),
  )
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
