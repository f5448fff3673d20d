ALTER TABLE "transactions" ADD COLUMN "finality" text;--> statement-breakpoint
-- Transactions quoted before networks could wait for finality counted confirmations.
UPDATE "transactions" SET "finality" = 'confirmations' WHERE "required_confirmations" IS NOT NULL;
