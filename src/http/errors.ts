import { Type } from '@sinclair/typebox'
import { StringEnum } from '../lib/string-enum.ts'
import type { Denial, DenialCode, FieldProblem } from '../lib/outcome.ts'

/** Denials from the domain, plus the two only the HTTP layer produces. */
export type ErrorCode = DenialCode | 'https_required' | 'internal'

/**
 * docs/decisions/0004-one-error-table.md: the one table from error code to HTTP status and error
 * type.
 */
export const ERRORS: Record<ErrorCode, { status: number; type: string }> = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  unauthenticated: { status: 401, type: 'authentication_error' },
  forbidden: { status: 403, type: 'permission_error' },
  not_found: { status: 404, type: 'not_found_error' },
  conflict: { status: 409, type: 'conflict_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  rate_limited: { status: 429, type: 'rate_limit_error' },
  unavailable: { status: 503, type: 'service_unavailable_error' },
  // docs/decisions/0003-https-only.md: plain HTTP to /api.
  https_required: { status: 403, type: 'invalid_request_error' },
  internal: { status: 500, type: 'api_error' },
}

/** Thrown by controllers and hooks; rendered by the app's single onError. */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: FieldProblem[],
  ) {
    super(message)
  }
  static from(d: Denial) {
    return new ApiError(d.code, d.message, d.details)
  }
  get status() {
    return ERRORS[this.code].status
  }
}

export interface ErrorBody {
  success: false
  message: string
  error: { type: string; message: string; details?: FieldProblem[]; request_id?: string }
}

export function errorBody(
  code: ErrorCode,
  message: string,
  details?: FieldProblem[],
  requestId?: string,
): ErrorBody {
  const error: ErrorBody['error'] = { type: ERRORS[code].type, message }
  if (details?.length) error.details = details
  if (requestId) error.request_id = requestId
  return { success: false, message, error }
}

export function errorResponse(
  code: ErrorCode,
  message: string,
  opts: { details?: FieldProblem[]; requestId?: string; headers?: Record<string, string> } = {},
) {
  return new Response(JSON.stringify(errorBody(code, message, opts.details, opts.requestId)), {
    status: ERRORS[code].status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...opts.headers },
  })
}

/**
 * The Commerce API's rendering of the same table (docs/decisions/0065-coinbase-commerce-drop-in.md):
 * `{error: {type, message}}` with the types Commerce's clients know, at the same statuses. A
 * refused field is `param_required` when it is missing, `validation_error` otherwise.
 */
const COMMERCE_TYPES: Record<ErrorCode, string> = {
  invalid_request: 'invalid_request',
  unauthenticated: 'authentication_error',
  forbidden: 'authentication_error',
  not_found: 'not_found',
  conflict: 'invalid_request',
  payload_too_large: 'invalid_request',
  rate_limited: 'rate_limit_exceeded',
  unavailable: 'service_unavailable',
  https_required: 'invalid_request',
  internal: 'internal_server_error',
}

/** Requests of the Commerce API (docs/decisions/0065-coinbase-commerce-drop-in.md). */
export const isCommercePath = (path: string) =>
  path === '/commerce' || path.startsWith('/commerce/')

function commerceType(code: ErrorCode, details?: FieldProblem[]) {
  if (code !== 'invalid_request' || !details?.length) return COMMERCE_TYPES[code]
  return details.some((d) => /required/i.test(d.message)) ? 'param_required' : 'validation_error'
}

/** An error response for a request to `path`: the Commerce API's shape there, else the table's. */
export function errorResponseFor(
  path: string,
  code: ErrorCode,
  message: string,
  opts: { details?: FieldProblem[]; requestId?: string; headers?: Record<string, string> } = {},
) {
  if (!isCommercePath(path)) return errorResponse(code, message, opts)
  return new Response(
    JSON.stringify({ error: { type: commerceType(code, opts.details), message } }),
    {
      status: ERRORS[code].status,
      headers: { 'content-type': 'application/json; charset=utf-8', ...opts.headers },
    },
  )
}

/** Every `error.type` a response can carry, once each. */
export const ERROR_TYPES = [...new Set(Object.values(ERRORS).map((e) => e.type))]

/**
 * OpenAPI model of every error response (docs/decisions/0004-one-error-table.md). Not named
 * `Error`, which generated TypeScript would shadow.
 */
export const ErrorResponse = Type.Object(
  {
    success: Type.Literal(false),
    message: Type.String(),
    error: Type.Object(
      {
        type: StringEnum(ERROR_TYPES, {
          description: 'The kind of error; the HTTP status tells the same at a coarser grain.',
        }),
        message: Type.String(),
        details: Type.Optional(
          Type.Array(
            Type.Object(
              { path: Type.String(), message: Type.String() },
              { additionalProperties: false },
            ),
            { description: 'Validation problems, one per field (400 only).' },
          ),
        ),
        request_id: Type.Optional(Type.String({ description: 'Quote it when reporting a 500.' })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)
