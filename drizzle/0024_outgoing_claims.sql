CREATE TABLE "outgoing_transactions" (
	"network" text NOT NULL,
	"tx_hash" text NOT NULL,
	"kind" text NOT NULL,
	"record_id" text NOT NULL,
	CONSTRAINT "outgoing_transactions_network_tx_hash_pk" PRIMARY KEY("network","tx_hash")
);
