import encodeQR from 'qr'

/**
 * A QR code of `text` as a standalone SVG: black modules on a white quiet zone (four modules,
 * as the QR standard asks) so phone cameras read it on any page background. Medium error
 * correction survives a scuffed screen and keeps EIP-681 URIs at a readable module size.
 */
export function qrSvg(text: string): string {
  const cached = recent.get(text)
  if (cached !== undefined) return cached
  const svg = encodeQR(text, 'svg', { ecc: 'medium', border: 4, optimize: true }).replace(
    /^<svg ([^>]*)>/,
    '<svg $1 shape-rendering="crispEdges"><rect width="100%" height="100%" fill="#fff"/>',
  )
  if (recent.size >= CACHE_SIZE) recent.delete(recent.keys().next().value!)
  recent.set(text, svg)
  return svg
}

/**
 * A page loads its QR code again on every change of state, while the payment request behind it
 * only changes when the amount due does: the last few thousand are kept (about 15 KiB each).
 */
const CACHE_SIZE = 2000
const recent = new Map<string, string>()
