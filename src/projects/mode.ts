/**
 * Test or live: keys, transactions, endpoints and deposit keys each belong to one
 * (docs/decisions/0009-keys-see-their-own-mode.md).
 */
export type Mode = 'test' | 'live'

/**
 * What a caller may see: one project in one mode (docs/decisions/0009-keys-see-their-own-mode.md).
 * Not a key's permission scopes (`Scope`).
 */
export interface ProjectMode {
  projectId: string
  mode: Mode
}

/**
 * A narrowing to a project and mode for dashboard and API callers; the operator's CLI passes none.
 */
export type ProjectFilter = Partial<ProjectMode>

export const modeOf = (testingMode: boolean): Mode => (testingMode ? 'test' : 'live')
