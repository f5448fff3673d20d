import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { X509Certificate } from 'node:crypto'
import { generate } from 'selfsigned'
import { ConfigError } from '../config.ts'

export interface TlsFiles {
  cert: string
  key: string
  /** Where they came from, for the start-up banner. */
  source: string
}

/**
 * docs/decisions/0003-https-only.md: the operator's certificate, or a self-signed one for localhost
 * made once under DATA_DIR/tls.
 */
export async function loadTls(opts: {
  certFile: string | null
  keyFile: string | null
  dataDir: string
}): Promise<TlsFiles> {
  if (opts.certFile && opts.keyFile) {
    const read = (file: string, variable: string, marker: RegExp) => {
      let text: string
      try {
        text = readFileSync(file, 'utf8')
      } catch (e) {
        throw new ConfigError(
          variable,
          `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`,
        )
      }
      if (!marker.test(text)) throw new ConfigError(variable, `${file} is not a PEM file`)
      return text
    }
    const cert = read(opts.certFile, 'TLS_CERT_FILE', /-----BEGIN CERTIFICATE-----/)
    const key = read(opts.keyFile, 'TLS_KEY_FILE', /-----BEGIN [A-Z ]*PRIVATE KEY-----/)
    try {
      new X509Certificate(cert)
    } catch {
      throw new ConfigError('TLS_CERT_FILE', `${opts.certFile} holds no valid certificate`)
    }
    return { cert, key, source: opts.certFile }
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
        {
          name: 'subjectAltName',
          altNames: [
            { type: 2, value: 'localhost' },
            { type: 7, ip: '127.0.0.1' },
            { type: 7, ip: '::1' },
          ],
        },
      ],
      // biome-ignore lint/suspicious/noExplicitAny: selfsigned's types lag its extension options
    } as any)
    writeFileSync(keyPath, pems.private, { mode: 0o600 })
    chmodSync(keyPath, 0o600)
    writeFileSync(certPath, pems.cert)
  }
  return {
    cert: readFileSync(certPath, 'utf8'),
    key: readFileSync(keyPath, 'utf8'),
    source: `${certPath} (self-signed, generated)`,
  }
}
