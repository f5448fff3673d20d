import { readFileSync } from 'node:fs'
import { type Hex, parseEther, parseGwei } from 'viem'
import type { RelayLimits } from '../chain/signature-pay/relay-limits.ts'
import { ConfigError, type Config } from '../config.ts'

/**
 * The relayer's key and limits (docs/decisions/0062-pay-by-signature.md,
 * docs/decisions/0067-the-relayer-pays-only-for-what-succeeds.md): RELAYER_KEY_FILE's key,
 * else on the service's own devnet one of its funded accounts, else none (paying by signature is
 * then not offered). The key pays gas only and moves nobody's funds.
 */
export function relayerSettings(
  config: Pick<Config, 'relayerKeyFile' | 'relayer'>,
  devnetKey: Hex | null,
): { privateKey: Hex; limits: RelayLimits; minBalanceWei: bigint } | null {
  const privateKey = config.relayerKeyFile ? readKey(config.relayerKeyFile) : devnetKey
  if (!privateKey) return null
  return {
    privateKey,
    limits: {
      maxFeePerGasWei: parseGwei(config.relayer.maxFeeGwei),
      maxSpendPerHourWei: parseEther(config.relayer.maxSpendPerHour),
      projectSpendPerHourWei: parseEther(config.relayer.projectSpendPerHour),
      payerSpendPerHourWei: parseEther(config.relayer.payerSpendPerHour),
      failuresPerHour: config.relayer.failuresPerHour,
      inFlight: config.relayer.inFlight,
    },
    minBalanceWei: parseEther(config.relayer.minBalance),
  }
}

function readKey(file: string): Hex {
  let text: string
  try {
    text = readFileSync(file, 'utf8').trim()
  } catch (e) {
    throw new ConfigError('RELAYER_KEY_FILE', `cannot read ${file}: ${(e as Error).message}`)
  }
  const hex = text.startsWith('0x') ? text.slice(2) : text
  // The key itself is never part of a message.
  if (!/^[0-9a-fA-F]{64}$/.test(hex))
    throw new ConfigError(
      'RELAYER_KEY_FILE',
      `${file} must hold one private key: 64 hex digits, optionally 0x-prefixed`,
    )
  return `0x${hex.toLowerCase()}`
}
