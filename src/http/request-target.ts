import { NotFoundError } from 'elysia'
import { paramTextProblems } from '../lib/storable-text.ts'
import { pathOf } from './api-gate.ts'
import { ApiError } from './errors.ts'

/**
 * Checks the request target before any route sees it, so no handler gets a path or query text
 * the database cannot store. A path whose percent-encoding is malformed or decodes to U+0000
 * names nothing here: 404 (rendered per area by the app's onError). U+0000 in a query
 * parameter (`%00`, the only way a query spells text that cannot be stored): 400 naming it.
 */
export function checkRequestTarget(url: string): void {
  const path = pathOf(url)
  if (path.includes('%') && !decodesToText(path)) throw new NotFoundError()
  const q = url.indexOf('?')
  if (q < 0 || !url.includes('%00', q)) return
  const problems = paramTextProblems(new URLSearchParams(url.slice(q + 1)))
  if (problems.length)
    throw new ApiError(
      'invalid_request',
      `Invalid query parameters: ${problems.map((p) => `${p.path} ${p.message}`).join('; ')}`,
      problems,
    )
}

function decodesToText(path: string): boolean {
  try {
    return !decodeURIComponent(path).includes('\u0000')
  } catch {
    return false
  }
}
