CREATE TABLE "chain_cursors" (
	"network" text PRIMARY KEY NOT NULL,
	"cursor" text NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "chain_transfers" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"network" text NOT NULL,
	"tx_hash" text NOT NULL,
	"log_index" integer NOT NULL,
	"block_number" bigint NOT NULL,
	"block_hash" text NOT NULL,
	"token_symbol" text NOT NULL,
	"from_address" text NOT NULL,
	"to_address" text NOT NULL,
	"amount" numeric(78, 0) NOT NULL,
	"transaction_id" uuid NOT NULL,
	"kind" text DEFAULT 'pending' NOT NULL,
	"applied" boolean DEFAULT false NOT NULL,
	"reorged_at" timestamp with time zone,
	"seen_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "deposit_addresses" (
	"address" text PRIMARY KEY NOT NULL,
	"transaction_id" uuid NOT NULL,
	"project_id" text NOT NULL,
	"mode" text NOT NULL,
	"xpub" text NOT NULL,
	"derivation_index" integer NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "deposit_addresses_transaction_id_unique" UNIQUE("transaction_id")
);
--> statement-breakpoint
CREATE TABLE "project_xpubs" (
	"project_id" text NOT NULL,
	"mode" text NOT NULL,
	"xpub" text NOT NULL,
	"next_index" integer DEFAULT 0 NOT NULL,
	"generated" boolean DEFAULT false NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "project_xpubs_project_id_mode_pk" PRIMARY KEY("project_id","mode")
);
--> statement-breakpoint
ALTER TABLE "chain_transfers" ADD CONSTRAINT "chain_transfers_transaction_id_transactions_id_fk" FOREIGN KEY ("transaction_id") REFERENCES "public"."transactions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "deposit_addresses" ADD CONSTRAINT "deposit_addresses_transaction_id_transactions_id_fk" FOREIGN KEY ("transaction_id") REFERENCES "public"."transactions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_xpubs" ADD CONSTRAINT "project_xpubs_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "chain_transfers_seen_idx" ON "chain_transfers" USING btree ("network","tx_hash","log_index","block_hash");--> statement-breakpoint
CREATE INDEX "chain_transfers_block_idx" ON "chain_transfers" USING btree ("network","block_hash");--> statement-breakpoint
CREATE INDEX "chain_transfers_tx_idx" ON "chain_transfers" USING btree ("transaction_id");