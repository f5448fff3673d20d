/**
 * postgres.js 3.4.9 keeps its pool's connections in a queue whose `shift` leaves a hole per item
 * handed out and whose `remove` scans those holes; under steady load the pool slowed down for as
 * long as the load lasted (docs/upstream/postgres-queue.md). `npm ci` fixes the installed copy
 * with patches/postgres+3.4.9.patch (patch-package, package.json `postinstall`). An install that
 * skipped it (`--ignore-scripts`, a copied node_modules, another version) would run slow without
 * a word, so the service and the CLI check the fix before they open a pool.
 */

interface Queue {
  push(x: unknown): unknown
  shift(): unknown
  remove(x: unknown): unknown
}

/**
 * The queue module next to the driver entry this runtime loads (Bun and Deno: src/, Node: cjs/).
 */
export const installedQueueUrl = () => new URL('./queue.js', import.meta.resolve('postgres')).href

/**
 * Whether the queue at `url` has the fix, asked of its behaviour rather than its text: after a
 * hand-out the slot it came from is a hole, and a fixed `remove` looks only at the items still
 * queued, so it finds no hole to take out (as shipped, it removes the hole and answers
 * `undefined`).
 */
export async function queueIsFixed(url: string): Promise<boolean> {
  const mod = (await import(url)) as { default: (initial?: unknown[]) => Queue }
  const q = mod.default(['first', 'second'])
  q.shift()
  return q.remove(undefined) === null
}

/** Throws, saying how to fix it, unless the installed driver's queue has the fix. */
export async function assertPostgresQueueFixed(url = installedQueueUrl()): Promise<void> {
  if (await queueIsFixed(url)) return
  throw new Error(
    `the PostgreSQL driver is installed without its queue fix (${url} as shipped: under steady load the pool slows down the longer the load lasts). ` +
      'Run `npm ci` (or `npx patch-package`) in the project directory: it applies patches/postgres+3.4.9.patch. ' +
      'See docs/upstream/postgres-queue.md.',
  )
}
