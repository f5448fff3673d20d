/**
 * The webhook body (spec "Webhook payload"): root `event`, `timestamp` (ISO 8601 with
 * milliseconds, the time of sending) and `data`; never a `transaction` key. A test event sent
 * from the dashboard or CLI also carries `"test": true` at the root, so no receiver can take
 * it for a real payment.
 */
export function webhookBody(event: string, data: Record<string, unknown>, sentAt: Date, test = false): string {
  return JSON.stringify(test ? { event, timestamp: sentAt.toISOString(), data, test: true } : { event, timestamp: sentAt.toISOString(), data })
}

/** The R18 headers of one attempt. */
export function webhookHeaders(opts: { signature: string; eventId: string; sentAt: Date; attempt: number; test: boolean }): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'crypto-pay-webhooks/1',
    'x-service-signature': opts.signature,
    'x-service-event-id': opts.eventId,
    'x-service-timestamp': opts.sentAt.toISOString(),
    'x-service-attempt': String(opts.attempt),
    ...(opts.test ? { 'x-service-test': 'true' } : {}),
  }
}
