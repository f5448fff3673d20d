CREATE TABLE "commerce_checkouts" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"mode" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"pricing_type" text NOT NULL,
	"amount" numeric(18, 3),
	"currency" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "outbox" ADD COLUMN "event_id" text;--> statement-breakpoint
ALTER TABLE "transactions" ADD COLUMN "any_amount" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "transactions" ADD COLUMN "commerce" jsonb;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD COLUMN "format" text DEFAULT 'standard' NOT NULL;--> statement-breakpoint
ALTER TABLE "commerce_checkouts" ADD CONSTRAINT "commerce_checkouts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "commerce_checkouts_project_idx" ON "commerce_checkouts" USING btree ("project_id","mode","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE UNIQUE INDEX "outbox_event_id_idx" ON "outbox" USING btree ("event_id");--> statement-breakpoint
CREATE INDEX "outbox_project_idx" ON "outbox" USING btree ("project_id","testing_mode","id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "outbox_transaction_idx" ON "outbox" USING btree ("transaction_id","id");