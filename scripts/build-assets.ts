/**
 * Bundles the pages' browser scripts with Bun.build and writes them next to their CSS, where
 * they are committed: the server (on Bun or Deno) serves files, it never bundles.
 *
 *   bun scripts/build-assets.ts           write the bundles
 *   bun scripts/build-assets.ts --check   exit 1 if the committed bundles are stale
 *
 * Each entry becomes one self-contained file. The browser wallet (viem) is its own entry, which
 * the pay page imports by URL only when the browser has a wallet, so most visitors never
 * download it. (Bun's code splitting preloads every chunk, which would defeat that.)
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const root = join(import.meta.dirname, '..')
/** Output directory -> the entries bundled into it. */
const BUNDLES: Record<string, string[]> = {
  'src/modules/pay/assets': [
    'src/modules/pay/client/pay-page.ts',
    'src/modules/pay/client/browser-wallet.ts',
  ],
  // The chart (uPlot and its stylesheet) is its own entry: only the overview loads it.
  'src/modules/dashboard/assets': [
    'src/modules/dashboard/client/dashboard.ts',
    'src/modules/dashboard/client/overview-chart.ts',
  ],
}

async function bundle(entries: string[]): Promise<Map<string, string>> {
  const dir = mkdtempSync(join(tmpdir(), 'assets-'))
  try {
    const r = await Bun.build({
      entrypoints: entries.map((e) => join(root, e)),
      outdir: dir,
      target: 'browser',
      format: 'esm',
      minify: true,
    })
    if (!r.success) throw new AggregateError(r.logs, `bundling ${entries.join(', ')} failed`)
    return new Map(readdirSync(dir).map((f) => [f, readFileSync(join(dir, f), 'utf8')]))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const check = process.argv.includes('--check')
let stale = false
for (const [dir, entries] of Object.entries(BUNDLES)) {
  const built = await bundle(entries)
  const outDir = join(root, dir)
  // Hand-written stylesheets live beside the bundles: only what a bundle made is compared.
  const committed = new Map(
    readdirSync(outDir)
      .filter((f) => f.endsWith('.js') || built.has(f))
      .map((f) => [f, readFileSync(join(outDir, f), 'utf8')]),
  )
  for (const [name, code] of built) {
    if (committed.get(name) === code) continue
    if (check) {
      console.error(`${dir}/${name} is stale: run bun scripts/build-assets.ts`)
      stale = true
    } else {
      writeFileSync(join(outDir, name), code)
      console.log(`wrote ${dir}/${name} (${(code.length / 1024).toFixed(1)} KiB)`)
    }
  }
  for (const name of committed.keys()) {
    if (built.has(name)) continue
    if (check) {
      console.error(`${dir}/${name} is no longer built: run bun scripts/build-assets.ts`)
      stale = true
    } else {
      unlinkSync(join(outDir, name))
      console.log(`removed ${dir}/${name}`)
    }
  }
}
if (stale) process.exit(1)
