import { describe, expect, test } from 'bun:test'
import { BUN, ROOT } from '../helpers/processes.ts'

/** Committed outputs that are built from sources: CI fails when someone forgot to rebuild. */
describe('generated files are up to date', () => {
  for (const [what, script] of [
    ["the pages' browser bundles", 'scripts/build-assets.ts'],
    ['the devnet contract artifacts', 'scripts/compile-contracts.ts'],
  ] as const) {
    test(`${what} (${script} --check)`, () => {
      const r = Bun.spawnSync([BUN, script, '--check'], { cwd: ROOT })
      expect({ code: r.exitCode, stderr: r.stderr.toString() }).toEqual({ code: 0, stderr: '' })
    })
  }
})
