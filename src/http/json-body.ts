import type { Static, TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { ValueError } from '@sinclair/typebox/errors'
import type { FieldProblem } from '../lib/outcome.ts'
import { jsonTextProblems } from '../lib/storable-text.ts'
import { explainErrors } from '../lib/typebox-errors.ts'
import { MAX_BODY_BYTES } from './api-gate.ts'
import { ApiError } from './errors.ts'

/** Reads at most `limit` bytes of the body; 413 beyond, whatever Content-Length claimed. */
async function readLimited(request: Request, limit: number): Promise<string> {
  if (!request.body) return ''
  const reader = request.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      await reader.cancel().catch(() => {})
      throw new ApiError('payload_too_large', `Request body is larger than ${limit} bytes`)
    }
    chunks.push(value)
  }
  return new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks))
}

/**
 * A `transform` hook that parses the JSON body strictly against `schema` (no coercion: "2" is not a
 * number; unknown fields are named) and then `rules`, failing with 400 and one detail per problem
 * (docs/decisions/0004-one-error-table.md, docs/decisions/0005-create-request-bounds.md). Before
 * the schema: text the database cannot store (U+0000, a lone surrogate), in any key or value, so
 * nothing below ever sees it. Route options also carry `parse: 'none'` so Elysia leaves the body
 * alone.
 */
export function strictJsonBody<S extends TSchema>(
  schema: S,
  rules: (body: Static<S>) => FieldProblem[] = () => [],
) {
  const check = TypeCompiler.Compile(schema)
  return async (ctx: { request: Request; body: unknown }) => {
    const type = ctx.request.headers.get('content-type') ?? ''
    if (!/^application\/json\b/i.test(type))
      throw new ApiError('invalid_request', 'Content-Type must be application/json')
    const text = await readLimited(ctx.request, MAX_BODY_BYTES)
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      throw new ApiError('invalid_request', 'Request body is not valid JSON')
    }
    const unstorable = jsonTextProblems(body)
    if (unstorable.length) throw invalidBody(unstorable)
    if (!check.Check(body)) throw invalidBody(explain(check.Errors(body), body))
    const problems = rules(body as Static<S>)
    if (problems.length) throw invalidBody(problems)
    ctx.body = body
  }
}

const invalidBody = (details: FieldProblem[]) =>
  new ApiError(
    'invalid_request',
    `Invalid request body: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`,
    details,
  )

/** One problem per field, in words a person can act on. */
const explain = (errors: Iterable<ValueError>, body: unknown): FieldProblem[] =>
  explainErrors(errors, body).map((p) => ({
    path: p.at.join('.') || '(body)',
    message: p.message,
  }))
