/**
 * What a driver's error says, whichever driver (postgres.js or PGlite) and however drizzle wrapped
 * it.
 */

/** A unique violation on a constraint whose name contains `column` (postgres.js or PGlite). */
export function isUniqueViolation(e: unknown, column: string): boolean {
  const err = e as {
    code?: string
    constraint_name?: string
    constraint?: string
    message?: string
    cause?: unknown
  }
  if (err?.code !== '23505') return err?.cause !== undefined && isUniqueViolation(err.cause, column)
  return String(err.constraint_name ?? err.constraint ?? err.message ?? '').includes(column)
}
