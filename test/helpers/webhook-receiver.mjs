// A merchant's webhook receiver, as a merchant would write it: plain Node, node:http and
// node:crypto only. Run as its own process by the tests (test/helpers/webhook-sink.ts).
//
// Each path is an endpoint with a behaviour, set by the test through POST /_control:
//   { path, secret, mode: 'ok' | 'fail' | 'fail-then-ok' | 'hang' | 'redirect' | 'slow' | 'answer', failures?: number, location?: string, delayMs?: number,
//     status?: number, headers?: object }   ('answer' replies status and headers, as a gone (410) or busy (429 with Retry-After) receiver does)
// Every request to such a path is recorded (GET /_received?path=...), with whether its signature
// verified. A bad signature gets 401, as docs/integrating/webhooks.md tells receivers to answer.
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer } from 'node:http'

const endpoints = new Map()
const received = []
const hanging = new Set()

function verify(rawBody, signature, secret) {
  if (typeof signature !== 'string' || !/^[0-9a-f]{64}$/.test(signature)) return false
  const expected = createHmac('sha256', secret).update(rawBody).digest()
  return timingSafeEqual(expected, Buffer.from(signature, 'hex'))
}

const server = createServer((req, res) => {
  const chunks = []
  req.on('data', (c) => chunks.push(c))
  req.on('end', () => {
    const raw = Buffer.concat(chunks)
    const url = new URL(req.url, 'http://x')
    if (url.pathname === '/_control') {
      const c = JSON.parse(raw.toString())
      endpoints.set(c.path, { ...c, seen: 0 })
      return res.end('{}')
    }
    if (url.pathname === '/_received') {
      const path = url.searchParams.get('path')
      res.setHeader('content-type', 'application/json')
      return res.end(
        JSON.stringify({
          received: received.filter((r) => !path || r.path === path),
          hanging: hanging.size,
        }),
      )
    }
    const ep = endpoints.get(url.pathname)
    const verified = ep ? verify(raw, req.headers['x-service-signature'], ep.secret) : false
    received.push({
      path: url.pathname,
      at: Date.now(),
      headers: req.headers,
      body: raw.toString(),
      verified,
    })
    if (!ep) return res.writeHead(404).end('unknown endpoint')
    if (!verified) return res.writeHead(401).end('invalid signature')
    ep.seen++
    if (ep.mode === 'hang') {
      hanging.add(res)
      res.on('close', () => hanging.delete(res))
      return
    }
    if (ep.mode === 'slow')
      return setTimeout(() => res.writeHead(200).end('ok, slowly'), ep.delayMs ?? 500)
    if (ep.mode === 'redirect') return res.writeHead(302, { location: ep.location }).end('moved')
    if (ep.mode === 'answer')
      return res.writeHead(ep.status ?? 200, ep.headers ?? {}).end(`answered ${ep.status}`)
    if (ep.mode === 'fail' || (ep.mode === 'fail-then-ok' && ep.seen <= (ep.failures ?? 2)))
      return res.writeHead(500).end('please retry')
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok')
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`))
process.on('SIGTERM', () => process.exit(0))
