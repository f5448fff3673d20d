import type { ChangeFeed } from '../db/change-feed.ts'
import { parseCidr } from '../lib/cidr.ts'
import type { Clock } from '../lib/clock.ts'
import { newId } from '../lib/ids.ts'
import { deny, ok, type Outcome } from '../lib/outcome.ts'
import type { ProjectRepo, ProjectRow } from './project.repo.ts'

export type ProjectStatus = 'active' | 'inactive'
export interface RateLimits {
  minute: number
  hour: number
  day: number
}
export interface Project {
  id: string
  name: string
  status: ProjectStatus
  limits: RateLimits
  ipAllowlist: string[]
  createdAt: Date
}

const toProject = (r: ProjectRow): Project => ({
  id: r.id,
  name: r.name,
  status: r.status,
  limits: { minute: r.rateLimitMinute, hour: r.rateLimitHour, day: r.rateLimitDay },
  ipAllowlist: r.ipAllowlist,
  createdAt: r.createdAt,
})

const MAX_LIMIT = 1_000_000_000

/** Operator-level project management (CLI today, dashboard settings later). */
export function createProjectService(deps: {
  repo: ProjectRepo
  changes: ChangeFeed
  clock: Clock
}) {
  async function update(id: string, values: Partial<ProjectRow>): Promise<Outcome<Project>> {
    const row = await deps.repo.update(id, values, new Date(deps.clock.now()))
    if (!row) return deny('not_found', `No project ${id}`)
    await deps.changes.publish({ kind: 'project', id })
    return ok(toProject(row))
  }

  return {
    async create(name: string): Promise<Outcome<Project>> {
      const trimmed = name.trim()
      if (!trimmed || trimmed.length > 100)
        return deny('invalid_request', 'Project name must be 1 to 100 characters', [
          { path: 'name', message: 'must be 1 to 100 characters' },
        ])
      return ok(toProject(await deps.repo.insert(newId('proj'), trimmed)))
    },

    async get(id: string): Promise<Project | null> {
      const row = await deps.repo.find(id)
      return row ? toProject(row) : null
    },

    /** The project created first (the demo project, on the embedded defaults). */
    first: (): Promise<string | null> => deps.repo.first(),

    setStatus(id: string, status: string): Promise<Outcome<Project>> {
      if (status !== 'active' && status !== 'inactive') {
        return Promise.resolve(
          deny('invalid_request', 'status must be active or inactive', [
            { path: 'status', message: 'must be active or inactive' },
          ]),
        )
      }
      return update(id, { status })
    },

    setLimits(id: string, limits: RateLimits): Promise<Outcome<Project>> {
      const bad = (Object.entries(limits) as [string, number][]).filter(
        ([, v]) => !Number.isInteger(v) || v < 1 || v > MAX_LIMIT,
      )
      if (bad.length) {
        return Promise.resolve(
          deny(
            'invalid_request',
            'Limits must be whole numbers from 1 to 1,000,000,000',
            bad.map(([k]) => ({
              path: k,
              message: 'must be a whole number from 1 to 1,000,000,000',
            })),
          ),
        )
      }
      return update(id, {
        rateLimitMinute: limits.minute,
        rateLimitHour: limits.hour,
        rateLimitDay: limits.day,
      })
    },

    /** An empty list clears the restriction. */
    setIpAllowlist(id: string, cidrs: string[]): Promise<Outcome<Project>> {
      const bad = cidrs.filter((c) => parseCidr(c) === null)
      if (bad.length)
        return Promise.resolve(
          deny(
            'invalid_request',
            `Not a valid IP address or CIDR: ${bad.join(', ')}`,
            bad.map((c) => ({ path: 'cidrs', message: `"${c}" is not an IP address or CIDR` })),
          ),
        )
      return update(id, { ipAllowlist: cidrs.map((c) => c.trim()) })
    },
  }
}

export type ProjectService = ReturnType<typeof createProjectService>
