import type { TSchema } from '@sinclair/typebox'
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors'

/**
 * TypeBox's validation errors in words a person can act on. Request bodies, the environment and
 * the networks file are all checked by TypeBox schemas, and each reports its problems the same
 * way: one per place (the first said), an unknown field or an absent one named as such, the
 * words the schema itself carries where it carries any, and a union explained by the variant the
 * value meant ("Expected union value" says nothing).
 *
 * Words a schema may carry, as options beside its keywords: `message` for a bad value, `missing`
 * for an absent field, `tooFew` for a list shorter than `minItems`.
 */

/** A place in a value: object keys, and list indexes as numbers. */
export type Segment = string | number

/** One problem at one place; `unknown`: a field the schema does not have. */
export interface SchemaProblem {
  at: Segment[]
  message: string
  unknown: boolean
}

export interface Wording {
  /** Words for a field the schema does not have, given those it does (default: "unknown field"). */
  unknownField?: (allowed: string[]) => string
  /**
   * The index of the variant of a union the value meant, whose own problems then stand for the
   * union's, or the problems to report instead. Default: the one variant besides null, if the
   * value is not null; otherwise TypeBox's words.
   */
  union?: (e: ValueError, at: Segment[]) => number | SchemaProblem[] | undefined
  /** The caller's own words for a bad value, before the schema's (undefined: the schema's). */
  word?: (e: ValueError, at: Segment[]) => string | undefined
}

/** A JSON pointer (`/metadata/k`) as a dotted field path (`metadata.k`); '' for the root. */
export const fieldPath = (pointer: string) => pointer.replace(/^\//, '').replace(/\//g, '.')

/** A JSON pointer as segments; a segment is a number only where the value there is a list. */
export function segments(root: unknown, pointer: string): Segment[] {
  const at: Segment[] = []
  let node = root
  for (const raw of pointer.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    at.push(Array.isArray(node) ? Number(key) : key)
    node = (node as Record<string, unknown> | undefined)?.[key]
  }
  return at
}

/**
 * The problems `errors` (TypeBox's, for `root`) describe, one per place, in the order first said.
 */
export function explainErrors(
  errors: Iterable<ValueError>,
  root: unknown,
  wording: Wording = {},
): SchemaProblem[] {
  const byPlace = new Map<string, SchemaProblem>()
  const add = (p: SchemaProblem) => {
    const place = JSON.stringify(p.at)
    if (!byPlace.has(place)) byPlace.set(place, p)
  }
  const visit = (e: ValueError) => {
    const at = segments(root, e.path)
    const schema: TSchema = e.schema
    if (e.type === ValueErrorType.ObjectAdditionalProperties) {
      const allowed = Object.keys(schema.properties ?? {})
      return add({ at, message: wording.unknownField?.(allowed) ?? 'unknown field', unknown: true })
    }
    // A field set to undefined (by a caller building the value in code) is as good as absent.
    if (
      e.type === ValueErrorType.ObjectRequiredProperty ||
      (e.value === undefined && schema.missing)
    )
      return add({ at, message: schema.missing ?? 'is required', unknown: false })
    if (e.type === ValueErrorType.Union) {
      const meant = (wording.union ?? onlyVariantBesidesNull)(e, at)
      if (typeof meant === 'number') {
        for (const inner of e.errors[meant] ?? []) visit(inner)
        return
      }
      if (meant) {
        for (const p of meant) add(p)
        return
      }
    }
    const own =
      wording.word?.(e, at) ??
      (e.type === ValueErrorType.ArrayMinItems ? schema.tooFew : undefined) ??
      schema.message
    add({ at, message: own ?? e.message, unknown: false })
  }
  for (const e of errors) visit(e)
  return [...byPlace.values()]
}

/** For `X | null` and a value that is not null, the problems are the value's as an X. */
function onlyVariantBesidesNull(e: ValueError): number | undefined {
  if (e.value === null) return undefined
  const variants = (e.schema.anyOf as TSchema[]).flatMap((v, i) => (v.type === 'null' ? [] : [i]))
  return variants.length === 1 ? variants[0] : undefined
}
