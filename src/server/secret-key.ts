import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { ConfigError, type Config } from '../config.ts'
import { parseSecretKey } from '../lib/secret-box.ts'

/**
 * The key that seals secrets at rest (docs/decisions/0024-start-and-configuration.md `SECRET_KEY`).
 * With the embedded database and no SECRET_KEY, one is generated once into `DATA_DIR/secret.key`
 * (mode 0600), next to the data it protects; with PostgreSQL the configuration already insists on
 * SECRET_KEY.
 */
export function resolveSecretKey(config: Pick<Config, 'secretKey' | 'dataDir'>): Buffer {
  if (config.secretKey) return config.secretKey
  const file = join(config.dataDir, 'secret.key')
  if (!existsSync(file)) {
    // 'wx' fails if another process created it meanwhile; then read theirs.
    try {
      writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' })
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e
    }
  }
  const key = parseSecretKey(readFileSync(file, 'utf8'))
  if (!key)
    throw new ConfigError('SECRET_KEY', `${file} does not hold a 32-byte key (64 hex characters)`)
  return key
}
