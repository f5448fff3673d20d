CREATE TABLE "relayed_authorizations" (
	"id" text PRIMARY KEY NOT NULL,
	"transaction_id" uuid,
	"project_id" text NOT NULL,
	"network" text NOT NULL,
	"token" text NOT NULL,
	"payer" text NOT NULL,
	"pay_to" text NOT NULL,
	"value" numeric(78, 0) NOT NULL,
	"valid_before" bigint NOT NULL,
	"nonce" text NOT NULL,
	"sender" text NOT NULL,
	"tx_nonce" bigint NOT NULL,
	"raw_transaction" text NOT NULL,
	"tx_hash" text NOT NULL,
	"max_cost_wei" numeric(78, 0) NOT NULL,
	"status" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "relayed_authorizations" ADD CONSTRAINT "relayed_authorizations_transaction_id_transactions_id_fk" FOREIGN KEY ("transaction_id") REFERENCES "public"."transactions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "relayed_authorizations_nonce_idx" ON "relayed_authorizations" USING btree ("network","token","payer","nonce");--> statement-breakpoint
CREATE INDEX "relayed_authorizations_spend_idx" ON "relayed_authorizations" USING btree ("network","created_at");