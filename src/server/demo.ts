import { randomString } from '../lib/ids.ts'
import type { Services } from '../services.ts'

export interface Demo {
  projectId: string
  /** Only on the start that created it: keys are stored hashed and cannot be shown again. */
  testKey: string | null
  /** The demo's dashboard user; the password only on the start that created it (stored hashed). */
  user: { email: string; password: string | null }
}

export const DEMO_EMAIL = 'demo@example.com'

/**
 * docs/decisions/0024-start-and-configuration.md: on the first start with the embedded defaults, a
 * demo project, its test key and a dashboard user.
 */
export async function ensureDemoProject(services: Services): Promise<Demo | null> {
  const first = await services.projects.first()
  if (first !== null)
    return { projectId: first, testKey: null, user: { email: DEMO_EMAIL, password: null } }
  const project = await services.projects.create('Demo project')
  if (!project.ok) throw new Error(project.message)
  const key = await services.keys.create({
    projectId: project.value.id,
    mode: 'test',
    name: 'Demo test key',
  })
  if (!key.ok) throw new Error(key.message)
  const password = randomString(20)
  const user = await services.users.create({
    email: DEMO_EMAIL,
    password,
    projectId: project.value.id,
  })
  if (!user.ok) throw new Error(user.message)
  return {
    projectId: project.value.id,
    testKey: key.value.key,
    user: { email: DEMO_EMAIL, password },
  }
}
