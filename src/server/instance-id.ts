import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { newId } from '../lib/ids.ts'

/**
 * This server's instance id, kept in DATA_DIR: a server restarted on the same DATA_DIR is the
 * same instance, and resumes the actors it ran (transactions, webhook deliveries) at once,
 * instead of waiting for its old lease to end as another instance would (ACTOR_LEASE_MS). The
 * caller holds DATA_DIR's lock, so two live processes never share an id.
 */
export function instanceIdOf(dataDir: string): string {
  const path = join(dataDir, 'instance-id')
  try {
    const id = readFileSync(path, 'utf8').trim()
    if (/^inst_[A-Za-z0-9]{20}$/.test(id)) return id
  } catch {}
  const id = newId('inst')
  writeFileSync(path, `${id}\n`, { mode: 0o600 })
  return id
}
