import { chmodSync, existsSync, mkdirSync, unlinkSync } from 'node:fs'
import { createConnection, createServer } from 'node:net'
import { dirname, join } from 'node:path'
import { runCommand, type CommandResult, type Flags } from '../cli/commands.ts'
import type { Services } from '../services.ts'

/**
 * docs/decisions/0025-operator-cli.md: the CLI sends its command to the server running on its
 * DATA_DIR here: a Unix socket in DATA_DIR/run, a directory only its owner can enter. One JSON line
 * in, one JSON line out. With the embedded database the server holds PGlite exclusively, so this
 * is the CLI's only way in while it runs; on PostgreSQL it makes `status` the instance's own
 * readiness, as GET /readyz reports it.
 */
export const adminSocketPath = (dataDir: string) => join(dataDir, 'run', 'admin.sock')

export async function listenAdminSocket(
  dataDir: string,
  services: Services,
): Promise<{ close(): Promise<void> }> {
  const path = adminSocketPath(dataDir)
  // The socket lives in a directory only the owner can enter, whatever DATA_DIR's own mode.
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  chmodSync(dirname(path), 0o700)
  if (existsSync(path)) unlinkSync(path)
  const server = createServer((socket) => {
    let buffer = ''
    socket.setEncoding('utf8')
    socket.on('data', async (chunk) => {
      buffer += chunk
      const nl = buffer.indexOf('\n')
      if (nl < 0) {
        if (buffer.length > 1_000_000) socket.destroy()
        return
      }
      let reply: CommandResult
      try {
        const req = JSON.parse(buffer.slice(0, nl)) as { words: string[]; flags: Flags }
        reply = await runCommand(services, req.words, req.flags)
      } catch (e) {
        reply = {
          ok: false,
          usage: false,
          message: `Admin command failed: ${e instanceof Error ? e.message : String(e)}`,
        }
      }
      socket.end(`${JSON.stringify(reply)}\n`)
    })
    socket.on('error', () => {})
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(path, () => resolve())
  })
  chmodSync(path, 0o600)
  return {
    close: () =>
      new Promise((resolve) =>
        server.close(() => {
          try {
            unlinkSync(path)
          } catch {}
          resolve()
        }),
      ),
  }
}

/** Sends one command to a running server; null when no server listens there. */
export async function sendAdminCommand(
  dataDir: string,
  words: string[],
  flags: Flags,
): Promise<CommandResult | null> {
  const path = adminSocketPath(dataDir)
  if (!existsSync(path)) return null
  return new Promise((resolve, reject) => {
    const socket = createConnection(path)
    let data = ''
    socket.setEncoding('utf8')
    socket.on('connect', () => socket.write(`${JSON.stringify({ words, flags })}\n`))
    socket.on('data', (c) => (data += c))
    socket.on('end', () => {
      try {
        resolve(JSON.parse(data))
      } catch (e) {
        reject(e)
      }
    })
    socket.on('error', (e: NodeJS.ErrnoException) =>
      e.code === 'ECONNREFUSED' || e.code === 'ENOENT' ? resolve(null) : reject(e),
    )
  })
}
