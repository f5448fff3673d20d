import { createHash, randomBytes } from 'node:crypto'
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { openDatabase } from '../../src/db/client.ts'
import { randomString } from '../../src/lib/ids.ts'

export type Backend = 'pglite' | 'postgres'

/** PGlite always; PostgreSQL too when DATABASE_URL is set (CI sets it). */
export function backends(): Backend[] {
  return process.env.DATABASE_URL ? ['pglite', 'postgres'] : ['pglite']
}

const MIGRATIONS = new URL('../../drizzle', import.meta.url).pathname

function migrationsHash() {
  const h = createHash('sha256')
  for (const f of readdirSync(MIGRATIONS).sort())
    if (f.endsWith('.sql')) h.update(f).update(readFileSync(join(MIGRATIONS, f)))
  return h.digest('hex').slice(0, 16)
}

/**
 * A migrated PGlite data directory, made once per migration set and copied for each test: opening a
 * copy takes ~0.3 s where a fresh in-memory PGlite takes ~4 s (docs/development.md#both-databases).
 */
export async function pgliteTemplate(): Promise<string> {
  const dir = join(tmpdir(), `crypto-pay-pglite-template-${migrationsHash()}`)
  if (existsSync(join(dir, 'PG_VERSION'))) return dir
  const building = `${dir}.${process.pid}.${randomString(6)}`
  const db = await openDatabase({ databaseUrl: null, pgliteDir: building })
  await db.close()
  try {
    renameSync(building, dir)
  } catch {
    rmSync(building, { recursive: true, force: true }) // another test process won the race
  }
  return dir
}

/** A DATA_DIR whose embedded database is already migrated. */
export async function freshDataDir(): Promise<string> {
  const dataDir = join(tmpdir(), `crypto-pay-test-${randomString(10)}`)
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  cpSync(await pgliteTemplate(), join(dataDir, 'pglite'), { recursive: true })
  return dataDir
}

let adminUrl: Promise<string> | null = null

/**
 * Where the tests create and drop their databases: DATABASE_URL's own database, or, when that
 * database does not exist on the server (a fresh server has only `postgres`), the server's
 * default `postgres` database. Nothing is created in its place: each test makes its own.
 */
function administration(): Promise<string> {
  return (adminUrl ??= (async () => {
    const base = process.env.DATABASE_URL
    if (!base) throw new Error('DATABASE_URL is not set')
    const probe = postgres(base, { max: 1, onnotice: () => {} })
    try {
      await probe`select 1`
      return base
    } catch (e) {
      if ((e as { code?: string }).code !== '3D000') throw e // anything but "database does not exist"
      const fallback = new URL(base)
      fallback.pathname = '/postgres'
      return fallback.toString()
    } finally {
      await probe.end()
    }
  })())
}

/** A new, empty PostgreSQL database on the DATABASE_URL server; `drop` removes it. */
export async function freshPostgres(): Promise<{
  url: string
  env: { DATABASE_URL: string; SECRET_KEY: string; WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: string }
  drop(): Promise<void>
}> {
  const base = await administration()
  const name = `crypto_pay_test_${randomString(10).toLowerCase()}`
  const admin = postgres(base, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  await admin.end()
  const url = new URL(base)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    // Instances on one PostgreSQL database share one SECRET_KEY (config requires it). Test
    // receivers listen on this machine, and DATABASE_URL turns private test endpoints off by
    // default.
    env: {
      DATABASE_URL: url.toString(),
      SECRET_KEY: randomBytes(32).toString('hex'),
      WEBHOOK_ALLOW_PRIVATE_TEST_ENDPOINTS: '1',
    },
    async drop() {
      const a = postgres(base, { max: 1, onnotice: () => {} })
      await a.unsafe(`drop database if exists ${name} with (force)`)
      await a.end()
    },
  }
}
