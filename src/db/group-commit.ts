import { createWorkLoop } from '../instances/work-loop.ts'
import type { Database } from './client.ts'

type Params = (string | number | boolean | null)[]
interface Pending {
  text: string
  params: Params
  resolve(rows: unknown[]): void
  reject(e: unknown): void
}

/**
 * Group commit for the embedded database (PGlite), where every statement runs in the server's
 * own thread and every commit costs it file-system work. A statement is written at once when
 * the last write began at least `gatherMs` ago (an idle server waits for nothing); otherwise it
 * waits until then, and everything that queued meanwhile is written in one transaction. Each
 * caller gets its own statement's rows after the commit. Should the shared transaction fail,
 * its statements are written again one by one, so only the one at fault fails. For
 * independent statements only (creates of different transactions). The batching is the shared
 * work loop's (src/instances/work-loop.ts): statements queued during a write go in the next.
 */
export function createGroupCommit(
  database: Pick<Database, 'query' | 'transaction'>,
  gatherMs: number,
): Pick<Database, 'query'> {
  let queue: Pending[] = []

  async function alone(p: Pending) {
    try {
      p.resolve(await database.query(p.text, p.params))
    } catch (e) {
      p.reject(e)
    }
  }

  async function write() {
    const batch = queue
    queue = []
    if (batch.length === 0) return
    if (batch.length === 1) return alone(batch[0]!)
    let results: unknown[][] | null = null
    try {
      results = await database.transaction(async (query) => {
        const out: unknown[][] = []
        for (const p of batch) out.push(await query(p.text, p.params))
        return out
      })
    } catch {
      for (const p of batch) await alone(p)
    }
    if (results) for (const [i, p] of batch.entries()) p.resolve(results[i]!)
  }

  const loop = createWorkLoop({ run: write, gatherMs })

  return {
    query<T>(text: string, params: Params): Promise<T[]> {
      return new Promise<T[]>((resolve, reject) => {
        queue.push({ text, params, resolve: resolve as (rows: unknown[]) => void, reject })
        void loop.request()
      })
    },
  }
}
