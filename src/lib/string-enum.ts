import { Kind, Type, TypeRegistry, type TUnsafe } from '@sinclair/typebox'

TypeRegistry.Set(
  'StringEnum',
  (schema: { enum: string[] }, value) => typeof value === 'string' && schema.enum.includes(value),
)

/**
 * A string from a fixed list, rendered as `{ type: 'string', enum: [...] }` in OpenAPI (what
 * client generators turn into a union type), and checkable by TypeBox's compiler (TypeBox's
 * documented pattern for enums of strings).
 */
export function StringEnum<T extends string>(
  values: readonly T[],
  options: { description?: string; default?: T } = {},
): TUnsafe<T> {
  return Type.Unsafe<T>({ [Kind]: 'StringEnum', type: 'string', enum: [...values], ...options })
}
