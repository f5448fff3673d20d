import { ConfigError, loadConfig } from './config.ts'
import { banner } from './server/banner.ts'
import { startServer } from './server/start.ts'

/** Entry point on Bun (`npm start`) and Deno (`npm run start:deno`): same code, same behaviour. */
try {
  const server = await startServer(loadConfig())
  console.log(banner(server))
  let stopping = false
  const shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    console.error(`${signal}: shutting down`)
    await server.stop()
    process.exit(0)
  }
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))
} catch (e) {
  console.error(
    e instanceof ConfigError
      ? `Configuration error: ${e.message}`
      : `Start-up failed: ${e instanceof Error ? e.message : String(e)}`,
  )
  process.exit(1)
}
