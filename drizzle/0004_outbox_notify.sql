-- Wakes the webhook dispatchers of every instance when outbox events are committed (docs/decisions/0032-webhook-delivery-actors.md):
-- one notification per statement, delivered after commit, whoever wrote the rows (server or CLI).
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('outbox', '');
  RETURN NULL;
END;
$$;--> statement-breakpoint
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
