import { runCli } from './run.ts'

/**
 * docs/decisions/0025-operator-cli.md: `npm run cli -- <command> [--json]` as a process: what
 * ./run.ts answers, printed, and its exit code.
 */
const run = await runCli(process.argv.slice(2), process.env)
process.stdout.write(run.stdout)
process.stderr.write(run.stderr)
process.exit(run.code)
