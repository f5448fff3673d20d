/**
 * Runs a real anvil node from the npm package `@foundry-rs/anvil`, for the devnet that
 * `npm start` launches and for tests. Works on Bun, Deno and Node (node:child_process).
 *
 * anvil writes a state file per block under its cache and never deletes it
 * (docs/development.md#anvil), so each node gets its own temporary HOME and cache path with
 * `--prune-history`, and `stop()` removes that directory. `--hardfork cancun` keeps mining time
 * linear as the chain grows.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

export interface AnvilOptions {
  /** Seconds per block; omitted: a block per transaction (automine). */
  blockTime?: number
  /** Mine only on request (`evm_mine` / `anvil_mine`). */
  noMining?: boolean
  chainId?: number
  /** 0 (default) picks a free port. */
  port?: number
  /** BIP-39 mnemonic for the funded dev accounts (anvil's default when omitted). */
  mnemonic?: string
  /**
   * States of past blocks kept in memory (`--prune-history N`). Reorgs (`anvil_reorg`) need
   * the states of the blocks they replace; the default 0 keeps none and the least memory.
   */
  historyStates?: number
  /**
   * Keep the chain in this file (`--state`): loaded at start when it exists, written every
   * 30 s and at a graceful stop. Blocks keep their hashes across restarts (anvil keeps only its
   * recent blocks in the file, so block 0 may come back with another hash: the follower knows the
   * chain by the blocks it followed last, follower/reorgs.ts). The node's process id is kept
   * beside it (`<stateFile>.pid`): a node left running by a process that was killed is stopped
   * (and writes its state) before a new one loads the file, so two never share it.
   */
  stateFile?: string
  /**
   * The EVM hardfork (default `cancun`); `prague` adds EIP-7702 (the treasury's sponsored sweeps).
   */
  hardfork?: 'cancun' | 'prague'
  extraArgs?: string[]
}

export interface AnvilNode {
  readonly rpcUrl: string
  readonly port: number
  readonly pid: number
  /** Stops the node (SIGTERM, then SIGKILL after 2 s) and removes its temporary directory. */
  stop(): Promise<void>
}

const PLATFORM_PACKAGES: Record<string, string> = {
  'linux-x64': '@foundry-rs/anvil-linux-amd64',
  'linux-arm64': '@foundry-rs/anvil-linux-arm64',
  'darwin-x64': '@foundry-rs/anvil-darwin-amd64',
  'darwin-arm64': '@foundry-rs/anvil-darwin-arm64',
  'win32-x64': '@foundry-rs/anvil-win32-amd64',
}

/** Path of the native anvil binary for this platform (skips the package's node wrapper). */
export function anvilBinary(): string {
  const key = `${process.platform}-${process.arch}`
  const pkg = PLATFORM_PACKAGES[key]
  if (!pkg) throw new Error(`anvil: no binary package for platform ${key}`)
  const require = createRequire(import.meta.url)
  const manifest = require.resolve(`${pkg}/package.json`)
  return join(dirname(manifest), 'bin', process.platform === 'win32' ? 'anvil.exe' : 'anvil')
}

/** How long a node keeping a state file may take to write it when stopped. */
const STATE_STOP_MS = 30_000

/**
 * Stops the node a killed process left running on `stateFile` (its pid beside it), waiting for
 * it to write the state: what it mined meanwhile is then loaded, not lost or overwritten.
 */
async function stopLeftOver(pidFile: string): Promise<void> {
  if (!existsSync(pidFile)) return
  const pid = Number(readFileSync(pidFile, 'utf8').trim())
  rmSync(pidFile, { force: true })
  if (!Number.isInteger(pid) || pid <= 0 || !isAnvil(pid)) return
  process.kill(pid, 'SIGTERM')
  const end = Date.now() + STATE_STOP_MS
  while (isAnvil(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50))
  if (isAnvil(pid)) process.kill(pid, 'SIGKILL')
}

/** Whether `pid` is a live anvil process (its command line says so, where /proc tells). */
function isAnvil(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('anvil')
  } catch {
    // No /proc (macOS): a live process with the recorded pid is taken to be it.
    return true
  }
}

export async function startAnvil(options: AnvilOptions = {}): Promise<AnvilNode> {
  const pidFile = options.stateFile ? `${options.stateFile}.pid` : null
  if (pidFile) await stopLeftOver(pidFile)
  const home = mkdtempSync(join(tmpdir(), 'anvil-'))
  const args = [
    '--host',
    '127.0.0.1',
    '--port',
    String(options.port ?? 0),
    '--hardfork',
    options.hardfork ?? 'cancun',
    '--prune-history',
    ...(options.historyStates ? [String(options.historyStates)] : []),
    '--cache-path',
    join(home, 'cache'),
  ]
  if (options.chainId !== undefined) args.push('--chain-id', String(options.chainId))
  if (options.blockTime !== undefined) args.push('--block-time', String(options.blockTime))
  if (options.noMining) args.push('--no-mining')
  if (options.mnemonic) args.push('--mnemonic', options.mnemonic)
  if (options.stateFile) args.push('--state', options.stateFile, '--state-interval', '30')
  args.push(...(options.extraArgs ?? []))
  // Not `--silent`: that also hides the "Listening on" line the port is read from.
  const child = spawn(anvilBinary(), args, {
    env: { ...process.env, HOME: home, XDG_CACHE_HOME: join(home, 'xdg') },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  // If this process ends without stop() (an uncaught error, process.exit), anvil goes too: one
  // keeping a state file is asked to stop (it writes the state as it goes, and its pid file stays
  // so the next start waits for it), any other is killed.
  const onExit = () => {
    child.kill(pidFile ? 'SIGTERM' : 'SIGKILL')
    rmSync(home, { recursive: true, force: true })
  }
  process.once('exit', onExit)
  const cleanup = () => {
    process.off('exit', onExit)
    rmSync(home, { recursive: true, force: true })
    if (pidFile) rmSync(pidFile, { force: true })
  }
  if (pidFile) writeFileSync(pidFile, String(child.pid))

  let port: number
  try {
    port = await listeningPort(child)
  } catch (error) {
    child.kill('SIGKILL')
    cleanup()
    throw error
  }
  // Keep draining output so a chatty node never blocks on a full pipe.
  child.stdout?.resume()
  child.stderr?.resume()

  let stopped: Promise<void> | null = null
  return {
    rpcUrl: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
          child.kill('SIGTERM')
          // A node keeping a state file writes it as it stops: give it the time.
          const timer = setTimeout(() => child.kill('SIGKILL'), pidFile ? STATE_STOP_MS : 2000)
          await exited
          clearTimeout(timer)
        }
        cleanup()
      })()
      return stopped
    },
  }
}

function listeningPort(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let output = ''
    const timer = setTimeout(
      () => fail(new Error(`anvil did not start within 15 s: ${output.slice(-500)}`)),
      15_000,
    )
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const match = /Listening on [\d.]+:(\d+)/.exec(output)
      if (match) {
        done()
        resolve(Number(match[1]))
      }
    }
    const onExit = (code: number | null) =>
      fail(new Error(`anvil exited (${code}) before listening: ${output.slice(-500)}`))
    const fail = (error: Error) => {
      done()
      reject(error)
    }
    const done = () => {
      clearTimeout(timer)
      child.stdout?.off('data', onData)
      child.stderr?.off('data', onData)
      child.off('exit', onExit)
      child.off('error', fail)
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', onExit)
    child.once('error', fail)
  })
}
