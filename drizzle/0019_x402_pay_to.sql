CREATE TABLE "x402_pay_to" (
	"project_id" text NOT NULL,
	"mode" text NOT NULL,
	"address" text NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "x402_pay_to_project_id_mode_pk" PRIMARY KEY("project_id","mode")
);
--> statement-breakpoint
ALTER TABLE "x402_pay_to" ADD CONSTRAINT "x402_pay_to_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "relayed_authorizations_tx_idx" ON "relayed_authorizations" USING btree ("tx_hash");--> statement-breakpoint
CREATE INDEX "relayed_authorizations_transaction_idx" ON "relayed_authorizations" USING btree ("transaction_id");