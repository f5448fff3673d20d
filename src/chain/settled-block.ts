/**
 * The newest block as final as a payment must be, on a network that counts confirmations: the
 * head is a block's first confirmation, so `confirmations` deep is head - confirmations + 1 (at
 * least one confirmation; never below block 0). What was not on the chain by that block, and is
 * not now, no reorg a payment must survive brings back. One answer for everyone who asks: the
 * outgoing tracker reading nonces and lapsed signatures, and a merchant asking to abandon a
 * refund's payment.
 */
export function settledBlock(head: bigint, confirmations: number): bigint {
  const at = head - BigInt(Math.max(1, confirmations)) + 1n
  return at < 0n ? 0n : at
}
