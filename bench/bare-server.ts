import { readFileSync } from 'node:fs'
import { Elysia } from 'elysia'

/** The baseline: a bare Elysia JSON route over HTTPS, same runtime, same certificate. */
const [certFile, keyFile] = [process.env.TLS_CERT_FILE!, process.env.TLS_KEY_FILE!]
const app = new Elysia().get('/bare', () => ({ success: true, hello: 'world' }))
const server = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  tls: { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') },
  fetch: (req) => app.handle(req),
})
console.error(JSON.stringify({ msg: 'listening', port: server.port }))
