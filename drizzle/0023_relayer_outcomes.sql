ALTER TABLE "relayed_authorizations" ADD COLUMN "client" text;--> statement-breakpoint
ALTER TABLE "relayed_authorizations" ADD COLUMN "gas_used" numeric(78, 0);--> statement-breakpoint
ALTER TABLE "relayed_authorizations" ADD COLUMN "cost_wei" numeric(78, 0);--> statement-breakpoint
ALTER TABLE "relayed_authorizations" ADD COLUMN "resolved_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "relayed_authorizations" ADD COLUMN "answered_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "relayed_authorizations_unresolved_idx" ON "relayed_authorizations" USING btree ("status") WHERE "relayed_authorizations"."status" in ('sending', 'sent');