import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Elysia } from 'elysia'

const TYPES: Record<string, string> = {
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
}

/** What every page shares (base.css: the design tokens and base rules), beside each page's own. */
export const SHARED_ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url))

interface Asset {
  body: Uint8Array
  type: string
  version: string
}

export interface StaticAssets {
  /** `/assets/<name>?v=<content hash>`: a new URL whenever the file changes. */
  url(name: string): string
  get(name: string): Asset | undefined
}

/**
 * The pages' own files (styles, bundled scripts, icons), read once at start-up and served from
 * memory: nothing is fetched from anywhere else (no CDN; CSP allows 'self' only). Names must
 * be unique across the directories.
 */
export function loadStaticAssets(dirs: string[]): StaticAssets {
  const files = new Map<string, Asset>()
  for (const dir of dirs) {
    for (const name of readdirSync(dir)) {
      const type = TYPES[extname(name)]
      if (!type) continue
      if (files.has(name)) throw new Error(`Two static assets are called ${name}`)
      const body = new Uint8Array(readFileSync(join(dir, name)))
      files.set(name, {
        body,
        type,
        version: createHash('sha256').update(body).digest('hex').slice(0, 12),
      })
    }
  }
  return {
    url(name) {
      const a = files.get(name)
      if (!a) throw new Error(`No static asset ${name}`)
      return `/assets/${name}?v=${a.version}`
    },
    get: (name) => files.get(name),
  }
}

/**
 * `GET /assets/:name`: immutable when asked for by its current version, briefly cached otherwise.
 */
export function staticAssetsController(assets: StaticAssets) {
  return new Elysia({ name: 'static-assets' }).get(
    '/assets/:name',
    ({ params, query }) => {
      const a = assets.get(params.name)
      if (!a)
        return new Response('Not found', {
          status: 404,
          headers: { 'content-type': 'text/plain; charset=utf-8' },
        })
      const current = (query as Record<string, string | undefined>).v === a.version
      return new Response(a.body as Uint8Array<ArrayBuffer>, {
        headers: {
          'content-type': a.type,
          'cache-control': current ? 'public, max-age=31536000, immutable' : 'public, max-age=300',
          etag: `"${a.version}"`,
          'cross-origin-resource-policy': 'same-origin',
          // An SVG opened on its own must not run anything either.
          ...(a.type === 'image/svg+xml'
            ? { 'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'" }
            : {}),
        },
      })
    },
    { detail: { hide: true } },
  )
}
