import { runCli, type CliResult } from './processes.ts'

/**
 * Polls `pred` until it holds; throws after `timeoutMs` with `describe()` saying what was seen
 * last.
 */
export async function waitUntil(
  pred: () => Promise<boolean> | boolean,
  timeoutMs = 20_000,
  describe?: () => string,
  everyMs = 25,
): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!(await pred())) {
    if (Date.now() > end)
      throw new Error(`condition not met in ${timeoutMs} ms${describe ? `: ${describe()}` : ''}`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

/** The operator's CLI (`bun src/cli/main.ts ... --json`) with one environment. */
export function cliWith(env: Record<string, string>) {
  const run = (...args: string[]): Promise<CliResult> => runCli([...args, '--json'], { env })
  return {
    run,
    /** Runs a command that must succeed and returns its JSON. */
    async ok(...args: string[]): Promise<any> {
      const r = await run(...args)
      if (r.code !== 0)
        throw new Error(`cli ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`)
      return r.json
    },
  }
}

export type Cli = ReturnType<typeof cliWith>

/** A project with generous limits and a test key, made through the CLI. */
export async function cliProject(
  cli: Cli,
  name: string,
  mode: 'test' | 'live' = 'test',
): Promise<{ id: string; key: string }> {
  const project = await cli.ok('project', 'create', '--name', name)
  await cli.ok(
    'project',
    'set-limits',
    '--project',
    project.id,
    '--minute',
    '100000',
    '--hour',
    '1000000',
    '--day',
    '10000000',
  )
  const { key } = await cli.ok(
    'key',
    'create',
    '--project',
    project.id,
    '--mode',
    mode,
    '--name',
    `${mode} key`,
  )
  return { id: project.id, key }
}

/** A transaction created through the API of a server reachable with `fetch`; returns its id. */
export async function createTransaction(
  fetchFn: (path: string, init?: RequestInit) => Promise<Response>,
  key: string,
  body: Record<string, unknown> = { amount: 25 },
): Promise<string> {
  const res = await fetchFn('/api/transactions/create', {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  const text = await res.text()
  if (res.status !== 201 && res.status !== 200)
    throw new Error(`create transaction: ${res.status} ${text}`)
  return JSON.parse(text).transaction.id
}
