/** Output of a finished child process. */
export interface RunResult {
  code: number
  stdout: string
  stderr: string
}

/**
 * Runs a command without blocking the event loop: a test server living in this process must
 * keep answering while the child talks to it (spawnSync would deadlock).
 */
export async function run(
  cmd: string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<RunResult> {
  const proc = Bun.spawn(cmd, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: opts.timeoutMs ?? 60_000,
  })
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  return { code, stdout, stderr }
}
