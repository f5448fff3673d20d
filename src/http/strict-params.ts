import type { TObject, TSchema } from '@sinclair/typebox'
import type { FieldProblem } from '../lib/outcome.ts'
import { UUID_RE } from '../lib/ids.ts'
import { ApiError } from './errors.ts'

/**
 * A `transform` hook that converts and checks query or path parameters against the route's own
 * TypeBox schema before Elysia's validation, whose messages ("Expected union value") do not tell a
 * caller what to send. One clear message per parameter (docs/decisions/0004-one-error-table.md,
 * docs/decisions/0008-list-order-and-paging.md).
 */
export function strictParams(source: 'query' | 'params', schema: TObject) {
  const entries = Object.entries(schema.properties) as [string, TSchema][]
  return (ctx: {
    request: Request
    query: Record<string, unknown>
    params: Record<string, unknown>
  }) => {
    const input = ctx[source]
    const search = source === 'query' ? new URL(ctx.request.url).searchParams : null
    const out: Record<string, unknown> = { ...input }
    const problems: FieldProblem[] = []
    for (const [name, s] of entries) {
      // Elysia keeps one of repeated query parameters; a repeated one is ambiguous, so refuse it.
      const all = search ? search.getAll(name) : input[name] === undefined ? [] : [input[name]]
      if (all.length === 0) continue
      const raw = all[0]
      if (all.length > 1 || typeof raw !== 'string') {
        problems.push({
          path: name,
          message: all.length > 1 ? 'must be given once' : 'is not a valid value',
        })
        continue
      }
      const converted = convert(raw, s)
      if ('problem' in converted) problems.push({ path: name, message: converted.problem })
      else out[name] = converted.value
    }
    if (problems.length)
      throw new ApiError(
        'invalid_request',
        `Invalid ${source === 'query' ? 'query parameters' : 'path'}: ${problems.map((p) => `${p.path} ${p.message}`).join('; ')}`,
        problems,
      )
    ctx[source] = out
  }
}

function convert(raw: string, s: TSchema): { value: unknown } | { problem: string } {
  if (s.type === 'integer') {
    const range =
      s.maximum !== undefined
        ? ` from ${s.minimum ?? 0} to ${s.maximum}`
        : s.minimum !== undefined
          ? ` of at least ${s.minimum}`
          : ''
    const n = /^-?\d{1,15}$/.test(raw) ? Number(raw) : NaN
    if (
      !Number.isInteger(n) ||
      (s.minimum !== undefined && n < s.minimum) ||
      (s.maximum !== undefined && n > s.maximum)
    ) {
      return { problem: `must be a whole number${range}` }
    }
    return { value: n }
  }
  if (s.type === 'boolean') {
    if (raw === 'true') return { value: true }
    if (raw === 'false') return { value: false }
    return { problem: 'must be true or false' }
  }
  if (Array.isArray(s.enum)) {
    return s.enum.includes(raw)
      ? { value: raw }
      : { problem: `must be one of: ${s.enum.join(', ')}` }
  }
  if (s.format === 'uuid' && !UUID_RE.test(raw)) return { problem: 'must be a UUID' }
  if (s.maxLength !== undefined && raw.length > s.maxLength)
    return { problem: `must be at most ${s.maxLength} characters` }
  return { value: raw }
}

/** The OpenAPI parameter objects of `schema`, for routes whose parameters `strictParams` checks. */
export function openApiParameters(where: 'query' | 'path', schema: TObject) {
  const required = new Set(schema.required ?? [])
  return Object.entries(schema.properties).map(([name, s]) => {
    const { description, ...rest } = JSON.parse(JSON.stringify(s)) as {
      description?: string
    } & Record<string, unknown>
    return {
      name,
      in: where,
      required: where === 'path' || required.has(name),
      description,
      schema: rest,
    }
  })
}
