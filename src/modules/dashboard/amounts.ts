import { html, type Html } from '../../lib/html.ts'
import { displayUnits } from '../pay/view.ts'

/** Decimals of a token on a network, for showing smallest units as amounts; null when unknown. */
export type TokenDecimals = (network: string, symbol: string) => number | null

/**
 * An amount in smallest units as a person reads it: `12.5 TUSD` (smallest units when the token is
 * unknown here).
 */
export function amountOf(
  amount: string | bigint,
  symbol: string,
  network: string,
  decimals: TokenDecimals,
): string {
  const d = decimals(network, symbol)
  return d === null
    ? `${amount} smallest units of ${symbol}`
    : `${displayUnits(amount.toString(), d)} ${symbol}`
}

/** `0x1234…cdef`, the whole hash in a tooltip and for copying, as a block explorer shows it. */
export const shortHash = (hash: string | null): Html =>
  hash
    ? html`<code class="hash-short" title="${hash}">${hash.slice(0, 10)}…${hash.slice(-8)}</code>`
    : html`<span class="muted">—</span>`
