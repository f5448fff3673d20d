CREATE TABLE "chain_followers" (
	"network" text PRIMARY KEY NOT NULL,
	"owner" text
);
--> statement-breakpoint
ALTER TABLE "chain_transfers" ADD COLUMN "attempts" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "chain_transfers" ADD COLUMN "retry_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "chain_transfers" ADD COLUMN "last_error" text;