-- Claims on what is sent out: several daemons read one outbox of
-- notification deliveries and one of chat messages, and each row must go
-- out once. A daemon that takes due rows marks them with its node id and a
-- lease (`claim_until`, ms since the epoch); other daemons skip them until
-- the lease lapses (the daemon died mid-send), the daemon holding them sees
-- them as its own. SQLite needs none of this: one daemon uses its file.

ALTER TABLE deliveries ADD COLUMN claimed_by TEXT;
ALTER TABLE deliveries ADD COLUMN claim_until BIGINT;

ALTER TABLE connector_outbox ADD COLUMN claimed_by TEXT;
ALTER TABLE connector_outbox ADD COLUMN claim_until BIGINT;
