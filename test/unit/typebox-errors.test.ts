import { describe, expect, test } from 'bun:test'
import { Type, type TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { explainErrors, segments, type Wording } from '../../src/lib/typebox-errors.ts'

/** The problems `value` has against `schema`, as "path: message" lines. */
function problems(schema: TSchema, value: unknown, wording?: Wording): string[] {
  const errors = TypeCompiler.Compile(schema).Errors(value)
  return explainErrors(errors, value, wording).map((p) => `${p.at.join('.')}: ${p.message}`)
}

const closed = { additionalProperties: false } as const

describe('explainErrors()', () => {
  test('names an unknown field and an absent one as such, once per place', () => {
    const schema = Type.Object({ amount: Type.Integer() }, closed)
    expect(problems(schema, { currency: 'EUR' })).toEqual([
      'amount: is required',
      'currency: unknown field',
    ])
  })

  test('speaks in the words a schema carries: message, missing and tooFew', () => {
    const schema = Type.Object({
      name: Type.String({ minLength: 1, message: 'must be a name', missing: 'needs a name' }),
      tags: Type.Array(Type.String(), { minItems: 1, tooFew: 'must list a tag' }),
    })
    expect(problems(schema, { tags: [] })).toEqual(['name: needs a name', 'tags: must list a tag'])
    expect(problems(schema, { name: '', tags: ['a'] })).toEqual(['name: must be a name'])
  })

  test('for X | null, reports why the value is not an X, at the place inside it', () => {
    const schema = Type.Object({
      metadata: Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()]),
    })
    expect(problems(schema, { metadata: { k: 1 } })).toEqual(['metadata.k: Expected string'])
  })

  test("a caller's union rule picks the variant meant, or says what to give", () => {
    const schema = Type.Union([
      Type.Object({ fixed: Type.String() }, closed),
      Type.Object({ feed: Type.String() }, closed),
    ])
    const union: Wording['union'] = (e, at) => {
      const value = e.value as Record<string, unknown>
      if ('fixed' in value) return 0
      if ('feed' in value) return 1
      return [{ at, message: 'needs "fixed" or "feed"', unknown: false }]
    }
    expect(problems(schema, { fixed: 1 }, { union })).toEqual(['fixed: Expected string'])
    expect(problems(schema, {}, { union })).toEqual([': needs "fixed" or "feed"'])
  })

  test("the caller's own words come before the schema's", () => {
    const schema = Type.Object({ PORT: Type.Integer({ maximum: 65535 }) })
    const word: Wording['word'] = (e, [name]) => `${name} is too big: ${e.value}`
    expect(problems(schema, { PORT: 70000 }, { word })).toEqual(['PORT: PORT is too big: 70000'])
  })
})

describe('segments()', () => {
  test('reads a JSON pointer, with list indexes as numbers and escapes undone', () => {
    const root = { 'a/b': [{ '~x': 1 }] }
    expect(segments(root, '/a~1b/0/~0x')).toEqual(['a/b', 0, '~x'])
  })
})
