CREATE TABLE "refunds" (
	"id" text PRIMARY KEY NOT NULL,
	"transaction_id" uuid NOT NULL,
	"project_id" text NOT NULL,
	"mode" text NOT NULL,
	"network" text NOT NULL,
	"token_symbol" text NOT NULL,
	"amount" numeric(78, 0) NOT NULL,
	"address" text NOT NULL,
	"reason" text,
	"deposit_address" text NOT NULL,
	"status" text NOT NULL,
	"snapshot" jsonb NOT NULL,
	"machine_version" integer NOT NULL,
	"paid_from" text,
	"sender" text,
	"tx_hash" text,
	"raw_transaction" text,
	"tx_nonce" bigint,
	"block_number" bigint,
	"block_hash" text,
	"confirmations" integer,
	"failure_reason" text,
	"failure_detail" text,
	"version" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	"submitted_at" timestamp with time zone,
	"completed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "sweep_items" (
	"sweep_id" text NOT NULL,
	"address" text NOT NULL,
	"token_symbol" text NOT NULL,
	"planned" numeric(78, 0) NOT NULL,
	"swept" numeric(78, 0),
	CONSTRAINT "sweep_items_sweep_id_address_token_symbol_pk" PRIMARY KEY("sweep_id","address","token_symbol")
);
--> statement-breakpoint
CREATE TABLE "sweeps" (
	"id" text PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"mode" text NOT NULL,
	"network" text NOT NULL,
	"treasury" text NOT NULL,
	"sender" text NOT NULL,
	"tx_hash" text NOT NULL,
	"raw_transaction" text NOT NULL,
	"tx_nonce" bigint NOT NULL,
	"status" text NOT NULL,
	"block_number" bigint,
	"block_hash" text,
	"confirmations" integer,
	"gas_used" numeric(78, 0),
	"fee" numeric(78, 0),
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	"confirmed_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "refunds" ADD CONSTRAINT "refunds_transaction_id_transactions_id_fk" FOREIGN KEY ("transaction_id") REFERENCES "public"."transactions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sweep_items" ADD CONSTRAINT "sweep_items_sweep_id_sweeps_id_fk" FOREIGN KEY ("sweep_id") REFERENCES "public"."sweeps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sweeps" ADD CONSTRAINT "sweeps_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "refunds_list_idx" ON "refunds" USING btree ("project_id","mode","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "refunds_tx_idx" ON "refunds" USING btree ("transaction_id");--> statement-breakpoint
CREATE UNIQUE INDEX "refunds_payment_idx" ON "refunds" USING btree ("network","tx_hash") WHERE tx_hash is not null;--> statement-breakpoint
CREATE INDEX "refunds_in_flight_idx" ON "refunds" USING btree ("network") WHERE status in ('submitted', 'confirming');--> statement-breakpoint
CREATE INDEX "sweep_items_address_idx" ON "sweep_items" USING btree ("address");--> statement-breakpoint
CREATE UNIQUE INDEX "sweeps_tx_idx" ON "sweeps" USING btree ("network","tx_hash");--> statement-breakpoint
CREATE INDEX "sweeps_list_idx" ON "sweeps" USING btree ("project_id","mode","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "sweeps_in_flight_idx" ON "sweeps" USING btree ("network") WHERE status in ('submitted', 'confirming');--> statement-breakpoint
CREATE INDEX "deposit_addresses_owner_idx" ON "deposit_addresses" USING btree ("project_id","mode","xpub","derivation_index");