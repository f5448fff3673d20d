/**
 * Business denials are values, not exceptions (docs/decisions/0004-one-error-table.md, after
 * Unkey). The HTTP layer maps each code to a status and body in one table (src/http/errors.ts).
 */
export type DenialCode =
  | 'invalid_request'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'payload_too_large'
  | 'rate_limited'
  /** A dependency (a price feed, a chain node) cannot answer now; nothing was changed. */
  | 'unavailable'

export interface FieldProblem {
  path: string
  message: string
}

export interface Denial {
  ok: false
  code: DenialCode
  message: string
  details?: FieldProblem[]
}

export type Outcome<T> = { ok: true; value: T } | Denial

export const ok = <T>(value: T): Outcome<T> => ({ ok: true, value })
export const deny = (code: DenialCode, message: string, details?: FieldProblem[]): Denial => ({
  ok: false,
  code,
  message,
  details,
})
