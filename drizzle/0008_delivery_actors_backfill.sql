-- docs/decisions/0032-webhook-delivery-actors.md: why a failed delivery stopped is a column now (it was read out of the snapshot).
-- Deliveries written by machine version 1 stored `{ state, context }`; the runtime resumes them.
UPDATE "webhook_deliveries" SET "failed_because" = "snapshot"->'context'->>'failedBecause'
WHERE "status" = 'failed' AND "machine_version" = 1;
