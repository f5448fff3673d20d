import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generate } from 'selfsigned'

export interface TlsFiles {
  cert: string
  key: string
  /** Where they came from, for the start-up banner. */
  source: string
}

/** R3: the operator's certificate, or a self-signed one for localhost made once under DATA_DIR/tls. */
export async function loadTls(opts: { certFile: string | null; keyFile: string | null; dataDir: string }): Promise<TlsFiles> {
  if (opts.certFile && opts.keyFile) {
    return { cert: readFileSync(opts.certFile, 'utf8'), key: readFileSync(opts.keyFile, 'utf8'), source: opts.certFile }
  }
  const dir = join(opts.dataDir, 'tls')
  const certPath = join(dir, 'cert.pem')
  const keyPath = join(dir, 'key.pem')
  if (!existsSync(certPath) || !existsSync(keyPath)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      days: 825,
      extensions: [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
        { name: 'extKeyUsage', serverAuth: true },
        { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }, { type: 7, ip: '::1' }] },
      ],
    } as any)
    writeFileSync(keyPath, pems.private, { mode: 0o600 })
    chmodSync(keyPath, 0o600)
    writeFileSync(certPath, pems.cert)
  }
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), source: `${certPath} (self-signed, generated)` }
}
