import encodeQR from 'qr'

/**
 * A QR code of `text` as a standalone SVG: black modules on a white quiet zone (four modules,
 * as the QR standard asks) so phone cameras read it on any page background. Medium error
 * correction survives a scuffed screen and keeps EIP-681 URIs at a readable module size.
 */
export function qrSvg(text: string): string {
  const svg = encodeQR(text, 'svg', { ecc: 'medium', border: 4, optimize: true })
  return svg.replace(/^<svg ([^>]*)>/, '<svg $1 shape-rendering="crispEdges"><rect width="100%" height="100%" fill="#fff"/>')
}
