CREATE TABLE "transaction_rollup_marks" (
	"project_id" text NOT NULL,
	"testing_mode" boolean NOT NULL,
	"through_day" date NOT NULL,
	CONSTRAINT "transaction_rollup_marks_project_id_testing_mode_pk" PRIMARY KEY("project_id","testing_mode")
);
--> statement-breakpoint
CREATE TABLE "transaction_rollups" (
	"project_id" text NOT NULL,
	"testing_mode" boolean NOT NULL,
	"day" date NOT NULL,
	"status" text NOT NULL,
	"currency" text NOT NULL,
	"n" integer NOT NULL,
	"amount_usd" numeric(20, 2) NOT NULL,
	"amount_in_currency" numeric(26, 3) NOT NULL,
	CONSTRAINT "transaction_rollups_project_id_testing_mode_day_status_currency_pk" PRIMARY KEY("project_id","testing_mode","day","status","currency")
);
--> statement-breakpoint
ALTER TABLE "transaction_rollup_marks" ADD CONSTRAINT "transaction_rollup_marks_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "transaction_rollups" ADD CONSTRAINT "transaction_rollups_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;