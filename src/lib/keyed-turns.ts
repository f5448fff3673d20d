/** Work for one key run one after another; work for other keys runs beside it. */
export interface KeyedTurns {
  /** Runs `fn` after every earlier run for `key` has finished, whether it resolved or threw. */
  <T>(key: string, fn: () => Promise<T> | T): Promise<T>
  /** Whether a run for `key` is waiting or running. */
  busy(key: string): boolean
  /** Resolves once every run started so far has finished. */
  idle(): Promise<void>
}

/** A key is forgotten once its last run is done. */
export function keyedTurns(): KeyedTurns {
  const tails = new Map<string, Promise<void>>()
  const turns = <T>(key: string, fn: () => Promise<T> | T): Promise<T> => {
    const run = (tails.get(key) ?? Promise.resolve()).then(fn, fn)
    const tail = run.then(
      () => {},
      () => {},
    )
    tails.set(key, tail)
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key)
    })
    return run
  }
  return Object.assign(turns, {
    busy: (key: string) => tails.has(key),
    idle: async () => {
      await Promise.all([...tails.values()])
    },
  })
}
