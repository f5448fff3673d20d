/**
 * A TCP proxy on 127.0.0.1 in front of a server (PostgreSQL), for tests that take the server
 * away without stopping it for everyone else: `cut()` drops every open connection and refuses
 * new ones (as a stopped server would), `restore()` lets them through again.
 */
import { createConnection, createServer, type Socket } from 'node:net'

export interface TcpProxy {
  port: number
  cut(): void
  restore(): void
  close(): Promise<void>
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const open = new Set<Socket>()
  let refusing = false
  const server = createServer((client) => {
    if (refusing) return client.destroy()
    const upstream = createConnection(target)
    open.add(client)
    open.add(upstream)
    const drop = () => {
      client.destroy()
      upstream.destroy()
      open.delete(client)
      open.delete(upstream)
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    port,
    cut() {
      refusing = true
      for (const s of open) s.destroy()
      open.clear()
    },
    restore() {
      refusing = false
    },
    async close() {
      refusing = true
      for (const s of open) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
