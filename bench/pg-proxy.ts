/**
 * A PostgreSQL proxy that counts statements, for `bench/round-trips.ts`, in a process of its own
 * (the bench blocks its own thread while wrk and the CLI run). Forwards 127.0.0.1:<port> to
 * PG_TARGET (host:port); logs `{"msg":"proxy","port":N}` then `{"msg":"listening","port":M}`,
 * M serving `GET /count`: the statements counted so far.
 */
import { connect, createServer, type Socket } from 'node:net'

const [host, port] = (process.env.PG_TARGET ?? '127.0.0.1:5432').split(':') as [string, string]

/**
 * Counts the statements a client sends through it: after the start-up message, each frontend
 * message is a type byte and a 4-byte length that counts itself.
 */
function startPgProxy() {
  let statements = 0
  const server = createServer((client: Socket) => {
    const upstream = connect(Number(port), host)
    let buffered: Buffer = Buffer.alloc(0)
    let started = false
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk)
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk
      for (;;) {
        if (!started) {
          // The start-up message (or an SSL request) has no type byte.
          if (buffered.length < 4) break
          const len = buffered.readInt32BE(0)
          if (buffered.length < len) break
          const code = buffered.readInt32BE(4)
          buffered = buffered.subarray(len)
          // 80877103: an SSL request, answered before the real start-up message.
          if (code !== 80877103) started = true
          continue
        }
        if (buffered.length < 5) break
        const len = buffered.readInt32BE(1)
        if (buffered.length < 1 + len) break
        const type = String.fromCharCode(buffered[0]!)
        if (type === 'S' || type === 'Q') statements++
        buffered = buffered.subarray(1 + len)
      }
    })
    upstream.on('data', (chunk) => client.write(chunk))
    const close = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('error', close)
    upstream.on('error', close)
    client.on('close', close)
    upstream.on('close', close)
  })
  return new Promise<{ port: number; count(): number; stop(): void }>((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as { port: number }).port,
        count: () => statements,
        stop: () => server.close(),
      }),
    ),
  )
}

const proxy = await startPgProxy()
console.error(JSON.stringify({ msg: 'proxy', port: proxy.port }))
const counter = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  fetch: () => new Response(String(proxy.count())),
})
console.error(JSON.stringify({ msg: 'listening', port: counter.port }))
process.on('SIGTERM', () => {
  proxy.stop()
  counter.stop(true)
  process.exit(0)
})
