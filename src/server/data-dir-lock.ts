import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs'
import { join } from 'node:path'

/**
 * A lock file in DATA_DIR held by one live process. PGlite is one process's database: whoever
 * opens DATA_DIR/pglite holds `pglite.lock`. A server on PostgreSQL holds `instance.lock`, so
 * the instance identity kept in DATA_DIR (src/server/instance-id.ts) is one process's. A lock
 * left by a dead process is taken over.
 */
export function lockDataDir(
  dataDir: string,
  who: string,
  file = 'pglite.lock',
): { release(): void } | { heldBy: string } {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const path = join(dataDir, file)
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600)
      writeSync(fd, JSON.stringify({ pid: process.pid, who }))
      closeSync(fd)
      return {
        release: () => {
          try {
            unlinkSync(path)
          } catch {}
        },
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e
      let holder: { pid: number; who: string } | null = null
      try {
        holder = JSON.parse(readFileSync(path, 'utf8'))
      } catch {}
      if (holder && holder.pid !== process.pid && alive(holder.pid))
        return { heldBy: `${holder.who} (pid ${holder.pid})` }
      try {
        unlinkSync(path)
      } catch {}
    }
  }
  return { heldBy: 'another process' }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}
