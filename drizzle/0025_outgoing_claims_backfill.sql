-- Money out recorded before outgoing_transactions existed: each sweep's transaction, then each
-- refund payment's (a transaction recorded both ways keeps its first, the sweep).
INSERT INTO "outgoing_transactions" ("network", "tx_hash", "kind", "record_id")
SELECT "network", "tx_hash", 'sweep', "id" FROM "sweeps"
ON CONFLICT DO NOTHING;--> statement-breakpoint
INSERT INTO "outgoing_transactions" ("network", "tx_hash", "kind", "record_id")
SELECT "network", "tx_hash", 'refund', "id" FROM "refunds" WHERE "tx_hash" IS NOT NULL
ON CONFLICT DO NOTHING;
