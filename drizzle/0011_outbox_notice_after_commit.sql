-- docs/decisions/0052-the-embedded-database-in-one-process.md: the outbox's notice moves out of the writing transaction. A NOTIFY inside a
-- transaction holds PostgreSQL's notify lock through the commit's WAL flush, so every create
-- and transition committed one after another (pgbench on this machine: 16,600 inserts/s
-- without the trigger, 5,500 with it). The instance that commits outbox events now wakes its
-- own dispatcher, and a process without one (the CLI) sends the notice after its commit.
DROP TRIGGER IF EXISTS outbox_notify ON outbox;--> statement-breakpoint
DROP FUNCTION IF EXISTS outbox_notify();
