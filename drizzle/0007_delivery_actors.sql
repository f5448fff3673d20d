DROP INDEX "webhook_deliveries_due_idx";--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ALTER COLUMN "snapshot" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD COLUMN "failed_because" text;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_unfinished_idx" ON "webhook_deliveries" USING btree ("claimed_by") WHERE status in ('pending', 'retrying');--> statement-breakpoint
ALTER TABLE "webhook_deliveries" DROP COLUMN "claim_until";