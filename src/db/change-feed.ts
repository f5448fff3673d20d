import { CHANNELS } from './channels.ts'
import type { Database } from './client.ts'

/**
 * A record whose cached copies must be dropped: keys and projects feed the auth cache, endpoints
 * the webhook sender's.
 */
export type Change = { kind: 'key' | 'project' | 'endpoint'; id: string } | { kind: 'all' }

export interface ChangeFeed {
  /** Tells this process at once and every other instance through NOTIFY (after commit). */
  publish(change: Change): Promise<void>
  subscribe(fn: (change: Change) => void): () => void
  stop(): Promise<void>
}

export async function createChangeFeed(database: Database): Promise<ChangeFeed> {
  const subscribers = new Set<(c: Change) => void>()
  const emit = (c: Change) => {
    for (const fn of subscribers) fn(c)
  }
  const unlisten = await database.listen(
    CHANNELS.cacheChanges,
    (payload) => {
      try {
        emit(JSON.parse(payload) as Change)
      } catch {
        emit({ kind: 'all' })
      }
    },
    // Notifications sent while the listening connection was down are lost: forget everything.
    () => emit({ kind: 'all' }),
  )
  return {
    async publish(change) {
      emit(change)
      await database.notify(CHANNELS.cacheChanges, JSON.stringify(change))
    },
    subscribe(fn) {
      subscribers.add(fn)
      return () => subscribers.delete(fn)
    },
    stop: unlisten,
  }
}
