ALTER TABLE "transactions" ADD COLUMN "amount_in_currency" numeric(18, 3);--> statement-breakpoint
UPDATE "transactions" SET "amount_in_currency" = "amount_usd";--> statement-breakpoint
ALTER TABLE "transactions" ALTER COLUMN "amount_in_currency" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "transactions" ADD COLUMN "usd_rate" jsonb;--> statement-breakpoint
ALTER TABLE "transactions" ADD COLUMN "quote_rates" jsonb;
