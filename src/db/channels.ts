/**
 * Every LISTEN/NOTIFY channel, in one place. A notification is a hint to look at the database
 * (delivered after commit, lost while a listener reconnects), never the only copy of anything.
 */
export const CHANNELS = {
  /**
   * A transaction changed: `{ id, version, event? }`, sent after every commit on a database
   * several instances share. The actor's owner moves its actor on; every instance moves its
   * pay-page streams of that transaction.
   */
  transactionActor: 'actor_changed',
  /**
   * New webhook work, told after the commit that wrote it. An empty payload: outbox events to
   * fan out (sent by a process without a running dispatcher, such as the CLI; a server fans out
   * its own). WEBHOOK_WORK_DELIVERIES: deliveries written for any instance to claim.
   */
  webhookWork: 'outbox',
  /** A running delivery actor is asked to act now (manual redelivery): the delivery id. */
  deliveryRequest: 'delivery_request',
  /** A deposit address was handed out: every instance's followers watch it. */
  depositAddress: 'deposit_address',
  /** Cached keys, projects or endpoints changed (src/db/change-feed.ts). */
  cacheChanges: 'cache_changes',
} as const

/**
 * The `webhookWork` payload for deliveries waiting to be claimed (an empty one means outbox
 * events).
 */
export const WEBHOOK_WORK_DELIVERIES = 'deliveries'
